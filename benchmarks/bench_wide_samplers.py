"""Benchmark: every sampler family on a wide sparse logistic regression, with the
diagonal metric that ``metric="auto"`` chooses beyond 2,000 parameters.

The data: ``n`` rows (default 2e5), ``p`` sparse columns (default 2,500) with
20 stored standard-normal entries a row (CSR, float64), labels from a logistic
model with coefficients N(0, 0.5^2). Each sampler runs 2 chains x (300 warmup
+ 500 draws) in 2 threads at its defaults unless a batch size is given, and is
compared with NUTS (diagonal metric), run first in the same process: time,
min and median bulk ESS, the step size, and the distance of its posterior
means and sds from NUTS's (max and median over the coordinates of
``|mean - mean_NUTS| / sd_NUTS``, and the 5%, 50%, 95% quantiles of
``sd / sd_NUTS``). Warnings the fits raise (EfficiencyWarning,
ConvergenceWarning) are listed, and a sampler's refusal (a ``SamplingError``:
the SG samplers' step too small to mix, or a chain that fails their check at
the end of warmup) is reported as its row.

Usage::

    python benchmarks/bench_wide_samplers.py                        # ~5 minutes
    python benchmarks/bench_wide_samplers.py --n 20000 --p 2500 --runs sgld:32

``--runs`` takes ``name[:batch_size]`` entries (names: sgld, sghmc, ewsg, mh,
austerity, confidence, hmc_ecs). Writes ``benchmarks/results/wide_samplers.json``
(or ``--out``).
"""
from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np
from scipy import sparse

from _procmem import run_info, write_result
from bayes_subsample import BayesianLogisticRegression
from bayes_subsample.exceptions import SamplingError
from bayes_subsample.samplers import (EWSG, HMCECS, MH, NUTS, SGHMC, SGLD, AusterityMH,
                                      ConfidenceMH)

SAMPLERS = {"nuts": NUTS, "sgld": SGLD, "sghmc": SGHMC, "ewsg": EWSG, "mh": MH,
            "austerity": AusterityMH, "confidence": ConfidenceMH, "hmc_ecs": HMCECS}


def make_data(n, p, nnz=20, seed=0):
    rng = np.random.default_rng(seed)
    X = sparse.random(n, p, density=nnz / p, format="csr", random_state=seed)
    X.data = rng.normal(size=X.data.shape)
    beta = rng.normal(0, 0.5, size=p)
    y = (rng.random(n) < 1 / (1 + np.exp(-(X @ beta)))).astype(int)
    return X, y


def fit(X, y, name, batch, args):
    kw = {"batch_size": batch} if batch else {}
    est = BayesianLogisticRegression(sampler=SAMPLERS[name](**kw), n_samples=args.draws,
                                     n_warmup=args.warmup, n_chains=2, n_jobs=2,
                                     random_state=0)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            est.fit(X, y)
        except SamplingError as e:       # a refusal (SG samplers): reported, not hidden
            return {"sampler": name, "batch_size": batch,
                    "seconds": time.perf_counter() - t0, "error": str(e)}
    seconds = time.perf_counter() - t0
    draws = est.trace_.pooled_draws()
    ess = np.asarray(est.diagnostics_["ess_bulk"])
    return {"sampler": name, "batch_size": batch, "seconds": seconds,
            "min_ess_bulk": float(ess.min()), "median_ess_bulk": float(np.median(ess)),
            "step_size": est.trace_.tuning[0].get("step_size"),
            "warnings": sorted({type(w.message).__name__ for w in caught}),
            "mean": draws.mean(axis=0), "sd": draws.std(axis=0, ddof=1)}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=float, default=2e5)
    ap.add_argument("--p", type=int, default=2500)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--draws", type=int, default=500)
    ap.add_argument("--runs", nargs="*", default=["sgld:32", "sgld:4096", "sghmc:4096"])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "wide_samplers.json"))
    args = ap.parse_args(argv)
    X, y = make_data(int(args.n), args.p)
    ref = fit(X, y, "nuts", None, args)
    rows = [ref]
    print(f"data: {X.shape[0]:,} x {X.shape[1]:,} CSR, {X.nnz:,} stored entries")
    print("| sampler | batch | s | min / median bulk ESS | step | |dmean|/sd max, median "
          "| sd / sd_NUTS 5%, 50%, 95% | warnings |")
    print("|---|---|---|---|---|---|---|---|")
    for spec in [None] + args.runs:
        if spec is None:
            r = ref
        else:
            name, _, batch = spec.partition(":")
            r = fit(X, y, name, int(batch) if batch else None, args)
            rows.append(r)
            if "error" in r:
                print(f"| {name} | {batch} | {r['seconds']:.1f} | refused: {r['error'][:160]} |",
                      flush=True)
                continue
            z = np.abs(r["mean"] - ref["mean"]) / ref["sd"]
            ratio = r["sd"] / ref["sd"]
            r["dmean_over_sd"] = [float(z.max()), float(np.median(z))]
            r["sd_ratio_quantiles"] = [float(q) for q in np.quantile(ratio, [0.05, 0.5, 0.95])]
        dm = r.get("dmean_over_sd")
        sq = r.get("sd_ratio_quantiles")
        print(f"| {r['sampler']} | {r['batch_size'] or ''} | {r['seconds']:.1f} | "
              f"{r['min_ess_bulk']:.0f} / {r['median_ess_bulk']:.0f} | "
              f"{r['step_size'] if r['step_size'] is not None else '':.3g} | "
              f"{'' if dm is None else f'{dm[0]:.2f}, {dm[1]:.2f}'} | "
              f"{'' if sq is None else ', '.join(f'{q:.2f}' for q in sq)} | "
              f"{', '.join(r['warnings'])} |", flush=True)
    for r in rows:
        r.pop("mean", None), r.pop("sd", None)
    write_result({**run_info("bench_wide_samplers.py", argv), "n": int(args.n), "p": args.p,
                  "runs": rows}, args.out)


if __name__ == "__main__":
    main()
