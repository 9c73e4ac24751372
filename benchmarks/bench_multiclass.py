"""Benchmark: multinomial logistic regression on covtype (7 classes).

All 581,012 rows of covtype (or ``--n-rows``), the 10 quantitative attributes
standardised (training-split statistics) + the 44 binary indicators + one
intercept per class: 7 x 55 = 385 parameters. A random 80/20 split
(``--seed``). Three fits on the training rows, each timed with a stopwatch
(elapsed wall-clock seconds of the whole call, preparation included):

* scikit-learn's ``LogisticRegression`` (multinomial, L-BFGS, ``C = 1e4``):
  the point estimate whose held-out accuracy HMC-ECS should match;
* HMC-ECS (``BayesianLogisticRegression(sampler="hmc_ecs")``, its defaults,
  ``--chains`` chains of ``--warmup`` + ``--draws``);
* full-data HMC (``sampler="hmc"``) on the same rows, a shorter run
  (``--hmc-warmup`` + ``--hmc-draws``: a full-data gradient costs a pass over
  ~465,000 rows); its ESS per second is the rate of that run.

``--attributes quantitative`` keeps the 10 quantitative attributes only (7 x 11
= 77 parameters). With the 44 indicators, the Taylor control variates at the
mode fit the rows of rare indicators poorly (their coefficients are weakly
identified): HMC-ECS runs its stratified warmup (the exact stratum and subsample
size per chain are in the JSON; ``hmc_ecs_full_data_fallback`` says whether it
fell back to full-data HMC instead).

ESS is the bulk ESS (min over parameters) of the centred coefficients (each
coordinate minus its mean over classes: the part of the one-vector-per-class
parameterisation the data identify, see the user guide); ESS/s divides it by
the elapsed time; max R-hat is of the same centred coefficients. Also
reported: the largest |difference of posterior means|
between HMC-ECS and full HMC in units of the posterior sd (full HMC's run is
short: its own Monte Carlo error is printed beside it).

Usage::

    python benchmarks/bench_multiclass.py --attributes quantitative   # all rows
    python benchmarks/bench_multiclass.py --n-rows 50000              # 54 attributes
    python benchmarks/bench_multiclass.py --hmc-warmup 100 --hmc-draws 100 \
        --out benchmarks/results/multiclass_all.json   # 54 attributes, all rows: ~45 min
                                                       # (full-data HMC over 465,000 rows)
    python benchmarks/bench_multiclass.py --skip-hmc \
        --out benchmarks/results/multiclass_all_ecs.json   # the same without full-data HMC

Writes ``benchmarks/results/multiclass.json`` (or ``--out``) and prints a table.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
import warnings

import numpy as np
from _provenance import stamp  # noqa: E402


def centred(draws, n_classes):
    t = draws.reshape(draws.shape[:-1] + (n_classes, -1))
    return (t - t.mean(axis=-2, keepdims=True)).reshape(draws.shape)


def load(n_rows, seed, attributes="all"):
    from bayes_subsample import datasets
    X, y = datasets.load_covtype(binary=False, return_X_y=True)
    rng = np.random.default_rng(seed)
    if n_rows is not None and n_rows < X.shape[0]:
        keep = np.sort(rng.choice(X.shape[0], n_rows, replace=False))
        X, y = X[keep], y[keep]
    X = np.asarray(X, dtype=np.float64)
    if attributes == "quantitative":
        X = X[:, :10]
    test = rng.random(X.shape[0]) < 0.2
    Xtr, Xte, ytr, yte = X[~test], X[test], y[~test], y[test]
    mu, sd = Xtr[:, :10].mean(axis=0), Xtr[:, :10].std(axis=0)
    Xtr[:, :10] = (Xtr[:, :10] - mu) / sd
    Xte[:, :10] = (Xte[:, :10] - mu) / sd
    return (np.ascontiguousarray(Xtr), np.ascontiguousarray(Xte), ytr, yte)


def fit_bayes(sampler, X, y, warmup, draws, chains, seed):
    from bayes_subsample import BayesianLogisticRegression
    est = BayesianLogisticRegression(sampler=sampler, n_warmup=warmup, n_samples=draws,
                                     n_chains=chains, n_jobs=chains, random_state=seed)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y)
    elapsed = time.perf_counter() - t0
    from bayes_subsample import diagnostics
    K = est.classes_.shape[0]
    c = centred(est.trace_.common_draws(), K)
    ess = diagnostics.ess_bulk(c)
    return est, elapsed, c, ess


def bayes_row(method, est, elapsed, c, ess, Xte, yte):
    """The figures both Bayesian fits report: time, held-out accuracy, the
    centred coefficients' bulk ESS (min, median), ESS/s and max R-hat, data
    read per iteration and full passes."""
    from bayes_subsample import diagnostics
    d = est.diagnostics_
    return {"method": method, "time_s": elapsed,
            "accuracy": float(np.mean(est.predict(Xte) == yte)),
            "min_ess_bulk": float(ess.min()), "median_ess_bulk": float(np.median(ess)),
            "ess_per_s": float(ess.min() / elapsed),
            "max_rhat": float(np.max(diagnostics.rhat(c))),
            "data_fraction_per_iteration": float(np.mean(d["data_fraction_per_iteration"])),
            "data_passes": d["data_passes"]}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-rows", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--attributes", choices=["all", "quantitative"], default="all",
                    help="all 54 attributes (default) or the 10 quantitative ones")
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--draws", type=int, default=1000)
    ap.add_argument("--hmc-warmup", type=int, default=150)
    ap.add_argument("--hmc-draws", type=int, default=150)
    ap.add_argument("--skip-hmc", action="store_true",
                    help="no full-data HMC fit (on all rows it takes ~30 min): the "
                         "comparisons with it are then null")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                   "multiclass.json"))
    args = ap.parse_args(argv)
    from sklearn.linear_model import LogisticRegression

    from bayes_subsample import diagnostics

    Xtr, Xte, ytr, yte = load(args.n_rows, args.seed, args.attributes)
    print(f"covtype: {Xtr.shape[0]} training rows, {Xte.shape[0]} test rows, "
          f"{Xtr.shape[1]} attributes, {np.unique(ytr).size} classes")
    rows = []

    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sk = LogisticRegression(C=1e4, max_iter=5000).fit(Xtr, ytr)
    rows.append({"method": "scikit-learn LogisticRegression (C=1e4)",
                 "time_s": time.perf_counter() - t0,
                 "accuracy": float(np.mean(sk.predict(Xte) == yte))})

    ecs, t_ecs, c_ecs, ess_ecs = fit_bayes("hmc_ecs", Xtr, ytr, args.warmup, args.draws,
                                           args.chains, args.seed)
    d = ecs.diagnostics_
    rows.append({**bayes_row("HMC-ECS", ecs, t_ecs, c_ecs, ess_ecs, Xte, yte),
                 "m": int(d["tuning"][0].get("m", 0)),
                 # stratified warmup (where the mode's control variates fail): the
                 # rows summed exactly and the subsample size per chain
                 "n_exact_per_chain": [int(t.get("n_exact", 0)) for t in d["tuning"]],
                 "m_per_chain": [int(t.get("m", 0)) for t in d["tuning"]],
                 "rows_per_evaluation_fraction": float(np.mean(
                     [(t.get("n_exact", 0) + t.get("m", 0)) / Xtr.shape[0]
                      for t in d["tuning"]])),
                 "wall_time": {k: np.asarray(v, dtype=float).tolist()
                               for k, v in ecs.trace_.wall_time.items()}})

    z = mcse_hmc = None
    if not args.skip_hmc:
        hmc, t_hmc, c_hmc, ess_hmc = fit_bayes("hmc", Xtr, ytr, args.hmc_warmup,
                                               args.hmc_draws, args.chains, args.seed + 1)
        rows.append(bayes_row("full-data HMC", hmc, t_hmc, c_hmc, ess_hmc, Xte, yte))
        fa, fb = c_ecs.reshape(-1, c_ecs.shape[-1]), c_hmc.reshape(-1, c_hmc.shape[-1])
        sd = fb.std(axis=0)
        z = np.abs(fa.mean(axis=0) - fb.mean(axis=0)) / sd
        mcse_hmc = np.atleast_1d(diagnostics.mcse_mean(c_hmc)) / sd
    result = {
        "n_train": int(Xtr.shape[0]), "n_test": int(Xte.shape[0]),
        "n_params": int(ecs.trace_.draws.shape[-1]), "chains": args.chains,
        "ecs_iterations": [args.warmup, args.draws], "hmc_iterations":
            [args.hmc_warmup, args.hmc_draws],
        "rows": rows,
        "ecs_vs_hmc_max_mean_diff_sd": None if z is None else float(z.max()),
        "ecs_vs_hmc_median_mean_diff_sd": None if z is None else float(np.median(z)),
        "hmc_max_mcse_sd": None if z is None else float(mcse_hmc.max()),
        "ess_per_s_ratio_ecs_over_hmc": (None if z is None else
                                         rows[1]["ess_per_s"] / rows[2]["ess_per_s"]),
        "accuracy_gap_ecs_minus_sklearn": rows[1]["accuracy"] - rows[0]["accuracy"],
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "hmc_ecs_full_data_fallback": bool(d["tuning"][0].get("full_data", False)),
        "command": "python benchmarks/bench_multiclass.py"
                   + (f" --n-rows {args.n_rows}" if args.n_rows else "")
                   + (f" --attributes {args.attributes}" if args.attributes != "all" else "")
                   + (f" --hmc-warmup {args.hmc_warmup}" if args.hmc_warmup != 150 else "")
                   + (f" --hmc-draws {args.hmc_draws}" if args.hmc_draws != 150 else "")
                   + (" --skip-hmc" if args.skip_hmc else ""),
        "load_average_after": list(os.getloadavg()),
    }
    print("| method | time s | held-out accuracy | min ESS (bulk) | ESS/s | max R-hat |"
          " data/iteration |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['method']} | {r['time_s']:.1f} | {r['accuracy']:.4f} | "
              f"{r.get('min_ess_bulk', float('nan')):.0f} | "
              f"{r.get('ess_per_s', float('nan')):.2f} | "
              f"{r.get('max_rhat', float('nan')):.3f} | "
              f"{r.get('data_fraction_per_iteration', float('nan')):.3g} |")
    print(f"accuracy HMC-ECS - scikit-learn: {result['accuracy_gap_ecs_minus_sklearn']:+.4f}")
    if z is not None:
        print(f"ESS/s ratio HMC-ECS / full HMC: {result['ess_per_s_ratio_ecs_over_hmc']:.1f}")
        print(f"posterior means, HMC-ECS vs full HMC: max {z.max():.3f} sd, median "
              f"{np.median(z):.3f} sd (full HMC's MCSE up to {mcse_hmc.max():.3f} sd)")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(stamp(result), fh, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
