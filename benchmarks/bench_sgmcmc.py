"""Benchmarks of the stochastic-gradient samplers (SGLD, SGHMC, EWSG).

1. covtype Bayesian logistic regression as in the EWSG paper §5.2: class 2 vs
   rest, 80/20 split, prior N(0, 10 I), minibatch 50, one data pass, gamma = 50,
   the paper's step sizes; test accuracy and test log-likelihood of the
   posterior predictive averaged over 200 independent samples (200 chains,
   each started at 0 and run for one data pass; its final state is the sample).
2. The HMC-ECS paper's Table 1 shape on synthetic HIGGS-shaped data: computing
   time CT = IF x per-datum evaluations per retained iteration -- all-in
   (preparation, tuning passes and warmup counted: the headline) and
   sampling-only -- for SGLD and SGHMC (with and without control variates),
   full-data HMC and, if available, perturbed HMC-ECS; RCT relative to HMC-ECS
   (or HMC); times are elapsed wall-clock seconds. Because the SG samplers are
   biased, their errors in posterior means/sds against full HMC are reported
   too; a sampler that refuses the posterior at its defaults (a
   ``SamplingError``: without control variates the default step is b / n
   times the Gaussian one) is reported as its row.

Usage::

    python benchmarks/bench_sgmcmc.py [--quick] [--out benchmarks/results/sgmcmc.json]

Timings and CT figures are noisy on a shared machine.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
import warnings

import numpy as np

from bayes_subsample import diagnostics as diag
from bayes_subsample import sample
from bayes_subsample.exceptions import SamplingError
from bayes_subsample.models import LogisticRegressionModel
from bayes_subsample.samplers.ewsg import EWSG
from bayes_subsample.samplers.hmc import HMC
from bayes_subsample.samplers.sghmc import SGHMC
from bayes_subsample.samplers import SGLD, iterations_for_passes
from _provenance import stamp  # noqa: E402


def _sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def _predictive(draws, X, y):
    """Posterior-predictive accuracy and mean log-likelihood on (X, y)."""
    eta = X @ draws[:, :-1].T + draws[:, -1]
    p = _sigmoid(eta).mean(axis=1)
    p = np.clip(p, 1e-12, 1 - 1e-12)
    acc = float(np.mean((p > 0.5) == (y > 0.5)))
    ll = float(np.mean(y * np.log(p) + (1 - y) * np.log1p(-p)))
    return acc, ll


# --------------------------------------------------------------------------------------
def covtype_benchmark(quick):
    from bayes_subsample.datasets import load_covtype
    data_home = os.environ.get("BAYES_SUBSAMPLE_DATA", "/work/shared/data")
    X, y = load_covtype(return_X_y=True, dtype=np.float64, data_home=data_home)
    rng = np.random.default_rng(2020)
    perm = rng.permutation(X.shape[0])
    n_train = int(0.8 * X.shape[0])
    tr, te = perm[:n_train], perm[n_train:]
    Xtr, Xte = X[tr], X[te]
    # standardise the 10 quantitative columns with training statistics
    mu, sd = Xtr[:, :10].mean(0), Xtr[:, :10].std(0)
    Xtr[:, :10] = (Xtr[:, :10] - mu) / sd
    Xte[:, :10] = (Xte[:, :10] - mu) / sd
    Xtr, Xte = np.ascontiguousarray(Xtr), np.ascontiguousarray(Xte)
    ytr, yte = y[tr], y[te]
    v = math.sqrt(10.0)
    model = LogisticRegressionModel(Xtr, ytr, prior_scale=v, intercept_prior_scale=v)
    n = model.n_data
    n_chains = 40 if quick else 200
    b, gamma = 50, 50.0
    configs = {
        # EWSG-paper step sizes; its SGLD h = 2e-5 is eps = 2h in our convention
        "SGLD (h=2e-5, eps=4e-5)": SGLD(step_size=4e-5, batch_size=b, control_variates=False),
        "SGHMC-uniform (EWSG M=0, h=1e-3)": EWSG(step_size=1e-3, batch_size=b, friction=gamma,
                                                 index_chain_length=0),
        "SGHMC class (eps=1e-3, C=50, no refresh)": SGHMC(step_size=1e-3, batch_size=b,
                                                          friction=gamma, n_steps=1,
                                                          control_variates=False,
                                                          refresh_momentum=False),
        "EWSG (h=3e-3, M=1)": EWSG(step_size=3e-3, batch_size=b, friction=gamma,
                                   index_chain_length=1),
        "EWSG (h=1e-3, M=1)": EWSG(step_size=1e-3, batch_size=b, friction=gamma,
                                   index_chain_length=1),
    }
    out = {"n_train": n, "n_test": int(len(te)), "n_params": model.n_params,
           "n_independent_samples": n_chains, "batch_size": b, "friction": gamma,
           "standardised": "10 quantitative columns, training mean/sd", "results": {}}
    from bayes_subsample._optimize import laplace
    lap = laplace(model)
    lam = np.linalg.eigvalsh(lap["precision"])
    out["precision_eigenvalues_min_max"] = [float(lam.min()), float(lam.max())]
    out["map_test"] = dict(zip(("accuracy", "loglik"),
                               _predictive(lap["theta_map"][None, :], Xte, yte)))
    print(f"covtype: n_train={n}, lambda_max(P)={lam.max():.3g}, MAP test acc="
          f"{out['map_test']['accuracy']:.4f}, ll={out['map_test']['loglik']:.4f}")
    for name, s in configs.items():
        M = getattr(s, "index_chain_length", 0)
        steps = iterations_for_passes(1, n, b, M)
        s.set_params(n_steps=steps)             # one retained iteration = one data pass
        t0 = time.perf_counter()
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                trace = sample(model, s, n_samples=1, n_warmup=0, n_chains=n_chains,
                               init=np.zeros(model.n_params), random_state=1,
                               check_convergence=False)
        except FloatingPointError as e:
            out["results"][name] = {"diverged": True, "message": str(e)}
            print(f"  {name:42s} DIVERGED: {e}")
            continue
        wall = time.perf_counter() - t0
        draws = trace.draws[:, -1, :]
        acc, ll = _predictive(draws, Xte, yte)
        passes = float(np.mean(trace.stats["data_passes"][:, -1]))
        res = {"test_accuracy": acc, "test_loglik": ll, "data_passes": passes,
               "wall_time_s": wall, "steps": steps,
               "prepare_evals_not_used_for_start": trace.n_evals_prepare}
        if "index_accept" in trace.stats:
            res["index_accept"] = float(np.nanmean(trace.stats["index_accept"]))
        out["results"][name] = res
        print(f"  {name:42s} acc={acc:.4f} ll={ll:.4f} passes={passes:.3f} "
              f"wall={wall:.1f}s" + (f" index_accept={res['index_accept']:.3f}"
                                     if "index_accept" in res else ""))
    return out


# --------------------------------------------------------------------------------------
def _if_per_param(draws):
    return np.array([[diag.integrated_autocorr_time(draws[c, :, j])
                      for j in range(draws.shape[2])] for c in range(draws.shape[0])]).mean(0)


def rct_benchmark(quick):
    from bayes_subsample.datasets import make_logistic_data
    n = 20_000 if quick else 100_000
    X, y = make_logistic_data(n, 28, random_state=0)
    model = LogisticRegressionModel(X, y)
    n_samples, n_warmup, n_chains = (600, 300, 2) if quick else (2000, 1000, 2)
    m = 100
    samplers = {
        "HMC (full data)": HMC(),
        "SGLD CV": SGLD(batch_size=m, control_variates=True, n_steps=20),
        "SGLD no CV": SGLD(batch_size=m, control_variates=False, n_steps=20),
        "SGHMC CV": SGHMC(batch_size=m, n_steps=20, control_variates=True),
        "SGHMC no CV": SGHMC(batch_size=m, n_steps=20, control_variates=False),
    }
    try:
        from bayes_subsample.samplers import HMCECS
        samplers["HMC-ECS perturbed"] = HMCECS()
    except ImportError:
        pass
    out = {"n_data": n, "n_params": model.n_params, "batch_size": m, "n_samples": n_samples,
           "n_warmup": n_warmup, "n_chains": n_chains, "step_sizes": "the samplers' defaults",
           "CT": "IF x per-datum evaluations per retained iteration, all-in (preparation, "
                 "tuning passes, warmup and sampling); the sampling-only basis beside it",
           "results": {}}
    ref_mean = ref_sd = None
    for name, s in samplers.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            try:
                trace = sample(model, s, n_samples=n_samples, n_warmup=n_warmup,
                               n_chains=n_chains, random_state=0, check_convergence=False)
            except SamplingError as e:      # an SG sampler's refusal: reported as the row
                out["results"][name] = {"error": str(e)}
                print(f"  {name:20s} refused: {str(e)[:150]}")
                continue
        wall = trace.wall_time["elapsed"]          # a stopwatch: preparation and warmup in
        ifs = _if_per_param(trace.draws)
        evals = float(trace.stats["n_evals"].mean())
        # all evaluations (preparation, tuning passes, warmup) per retained iteration
        evals_all = float(np.sum(trace.n_evals_per_chain())) / (n_chains * n_samples)
        ct = diag.computing_time(ifs, evals_all)
        flat = trace.draws.reshape(-1, model.n_params)
        res = {"mean_IF": float(np.nanmean(ifs)), "evals_per_iter": evals,
               "evals_per_iter_all_in": evals_all, "CT_per_param": ct.tolist(),
               "CT_sampling_only_per_param": diag.computing_time(ifs, evals).tolist(),
               "wall_time_s": wall, "step_size": trace.tuning[0].get("step_size")}
        if name == "HMC (full data)":
            ref_mean, ref_sd = flat.mean(0), flat.std(0)
        else:
            res["max_abs_mean_err_in_sd"] = float(np.max(np.abs(flat.mean(0) - ref_mean) / ref_sd))
            res["sd_ratio_min_max"] = [float(np.min(flat.std(0) / ref_sd)),
                                       float(np.max(flat.std(0) / ref_sd))]
        out["results"][name] = res
        print(f"  {name:20s} IF={res['mean_IF']:8.2f} evals/it={evals:10.0f} all-in "
              f"{evals_all:10.0f} median CT all-in={np.median(ct):.3g} elapsed={wall:.1f}s")
    ref_name = "HMC-ECS perturbed" if "HMC-ECS perturbed" in out["results"] else "HMC (full data)"
    ref_ct = np.asarray(out["results"][ref_name]["CT_per_param"])
    out["rct_reference"] = ref_name
    ref_ct_s = np.asarray(out["results"][ref_name]["CT_sampling_only_per_param"])
    for name, res in out["results"].items():
        if "error" in res:
            continue
        r = diag.rct_summary(diag.relative_computing_time(ref_ct, np.asarray(res["CT_per_param"])))
        res["RCT_min_median_max"] = [r.min, r.median, r.max]          # all-in (headline)
        rs = diag.rct_summary(diag.relative_computing_time(
            ref_ct_s, np.asarray(res["CT_sampling_only_per_param"])))
        res["RCT_sampling_only_min_median_max"] = [rs.min, rs.median, rs.max]
        extra = ""
        if "sd_ratio_min_max" in res:
            extra = (f"  |mean err|/sd<={res['max_abs_mean_err_in_sd']:.2f} "
                     f"sd ratio {res['sd_ratio_min_max'][0]:.2f}-{res['sd_ratio_min_max'][1]:.2f}")
        print(f"  RCT all-in vs {ref_name}: {name:20s} {r.min:8.2f} {r.median:8.2f} {r.max:8.2f}"
              f" (sampling-only {rs.min:.2f} {rs.median:.2f} {rs.max:.2f}){extra}")
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller runs (about a minute)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "sgmcmc.json"))
    ap.add_argument("--skip-covtype", action="store_true")
    args = ap.parse_args(argv)
    result = {"quick": args.quick, "python": sys.version.split()[0],
              "machine": platform.machine(), "cpus": os.cpu_count(),
              "note": "figures measured on a shared machine; timings are noisy"}
    if not args.skip_covtype:
        print("== covtype, one data pass (EWSG paper §5.2) ==")
        try:
            result["covtype"] = covtype_benchmark(args.quick)
        except FileNotFoundError as e:
            print(f"covtype skipped: {e}")
            result["covtype"] = {"skipped": str(e)}
    print("== synthetic HIGGS-shaped data: CT / RCT (HMC-ECS paper Table 1 shape) ==")
    result["rct"] = rct_benchmark(args.quick)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(stamp(result), f, indent=2)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
