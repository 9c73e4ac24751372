"""Mixing of every sampler at its defaults, against full-data NUTS in the same run.

1. covtype.binary (200,000 rows chosen at random, the 10 quantitative
   attributes standardised over those rows, intercept, prior N(0, 10^2)) and
   the shipped HIGGS sample (7,000 rows, 28 standardised features +
   intercept): every sampler at its defaults, 4 chains x (1000 warmup + 1000
   draws); the random-walk samplers (MH, austerity, confidence) on covtype
   only with ``--all``. Per sampler: min bulk ESS / draws, max R-hat, the largest
   |mean - NUTS mean| / NUTS sd, the sd ratios to NUTS, all-in wall time and
   min ESS per second, data passes per 100 draws (all evaluations: preparation,
   warmup, sampling).
2. The SG samplers' bias against step size on covtype: the default step times
   1/4, 1/2, 1, 2 (and 4), same statistics.
3. n = 1e6 synthetic logistic regression (d = 28 + intercept): HMC-ECS at the
   old default (``trajectory_length=1.2``, no jitter) and at today's default,
   all-in min-bulk-ESS per second, in one run.

Prints Markdown tables and writes ``benchmarks/results/mixing.json``.

Usage::

    python benchmarks/bench_mixing.py                   # about 15 minutes on 2 cores
    python benchmarks/bench_mixing.py --quick           # smaller runs, about 3 minutes
    python benchmarks/bench_mixing.py --skip synthetic --skip bias
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from bayes_subsample import diagnostics as diag
from bayes_subsample import sample
from bayes_subsample.datasets import load_covtype, load_higgs_sample, make_logistic_data
from bayes_subsample.models import LogisticRegressionModel
from bayes_subsample.samplers import EWSG, HMCECS, SGHMC, SGLD, resolve_sampler
from _provenance import stamp  # noqa: E402

DEFAULTS = ["nuts", "hmc", "hmc_ecs", "hmc_ecs_nuts", "mh", "austerity", "confidence",
            "sgld", "sghmc", "ewsg"]
#: random-walk samplers: d transitions per draw, each a full pass or a large share
#: of one, so on 200,000 rows they take most of an hour (``--all`` runs them)
MH_FAMILY = ("mh", "austerity", "confidence")
SG = {"sgld": SGLD, "sghmc": SGHMC, "ewsg": EWSG}


def covtype_model(n_rows=200_000, seed=0):
    data_home = os.environ.get("BAYES_SUBSAMPLE_DATA")
    X, y = load_covtype(return_X_y=True, data_home=data_home)
    rows = np.sort(np.random.default_rng(seed).choice(X.shape[0], n_rows, replace=False))
    X = X[rows, :10]
    X = np.ascontiguousarray((X - X.mean(0)) / X.std(0))
    return LogisticRegressionModel(X, y[rows], prior_scale=10.0, intercept_prior_scale=10.0)


def higgs_model():
    X, y = load_higgs_sample(return_X_y=True, standardize=True)
    return LogisticRegressionModel(X, y, prior_scale=10.0, intercept_prior_scale=10.0)


def run(model, sampler, args, seed=0):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return sample(model, sampler, n_samples=args.n_samples, n_warmup=args.n_warmup,
                      n_chains=args.n_chains, n_jobs=args.n_jobs, random_state=seed,
                      check_convergence=False)


def summarise(trace, ref=None):
    d = trace.draws
    flat = d.reshape(-1, d.shape[-1])
    ess = np.atleast_1d(diag.ess_bulk(d))
    n_draws = d.shape[0] * d.shape[1]
    elapsed = trace.wall_time["elapsed"]
    evals = float(np.sum(trace.n_evals_per_chain()))
    res = {"min_ess_per_draw": float(ess.min() / n_draws),
           "max_rhat": float(np.max(diag.rhat(d))),
           "wall_s": elapsed, "min_ess_per_s": float(ess.min() / elapsed),
           "passes_per_100_draws": 100 * evals / trace.n_data / n_draws,
           "mean": flat.mean(0).tolist(), "sd": flat.std(0, ddof=1).tolist()}
    if ref is not None:
        m0, s0 = np.asarray(ref["mean"]), np.asarray(ref["sd"])
        ratio = flat.std(0, ddof=1) / s0
        res["max_mean_err_sd"] = float(np.max(np.abs(flat.mean(0) - m0) / s0))
        res["sd_ratio_min_max"] = [float(ratio.min()), float(ratio.max())]
    tun = trace.tuning[0]
    for k in ("step_size", "full_data", "subsample_size", "n_leapfrog"):
        if k in tun and np.ndim(tun[k]) == 0:
            res[k] = tun[k] if isinstance(tun[k], (bool, str)) else float(tun[k])
    return res


def row(name, r):
    err = r.get("max_mean_err_sd")
    sd = r.get("sd_ratio_min_max")
    return (f"| {name} | {r['min_ess_per_draw']:.2f} | {r['max_rhat']:.3f} | "
            + (f"{err:.3f} | {sd[0]:.2f}-{sd[1]:.2f} |" if err is not None else "ref | ref |")
            + f" {r['wall_s']:.1f} | {r['min_ess_per_s']:.1f} | {r['passes_per_100_draws']:.3g} |")


HEADER = ("| sampler | min ESS / draws | max R-hat | max mean err / sd | sd ratio | "
          "wall s | min ESS/s | passes / 100 draws |\n|---|---|---|---|---|---|---|---|")


def defaults_table(label, model, args, names=DEFAULTS):
    print(f"\n## {label}: n = {model.n_data}, {model.n_params} parameters, every sampler at "
          f"its defaults, {args.n_chains} chains x ({args.n_warmup} warmup + "
          f"{args.n_samples} draws)\n")
    print(HEADER)
    out, ref = {}, None
    for name in names:
        try:
            trace = run(model, resolve_sampler(name), args)
        except FloatingPointError as e:
            out[name] = {"failed": str(e)}
            print(f"| {name} | failed: {e} |")
            continue
        r = summarise(trace, ref)
        if name == "nuts":
            ref = r
        out[name] = r
        print(row(name, r), flush=True)
    return out, ref


def bias_table(model, ref, args):
    factors = [0.25, 0.5, 1.0, 2.0, 4.0]
    print(f"\n## SG bias against step size (covtype, n = {model.n_data}; factor x the default "
          "step size)\n")
    print("| sampler | factor | step size | min ESS / draws | max R-hat | max mean err / sd "
          "| sd ratio | wall s | min ESS/s | passes / 100 draws |\n"
          "|---|---|---|---|---|---|---|---|---|---|")
    out = {}
    for name, cls in SG.items():
        default_step = None
        for f in factors:
            s = cls()
            if default_step is None:
                default_step = s.prepare(model, np.random.default_rng(0)).step_size
            # the table measures the bias of large steps: no end-of-warmup check
            s.set_params(step_size=f * default_step, check_spread=False)
            try:
                r = summarise(run(model, s, args), ref)
            except FloatingPointError as e:
                out[f"{name} x{f}"] = {"failed": str(e)}
                print(f"| {name} | {f} | {f * default_step:.3g} | failed: {str(e)[:60]} |")
                continue
            out[f"{name} x{f}"] = r
            print(f"| {name} | {f} | {f * default_step:.3g} "
                  + row("", r)[len("|  "):], flush=True)
    return out


def synthetic_table(args):
    n = args.synthetic_n
    X, y = make_logistic_data(n, 28, random_state=0)
    model = LogisticRegressionModel(X, y)
    print(f"\n## HMC-ECS at n = {n} (synthetic, d = 28 + intercept): old default vs new\n")
    print(HEADER)
    configs = {"HMCECS(trajectory_length=1.2, jitter=0) (v0.1 default)":
               HMCECS(trajectory_length=1.2, jitter=0.0),
               "HMCECS() (default)": HMCECS(),
               "HMCECS(inner='nuts')": HMCECS(inner="nuts")}
    out = {}
    for name, s in configs.items():
        r = summarise(run(model, s, args))
        out[name] = r
        print(row(name, r), flush=True)
    old, new = (out[k]["min_ess_per_s"] for k in list(configs)[:2])
    out["ratio_new_over_old_min_ess_per_s"] = new / old
    print(f"\nall-in min-ESS/s, new default / v0.1 default: {new / old:.2f}x")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="2 chains x (500 + 500), 50,000 covtype rows, n = 2e5 synthetic")
    ap.add_argument("--skip", action="append", default=[],
                    choices=["covtype", "higgs", "bias", "synthetic"])
    ap.add_argument("--all", action="store_true",
                    help="also run MH, austerity and confidence on covtype")
    ap.add_argument("--n-jobs", type=int, default=1,
                    help="chains in parallel (default 1: per-sampler times comparable)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "mixing.json"))
    args = ap.parse_args(argv)
    args.n_chains, args.n_warmup, args.n_samples = (2, 500, 500) if args.quick else (4, 1000,
                                                                                     1000)
    args.synthetic_n = 200_000 if args.quick else 1_000_000
    covtype_rows = 50_000 if args.quick else 200_000
    result = {"platform": platform.platform(), "python": sys.version.split()[0],
              "cpu_count": os.cpu_count(), "load_average": os.getloadavg(),
              "n_chains": args.n_chains, "n_warmup": args.n_warmup,
              "n_samples": args.n_samples, "n_jobs": args.n_jobs}
    t0 = time.perf_counter()
    ref = None
    if "covtype" not in args.skip or "bias" not in args.skip:
        cov = covtype_model(covtype_rows)
        if "covtype" not in args.skip:
            names = DEFAULTS if args.all else [s for s in DEFAULTS if s not in MH_FAMILY]
            result["covtype"], ref = defaults_table("covtype.binary", cov, args, names)
        if "bias" not in args.skip:
            if ref is None:
                ref = summarise(run(cov, "nuts", args))
            result["sg_bias"] = bias_table(cov, ref, args)
    if "higgs" not in args.skip:
        result["higgs"], _ = defaults_table("HIGGS sample", higgs_model(), args)
    if "synthetic" not in args.skip:
        result["synthetic"] = synthetic_table(args)
    result["total_s"] = time.perf_counter() - t0
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(stamp(result), f, indent=1, default=float)
    print(f"\nwrote {args.out} ({result['total_s']:.0f} s; load average at start "
          f"{result['load_average'][0]:.1f})")


if __name__ == "__main__":
    main()
