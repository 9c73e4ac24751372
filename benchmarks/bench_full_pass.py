"""Benchmark: the fused full-data log-likelihood + gradient pass of logistic regression.

Times ``LogisticRegressionModel.full_pass(theta)`` (sum of l_k and sum of grad l_k in
one read of X) against a plain NumPy reference computing the same two quantities
(``eta = X @ theta``, ``ll = sum(y eta - logaddexp(0, eta))``, ``r = y - expit(eta)``,
``grad = X.T @ r``), in the same run, for float64 and float32 X, with one thread
and with all threads (NumPy's BLAS limited/unlimited through threadpoolctl).
Each timing is the median of ``--repeat`` runs after one warm-up. With one thread
it also times the rows' dot products alone (the pass's first step, ``Rows.dot_range``
over all rows), the part that bounds the float32 pass, and the Hessian sum alone
per row, over rows read from memory and over a block that stays in the cache; and,
for every case, the same pass with the Hessian sum (``full_pass(theta,
hessian=True)``, what HMC-ECS's preparation computes at theta*).

Also measures, in a fresh subprocess, the peak resident memory of building the
model and running one full pass relative to the size of X (target <= 1.3 x X).

Usage::

    python benchmarks/bench_full_pass.py                  # n = 1,000,000, d = 28 (+ intercept)
    python benchmarks/bench_full_pass.py --n 200000 --repeat 5 --no-memory

Writes ``benchmarks/results/full_pass.json`` (or ``--out``) and prints a Markdown
table. Timings on a shared machine are noisy: compare ratios measured in one run.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
from scipy.special import expit
from _provenance import stamp  # noqa: E402

HERE = Path(__file__).resolve().parent


def make_data(n, d, dtype, seed=0):
    """Standard-normal X filled in chunks (no full-size temporaries), logistic y."""
    rng = np.random.default_rng(seed)
    X = np.empty((n, d), dtype=dtype)
    step = max(1, 2**20 // d)
    for s in range(0, n, step):
        rng.standard_normal(out=X[s : s + step], dtype=dtype)
    theta = rng.normal(scale=1.0 / np.sqrt(d), size=d + 1)
    y = np.empty(n)
    for s in range(0, n, step):
        eta = X[s : s + step].astype(np.float64) @ theta[:d] + theta[d]
        y[s : s + step] = rng.random(eta.shape[0]) < expit(eta)
    return X, y, theta


def numpy_full_pass(X, y, theta):
    """The same ll and gradient with plain NumPy (BLAS in X's dtype)."""
    d = X.shape[1]
    eta = X @ theta[:d].astype(X.dtype)
    eta = eta.astype(np.float64, copy=False)
    eta += theta[d]
    ll = float(np.sum(y * eta - np.logaddexp(0.0, eta)))
    r = y - expit(eta)
    grad = np.empty(d + 1)
    grad[:d] = X.T @ r.astype(X.dtype, copy=False)
    grad[d] = r.sum()
    return ll, grad


def median_time(fn, repeat):
    fn()  # warm-up (page-in, thread pool start)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), float(np.min(times))


def bench_dtype(n, d, dtype, repeat, n_threads_all):
    from threadpoolctl import threadpool_limits

    from bayes_subsample.models import LogisticRegressionModel

    X, y, theta = make_data(n, d, dtype)
    rows = []
    for threads in sorted({1, n_threads_all}):
        model = LogisticRegressionModel(X, y, n_threads=threads)
        t_ours, t_ours_min = median_time(lambda m=model: m.full_pass(theta, gradient=True), repeat)
        t_hess, _ = median_time(lambda m=model: m.full_pass(theta, hessian=True), repeat)
        with threadpool_limits(limits=threads):
            t_np, t_np_min = median_time(lambda: numpy_full_pass(X, y, theta), repeat)
        ll, g, _ = model.full_pass(theta, gradient=True)
        with threadpool_limits(limits=threads):
            ll_np, g_np = numpy_full_pass(X, y, theta)
        # the rows' dot products alone (one thread; the pass's first step)
        t_dot = median_time(lambda m=model: m._cy.rows.py_dot_range(0, n, theta), repeat)[0] \
            if threads == 1 else None
        hess_mem = hess_cache = None
        if threads == 1:
            hess_mem, hess_cache = hessian_sum_ns_per_row(model._cy.rows, n, repeat)
        rows.append({
            "dtype": np.dtype(dtype).name, "threads": threads, "n": n, "d": d + 1,
            "ours_s": t_ours, "ours_min_s": t_ours_min, "with_hessian_s": t_hess,
            "numpy_s": t_np, "numpy_min_s": t_np_min,
            "ratio_numpy_over_ours": t_np / t_ours,
            "bandwidth_GBps": X.nbytes / t_ours / 1e9,
            "numpy_bandwidth_GBps": X.nbytes / t_np / 1e9,
            "dot_products_s": t_dot,
            "hessian_sum_ns_per_row_memory": hess_mem,
            "hessian_sum_ns_per_row_cache": hess_cache,
            "rel_diff_ll": abs(ll - ll_np) / abs(ll_np),
            "rel_diff_grad": float(np.max(np.abs(g - g_np)) / np.max(np.abs(g_np))),
        })
    return rows


def hessian_sum_ns_per_row(rows, n, repeat, cached=4096):
    """The Hessian sum alone (``Rows.add_xwx_range``, one thread), nanoseconds per
    row: over all ``n`` rows read from memory, and over the first ``cached`` rows
    (about 460 KB at d = 29 float32, in the cache) summed ``n / cached`` times.
    Equal times mean the kernel is bound by its arithmetic, not by memory."""
    w = np.random.default_rng(1).random(n)
    t_mem = median_time(lambda: rows.py_add_xwx_range(0, n, w), repeat)[0] / n
    k = min(n, cached)
    reps = max(1, n // k)

    def in_cache():
        for _ in range(reps):
            rows.py_add_xwx_range(0, k, w[:k])

    t_cache = median_time(in_cache, repeat)[0] / (reps * k)
    return 1e9 * t_mem, 1e9 * t_cache


# ---------------------------------------------------------------------------
# peak memory, measured in a fresh process
# ---------------------------------------------------------------------------
def _proc_status_bytes(field):
    """VmRSS / VmHWM of this process from /proc (per address space: unlike
    ru_maxrss, not inherited across exec from the parent)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise KeyError(field)


def _reset_peak_rss():
    """Reset VmHWM to the current RSS (Linux >= 4.0); False if not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def memory_child(n, d, dtype):
    import tracemalloc

    from bayes_subsample.models import LogisticRegressionModel

    base = _proc_status_bytes("VmRSS")
    X, y, theta = make_data(n, d, np.dtype(dtype))
    after_data = _proc_status_bytes("VmRSS")
    reset = _reset_peak_rss()   # forget the data generator's temporaries
    tracemalloc.start()
    model = LogisticRegressionModel(X, y)
    model.full_pass(theta, gradient=True, hessian=False)
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    peak = _proc_status_bytes("VmHWM") if reset else None
    print(json.dumps({
        "dtype": np.dtype(dtype).name, "X_bytes": X.nbytes, "y_bytes": y.nbytes,
        "rss_baseline": base, "rss_after_data": after_data, "rss_peak": peak,
        "tracemalloc_peak_model_and_pass": traced_peak,
        "shares_memory": bool(np.shares_memory(model.X, X)),
    }))


def measure_memory(n, d, dtype):
    out = subprocess.run(
        [sys.executable, __file__, "--_memory-child", np.dtype(dtype).name, "--n", str(n),
         "--d", str(d)],
        check=True, capture_output=True, text=True,
    )
    r = json.loads(out.stdout.strip().splitlines()[-1])
    X = r["X_bytes"]
    r["tracemalloc_over_X"] = r["tracemalloc_peak_model_and_pass"] / X
    if r["rss_peak"] is not None:
        # peak while building + one pass, X and y included, interpreter excluded
        r["peak_over_X"] = (r["rss_peak"] - r["rss_baseline"]) / X
        r["extra_over_X"] = (r["rss_peak"] - r["rss_after_data"]) / X   # beyond X and y
    else:  # no /proc/self/clear_refs: estimate from NumPy allocations
        r["peak_over_X"] = (X + r["y_bytes"] + r["tracemalloc_peak_model_and_pass"]) / X
        r["extra_over_X"] = r["tracemalloc_over_X"]
    r["method"] = "VmHWM" if r["rss_peak"] is not None else "tracemalloc"
    return r


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1_000_000, help="rows (default 1,000,000)")
    ap.add_argument("--d", type=int, default=28, help="features, intercept added (default 28)")
    ap.add_argument("--repeat", type=int, default=7, help="timed runs per case (median)")
    ap.add_argument("--dtype", choices=["float64", "float32", "both"], default="both")
    ap.add_argument("--threads", type=int, default=None, help="'all threads' (default: cores)")
    ap.add_argument("--no-memory", action="store_true", help="skip the peak-memory subprocess")
    ap.add_argument("--out", default=str(HERE / "results" / "full_pass.json"))
    ap.add_argument("--_memory-child", dest="memory_child", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.memory_child:
        memory_child(args.n, args.d, args.memory_child)
        return

    from bayes_subsample._threads import available_cores

    n_all = args.threads or available_cores()
    dtypes = ["float64", "float32"] if args.dtype == "both" else [args.dtype]
    rows, mem = [], []
    for dt in dtypes:
        rows += bench_dtype(args.n, args.d, np.dtype(dt), args.repeat, n_all)
        if not args.no_memory:
            mem.append(measure_memory(args.n, args.d, dt))

    print(f"\nfull pass (ll + gradient), logistic, n = {args.n:,}, d = {args.d} + intercept, "
          f"median of {args.repeat}\n")
    print("| dtype | threads | ours (ms) | numpy (ms) | numpy / ours | ours GB/s | numpy GB/s |"
          " dot products (ms) | with Hessian (ms) | Hessian sum ns/row (memory / cache) |"
          " rel diff ll | rel diff grad |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        dot = "" if r["dot_products_s"] is None else f"{1e3 * r['dot_products_s']:.1f}"
        hs = "" if r["hessian_sum_ns_per_row_memory"] is None else (
            f"{r['hessian_sum_ns_per_row_memory']:.1f} / {r['hessian_sum_ns_per_row_cache']:.1f}")
        print(f"| {r['dtype']} | {r['threads']} | {1e3 * r['ours_s']:.1f} | "
              f"{1e3 * r['numpy_s']:.1f} | {r['ratio_numpy_over_ours']:.2f} | "
              f"{r['bandwidth_GBps']:.2f} | {r['numpy_bandwidth_GBps']:.2f} | "
              f"{dot} | {1e3 * r['with_hessian_s']:.1f} | {hs} | "
              f"{r['rel_diff_ll']:.1e} | {r['rel_diff_grad']:.1e} |")
    if mem:
        print("\npeak memory of building the model + one full pass (target <= 1.3 x X)\n")
        print("| dtype | X (MB) | peak RSS / X (incl. X, y) | extra RSS / X | tracemalloc / X |"
              " X used without copy |")
        print("|---|---|---|---|---|---|")
        for m in mem:
            print(f"| {m['dtype']} | {m['X_bytes'] / 1e6:.0f} | {m['peak_over_X']:.3f} | "
                  f"{m['extra_over_X']:.3f} | {m['tracemalloc_over_X']:.4f} | "
                  f"{m['shares_memory']} |")
    result = {
        "benchmark": "full_pass",
        "what": "logistic regression: sum of log-likelihoods + gradient, one pass over X",
        "n": args.n, "d": args.d + 1, "repeat": args.repeat, "statistic": "median",
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(),
                    "threads_all": n_all, "python": platform.python_version(),
                    "numpy": np.__version__,
                    "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None},
        "timings": rows, "memory": mem,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(stamp(result), indent=2) + "\n")
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
