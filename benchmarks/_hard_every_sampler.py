"""Every sampler at its defaults on one posterior against a long NUTS run: the
loop the ``separable`` and ``ill_conditioned`` sections of
``bench_hard_data.py`` share."""
from __future__ import annotations

import numpy as np

from _hard_problems import compare, nuts_reference, run_sampler, within
from bayes_subsample.samplers import resolve_sampler

#: every registered sampler, exact ones first
SAMPLERS = ["nuts", "hmc", "mh", "hmc_ecs", "hmc_ecs_nuts", "hmc_ecs_signed", "austerity",
            "confidence", "sgld", "sghmc", "ewsg"]


def run_problem(label, model, seeds, quick, samplers=SAMPLERS, reference=None,
                keep_draws=False):
    """Rows (sampler x seed) of ``model``'s posterior at each sampler's defaults
    (4 chains x (1000 + 1000); ``quick``: 2 x (300 + 300)) compared with a long
    NUTS run (``reference``: computed here when None). A sampler that raises
    before any draw gives a row with its error (an accepted outcome: a clear
    error instead of a wrong fit). ``keep_draws``: the reference made here keeps
    its draws (``"draws"``)."""
    sizes = dict(n_samples=300, n_warmup=300, n_chains=2) if quick else {}
    ref = reference if reference is not None else nuts_reference(
        model, keep_draws=keep_draws, **(dict(n_samples=1000, n_warmup=500) if quick else {}))
    rows = []
    for name in samplers:
        exact = resolve_sampler(name).exact
        for seed in seeds:
            trace, warns, elapsed = run_sampler(model, name, seed=seed, **sizes)
            row = {"problem": label, "sampler": name, "seed": seed, "exact": exact,
                   "time_s": elapsed, "warnings": warns}
            if isinstance(trace, Exception):
                row.update(error=f"{type(trace).__name__}: {trace}", ok=True)
            else:
                signs = trace.stats.get("sign")
                cmp = compare(trace.draws, ref, weights=signs)
                row.update(cmp, ok=within(cmp, exact),
                           min_ess_per_s=cmp["min_ess_bulk"] / elapsed,
                           full_data=bool(trace.tuning[0].get("full_data", False)),
                           choice=trace.choice(), cv_order=trace.tuning[0].get("cv_order"))
            rows.append(row)
    return rows, ref


def merge_rows(stored, rows, samplers, key="rows"):
    """A partial re-run's rows (``samplers`` only) merged into a stored result of
    the same section: the stored rows of the other samplers, each tagged with
    the commit it was measured at (``stored["commit"]`` where it carries none),
    and ``rows``, in the order problem, sampler (``SAMPLERS``), seed."""
    kept = [{**r, "commit": r.get("commit", stored.get("commit"))}
            for r in stored.get(key, []) if r["sampler"] not in samplers]
    merged = kept + list(rows)
    problems = list(dict.fromkeys(r["problem"] for r in merged))
    return sorted(merged, key=lambda r: (problems.index(r["problem"]),
                                         SAMPLERS.index(r["sampler"]), r["seed"]))


def stored_reference(stored, label):
    """The long NUTS reference a stored result of a section compared with
    (means, sds, ...; not its draws), as arrays: a partial re-run compares with
    the same one."""
    return {k: (np.asarray(v) if isinstance(v, list) else v)
            for k, v in stored["references"][label].items()}


def table(rows):
    out = ["| problem | sampler | seed | max mean err / sd | sd ratio | min ESS | max R-hat "
           "| s | min ESS/s | within bounds | warnings / error |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            out.append(f"| {r['problem']} | {r['sampler']} | {r['seed']} | | | | | "
                       f"{r['time_s']:.1f} | | error | {r['error'][:120]} |")
            continue
        w = "; ".join(x.split(":")[0] for x in r["warnings"])
        out.append(f"| {r['problem']} | {r['sampler']} | {r['seed']} | "
                   f"{r['max_mean_err_sd']:.2f} | {r['sd_ratio_min']:.2f}-{r['sd_ratio_max']:.2f}"
                   f" | {r['min_ess_bulk']:.0f} | {r['max_rhat']:.3f} | {r['time_s']:.1f} | "
                   f"{r['min_ess_per_s']:.3g} | {'yes' if r['ok'] else 'NO'} | {w} |")
    return "\n".join(out)


#: the default (HMC-ECS) is never slower than full-data NUTS by more than this
DEFAULT_SLACK = 0.2


def criteria(rows):
    """One check per problem and sampler: every seed within bounds (or a clear
    error); and per problem and seed, the default's (``hmc_ecs``) min bulk ESS
    per second at least ``1 - DEFAULT_SLACK`` of full-data NUTS's (all-in, in
    the same run)."""
    out = {}
    for r in rows:
        key = f"{r['problem']}: {r['sampler']} within bounds or a clear error"
        out[key] = out.get(key, True) and bool(r["ok"])
    by = {(r["problem"], r["sampler"], r["seed"]): r for r in rows}
    for (problem, name, seed), r in by.items():
        nuts = by.get((problem, "nuts", seed))
        if name != "hmc_ecs" or nuts is None or "min_ess_per_s" not in nuts:
            continue
        key = (f"{problem}: the default's min ESS/s at least {1 - DEFAULT_SLACK:.0%} of "
               "full-data NUTS's")
        ok = r.get("min_ess_per_s", 0.0) >= (1 - DEFAULT_SLACK) * nuts["min_ess_per_s"]
        out[key] = out.get(key, True) and ok
    return out


def ref_summary(ref):
    return {k: (np.asarray(v).tolist() if isinstance(v, np.ndarray) else v)
            for k, v in ref.items()}
