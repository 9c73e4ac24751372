"""Benchmark: the compiled multinomial logistic regression model (``CyMultinomial``).

On covtype-sized synthetic data (n = 581,012, d = 54 float64, K = 7 classes,
intercepts: p = 7 x 55 = 385 parameters), times

* ``full_pass`` (log-likelihood + gradient), 1 thread and all threads;
* ``full_pass(hessian=True)`` (the 385 x 385 Hessian too), 1 thread and all
  threads (the pairs of classes' blocks in threads);
* the plain NumPy definitions of the same sums (``multinomial_*_reference``
  over chunks of 65,536 rows; BLAS at its default threads);
* ``loglik_diff_terms`` and cached ``cv_residual_diff_terms`` (order 2) over
  all rows (one thread), and ``cv_cache``.

Each timing is the median of ``--repeat`` runs after one warm-up.

Usage::

    python benchmarks/bench_multinomial.py                 # about 1 minute
    python benchmarks/bench_multinomial.py --n 100000 --repeat 3

Writes ``benchmarks/results/multinomial.json`` (or ``--out``) and prints a
Markdown table. Timings on a shared machine are noisy (check ``uptime``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
from scipy.special import softmax

from bayes_subsample.models import MultinomialLogisticModel
from bayes_subsample.models._multinomial import (multinomial_grad_reference,
                                                 multinomial_hessian_reference,
                                                 multinomial_loglik_reference)
from _provenance import stamp  # noqa: E402

HERE = Path(__file__).resolve().parent


def make_data(n, d, K, seed=0):
    """Standard-normal X, classes drawn from a softmax model with coefficients of
    scale 1 / sqrt(d) (so every class has a fair share)."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    theta = rng.normal(scale=1.0 / np.sqrt(d), size=(K, d + 1))
    y = np.empty(n)
    step = 65536
    for s in range(0, n, step):
        p = softmax(X[s : s + step] @ theta[:, :d].T + theta[:, d], axis=1)
        u = rng.random((p.shape[0], 1))
        y[s : s + step] = np.minimum((u > p.cumsum(axis=1)).sum(axis=1), K - 1)
    return X, y, theta.ravel()


def timed(fn, repeat):
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def numpy_full_pass(model, theta, hessian):
    ll, g = 0.0, np.zeros(model.n_params)
    H = np.zeros((model.n_params, model.n_params)) if hessian else None
    args = (model.X, model.y, theta, model.n_classes, model.fit_intercept)
    for s in range(0, model.n_data, 65536):
        idx = np.arange(s, min(s + 65536, model.n_data))
        ll += float(multinomial_loglik_reference(*args, idx).sum())
        g += multinomial_grad_reference(*args, idx).sum(axis=0)
        if hessian:
            H += multinomial_hessian_reference(*args, idx)
    return ll, g, H


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=581_012)
    ap.add_argument("--d", type=int, default=54)
    ap.add_argument("--K", type=int, default=7)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default=str(HERE / "results" / "multinomial.json"))
    args = ap.parse_args()

    X, y, theta = make_data(args.n, args.d, args.K)
    cores = len(os.sched_getaffinity(0))
    one = MultinomialLogisticModel(X, y, n_classes=args.K, n_threads=1)
    many = MultinomialLogisticModel(X, y, n_classes=args.K, n_threads=cores)
    cy = one.compiled
    theta_new = theta + 0.01
    idx = np.arange(args.n)
    cache = cy.cv_cache(theta, n_threads=cores)

    rows = []

    def add(name, fn):
        rows.append((name, timed(fn, args.repeat)))
        print(f"{name}: {rows[-1][1]:.3f} s", flush=True)

    add("full_pass ll + grad, 1 thread", lambda: one.full_pass(theta))
    add(f"full_pass ll + grad, {cores} threads", lambda: many.full_pass(theta))
    add("NumPy reference ll + grad", lambda: numpy_full_pass(one, theta, False))
    add("full_pass + Hessian, 1 thread", lambda: one.full_pass(theta, hessian=True))
    add(f"full_pass + Hessian, {cores} threads", lambda: many.full_pass(theta, hessian=True))
    add("NumPy reference ll + grad + Hessian", lambda: numpy_full_pass(one, theta, True))
    add("loglik_diff_terms, all rows", lambda: one.loglik_diff_terms(theta, theta_new, idx))
    add("cv_residual_diff_terms order 2 cached, all rows",
        lambda: cy.cv_residual_diff_terms(2, theta, theta, theta_new, idx, cache))
    add("cv_cache, 1 thread", lambda: cy.cv_cache(theta, n_threads=1))
    add(f"cv_cache, {cores} threads", lambda: cy.cv_cache(theta, n_threads=cores))

    ours = many.full_pass(theta, hessian=True)
    ref = numpy_full_pass(one, theta, True)
    err = {"ll": abs(ours[0] - ref[0]) / abs(ref[0]),
           "grad": float(np.abs(ours[1] - ref[1]).max() / np.abs(ref[1]).max()),
           "hessian": float(np.abs(ours[2] - ref[2]).max() / np.abs(ref[2]).max())}

    print(f"\n| n = {args.n}, d = {args.d}, K = {args.K} (p = {one.n_params}) | seconds |")
    print("|---|---|")
    for name, t in rows:
        print(f"| {name} | {t:.3f} |")
    print(f"\nmax relative differences from the NumPy reference: {err}")
    out = {"n": args.n, "d": args.d, "K": args.K, "n_params": one.n_params,
           "repeat": args.repeat, "timings_s": dict(rows), "relative_difference": err,
           "platform": platform.platform(), "cpu_count": cores,
           "loadavg": os.getloadavg()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(stamp(out), indent=2))


if __name__ == "__main__":
    main()
