"""The confidence sampler on covtype with all 54 attributes (class 2 against the
rest: the ten quantitative attributes standardised, the 44 one-hot indicators as
they are) against exact MH, both at their defaults, and a long NUTS run.

On all 464,809 training rows exact MH makes a full pass per transition (55 a
draw): too slow for thousands of draws here, so the comparison runs on a random
subset of ``N_ROWS`` training rows (``numpy.random.default_rng(0).choice``,
without replacement, kept in order); the confidence sampler's read fraction on
all training rows comes from a shorter run. Figures per seed: all-in wall time
(preparation, warmup and draws), min bulk ESS, min bulk ESS per second, the data
read per decision after warmup (``data_fraction``), posterior means and sds
against NUTS.

Done when, for every seed: the confidence sampler reads at most half the data
per decision, its min bulk ESS per second is at least exact MH's in the same
run, its means are within 0.3 sd and its sds within 30% of NUTS's; and on all
training rows it reads at most half the data.
"""
from __future__ import annotations

import numpy as np

from _hard_problems import (APPROX_MEAN_SD, APPROX_SD_RATIO, compare, covtype_split,
                            nuts_reference, run_sampler)
from bayes_subsample.models import LogisticRegressionModel

#: the training rows the comparison with exact MH runs on (quick: 16,000)
N_ROWS = 100_000
#: chains, warmup and retained draws of the two samplers (quick: 2, 100, 150)
SIZES = dict(n_chains=2, n_warmup=300, n_samples=1000)
#: the long NUTS run (quick: 2 x (300 + 500))
NUTS_SIZES = dict(n_chains=4, n_warmup=500, n_samples=1500)
#: the run on all training rows, for the read fraction
FULL_SIZES = dict(n_chains=1, n_warmup=200, n_samples=200)
#: the largest share of the data a decision may read
MAX_READ = 0.5


def subset(X, y, n_rows, seed=0):
    """``n_rows`` rows drawn without replacement (in their order)."""
    if n_rows >= X.shape[0]:
        return X, y
    idx = np.sort(np.random.default_rng(seed).choice(X.shape[0], n_rows, replace=False))
    return np.ascontiguousarray(X[idx]), np.ascontiguousarray(y[idx])


def _row(trace, elapsed, ref, name, seed):
    cmp = compare(trace.draws, ref)
    ess = cmp["min_ess_bulk"]
    frac = (float(np.mean(trace.stats["data_fraction"])) if "data_fraction" in trace.stats
            else 1.0)
    return {"sampler": name, "seed": seed, "time_s": elapsed, "ess_per_s": ess / elapsed,
            "data_fraction": frac, **cmp}


def run(seeds=(0, 1, 2), quick=False):
    Xtr, _, ytr, _ = covtype_split()
    n_rows = 16_000 if quick else N_ROWS
    X, y = subset(Xtr, ytr, n_rows)
    model = LogisticRegressionModel(X, y)
    ref = nuts_reference(model, **(dict(n_chains=2, n_warmup=300, n_samples=500) if quick
                                   else NUTS_SIZES))
    sizes = dict(n_chains=2, n_warmup=100, n_samples=150) if quick else SIZES
    rows = []
    for seed in seeds:
        for name in ("mh", "confidence"):
            trace, warns, elapsed = run_sampler(model, name, seed=seed, **sizes)
            if isinstance(trace, Exception):
                raise trace
            rows.append({**_row(trace, elapsed, ref, name, seed), "n_rows": n_rows,
                         "warnings": warns})
    # the read fraction on all training rows
    full = LogisticRegressionModel(Xtr, ytr)
    trace, warns, elapsed = run_sampler(full, "confidence", seed=seeds[0],
                                        **(dict(n_chains=1, n_warmup=50, n_samples=50)
                                           if quick else FULL_SIZES))
    if isinstance(trace, Exception):
        raise trace
    full_row = {"sampler": "confidence", "seed": seeds[0], "n_rows": full.n_data,
                "time_s": elapsed,
                "data_fraction": float(np.mean(trace.stats["data_fraction"])),
                "warnings": warns}
    crit = {}
    by = {(r["sampler"], r["seed"]): r for r in rows}
    for seed in seeds:
        c, m = by["confidence", seed], by["mh", seed]
        crit[f"seed {seed}: confidence reads at most 50% of the data per decision"] = \
            c["data_fraction"] <= MAX_READ
        crit[f"seed {seed}: confidence's min bulk ESS/s at least exact MH's"] = \
            c["ess_per_s"] >= m["ess_per_s"]
        crit[f"seed {seed}: confidence within 0.3 sd (means) and 30% (sds) of NUTS"] = (
            c["max_mean_err_sd"] <= APPROX_MEAN_SD
            and 1 - APPROX_SD_RATIO <= c["sd_ratio_min"]
            and c["sd_ratio_max"] <= 1 + APPROX_SD_RATIO)
    crit["all training rows: confidence reads at most 50% of the data per decision"] = \
        full_row["data_fraction"] <= MAX_READ
    reference = {k: (np.asarray(v).tolist() if isinstance(v, np.ndarray) else v)
                 for k, v in ref.items()}
    return {"n_rows": n_rows, "sizes": sizes, "rows": rows, "full_data": full_row,
            "reference": reference, "criteria": crit}


def table(result):
    out = [f"covtype binary, all 54 attributes, {result['n_rows']:,} training rows "
           f"({result['sizes']['n_chains']} chains x ({result['sizes']['n_warmup']} + "
           f"{result['sizes']['n_samples']}) each):", "",
           "| sampler | seed | s | min ESS | ESS/s | data read | max mean err / sd | sd ratio "
           "| max R-hat |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        out.append(f"| {r['sampler']} | {r['seed']} | {r['time_s']:.0f} | "
                   f"{r['min_ess_bulk']:.0f} | {r['ess_per_s']:.3f} | "
                   f"{100 * r['data_fraction']:.1f}% | {r['max_mean_err_sd']:.2f} | "
                   f"{r['sd_ratio_min']:.2f}-{r['sd_ratio_max']:.2f} | {r['max_rhat']:.3f} |")
    f = result["full_data"]
    out += ["", f"All {f['n_rows']:,} training rows: the confidence sampler read "
            f"{100 * f['data_fraction']:.1f}% of the data per decision ({f['time_s']:.0f} s)."]
    return "\n".join(out)
