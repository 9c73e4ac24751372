"""Benchmark: chains in threads of this process against chains as tasks on a
``distributed.LocalCluster`` (2 worker processes of one thread each), through
joblib's Dask backend.

Small in-memory fits of ``BayesianLogisticRegression`` (synthetic logistic
data, float64, d = 10 + intercept; 2 chains, ``n_jobs=2``):

* ``hmc_ecs`` on n = 200,000 rows, 2 x (1000 + 4000) iterations (the chains are
  cheap: the preparation's two full passes are a large share of the fit);
* ``nuts`` on n = 20,000 rows, 2 x (300 + 500) iterations (full-data
  gradients: the chains are nearly all of the fit).

Each fit is timed all-in (``fit`` from call to return, preparation in this
process included), ``--repeat`` times after one untimed warm-up fit of each
route, and the median is reported; the cluster's start is not counted. The
draws of the two routes are compared (they must be equal, bit for bit).

Usage::

    python benchmarks/bench_dask_chains.py              # about 1 minute
    python benchmarks/bench_dask_chains.py --repeat 1   # quick

Writes ``benchmarks/results/dask_chains.json`` (or ``--out``).
"""
from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

from _procmem import run_info, write_result

CASES = {
    "hmc_ecs": dict(n=200_000, n_warmup=1000, n_samples=4000),
    "nuts": dict(n=20_000, n_warmup=300, n_samples=500),
}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "dask_chains.json"))
    args = ap.parse_args(argv)
    import distributed
    from joblib import parallel_config

    from bayes_subsample import BayesianLogisticRegression
    from bayes_subsample.datasets import make_logistic_data

    warnings.simplefilter("ignore")
    result = {**run_info("bench_dask_chains.py", argv), "repeat": args.repeat,
              "cluster": "LocalCluster(n_workers=2, threads_per_worker=1, processes=True)",
              "cases": {}}
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster):
        for sampler, case in CASES.items():
            X, y = make_logistic_data(case["n"], 10, random_state=0)
            kw = dict(sampler=sampler, n_samples=case["n_samples"], n_warmup=case["n_warmup"],
                      n_chains=2, n_jobs=2, random_state=0)

            def fit(on_cluster):
                t0 = time.perf_counter()
                if on_cluster:
                    with parallel_config(backend="dask"):
                        est = BayesianLogisticRegression(**kw).fit(X, y)
                else:
                    est = BayesianLogisticRegression(**kw).fit(X, y)
                return time.perf_counter() - t0, est

            times = {"threads": [], "cluster": []}
            fits = {}
            for route in times:
                fit(route == "cluster")                # warm-up (imports, worker caches)
                for _ in range(args.repeat):
                    seconds, fits[route] = fit(route == "cluster")
                    times[route].append(seconds)
            workers = sorted({t["worker"] for t in fits["cluster"].trace_.tuning})
            same = bool(np.array_equal(fits["threads"].trace_.draws,
                                       fits["cluster"].trace_.draws))
            med = {route: float(np.median(t)) for route, t in times.items()}
            result["cases"][sampler] = {
                **case, "n_features": 10, "n_chains": 2, "seconds": times, "median": med,
                "ratio_cluster_over_threads": med["cluster"] / med["threads"],
                "prepare_seconds": float(fits["threads"].trace_.wall_time["prepare"]),
                "same_draws": same, "workers": workers}
    print("| sampler | n | iterations per chain | threads s | LocalCluster s | ratio | "
          "same draws |")
    print("|---|---|---|---|---|---|---|")
    for sampler, r in result["cases"].items():
        print(f"| {sampler} | {r['n']:,} | {r['n_warmup']} + {r['n_samples']} | "
              f"{r['median']['threads']:.2f} | {r['median']['cluster']:.2f} | "
              f"{r['ratio_cluster_over_threads']:.2f} | {r['same_draws']} |")
    print(f"\nmedians of {args.repeat} fits each; load average {result['load_average']}")
    write_result(result, args.out)


if __name__ == "__main__":
    main()
