"""Benchmark: the subsample size HMC-ECS's rule asks for with order-1 control
variates (the diagonal metric of wide models) against order 2 (dense metric).

For logistic regressions on sparse designs (``n`` rows, ``p`` columns, ``nnz``
stored N(0, 1) entries per row at random columns, coefficients N(0, 0.3^2),
intercept -0.5), it runs HMC-ECS's preparation (``HMCECS(metric=...).prepare``:
theta*, the control variates, the rule for ``m`` at typical posterior points)
with ``metric="diag"`` (order 1) and ``metric="dense"`` (order 2) and prints
``m``, ``m / p^2`` and the full passes of each. Order-1 residuals are
``-w (x . delta)^2 / 2``, whose spread is of order ``p / n``, so their ``m`` grows
like ``p^2`` whatever ``n`` (doc/algorithms/hmc_ecs.rst, "Wide models").

Usage::

    python benchmarks/bench_cv_order.py          # five sizes, about a minute

Writes ``benchmarks/results/cv_order.json`` (or ``--out``) and prints a
Markdown table.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
from scipy import sparse

from _procmem import run_info, write_result

SIZES = [(200_000, 100, 20), (200_000, 300, 20), (200_000, 300, 5), (50_000, 300, 20),
         (200_000, 1000, 20)]


def problem(n, p, nnz, seed=0):
    from bayes_subsample.models import LogisticRegressionModel
    rng = np.random.default_rng(seed)
    cols = np.sort(rng.choice(p, size=(n, nnz)), axis=1)
    X = sparse.csr_matrix((rng.normal(size=n * nnz), cols.ravel(),
                           np.arange(0, n * nnz + 1, nnz)), shape=(n, p))
    X.sum_duplicates()
    beta = rng.normal(0, 0.3, size=p)
    y = (rng.random(n) < 1 / (1 + np.exp(-(X @ beta - 0.5)))).astype(float)
    return LogisticRegressionModel(X, y)


def main(argv=None):
    from bayes_subsample.samplers import HMCECS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "cv_order.json"))
    args = ap.parse_args(argv)
    rows = []
    print("| n | p | nnz/row | m, order 1 (diag) | m / p^2 | passes | m, order 2 (dense) | "
          "passes | s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for n, p, nnz in SIZES:
        t0 = time.perf_counter()
        row = {"n": n, "p": p, "nnz_per_row": nnz}
        for metric in ("diag", "dense"):
            model = problem(n, p, nnz)
            prep = HMCECS(metric=metric).prepare(model, np.random.default_rng(1))
            row[metric] = {"m": int(prep.m), "cv_order": int(prep.cv.order),
                           "passes": int(model.n_full_passes)}
        row["seconds"] = time.perf_counter() - t0
        rows.append(row)
        d, D = row["diag"], row["dense"]
        print(f"| {n:,} | {p:,} | {nnz} | {d['m']:,} | {d['m'] / (p + 1) ** 2:.2f} | "
              f"{d['passes']} | {D['m']:,} | {D['passes']} | {row['seconds']:.0f} |",
              flush=True)
    write_result({**run_info("bench_cv_order.py", argv), "runs": rows}, args.out)


if __name__ == "__main__":
    main()
