"""Benchmark: how an HMC-ECS fit scales with n -- full data passes, time, memory.

Each size runs in a fresh subprocess: it draws HIGGS-shaped logistic data
(``datasets.make_logistic_data``, float32 X, d = 28, float64 0/1 labels, or
uint8 with ``--labels uint8``), notes
the resident set size (RSS) before the fit, resets the kernel's peak-RSS counter
(``/proc/self/clear_refs``, Linux) and fits ``BayesianLogisticRegression``
(HMC-ECS at its defaults, 2 chains in 2 threads, 300 warmup + 500 draws). It
reports

* the all-in fit time and the preparation's share (MAP, theta*, control
  variates, metric);
* ``diagnostics_["data_passes"]``: the full passes over X of the preparation and
  of the chains (HMC-ECS recentres, one pass each, only when its Newton
  refinement of theta* did not converge);
* the peak RSS during the fit over the bytes of X (everything the process holds:
  X, y, the interpreter and the libraries) and what the fit added;
* the min bulk ESS and all-in ESS/s;

and, in the same run, the ratio of the fit times at the largest and the
smallest size (linear in n would be their ratio of sizes; HMC-ECS's draws cost
the same at any n, so only the passes grow).

Usage::

    python benchmarks/bench_passes.py                    # n = 1e7 and 3e7 (~2 minutes, 8 GB)
    python benchmarks/bench_passes.py --sizes 1e6 3e6    # quick
    python benchmarks/bench_passes.py --labels uint8 --out benchmarks/results/passes_uint8.json

Writes ``benchmarks/results/passes.json`` (or ``--out``) and prints a Markdown
table. Linux only (reads /proc).
"""
from __future__ import annotations

import argparse
import os

from _procmem import rss_ratios, run_child, run_info, write_result

_CHILD = r"""
import json, sys, time, warnings
from _procmem import proc_status as status, reset_peak_rss
import numpy as np
from bayes_subsample import BayesianLogisticRegression
from bayes_subsample.datasets import make_logistic_data


n = int(float(sys.argv[1]))
X, y = make_logistic_data(n, dtype=np.float32, random_state=0)
if sys.argv[2] != "float64":
    y = y.astype(sys.argv[2])
before = status()["VmRSS"]
reset_peak_rss()
t0 = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    est = BayesianLogisticRegression(n_samples=500, n_warmup=300, n_chains=2, n_jobs=2,
                                     random_state=0).fit(X, y)
seconds = time.perf_counter() - t0
peak = status()["VmHWM"]
d = est.diagnostics_
tr = est.trace_
print(json.dumps({"n": n, "labels": str(y.dtype), "X_bytes": X.nbytes, "y_bytes": y.nbytes,
                  "rss_before": before,
                  "peak_rss": peak, "fit_seconds": seconds,
                  "prepare_seconds": tr.wall_time["prepare"],
                  "data_passes": d["data_passes"],
                  "min_ess_bulk": float(np.min(d["ess_bulk"])),
                  "min_ess_per_second": float(np.min(d["ess_bulk"])) / seconds,
                  "m": int(tr.tuning[0].get("m", n)),
                  "full_data": bool(tr.tuning[0].get("full_data", False))}))
"""


def run(n, labels):
    r = run_child(_CHILD, n, labels)
    return rss_ratios(r, r["X_bytes"], "X")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=float, nargs="*", default=[1e7, 3e7])
    ap.add_argument("--labels", choices=["float64", "uint8"], default="float64",
                    help="dtype of the 0/1 labels (uint8: one byte a row, used in place)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "passes.json"))
    args = ap.parse_args(argv)
    rows = []
    print("| n | X GB | fit s | prepare s | passes (prepare + chains) | peak RSS / X | "
          "added by fit / X | min bulk ESS | ESS/s | m |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for n in args.sizes:
        r = run(int(n), args.labels)
        rows.append(r)
        p = r["data_passes"]
        print(f"| {int(n):,} | {r['X_bytes'] / 1e9:.2f} | {r['fit_seconds']:.2f} | "
              f"{r['prepare_seconds']:.2f} | {p['prepare']} + {p['chains']} | "
              f"{r['peak_over_X']:.3f} | {r['added_over_X']:.3f} | {r['min_ess_bulk']:.0f} | "
              f"{r['min_ess_per_second']:.0f} | "
              f"{r['m']}{' (full data)' if r['full_data'] else ''} |",
              flush=True)
    result = {**run_info("bench_passes.py", argv), "runs": rows}
    if len(rows) > 1:
        lo, hi = rows[0], rows[-1]
        result["time_ratio"] = hi["fit_seconds"] / lo["fit_seconds"]
        result["size_ratio"] = hi["n"] / lo["n"]
        print(f"\nfit time at n = {hi['n']:,} / at n = {lo['n']:,}: "
              f"{result['time_ratio']:.2f} (sizes {result['size_ratio']:.1f}x)")
    write_result(result, args.out)


if __name__ == "__main__":
    main()
