"""Benchmarks of the approximate MH samplers (austerity MH, confidence sampler).

1. MNIST 7 vs 9 as in Korattikara, Chen & Welling, Figures 2-3: logistic
   regression on 50 PCA components (sklearn PCA of the pixels / 255, components
   scaled to unit variance), Gaussian prior N(0, I) (intercept N(0, 10^2)),
   random-walk proposal adapted in warmup. For epsilon in {0, 0.01, 0.05, 0.1,
   0.2}: (a) fraction of data used and wrong-decision rate (full-data decision
   with the same u, ``check_exact``) over a fixed number of iterations;
   (b) samples drawn in a fixed wall time per epsilon (after warmup) and the
   risk of the predictive mean on the 2,037 test points, i.e. the mean over
   test points of (p_hat(x) - p_ref(x))^2 averaged over chains, p_ref from a
   long full-data HMC run.
2. covtype.binary as in Bardenet, Doucet & Holmes: the first 2 and the first
   10 attributes standardised to mean 0, sd 0.5 (Gelman), n = 400,000 rows with
   ``--full``; Gaussian prior with sd 10 (intercept) and 2.5 (slopes) instead of
   the paper's Cauchy. Confidence sampler (delta = 0.01, Bernstein-Serfling;
   and the Taylor-proxy variant) and exact MH, each chain started at 0: data
   fraction per iteration during burn-in (first 10% of warmup) and at
   equilibrium (after warmup), and agreement of posterior means and sds with
   exact MH.
3. The lognormal toy of BDH §4.1 (heavy-tailed log-likelihood differences):
   wrong-decision rates of austerity MH with a first batch of 2 and of the
   confidence sampler.

Every sampler here runs with ``n_steps=1`` (one MH transition per retained
iteration, as in the papers), so the per-iteration figures are per decision;
the samplers' default makes one transition per parameter.

Usage::

    python benchmarks/bench_approx_mh.py [--quick | --full] [--out FILE]

Default run: a few minutes; ``--quick``: about a minute; ``--full``: the
paper-size runs (400 s per epsilon on MNIST, n = 400,000 covtype; hours).
Timings are noisy on a shared machine: compare within one run.
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

from bayes_subsample._driver import sample
from bayes_subsample.models import FunctionModel, LogisticRegressionModel
from bayes_subsample.samplers import HMC, MH
from bayes_subsample.samplers.austerity import AusterityMH
from bayes_subsample.samplers.confidence import ConfidenceMH
from _provenance import stamp  # noqa: E402

EPSILONS = [0.0, 0.01, 0.05, 0.1, 0.2]
DATA = os.environ.get("BAYES_SUBSAMPLE_DATA", "/work/shared/data")


def _sigmoid(z):
    return 0.5 * (1.0 + np.tanh(0.5 * z))


def run_kernel(sampler, model, prepared, rng, theta0, n_warmup, n_iter=None, seconds=None,
               thin=1):
    """Drive one chain by hand: warmup, then n_iter steps or until ``seconds``
    of wall time. Returns (draws, per-step Info fields, steps, elapsed)."""
    kernel = sampler.build(model, prepared, n_warmup)
    state = kernel.init(rng, theta0.copy())
    for i in range(n_warmup):
        state, _ = kernel.warmup_step(rng, state, i)
    state = kernel.end_warmup(state)
    draws, extras, steps = [], {}, 0
    t0 = time.perf_counter()
    while True:
        state, info = kernel.step(rng, state)
        steps += 1
        if steps % thin == 0:
            draws.append(state.theta)
        for k, v in zip(info._fields, info):
            extras.setdefault(k, []).append(v)
        if n_iter is not None and steps >= n_iter:
            break
        if seconds is not None and steps % 50 == 0 and time.perf_counter() - t0 >= seconds:
            break
    elapsed = time.perf_counter() - t0
    return np.asarray(draws), {k: np.asarray(v) for k, v in extras.items()}, steps, elapsed


# --------------------------------------------------------------------------------------
def mnist_7v9_pca():
    """MNIST 7 vs 9 as in Korattikara, Chen & Welling: 50 PCA components of the
    pixels / 255, scaled to unit variance. Returns (Z_train, y_train, Z_test)."""
    from sklearn.decomposition import PCA

    z = np.load(os.path.join(DATA, "mnist", "mnist_7vs9_derived.npz"))
    Xtr, ytr = z["X_train"].astype(np.float64) / 255.0, z["y_train"].astype(np.float64)
    Xte = z["X_test"].astype(np.float64) / 255.0
    pca = PCA(50, random_state=0).fit(Xtr)
    Ztr, Zte = pca.transform(Xtr), pca.transform(Xte)
    scale = Ztr.std(axis=0)
    return np.ascontiguousarray(Ztr / scale), ytr, Zte / scale


def mnist_benchmark(mode):
    Ztr, ytr, Zte = mnist_7v9_pca()
    model = LogisticRegressionModel(np.ascontiguousarray(Ztr), ytr, prior_scale=1.0,
                                    intercept_prior_scale=10.0)
    cfg = {"quick": {"check_iter": 300, "warmup": 300, "seconds": 3.0, "chains": 2,
                     "ref": (300, 300)},
           "default": {"check_iter": 1500, "warmup": 1000, "seconds": 15.0, "chains": 2,
                       "ref": (1000, 1000)},
           "full": {"check_iter": 10000, "warmup": 2000, "seconds": 400.0, "chains": 8,
                        "ref": (5000, 2000)}}[mode]
    print(f"\n## MNIST 7 vs 9 (n = {model.n_data}, d = 50 + intercept), mode {mode}")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = sample(model, HMC(), n_samples=cfg["ref"][0], n_warmup=cfg["ref"][1], n_chains=2,
                     random_state=0)
    flat = ref.draws.reshape(-1, ref.draws.shape[-1])
    p_ref = _sigmoid(Zte @ flat[:, :-1].T + flat[:, -1]).mean(axis=1)
    rows = []
    for eps in EPSILONS:
        s = AusterityMH(n_steps=1, epsilon=eps, check_exact=True, proxy=None)
        prepared = s.prepare(model, np.random.default_rng(0))
        rng = np.random.default_rng(100)
        _, ex, _, _ = run_kernel(s, model, prepared, rng, prepared.theta_init, cfg["warmup"],
                                 n_iter=cfg["check_iter"])
        s_fast = AusterityMH(n_steps=1, epsilon=eps, proxy=None)
        risks, counts = [], []
        for c in range(cfg["chains"]):
            rng = np.random.default_rng([200, c])
            theta0 = prepared.theta_init + prepared.init_chol @ rng.standard_normal(model.n_params)
            draws, _, steps, _el = run_kernel(s_fast, model, prepared, rng, theta0, cfg["warmup"],
                                             seconds=cfg["seconds"], thin=5)
            p_hat = _sigmoid(Zte @ draws[:, :-1].T + draws[:, -1]).mean(axis=1)
            risks.append(float(np.mean((p_hat - p_ref) ** 2)))
            counts.append(steps)
        row = {"epsilon": eps, "data_fraction": float(ex["data_fraction"].mean()),
                   "wrong_decision_rate": float(ex["wrong_decision"].mean()),
                   "mean_tests": float(ex["n_batches"].mean()),
                   "samples_in_time": float(np.mean(counts)), "seconds": cfg["seconds"],
                   "risk_predictive_mean": float(np.mean(risks)),
                   "log10_risk": float(np.log10(np.mean(risks)))}
        rows.append(row)
    print("| epsilon | data fraction | wrong decisions | tests/step | samples in "
          f"{cfg['seconds']:.0f} s | risk (pred. mean) |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['epsilon']} | {r['data_fraction']:.3f} | {r['wrong_decision_rate']:.4f} | "
              f"{r['mean_tests']:.1f} | {r['samples_in_time']:.0f} | "
              f"{r['risk_predictive_mean']:.2e} |")
    return {"n_train": model.n_data, "n_test": int(Zte.shape[0]), "config": cfg, "rows": rows}


# --------------------------------------------------------------------------------------
def covtype_benchmark(mode):
    from bayes_subsample.datasets import load_covtype, load_covtype_sample

    n_rows = {"quick": None, "default": 100_000, "full": 400_000}[mode]
    if n_rows is None:
        X, y = load_covtype_sample(return_X_y=True)
    else:
        X, y = load_covtype(return_X_y=True, n_rows=n_rows, data_home=DATA)
    it = {"quick": (200, 200), "default": (500, 500), "full": (3000, 3000)}[mode]
    out = {}
    for d in (2, 10):
        Z = np.asarray(X[:, :d], dtype=np.float64)
        Z = 0.5 * (Z - Z.mean(axis=0)) / Z.std(axis=0)      # Gelman: mean 0, sd 0.5
        model = LogisticRegressionModel(np.ascontiguousarray(Z), np.asarray(y, np.float64),
                                        prior_scale=2.5, intercept_prior_scale=10.0)
        res = {}
        init = np.zeros(model.n_params)
        runs = {"mh": MH(n_steps=1),
                "confidence": ConfidenceMH(n_steps=1, delta=0.01, proxy=None, stratify=False),
                "confidence_taylor": ConfidenceMH(n_steps=1, delta=0.01, proxy="taylor")}
        for name, s in runs.items():
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tr = sample(model, s, n_samples=it[1], n_warmup=it[0], n_chains=1,
                            random_state=1, init=init)
            el = time.perf_counter() - t0
            w_ev = tr.warmup_stats["n_evals"][0]
            burn = max(1, it[0] // 10)
            r = {"seconds": el, "mean": tr.draws[0].mean(axis=0).tolist(),
                 "sd": tr.draws[0].std(axis=0).tolist(),
                 "evals_per_iter_burnin": float(w_ev[:burn].mean()),
                 "evals_per_iter_equilibrium": float(tr.stats["n_evals"][0].mean()),
                 "acceptance": float(tr.stats["accepted"].mean())}
            if "data_fraction" in tr.stats:
                r["data_fraction_burnin"] = float(tr.warmup_stats["data_fraction"][0, :burn].mean())
                r["data_fraction_equilibrium"] = float(tr.stats["data_fraction"][0].mean())
            res[name] = r
        mh_mean, mh_sd = np.array(res["mh"]["mean"]), np.array(res["mh"]["sd"])
        for name in ("confidence", "confidence_taylor"):
            res[name]["max_abs_mean_diff_in_mh_sd"] = float(
                np.max(np.abs(np.array(res[name]["mean"]) - mh_mean) / mh_sd))
            res[name]["max_rel_sd_diff"] = float(
                np.max(np.abs(np.array(res[name]["sd"]) / mh_sd - 1.0)))
        out[f"first_{d}_attributes"] = {"n": model.n_data, "iterations": it, **res}
        print(f"\n## covtype.binary, first {d} attributes (n = {model.n_data}), "
              f"{it[0]} warmup + {it[1]} iterations, start at 0")
        print("| sampler | time (s) | data frac. burn-in | data frac. equilibrium | "
              "evals/iter equilibrium | max |mean diff| / sd_MH | max sd rel. diff |")
        print("|---|---|---|---|---|---|---|")
        for name, r in res.items():
            print(f"| {name} | {r['seconds']:.1f} | {r.get('data_fraction_burnin', 1.0):.3f} | "
                  f"{r.get('data_fraction_equilibrium', 1.0):.3f} | "
                  f"{r['evals_per_iter_equilibrium']:.0f} | "
                  f"{r.get('max_abs_mean_diff_in_mh_sd', 0.0):.2f} | "
                  f"{r.get('max_rel_sd_diff', 0.0):.2f} |")
    return out


# --------------------------------------------------------------------------------------
def lognormal_benchmark(mode):
    n = {"quick": 5000, "default": 20000, "full": 100000}[mode]
    x = np.random.default_rng(0).lognormal(0.0, 2.0, size=n)
    lo, hi = float(x.min()), float(x.max())

    def loglik(theta, idx):
        z = (x[idx] - theta[0]) * math.exp(-theta[1])
        return -0.5 * z * z - theta[1]

    def grad(theta, idx):
        e = math.exp(-theta[1])
        z = (x[idx] - theta[0]) * e
        return np.column_stack([z * e, z * z - 1.0])

    def range_bound(theta, theta_new):
        (m0, l0), (m1, l1) = theta, theta_new
        v0, v1 = math.exp(-2 * l0), math.exp(-2 * l1)
        a, b = 0.5 * (v0 - v1), m1 * v1 - m0 * v0
        c = 0.5 * (m0 * m0 * v0 - m1 * m1 * v1) + l0 - l1
        pts = [lo, hi] + ([-b / (2 * a)] if a != 0 and lo < -b / (2 * a) < hi else [])
        return max(abs(a * t * t + b * t + c) for t in pts)

    model = FunctionModel(loglik, grad, n, 2, prior_scale=1e3, range_bound=range_bound)
    it = {"quick": 500, "default": 1500, "full": 5000}[mode]
    res = {}
    runs = {"mh": MH(n_steps=1),
            "confidence_delta0.05": ConfidenceMH(n_steps=1, delta=0.05, check_exact=True),
            "austerity_eps0.05_first2": AusterityMH(n_steps=1, epsilon=0.05, first_batch_size=2,
                                                    batch_size=50, check_exact=True),
            "austerity_eps0.05_first500": AusterityMH(n_steps=1, epsilon=0.05, first_batch_size=500,
                                                      batch_size=500, check_exact=True)}
    for name, s in runs.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tr = sample(model, s, n_samples=it, n_warmup=it // 2, n_chains=2, random_state=3)
        sig = np.exp(tr.draws[..., 1])
        res[name] = {"sigma_mean": float(sig.mean()), "sigma_sd": float(sig.std()),
                     "mu_mean": float(tr.draws[..., 0].mean()),
                     "wrong_decision_rate": float(tr.stats["wrong_decision"].mean())
                     if "wrong_decision" in tr.stats else 0.0,
                     "data_fraction": float(tr.stats["data_fraction"].mean())
                     if "data_fraction" in tr.stats else 1.0}
    print(f"\n## lognormal toy (n = {n}, log-sd 2), {it} iterations x 2 chains")
    print("| sampler | wrong decisions | data fraction | mean sigma | sd sigma |")
    print("|---|---|---|---|---|")
    for name, r in res.items():
        print(f"| {name} | {r['wrong_decision_rate']:.4f} | {r['data_fraction']:.3f} | "
              f"{r['sigma_mean']:.3f} | {r['sigma_sd']:.4f} |")
    return {"n": n, "iterations": it, **res}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="small runs (about a minute)")
    g.add_argument("--full", action="store_true", help="paper-size runs (hours)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "approx_mh.json"))
    ap.add_argument("--skip", nargs="*", default=[], choices=["mnist", "covtype", "lognormal"])
    args = ap.parse_args(argv)
    mode = "quick" if args.quick else "full" if args.full else "default"
    t0 = time.perf_counter()
    result = {"mode": mode, "platform": platform.platform(), "python": sys.version.split()[0],
              "cpu_count": os.cpu_count(), "load_average_start": os.getloadavg()}
    if "mnist" not in args.skip:
        result["mnist_7vs9"] = mnist_benchmark(mode)
    if "covtype" not in args.skip:
        result["covtype"] = covtype_benchmark(mode)
    if "lognormal" not in args.skip:
        result["lognormal_toy"] = lognormal_benchmark(mode)
    result["load_average_end"] = os.getloadavg()
    result["total_seconds"] = time.perf_counter() - t0
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(stamp(result), f, indent=1)
    print(f"\nwrote {args.out} ({result['total_seconds']:.0f} s; load average "
          f"{result['load_average_start'][0]:.1f} -> {result['load_average_end'][0]:.1f})")


if __name__ == "__main__":
    main()
