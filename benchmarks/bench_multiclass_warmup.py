"""Where the default multiclass fit spends its time: HMC-ECS's warmup on covtype,
7 classes, all 54 attributes, one chain, stage by stage.

The default ``BayesianLogisticRegression()`` on covtype's 7 classes takes 16
times scikit-learn's fit time (``bench_hard_data.py --sections
covtype_multiclass``). This script times the preparation and its shared exact
pilot chain, one chain's warmup iterations (in blocks of 50: seconds per
iteration, leapfrog steps, subsample size ``m``, rows summed exactly, step
size) and restratifications, and the sampling phase, and counts the (class, indicator)
pairs no row has (classes separated along an indicator: their coefficients are
bounded by the prior alone on one side, which is what keeps the step size
small).

Usage::

    python benchmarks/bench_multiclass_warmup.py --n-rows 150000      # ~4 minutes, 2 cores
    python benchmarks/bench_multiclass_warmup.py                      # all 464,809 rows

Writes ``benchmarks/results/multiclass_warmup.json`` (or ``--out``).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _hard_problems import RESULTS, covtype_split  # noqa: E402
from _provenance import stamp  # noqa: E402

from bayes_subsample import BayesianLogisticRegression  # noqa: E402
from bayes_subsample._cost import design_report  # noqa: E402
from bayes_subsample.samplers import _ecs_warmup, hmc_ecs  # noqa: E402


def instrument(log, per_iteration):
    """Time HMC-ECS's warmup steps, exact pilot and restratifications (wrapping
    the kernel's methods; the draws are unchanged)."""
    K = hmc_ecs.HMCECSKernel
    step, pilot, restratify, ref = K.warmup_step, K.exact_pilot, K.restratify, K._reference_at

    def timed_step(self, rng, state, iteration):
        t = time.perf_counter()
        state, info = step(self, rng, state, iteration)
        per_iteration.append((time.perf_counter() - t, int(info.n_leapfrog), int(self.m),
                              0 if self.exact_mask is None else int(self.exact_mask.sum()),
                              float(self.tuner.step_size)))
        return state, info

    def timed(name, f):
        def wrapper(self, *args):
            t = time.perf_counter()
            out = f(self, *args)
            log[name] = log.get(name, 0.0) + time.perf_counter() - t
            return out
        return wrapper

    def timed_function(name, f):
        def wrapper(*args):
            t = time.perf_counter()
            out = f(*args)
            log[name] = log.get(name, 0.0) + time.perf_counter() - t
            return out
        return wrapper

    K.warmup_step = timed_step
    # the exact pilot: once at preparation (shared), or a chain's own
    _ecs_warmup.shared_pilot = timed_function("shared_pilot_s", _ecs_warmup.shared_pilot)
    K.exact_pilot = timed("pilot_s", pilot)
    K.restratify = timed("restratify_s", restratify)
    K._reference_at = timed("reference_s", ref)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-rows", type=int, default=None, help="training rows (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-samples", type=int, default=100)
    ap.add_argument("--out", default=os.path.join(RESULTS, "multiclass_warmup.json"))
    args = ap.parse_args(argv)
    Xtr, _, ytr, _ = covtype_split(binary=False)
    if args.n_rows is not None and args.n_rows < len(ytr):
        rows = np.sort(np.random.default_rng(0).choice(len(ytr), args.n_rows, replace=False))
        Xtr, ytr = Xtr[rows], ytr[rows]
    classes, labels = np.unique(ytr, return_inverse=True)
    rep = design_report(Xtr, labels, len(classes))
    log, per_it = {}, []
    instrument(log, per_it)
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        clf = BayesianLogisticRegression(random_state=args.seed, n_chains=1,
                                         n_samples=args.n_samples, progress=False).fit(Xtr, ytr)
    total = time.perf_counter() - t
    wall = clf.trace_.wall_time
    a = np.array(per_it)
    blocks = [{"iterations": [lo, min(lo + 50, len(a)) - 1],
               "s_per_iteration": float(a[lo:lo + 50, 0].mean()),
               "n_leapfrog": float(a[lo:lo + 50, 1].mean()),
               "m": float(a[lo:lo + 50, 2].mean()), "n_exact": float(a[lo:lo + 50, 3].mean()),
               "step_size": float(a[lo:lo + 50, 4].mean())} for lo in range(0, len(a), 50)]
    tun = clf.diagnostics_["tuning"][0]
    result = {"n_train": int(len(ytr)), "n_params": int(clf.trace_.draws.shape[-1]),
              "separated_pairs": rep.separated_pairs,
              "class_indicator_pairs": int(len(classes) * (Xtr.shape[1] - 10)),
              "total_s": total, "prepare_s": float(wall["prepare"]),
              "warmup_s": float(np.sum(wall["warmup"])),
              "sampling_s": float(np.sum(wall["sampling"])), "n_samples": args.n_samples,
              **log, "sampling_n_leapfrog": float(np.mean(clf.trace_.stats["n_leapfrog"])),
              "final": {k: tun.get(k) for k in ("step_size", "n_leapfrog", "m", "n_exact")},
              "stages": tun.get("strata_stages"), "strata_pilot": tun.get("strata_pilot"),
              "warmup_blocks": blocks}
    print(f"{result['n_train']:,} rows, {result['n_params']} parameters; "
          f"{rep.separated_pairs} of {result['class_indicator_pairs']} (class, indicator) pairs "
          "separated")
    print(f"total {total:.0f} s: prepare {result['prepare_s']:.0f} (its shared exact pilot "
          f"{log.get('shared_pilot_s', 0):.0f}), warmup "
          f"{result['warmup_s']:.0f} (restratify {log.get('restratify_s', 0):.0f}: a chain's own "
          f"exact pilot {log.get('pilot_s', 0):.0f}, its new references (Hessian passes) "
          f"{log.get('reference_s', 0):.0f}), sampling {result['sampling_s']:.0f} for "
          f"{args.n_samples} draws")
    print("| iterations | s / iteration | leapfrog steps | m | exact rows | step size |")
    print("|---|---|---|---|---|---|")
    for b in blocks:
        print(f"| {b['iterations'][0]}-{b['iterations'][1]} | {b['s_per_iteration']:.3f} | "
              f"{b['n_leapfrog']:.1f} | {b['m']:.0f} | {b['n_exact']:.0f} | "
              f"{b['step_size']:.4f} |")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(stamp(result), fh, indent=1)
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
