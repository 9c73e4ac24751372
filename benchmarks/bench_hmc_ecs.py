"""HMC with energy-conserving subsampling against full-data HMC, measured in one run.

Prints Markdown tables and writes ``benchmarks/results/hmc_ecs.json``.

Sections
--------
1. ``per-iteration``: time per iteration of the compiled perturbed kernel at
   m = 1000, L = 6, d = 29 (fixed, no tuning), one chain on one core, for each n
   -- the "flat in n" check and iterations per second.
2. ``scaling``: synthetic HIGGS-shaped logistic regression (28 features +
   intercept, ``datasets.make_logistic_data``) at each n: perturbed and signed
   HMC-ECS and full-data HMC, all-in (tuning, warmup and compilation-free runs
   included): wall time, time per iteration, ESS/s (min / median over
   parameters), mean IF, alpha_theta, alpha_u, m/n, per-datum evaluations per
   effective sample, RCT against full HMC (min / median / max over parameters,
   CT = IF x evaluations per iteration; signed: / (2 tau - 1)^2), and the max
   |posterior-mean error| / posterior sd against the reference (full HMC, or the
   Laplace approximation where full HMC is skipped).
3. ``covtype``: the same on covtype.binary (581,012 rows, the 10 quantitative
   attributes standardised, the 44 indicators kept 0/1, + intercept) when
   ``$BAYES_SUBSAMPLE_DATA`` holds it.

Usage::

    python benchmarks/bench_hmc_ecs.py                 # n = 1e5, 1e6 (+ covtype if available)
    python benchmarks/bench_hmc_ecs.py --full    # adds n = 1e7 (float32), longer HMC reference
    python benchmarks/bench_hmc_ecs.py --quick         # small smoke run
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from bayes_subsample import diagnostics, sample
from bayes_subsample._optimize import laplace
from bayes_subsample.control_variates import TaylorControlVariate
from bayes_subsample.datasets import make_logistic_data
from bayes_subsample.models import LogisticRegressionModel
from bayes_subsample.samplers import HMC, HMCECS
from bayes_subsample.samplers._hmc_ecs_fast import ECSCore
from bayes_subsample.samplers.hmc import metric_from_precision
from _provenance import stamp  # noqa: E402

warnings.simplefilter("ignore", ConvergenceWarning)


def per_iteration(model, n_iter=3000, m=1000, L=6, G=100, seed=0):
    """Seconds per iteration of the compiled perturbed kernel (u-step + HMC)."""
    lap = laplace(model)
    cv = TaylorControlVariate(model, lap["theta_map"], order=2)
    core = ECSCore(model.compiled, 2, model.prior.precision, "perturbed")
    rng = np.random.default_rng(seed)
    core.set_rows(rng.integers(0, model.n_data, size=m), m // G)
    core.set_reference(cv.theta_star, cv.L_star, cv.A, cv.B)
    metric, _ = metric_from_precision(lap["precision"])
    core.set_position(lap["theta_map"])
    eps = 1.2 / L
    for _ in range(200):
        core.u_step(rng)
        core.hmc_step(metric, rng, eps, L)
    times, acc = [], 0
    for rep in range(3):
        t0 = time.perf_counter()
        for _ in range(n_iter):
            core.u_step(rng)
            acc += core.hmc_step(metric, rng, eps, L)[0]
        times.append((time.perf_counter() - t0) / n_iter)
    return float(np.median(times)), acc / (3 * n_iter)


def summarise(trace, ref_mean, ref_sd):
    """Figures of one run. Times are elapsed wall-clock seconds of the whole
    call (a user's stopwatch: parallel chains overlap), preparation and warmup
    included; ``compute_time_s`` sums the chains' times. The computing time
    CT = IF x evaluations per retained iteration is given on two bases:
    all-in (every per-datum evaluation: preparation, tuning passes, warmup,
    sampling; the headline, as ``Trace.diagnostics()``) and sampling-only
    (the retained iterations' evaluations)."""
    elapsed = trace.wall_time["elapsed"]
    n_iter = trace.n_samples
    flat = trace.draws.reshape(-1, trace.draws.shape[-1])
    ifs = np.array([[diagnostics.integrated_autocorr_time(trace.draws[c, :, j])
                     for j in range(flat.shape[1])] for c in range(trace.n_chains)]).mean(0)
    evals_per_iter = float(trace.stats["n_evals"].mean())
    # all evaluations (warmup, tuning passes and preparation) per retained iteration
    evals_all = float(np.sum(trace.n_evals_per_chain())) / (trace.n_chains * n_iter)
    tau = None
    ct = {"all_in": ifs * evals_all, "sampling_only": ifs * evals_per_iter}
    if trace.signs is not None:
        tau = float((trace.signs > 0).mean())
        ct = {k: v / max(2 * tau - 1, 1e-12) ** 2 for k, v in ct.items()}
    ess = np.atleast_1d(diagnostics.ess_bulk(trace.draws))
    out = {
        "wall_time_s": elapsed,
        "compute_time_s": trace.wall_time["total"],
        "sampling_time_per_iter_ms": 1e3 * float(np.mean(trace.wall_time["sampling"])) / n_iter,
        "ess_per_s_min": float(ess.min() / elapsed),
        "ess_per_s_median": float(np.median(ess) / elapsed),
        "ess_bulk_min": float(ess.min()),
        "n_draws": int(trace.n_chains * n_iter),
        "if_mean": float(ifs.mean()),
        "alpha_theta": float(np.mean(trace.stats["accept_prob"])),
        "alpha_u": float(np.nanmean(trace.stats["alpha_u"])) if "alpha_u" in trace.stats else None,
        "m_over_n": evals_per_iter / trace.n_data,
        "evals_per_iter": evals_per_iter,
        "evals_per_ess_all_in": float(np.sum(trace.n_evals_per_chain()) / ess.min()),
        "evals_per_iter_all_in": evals_all,
        "tau_hat": tau,
        "step_size": float(trace.tuning[0].get("step_size", np.nan)),
        "n_leapfrog": int(trace.tuning[0].get("n_leapfrog", 0)),
        "m": trace.tuning[0].get("m"),
        "max_abs_mean_err_over_sd": float(np.max(np.abs(trace.posterior_mean() - ref_mean)
                                                 / ref_sd)),
        "_ct": ct,
    }
    return out


def run_problem(name, model, args, run_hmc=True):
    print(f"\n### {name}: n = {model.n_data:,}, d = {model.n_params}, dtype = {model.X.dtype}",
          flush=True)
    lap = laplace(model)
    ref_mean, ref_sd = lap["theta_map"], np.sqrt(np.diag(lap["cov"]))
    rows = {}
    kw = dict(n_chains=args.chains, n_jobs=args.chains, random_state=args.seed,
              check_convergence=False)
    if run_hmc:
        hkw = dict(kw, n_chains=args.hmc_chains or args.chains,
                   n_jobs=args.hmc_chains or args.chains)
        tr = sample(model, HMC(), n_samples=args.hmc_samples, n_warmup=args.hmc_warmup, **hkw)
        flat = tr.draws.reshape(-1, model.n_params)
        ref_mean, ref_sd = flat.mean(0), flat.std(0)
        rows["hmc"] = summarise(tr, ref_mean, ref_sd)
        ref_label = "full HMC"
    else:
        ref_label = "Laplace"
    for label, smp in [("hmc_ecs", HMCECS()), ("hmc_ecs_signed", HMCECS(variant="signed"))]:
        tr = sample(model, smp, n_samples=args.samples, n_warmup=args.warmup, **kw)
        rows[label] = summarise(tr, ref_mean, ref_sd)
    if "hmc" in rows:
        for label in ("hmc_ecs", "hmc_ecs_signed"):
            for basis in ("all_in", "sampling_only"):
                rct = rows["hmc"]["_ct"][basis] / rows[label]["_ct"][basis]
                rows[label][f"rct_{basis}_vs_hmc"] = [float(rct.min()), float(np.median(rct)),
                                                      float(rct.max())]
            rows[label]["ess_per_s_ratio_vs_hmc"] = (rows[label]["ess_per_s_min"]
                                                     / rows["hmc"]["ess_per_s_min"])
    for r in rows.values():
        r.pop("_ct")
    header = ("| sampler | elapsed s | ms/iter | ESS/s min | ESS/s med | IF | a_theta | a_u | m/n "
              "| evals/ESS | RCT all-in (min/med/max) | RCT sampling-only (min/med/max) "
              "| max err/sd |")
    print(f"(elapsed wall-clock time, preparation and warmup included; RCT against full HMC; "
          f"errors against {ref_label})")
    print(header)
    print("|" + "---|" * 13)
    for label, r in rows.items():
        rcts = []
        for basis in ("all_in", "sampling_only"):
            rct = r.get(f"rct_{basis}_vs_hmc")
            rcts.append("/".join(f"{v:,.0f}" for v in rct) if rct else "-")
        au = f"{r['alpha_u']:.3f}" if r["alpha_u"] is not None else "-"
        print(f"| {label} | {r['wall_time_s']:.1f} | {r['sampling_time_per_iter_ms']:.3f} | "
              f"{r['ess_per_s_min']:.1f} | {r['ess_per_s_median']:.1f} | {r['if_mean']:.2f} | "
              f"{r['alpha_theta']:.3f} | {au} | {r['m_over_n']:.2e} | "
              f"{r['evals_per_ess_all_in']:.3g} | "
              f"{rcts[0]} | {rcts[1]} | {r['max_abs_mean_err_over_sd']:.3f} |", flush=True)
    return {"n": model.n_data, "d": model.n_params, "dtype": str(model.X.dtype),
            "reference": ref_label, "samplers": rows}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small smoke run")
    ap.add_argument("--full", action="store_true", help="add n = 1e7 (float32)")
    ap.add_argument("--sizes", type=float, nargs="*", default=None)
    ap.add_argument("--samples", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--hmc-samples", type=int, default=1000)
    ap.add_argument("--hmc-warmup", type=int, default=500)
    ap.add_argument("--chains", type=int, default=2)
    ap.add_argument("--hmc-chains", type=int, default=None,
                    help="chains of the full-HMC reference (default: --chains)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-covtype", action="store_true")
    ap.add_argument("--no-hmc", action="store_true",
                    help="skip the full-HMC reference (errors against the Laplace approximation)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "hmc_ecs.json"))
    args = ap.parse_args(argv)
    sizes = args.sizes or ([2e4] if args.quick else [1e5, 1e6] + ([1e7] if args.full else []))
    if args.quick:
        args.samples = args.hmc_samples = 300
        args.warmup = args.hmc_warmup = 300
    result = {"command": "python benchmarks/bench_hmc_ecs.py " + " ".join(argv or sys.argv[1:]),
              "platform": platform.platform(), "cpu_count": os.cpu_count(),
              "load_average": os.getloadavg(), "per_iteration": [], "scaling": []}

    print("## Per-iteration cost (m = 1000, L = 6, d = 29, one chain, one core)")
    print("| n | dtype | ms / iteration | iterations / s | acceptance |")
    print("|---|---|---|---|---|")
    datasets = {}
    for n in sizes:
        n = int(n)
        dtype = np.float32 if n >= 5_000_000 else np.float64
        X, y = make_logistic_data(n, 28, dtype=dtype, random_state=args.seed)
        model = LogisticRegressionModel(X, y, prior_scale=10.0)
        datasets[n] = model
        t, acc = per_iteration(model, n_iter=500 if args.quick else 3000)
        result["per_iteration"].append({"n": n, "dtype": np.dtype(dtype).name, "s_per_iter": t,
                                        "iter_per_s": 1 / t, "accept": acc})
        print(f"| {n:,} | {np.dtype(dtype).name} | {1e3 * t:.3f} | {1 / t:,.0f} | {acc:.3f} |",
              flush=True)
    pi = result["per_iteration"]
    if len(pi) > 1:
        ratio = pi[-1]["s_per_iter"] / pi[0]["s_per_iter"]
        result["per_iteration_ratio_largest_vs_smallest_n"] = ratio
        print(f"time per iteration at n = {pi[-1]['n']:,} / at n = {pi[0]['n']:,}: {ratio:.2f}")

    print("\n## All-in runs (tuning + warmup + sampling), "
          f"{args.chains} chains in parallel threads")
    def save():
        os.makedirs(os.path.dirname(args.out), exist_ok=True)
        with open(args.out, "w") as f:
            json.dump(stamp(result), f, indent=1, default=float)

    for n, model in datasets.items():
        run_hmc = (n <= 1_000_000 or args.full) and not args.no_hmc
        res = run_problem("synthetic HIGGS-shaped", model, args, run_hmc=run_hmc)
        result["scaling"].append(res)
        save()   # keep what is measured even if a later section is stopped
        del model
    datasets.clear()

    if not args.no_covtype and not args.quick:
        try:
            from bayes_subsample.datasets import load_covtype
            X, y = load_covtype(return_X_y=True)
        except (FileNotFoundError, OSError) as e:
            print(f"\n(covtype skipped: {e.__class__.__name__}: set BAYES_SUBSAMPLE_DATA)")
        else:
            # standardise the 10 quantitative attributes; keep the 44 indicators 0/1
            # (standardised rare indicators reach |x| ~ 300, which no Taylor
            # control variate survives)
            X = np.array(X, dtype=np.float64)
            X[:, :10] = (X[:, :10] - X[:, :10].mean(0)) / X[:, :10].std(0)
            model = LogisticRegressionModel(np.ascontiguousarray(X), y, prior_scale=10.0)
            result["covtype"] = run_problem("covtype.binary", model, args,
                                            run_hmc=not args.no_hmc)

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    result["peak_rss_bytes"] = peak
    save()
    print(f"\nwrote {args.out}; peak RSS {peak / 2**30:.2f} GiB; load average "
          f"{os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
