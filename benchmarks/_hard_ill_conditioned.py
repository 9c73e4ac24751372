"""Ill-conditioned and small user models, every sampler at its defaults against
a long NUTS run: a 5,000-row linear regression with 24 predictors sharing one
factor (condition number of X^T X above 1e6) and a 434-row regression with
three predictors, both with the noise's log sd sampled (``FunctionModel``).
Bounds: exact samplers' means within 0.1 sd, approximate ones' within 0.3 sd
and sds within 30% (HMC-ECS's means within 0.1 sd and sds within 5%), or a
clear error before any draw. Each HMC-ECS row says what its preparation chose
(``choice``: subsampled or full data, and why)."""
from __future__ import annotations

from _hard_every_sampler import criteria, ref_summary, run_problem
from _hard_every_sampler import table as rows_table
from _hard_problems import gaussian_function_model, ill_conditioned_regression, small_regression

#: HMC-ECS's sds must be within this fraction of the reference's
ECS_SD_RATIO = 0.05
#: and its means within this many of the reference's sds
ECS_MEAN_SD = 0.1


def problems(quick):
    yield "ill-conditioned 5000 x 24", gaussian_function_model(*ill_conditioned_regression())
    yield "small 434 x 3", gaussian_function_model(*small_regression())


def run(seeds=(0, 1, 2), quick=False):
    rows, refs = [], {}
    for label, model in problems(quick):
        r, ref = run_problem(label, model, seeds, quick)
        rows += r
        refs[label] = ref_summary(ref)
    crit = criteria(rows)
    for r in rows:
        if r["sampler"].startswith("hmc_ecs") and "error" not in r:
            key = f"{r['problem']}: {r['sampler']} means within 0.1 sd and sds within 5%"
            ok = (r["max_mean_err_sd"] <= ECS_MEAN_SD
                  and abs(r["sd_ratio_min"] - 1) <= ECS_SD_RATIO
                  and abs(r["sd_ratio_max"] - 1) <= ECS_SD_RATIO)
            crit[key] = crit.get(key, True) and ok
    return {"rows": rows, "references": refs, "criteria": crit}


def table(result):
    """The rows, then what HMC-ECS's preparation chose on each problem (each
    distinct choice once, with its seeds and control variates' order)."""
    seen = {}
    for r in result["rows"]:
        if r["sampler"].startswith("hmc_ecs") and r.get("choice"):
            c = r["choice"]
            key = (r["problem"], r["sampler"], c["engine"], r.get("cv_order"), c["reason"])
            seen.setdefault(key, []).append(str(r["seed"]))
    lines = [f"- {p}, {s} (seeds {', '.join(seeds)}): "
             + (f"control variates of order {o}; " if e != "full data" else "") + why
             for (p, s, e, o, why), seeds in seen.items()]
    return rows_table(result["rows"]) + ("\n\nHMC-ECS's choice:\n\n" + "\n".join(lines)
                                         if lines else "")
