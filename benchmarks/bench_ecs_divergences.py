"""What HMC-ECS's divergent transitions are on covtype with all 54 attributes.

The default ``BayesianLogisticRegression()`` on binary covtype (all 54
attributes, 80/20 split, ``_hard_problems.covtype_split``) reports a few
divergent transitions per thousand. Per seed this script fits it twice:

* at the defaults, recording where the divergent transitions happen (the
  largest |z| of the draw before each, z against the run's posterior means
  and sds), their energy errors, and the subsampled log-likelihood
  estimator's variance (``sigma2``) at them against all iterations;
* with the exact stratum widened by the rows whose single-row curvature,
  scaled by ``n / n_blocks``, reaches ``--leverage`` times the posterior's
  along their direction (``(n / G) w_k(theta_map) x_k^T Sigma x_k``, Sigma the
  Laplace covariance): the rows that can bend the estimated potential when
  subsampled (a private hook on the stratum rule; its fit time includes a
  mode search of its own).

and compares the two fits' posterior means (in sds and in Monte Carlo
standard errors) and sds: whether the divergences move the answer.

Usage::

    python benchmarks/bench_ecs_divergences.py                 # seeds 0 1 2, about 2 minutes
    python benchmarks/bench_ecs_divergences.py --seeds 0 --leverage 10
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


def widened_heavy_rows(threshold):
    """A replacement of ``_ecs_tuning.heavy_rows`` that adds the rows of scaled
    leverage at least ``threshold`` (counted in ``added``)."""
    from bayes_subsample._optimize import find_map
    from bayes_subsample.samplers import _ecs_tuning
    original = _ecs_tuning.heavy_rows
    added = []

    def heavy(model, cov, max_fraction=None):
        mask, read = original(model, cov, max_fraction)
        theta = find_map(model)[0]
        s = 1.0 / (1.0 + np.exp(-model.linear_predictor(theta)))
        sd = model.linear_predictor_sd(np.asarray(cov))
        lev = model.n_data / 100 * s * (1.0 - s) * sd ** 2
        wide = lev >= threshold
        base = np.zeros_like(wide) if mask is None else mask
        added.append(int(np.sum(wide & ~base)))
        return wide | base, True

    return original, heavy, added


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
    ap.add_argument("--leverage", type=float, default=3.0,
                    help="scaled leverage from which a row joins the widened exact stratum")
    ap.add_argument("--out", default=os.path.join(RESULTS, "ecs_divergences.json"))
    args = ap.parse_args(argv)
    from bayes_subsample.samplers import _ecs_prepare
    Xtr, _, ytr, _ = covtype_split(binary=True)
    rows = []
    for seed in args.seeds:
        est, el, caught = fit(Xtr, ytr, seed)
        base = summary(est, el, caught)
        base["where"] = where(est)
        original, heavy, added = widened_heavy_rows(args.leverage)
        _ecs_prepare.heavy_rows = heavy
        try:
            wide = summary(*fit(Xtr, ytr, seed))
        finally:
            _ecs_prepare.heavy_rows = original
        wide["rows_added"] = added[0] if added else 0
        z = (base["_mean"] - wide["_mean"]) / np.hypot(base["_mcse"], wide["_mcse"])
        cmp = {"max_mean_diff_sd": float(np.max(np.abs(base["_mean"] - wide["_mean"])
                                               / wide["_sd"])),
               "max_abs_z": float(np.max(np.abs(z))), "rms_z": float(np.sqrt(np.mean(z * z))),
               "sd_ratio_min": float(np.min(base["_sd"] / wide["_sd"])),
               "sd_ratio_max": float(np.max(base["_sd"] / wide["_sd"]))}
        for r in (base, wide):
            for k in ("_mean", "_sd", "_mcse"):
                del r[k]
        rows.append({"seed": seed, "default": base, "widened": wide, "compare": cmp})
        print(f"seed {seed}: default {base['n_divergences']} divergent of "
              f"{base['n_transitions']} ({base['time_s']:.1f} s, n_exact {base['n_exact']}), "
              f"widened {wide['n_divergences']} ({wide['time_s']:.1f} s, n_exact "
              f"{wide['n_exact']}); means differ by at most {cmp['max_mean_diff_sd']:.3f} sd "
              f"(max |z| {cmp['max_abs_z']:.2f}, rms z {cmp['rms_z']:.2f}), sd ratios "
              f"{cmp['sd_ratio_min']:.3f}-{cmp['sd_ratio_max']:.3f}; divergent draws' max |z| "
              f"before: {max(base['where']['max_abs_z_before'], default=0):.2f}; sigma2 median "
              f"{base['where']['sigma2_median_all']:.3g} (all), "
              f"{base['where']['sigma2_median_at_divergent'] or 0:.3g} (at divergent)",
              flush=True)
    result = {"leverage": args.leverage, "rows": rows}
    with open(args.out, "w") as fh:
        json.dump(stamp(result), fh, indent=1)
    return result


if __name__ == "__main__":
    main()
