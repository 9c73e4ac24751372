"""Benchmark: HMC-ECS on a data set stored on disk, read through a memory map and
through Dask (1e8 rows x 28 float32 = 11.2 GB by default).

1. Writes HIGGS-shaped logistic data (``make_logistic_data_dask``: the rows of
   ``make_logistic_data``) to ``X.npy`` and ``y.npy`` in ``--dir``, chunk by
   chunk (``dask.array.store`` into ``np.lib.format.open_memmap`` files), unless
   they are there already with the right shape.
2. In a fresh subprocess, fits ``BayesianLogisticRegression`` (HMC-ECS
   defaults, 2 chains x (300 warmup + 1000 draws)) on
   ``np.load("X.npy", mmap_mode="r")``: the compiled passes read the file
   through the page cache, nothing is copied.
3. In another fresh subprocess, fits the same on ``datasets.open_npy_dask``
   (chunks read through memory maps where they are computed;
   ``dask.array.from_array`` would copy the whole memory map) with Dask's
   local threaded scheduler (the route to a Zarr store or a cluster).

For each fit it reports the all-in time, the preparation's share, the full
passes, min bulk ESS and ESS/s, and the process's peak RSS over the file's
size (mapped file pages count in RSS while resident; they are page cache the
kernel can drop, not private memory -- ``peak anonymous`` is the private part).

Usage::

    python benchmarks/bench_out_of_core.py --dir /path/with/12GB/free     # n = 1e8
    python benchmarks/bench_out_of_core.py --dir /tmp/ooc --n 1e7         # quick

Writes ``benchmarks/results/out_of_core.json`` (or ``--out``). Linux only.
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from _procmem import run_child, run_info, write_result

_CHILD = r"""
import json, sys, time, warnings
import numpy as np
from _procmem import proc_status as status, reset_peak_rss
from bayes_subsample import BayesianLogisticRegression


folder, route = sys.argv[1], sys.argv[2]
X = np.load(folder + "/X.npy", mmap_mode="r")
y = np.load(folder + "/y.npy")
if route == "dask":
    from bayes_subsample.datasets import open_npy_dask
    X = open_npy_dask(folder + "/X.npy", chunk_rows=4 * 1048576)
base_anon = status()["RssAnon"]
reset_peak_rss()
peak_anon = [base_anon]
import threading
stop = threading.Event()
def watch():
    while not stop.wait(0.05):
        peak_anon[0] = max(peak_anon[0], status()["RssAnon"])
threading.Thread(target=watch, daemon=True).start()
t0 = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    est = BayesianLogisticRegression(n_samples=1000, n_warmup=300, n_chains=2, n_jobs=2,
                                     random_state=0).fit(X, y)
seconds = time.perf_counter() - t0
stop.set()
d = est.diagnostics_
print(json.dumps({"route": route, "fit_seconds": seconds,
                  "prepare_seconds": est.trace_.wall_time["prepare"],
                  "data_passes": d["data_passes"],
                  "min_ess_bulk": float(np.min(d["ess_bulk"])),
                  "ess_per_second": float(np.min(d["ess_bulk"])) / seconds,
                  "peak_rss": status()["VmHWM"], "base_anon": base_anon,
                  "peak_anon": peak_anon[0], "m": int(est.trace_.tuning[0]["m"])}))
"""


def write(folder, n, d):
    import dask.array as da

    from bayes_subsample.datasets import make_logistic_data_dask
    os.makedirs(folder, exist_ok=True)
    px, py = os.path.join(folder, "X.npy"), os.path.join(folder, "y.npy")
    try:
        if (np.load(px, mmap_mode="r").shape == (n, d)
                and np.load(py, mmap_mode="r").shape == (n,)):
            return 0.0
    except (OSError, ValueError):
        pass
    t0 = time.perf_counter()
    Xd, yd = make_logistic_data_dask(n, d, chunk_rows=16 * 65536, dtype=np.float32,
                                     random_state=0)
    X = np.lib.format.open_memmap(px, mode="w+", dtype=np.float32, shape=(n, d))
    y = np.lib.format.open_memmap(py, mode="w+", dtype=np.float64, shape=(n,))
    da.store([Xd, yd], [X, y], lock=False)
    X.flush()
    y.flush()
    del X, y
    return time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", required=True, help="folder for X.npy and y.npy")
    ap.add_argument("--n", type=float, default=1e8)
    ap.add_argument("--routes", nargs="*", default=["memmap", "dask"],
                    choices=["memmap", "dask"])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "out_of_core.json"))
    args = ap.parse_args(argv)
    n, d = int(args.n), 28
    t_write = write(args.dir, n, d)
    file_bytes = n * d * 4 + n * 8
    print(f"n = {n:,}: X.npy + y.npy {file_bytes / 1e9:.1f} GB "
          + (f"written in {t_write:.0f} s" if t_write else "(already there)"))
    rows = []
    print("\n| route | fit s | prepare s | passes | min bulk ESS | ESS/s | m | peak RSS / files "
          "| peak anonymous / files |")
    print("|---|---|---|---|---|---|---|---|---|")
    for route in args.routes:
        r = run_child(_CHILD, args.dir, route)
        r["peak_rss_over_files"] = r["peak_rss"] / file_bytes
        r["peak_anon_over_files"] = r["peak_anon"] / file_bytes
        rows.append(r)
        p = r["data_passes"]
        print(f"| {route} | {r['fit_seconds']:.1f} | {r['prepare_seconds']:.1f} | "
              f"{p['prepare']} + {p['chains']} | {r['min_ess_bulk']:.0f} | "
              f"{r['ess_per_second']:.0f} | {r['m']} | {r['peak_rss_over_files']:.2f} | "
              f"{r['peak_anon_over_files']:.3f} |", flush=True)
    result = {**run_info("bench_out_of_core.py", argv), "n": n, "d": d, "file_bytes": file_bytes,
              "write_seconds": t_write, "runs": rows}
    write_result(result, args.out)


if __name__ == "__main__":
    main()
