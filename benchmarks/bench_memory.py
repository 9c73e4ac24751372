"""Benchmark: peak resident memory of an estimator fit relative to the size of X.

Each configuration runs in a fresh subprocess: it draws HIGGS-shaped logistic
data (``datasets.make_logistic_data``, float32 X, d = 28), notes the resident
set size (RSS) before the fit -- X, y, the interpreter and the libraries --
resets the kernel's peak-RSS counter (``/proc/self/clear_refs``, Linux) and
fits ``BayesianLogisticRegression`` (HMC-ECS, 2 chains in 2 threads,
300 warmup + 500 draws). It reports

* ``peak / X``: the peak RSS during the fit over the bytes of X (everything
  the process holds, the interpreter included);
* ``added / X``: what the fit added to the RSS it started from, over X.

Labels are passed as float64 0/1 (used without a copy), as uint8 0/1 (used
without a copy, 1 byte per row) and as int64 (encoded to a 0/1 copy of 1 byte
per row).

Usage::

    python benchmarks/bench_memory.py                 # n = 1e6 and 1e7 (about 1 minute)
    python benchmarks/bench_memory.py --sizes 1e6     # quick

Writes ``benchmarks/results/memory.json`` (or ``--out``) and prints a Markdown
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


n, labels = int(float(sys.argv[1])), sys.argv[2]
X, y = make_logistic_data(n, dtype=np.float32, random_state=0)
if labels != "float64":
    y = y.astype(labels)
before = status()["VmRSS"]
reset_peak_rss()
t0 = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    BayesianLogisticRegression(n_samples=500, n_warmup=300, n_chains=2, n_jobs=2,
                               random_state=0).fit(X, y)
seconds = time.perf_counter() - t0
peak = status()["VmHWM"]
print(json.dumps({"n": n, "labels": labels, "X_bytes": X.nbytes, "y_bytes": y.nbytes,
                  "rss_before": before, "peak_rss": peak, "fit_seconds": seconds}))
"""


def run(n, labels):
    r = run_child(_CHILD, n, labels)
    return rss_ratios(r, r["X_bytes"], "X")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=float, nargs="*", default=[1e6, 1e7])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "memory.json"))
    args = ap.parse_args(argv)
    rows = []
    print("| n | labels | X GB | RSS before fit / X | peak RSS / X | added by fit / X | fit s |")
    print("|---|---|---|---|---|---|---|")
    for n in args.sizes:
        for labels in ("float64", "uint8", "int64"):
            r = run(int(n), labels)
            rows.append(r)
            print(f"| {int(n):,} | {labels} | {r['X_bytes'] / 1e9:.2f} | "
                  f"{r['before_over_X']:.3f} | {r['peak_over_X']:.3f} | "
                  f"{r['added_over_X']:.3f} | {r['fit_seconds']:.1f} |", flush=True)
    result = {**run_info("bench_memory.py", argv), "runs": rows}
    write_result(result, args.out)


if __name__ == "__main__":
    main()
