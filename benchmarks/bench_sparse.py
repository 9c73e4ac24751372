"""Benchmark: an HMC-ECS fit on a sparse (CSR) design: time, peak memory, ESS.

Each configuration runs in a fresh subprocess: it draws a logistic problem
with ``n`` rows, ``p`` columns and exactly ``--nnz`` stored entries per row
(distinct sorted columns, N(0, 1) values, float64 data, int32 indices;
coefficients N(0, 0.3^2), intercept -0.5), notes the resident set size (RSS)
before the fit -- the CSR arrays, y, the interpreter and the libraries --
resets the kernel's peak-RSS counter (``/proc/self/clear_refs``, Linux) and
fits ``BayesianLogisticRegression`` (HMC-ECS, 2 chains in 2 threads, 300
warmup + 500 draws) on the ``csr_matrix``. It reports the fit's wall time,
``peak / CSR`` (the peak RSS during the fit over the bytes of the CSR arrays
``data + indices + indptr``), ``added / CSR`` (what the fit added to the RSS
it started from), ``(peak - libraries) / CSR`` (the peak less the RSS of the
interpreter and the imported libraries, measured before the data are drawn:
what the data and the fit hold) and the smallest bulk ESS over the
coefficients.

The p x p problem
-----------------
Up to ``DENSE_METRIC_MAX`` (2,000) parameters HMC-ECS uses dense ``p x p``
matrices, whatever the format of X: the second-order control variates'
Hessian sum ``B`` and the dense mass matrix (the posterior precision at
theta*) with its Cholesky factors. The largest of them is the full data pass
with ``hessian=True`` (``CyGLM.full_sums`` in ``models/_cyglm.pyx``): it
callocs one ``p x p`` block per slot of rows (at most 64 slots, as many as
fit 256 MB, at least one) before summing them. Before such a configuration
runs, its dense ``p x p`` bytes are estimated (below); one whose buffers would
add up to more than ``--max-dense-gb`` is not run, and its estimate is
reported instead (``--metric dense`` at p = 1e4: 21 blocks of 800 MB, 17 GB).

Beyond 2,000 parameters (``metric="auto"``) HMC-ECS uses the diagonal metric:
no ``p x p`` matrix anywhere (theta* by preconditioned L-BFGS, the Hessian's
diagonal from one pass, order-1 control variates, the subsample's sparse
rows read in place). The table reports the metric, the full passes and
whether the control variates let HMC-ECS subsample (``m``) or it ran on the
full data.

Usage::

    python benchmarks/bench_sparse.py                       # n = 1e5, p = 1e3 and 1e4
    python benchmarks/bench_sparse.py --n-cols 2000         # one size
    python benchmarks/bench_sparse.py --n-rows 1e6          # tall (minutes; GBs of RAM)
    python benchmarks/bench_sparse.py --n-rows 1e6 --n-cols 1e4   # the issue's wide problem

Writes ``benchmarks/results/sparse.json`` (or ``--out``) and prints a Markdown
table. Linux only (reads /proc).
"""
from __future__ import annotations

import argparse
import math
import os
import subprocess

from _procmem import rss_ratios, run_child, run_info, write_result

#: rows per chunk of the compiled full pass (``PASS_CHUNK`` in models/_cyglm.pyx)
PASS_CHUNK = 4096

_CHILD = r"""
import json, sys, time, warnings
from _procmem import proc_status as status, reset_peak_rss
import numpy as np
from scipy import sparse
from bayes_subsample import BayesianLogisticRegression, diagnostics
from bayes_subsample.samplers import HMCECS

rss_imports = status()["VmRSS"]        # the interpreter and the libraries
n, p, nnz = (int(float(a)) for a in sys.argv[1:4])
n_samples, n_warmup, metric = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
rng = np.random.default_rng(0)
# nnz distinct sorted columns per row: a sorted draw from [0, p - nnz] plus 0..nnz-1
cols = np.empty((n, nnz), dtype=np.int32)
step = 1 << 16
for s in range(0, n, step):
    c = np.sort(rng.integers(0, p - nnz + 1, size=(min(step, n - s), nnz)), axis=1)
    cols[s:s + step] = c + np.arange(nnz)
X = sparse.csr_matrix((rng.standard_normal(n * nnz), cols.ravel(),
                       np.arange(0, n * nnz + 1, nnz)), shape=(n, p))
del cols
coef = 0.3 * rng.standard_normal(p)
eta = X @ coef - 0.5
y = (rng.random(n) < 1.0 / (1.0 + np.exp(-eta))).astype(np.float64)
csr_bytes = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
before = status()["VmRSS"]
reset_peak_rss()
t0 = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    est = BayesianLogisticRegression(sampler=HMCECS(metric=metric), n_samples=n_samples,
                                     n_warmup=n_warmup, n_chains=2, n_jobs=2,
                                     random_state=0).fit(X, y)
seconds = time.perf_counter() - t0
peak = status()["VmHWM"]
draws = est.posterior_draws_
ess = np.asarray(diagnostics.ess_bulk(draws))
tuning = est.diagnostics_["tuning"][0]
stats = est.trace_.stats
frac = float(np.mean(stats["data_fraction"])) if "data_fraction" in stats else None
print(json.dumps({
    "n": n, "p": p, "nnz_per_row": nnz, "csr_bytes": int(csr_bytes),
    "rss_imports": rss_imports, "rss_before": before, "peak_rss": peak,
    "fit_seconds": seconds, "draw_bytes": int(draws.nbytes),
    "min_ess_bulk": float(ess.min()), "median_ess_bulk": float(np.median(ess)),
    "n_draws": int(draws.shape[0] * draws.shape[1]),
    "full_data": bool(tuning.get("full_data", False)), "m": int(tuning["m"]),
    "metric": "diag" if np.ndim(tuning["mass_matrix"]) == 1 else "dense",
    "cv_order": int(tuning["cv_order"]),
    "data_passes": est.diagnostics_["data_passes"],
    "step_size": float(tuning.get("step_size", float("nan"))),
    "data_fraction_per_iteration": frac,
    "max_abs_coef_error": float(np.max(np.abs(est.coef_ - coef))),
}))
"""


#: the most parameters of a dense metric under metric="auto" (samplers/_base.py)
DENSE_METRIC_MAX = 2000


def dense_estimate(n, p, metric, n_chains=2):
    """Bytes of the dense ``(p + 1) x (p + 1)`` float64 buffers of an HMC-ECS
    fit, by where they are allocated (not all live at once; the full pass is
    the peak); none with the diagonal metric."""
    if metric == "diag" or (metric == "auto" and p + 1 > DENSE_METRIC_MAX):
        return {}
    q = 8 * (p + 1) ** 2
    chunks = math.ceil(n / PASS_CHUNK)
    slots = max(1, min(64, chunks, (1 << 25) // (p + 1) ** 2))
    return {
        "full_pass_slot_hessians (CyGLM.full_sums, <= 64 slots within 256 MB)": slots * q,
        "full_pass_hessian_sum": q,
        "newton_system (refine_theta_star: -H + prior, symmetrised)": 2 * q,
        "factor_precision (P, L, inv L, cov, chol cov)": 5 * q,
        "per chain: metric factors + ECSCore copy of B": n_chains * 6 * q,
    }


def run(n, p, nnz, n_samples, n_warmup, metric):
    try:
        r = run_child(_CHILD, n, p, nnz, n_samples, n_warmup, metric)
    except subprocess.CalledProcessError as e:
        raise RuntimeError(f"n={n}, p={p}: the fit failed:\n{e.stderr[-3000:]}") from e
    return rss_ratios(r, r["csr_bytes"], "csr")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n-rows", type=float, default=1e5)
    ap.add_argument("--n-cols", type=float, nargs="*", default=[1e3, 1e4])
    ap.add_argument("--nnz", type=int, default=20, help="stored entries per row")
    ap.add_argument("--n-samples", type=int, default=500)
    ap.add_argument("--n-warmup", type=int, default=300)
    ap.add_argument("--metric", choices=["auto", "dense", "diag"], default="auto",
                    help="HMC-ECS's metric (auto: diagonal beyond 2,000 parameters)")
    ap.add_argument("--max-dense-gb", type=float, default=4.0,
                    help="skip a size whose p x p buffers would need more memory")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "sparse.json"))
    args = ap.parse_args(argv)
    n = int(args.n_rows)
    rows = []
    print("| n | p | nnz/row | CSR MB | metric | fit s | passes | peak RSS / CSR | "
          "added by fit / CSR | (peak - libraries) / CSR | min ESS (bulk) | m | "
          "data read / iter |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for p in (int(v) for v in args.n_cols):
        est = dense_estimate(n, p, args.metric)
        dense = sum(est.values())
        if dense > args.max_dense_gb * 1e9:
            rows.append({"n": n, "p": p, "nnz_per_row": args.nnz, "skipped": True,
                         "dense_pxp_bytes": est})
            print(f"| {n:,} | {p:,} | {args.nnz} | {n * args.nnz * 12 / 1e6:.0f} | dense | "
                  f"not run: its p x p buffers add up to {dense / 1e9:.1f} GB "
                  f"(> --max-dense-gb {args.max_dense_gb:g}) | | | | | | | |", flush=True)
            continue
        r = run(n, p, args.nnz, args.n_samples, args.n_warmup, args.metric)
        r["dense_pxp_bytes"] = est
        rows.append(r)
        frac = r["data_fraction_per_iteration"]
        passes = r["data_passes"]
        print(f"| {n:,} | {p:,} | {args.nnz} | {r['csr_bytes'] / 1e6:.0f} | {r['metric']} | "
              f"{r['fit_seconds']:.1f} | {passes['prepare']} + {passes['chains']} | "
              f"{r['peak_over_csr']:.2f} | {r['added_over_csr']:.2f} | "
              f"{(r['peak_rss'] - r['rss_imports']) / r['csr_bytes']:.2f} | "
              f"{r['min_ess_bulk']:.0f} of {r['n_draws']} | "
              f"{'full data' if r['full_data'] else r['m']} | "
              f"{'' if frac is None else f'{frac:.3f}'} |", flush=True)
    for r in rows:
        if r.get("skipped"):
            print(f"\np = {r['p']:,}, n = {n:,}: dense (p+1) x (p+1) float64 buffers of HMC-ECS "
                  "(where allocated; the first is the peak):")
            for k, v in r["dense_pxp_bytes"].items():
                print(f"  {v / 1e9:8.2f} GB  {k}")
    result = {**run_info("bench_sparse.py", argv), "runs": rows}
    write_result(result, args.out)


if __name__ == "__main__":
    main()
