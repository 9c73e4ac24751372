"""Benchmark: an HMC-ECS fit on a Dask array under a ``distributed.LocalCluster``
against the in-memory fit of the same data.

The data (HIGGS-shaped logistic regression, ``make_logistic_data_dask``: 28
features + intercept, float64) are drawn on the cluster's two worker processes
and persisted there, so this process -- the client -- never holds X. It fits
``BayesianLogisticRegression`` (HMC-ECS defaults, 2 chains x (300 warmup + 1000
draws)) on the Dask arrays and reports

* the all-in fit time, the full passes (Dask reductions on the workers) and the
  rows brought into the client (``diagnostics_["data_passes"]``);
* the client's peak RSS growth during the fit over ``X.nbytes`` (the client
  holds y, 8 bytes per row, and the rows HMC-ECS asks for);

then computes X into the client, fits the same estimator in memory and reports
the time ratio and the largest difference of posterior means in posterior sds
(both runs are Monte Carlo: the MCSE is printed beside it).

Usage::

    python benchmarks/bench_dask.py                  # n = 2e6 (about 1 minute)
    python benchmarks/bench_dask.py --n 5e5          # quick

Writes ``benchmarks/results/dask.json`` (or ``--out``). Linux only (reads /proc).
"""
from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

from _procmem import proc_status, reset_peak_rss, run_info, write_result


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=float, default=2e6)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "dask.json"))
    args = ap.parse_args(argv)
    import distributed

    from bayes_subsample import BayesianLogisticRegression, diagnostics
    from bayes_subsample.datasets import make_logistic_data_dask

    n, d = int(args.n), 28
    kw = dict(n_samples=1000, n_warmup=300, n_chains=2, n_jobs=2, random_state=0)
    warnings.simplefilter("ignore")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        Xd, yd = make_logistic_data_dask(n, d, chunk_rows=4 * 65536, random_state=0)
        Xd, yd = client.persist([Xd, yd])
        distributed.wait([Xd, yd])
        x_bytes = int(Xd.nbytes)
        before = proc_status()["VmRSS"]
        reset_peak_rss()
        t0 = time.perf_counter()
        est = BayesianLogisticRegression(**kw).fit(Xd, yd)
        t_dask = time.perf_counter() - t0
        peak = proc_status()["VmHWM"]
        passes = est.diagnostics_["data_passes"]
        X, y = Xd.compute(), yd.compute()
    t0 = time.perf_counter()
    ref = BayesianLogisticRegression(**kw).fit(X, y)
    t_mem = time.perf_counter() - t0
    a, b = est.trace_, ref.trace_
    sd = b.pooled_draws().std(axis=0)
    mean_err = np.abs(a.posterior_mean() - b.posterior_mean()) / sd
    mcse = np.hypot(diagnostics.mcse_mean(a.draws), diagnostics.mcse_mean(b.draws)) / sd
    result = {
        **run_info("bench_dask.py", argv), "n": n, "n_params": d + 1, "X_bytes": x_bytes,
        "cluster": "LocalCluster(n_workers=2, threads_per_worker=1, processes=True)",
        "dask_fit_seconds": t_dask, "in_memory_fit_seconds": t_mem,
        "time_ratio_dask_over_memory": t_dask / t_mem,
        "data_passes": passes, "rows_fetched_fraction": passes["rows_fetched"] / n,
        "client_peak_rss_growth_over_X": (peak - before) / x_bytes,
        "max_mean_diff_in_sd": float(mean_err.max()),
        "max_combined_mcse_in_sd": float(mcse.max()),
        "min_ess_bulk_dask": float(np.min(est.diagnostics_["ess_bulk"])),
        "min_ess_bulk_memory": float(np.min(ref.diagnostics_["ess_bulk"])),
    }
    print("| | Dask (LocalCluster, 2 workers) | in memory |")
    print("|---|---|---|")
    print(f"| fit s (all-in) | {t_dask:.2f} | {t_mem:.2f} |")
    print(f"| full passes | {passes['prepare']} + {passes['chains']} | "
          f"{ref.diagnostics_['data_passes']['prepare']} + "
          f"{ref.diagnostics_['data_passes']['chains']} |")
    print(f"| min bulk ESS | {result['min_ess_bulk_dask']:.0f} | "
          f"{result['min_ess_bulk_memory']:.0f} |")
    print(f"\nn = {n:,}, X {x_bytes / 1e9:.2f} GB on the workers; rows brought to the client: "
          f"{passes['rows_fetched']:,} ({100 * result['rows_fetched_fraction']:.2f}%); "
          f"client peak RSS growth / X = {result['client_peak_rss_growth_over_X']:.3f}")
    print(f"posterior means, Dask vs in memory: max {result['max_mean_diff_in_sd']:.3f} sd "
          f"(combined MCSE up to {result['max_combined_mcse_in_sd']:.3f} sd)")
    write_result(result, args.out)


if __name__ == "__main__":
    main()
