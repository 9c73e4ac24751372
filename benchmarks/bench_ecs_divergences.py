"""What HMC-ECS's divergent transitions are on covtype with all 54 attributes.

The default ``BayesianLogisticRegression()`` on binary covtype (all 54
attributes, 80/20 split, ``_hard_problems.covtype_split``) is fitted per seed
with the leverage rule of the exact stratum at each threshold of
``--leverage`` (``_ecs_tuning.LEVERAGE``, set for the fit: the rows whose
curvature, scaled by ``n / n_blocks``, reaches that multiple of the
posterior's along their direction, ``(n / G) w_k(theta_map) x_k^T Sigma x_k``,
start in the exact stratum; ``inf``: none, the rule before it). Per fit: the
divergent transitions, where they happen (the largest |z| of the draw before
each, against the fit's means and sds), the log-likelihood estimator's
variance (``sigma2``) at them against all iterations, time, exact rows and
data per iteration; and each fit's posterior means and sds against those of
the last threshold (the most rows exact): whether the divergences move the
answer.

Usage::

    python benchmarks/bench_ecs_divergences.py                 # seeds 0 1 2, about 3 minutes
    python benchmarks/bench_ecs_divergences.py --seeds 0 --leverage inf 3
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))

from _hard_problems import RESULTS, covtype_split  # noqa: E402
from _provenance import stamp  # noqa: E402
from bayes_subsample import BayesianLogisticRegression  # noqa: E402
from bayes_subsample import diagnostics as diag  # noqa: E402


def fit(Xtr, ytr, seed):
    t = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est = BayesianLogisticRegression(random_state=seed).fit(Xtr, ytr)
    return est, time.perf_counter() - t, caught


def summary(est, elapsed, caught):
    tr = est.trace_
    draws = tr.draws
    flat = draws.reshape(-1, draws.shape[-1])
    ess = diag.ess_bulk(draws)
    tun = est.diagnostics_["tuning"][0]
    return {"time_s": elapsed, "min_ess_bulk": float(ess.min()),
            "min_ess_per_s": float(ess.min() / elapsed),
            "n_divergences": int(tr.stats["diverging"].sum()),
            "n_transitions": int(tr.stats["diverging"].size),
            "m": tun.get("m"), "n_exact": tun.get("n_exact"),
            "data_fraction_per_iteration": float(np.mean(
                est.diagnostics_["data_fraction_per_iteration"])),
            "warnings": sorted({str(w.message)[:120] for w in caught}),
            "_mean": flat.mean(0), "_sd": flat.std(0, ddof=1),
            "_mcse": diag.mcse_mean(draws)}


def where(est):
    """Where the divergent transitions of a fit happen."""
    tr = est.trace_
    st, draws = tr.stats, tr.draws
    flat = draws.reshape(-1, draws.shape[-1])
    mu, sd = flat.mean(0), flat.std(0)
    div = st["diverging"]
    ci, ii = np.nonzero(div)
    before = draws[ci, np.maximum(ii - 1, 0)]
    z = np.abs(before - mu) / sd
    s2 = st["sigma2"]
    dE = np.abs(st["energy_error"][div])
    return {"max_abs_z_before": [float(v) for v in z.max(axis=1)],
            "energy_error_min": float(np.nanmin(dE)) if dE.size else None,
            "energy_error_nan": int(np.sum(~np.isfinite(dE))),
            "sigma2_median_all": float(np.median(s2)),
            "sigma2_p99_all": float(np.quantile(s2, 0.99)),
            "sigma2_median_at_divergent": float(np.median(s2[div])) if div.any() else None}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    ap.add_argument("--leverage", nargs="+", type=float, default=[float("inf"), 10.0, 3.0],
                    help="thresholds of the leverage rule, one fit each (inf: no such rows); "
                    "the last is the comparison")
    ap.add_argument("--out", default=os.path.join(RESULTS, "ecs_divergences.json"))
    args = ap.parse_args(argv)
    from bayes_subsample.samplers import _ecs_tuning
    Xtr, _, ytr, _ = covtype_split(binary=True)
    default = _ecs_tuning.LEVERAGE
    rows = []
    for seed in args.seeds:
        fits = []
        for lev in args.leverage:
            _ecs_tuning.LEVERAGE = lev
            try:
                est, el, caught = fit(Xtr, ytr, seed)
            finally:
                _ecs_tuning.LEVERAGE = default
            r = summary(est, el, caught)
            r.update(leverage=lev if np.isfinite(lev) else None, where=where(est))
            fits.append(r)
        last = fits[-1]
        for r in fits:
            z = (r["_mean"] - last["_mean"]) / np.hypot(r["_mcse"], last["_mcse"])
            r["against_last"] = {
                "max_mean_diff_sd": float(np.max(np.abs(r["_mean"] - last["_mean"])
                                                 / last["_sd"])),
                "max_abs_z": float(np.max(np.abs(z))), "rms_z": float(np.sqrt(np.mean(z * z))),
                "sd_ratio_min": float(np.min(r["_sd"] / last["_sd"])),
                "sd_ratio_max": float(np.max(r["_sd"] / last["_sd"]))}
        for r in fits:
            for k in ("_mean", "_sd", "_mcse"):
                del r[k]
            a, w = r["against_last"], r["where"]
            lev, ref = (float("inf") if v is None else v for v in (r["leverage"], last["leverage"]))
            print(f"seed {seed}, leverage {lev:g}: {r['n_divergences']} divergent of "
                  f"{r['n_transitions']}, {r['time_s']:.1f} s, n_exact {r['n_exact']}, data "
                  f"{100 * r['data_fraction_per_iteration']:.2f}% per iteration, min ESS/s "
                  f"{r['min_ess_per_s']:.0f}; against leverage {ref:g}: means within "
                  f"{a['max_mean_diff_sd']:.3f} sd (max |z| {a['max_abs_z']:.2f}, rms z "
                  f"{a['rms_z']:.2f}), sd ratios {a['sd_ratio_min']:.3f}-{a['sd_ratio_max']:.3f}; "
                  f"divergent draws' max |z| before {max(w['max_abs_z_before'], default=0):.2f}, "
                  f"sigma2 median {w['sigma2_median_all']:.3g} (all), "
                  f"{w['sigma2_median_at_divergent'] or 0:.3g} (at divergent)", flush=True)
        rows.append({"seed": seed, "fits": fits})
    result = {"leverage": [v if np.isfinite(v) else None for v in args.leverage], "rows": rows}
    with open(args.out, "w") as fh:
        json.dump(stamp(result), fh, indent=1)
    return result


if __name__ == "__main__":
    main()
