"""HMC-ECS's exact stratum summed in threads: one potential evaluation, and one
chain of the default multiclass covtype fit, with one thread and with two.

An exact stratum of more than ``EXACT_CHUNK`` rows is summed chunk by chunk in
the chain's share of the cores (``_hmc_ecs_fast.ECSCore.set_exact_threads``),
the chunks' sums added in order. Two measurements:

- ``evaluation``: ``ECSCore.value_and_grad`` on 12,000 exact rows and 900
  subsampled ones of 30,000 synthetic rows (54 features; multinomial with 7
  classes, and logistic), the fastest of 30 calls with one thread and with two,
  BLAS held to one thread as in a chain;
- ``covtype`` (``--covtype``): one chain of ``BayesianLogisticRegression()`` on
  covtype's 7 classes (all 54 attributes, the 80/20 split of seed 0), once with
  the exact stratum on one thread and once with the chain's share: prepare,
  warmup and sampling wall times, and whether the draws are identical.

Usage::

    python benchmarks/bench_exact_threads.py              # seconds
    python benchmarks/bench_exact_threads.py --covtype    # about 4 minutes, 2 cores

Writes ``benchmarks/results/exact_threads.json`` (or ``--out``). Wall-clock
figures: run on a quiet machine (with the other core busy, two threads are
slower than one).
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
from _provenance import stamp  # noqa: E402

from bayes_subsample._threads import one_blas_thread  # noqa: E402
from bayes_subsample.control_variates import TaylorControlVariate  # noqa: E402
from bayes_subsample.models import LogisticRegressionModel, MultinomialLogisticModel  # noqa: E402
from bayes_subsample.samplers import hmc_ecs  # noqa: E402
from bayes_subsample.samplers._hmc_ecs_fast import EXACT_CHUNK, ECSCore  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def evaluation(n=30_000, d=54, K=7, n_exact=12_000, m=900, repeats=30, seed=0):
    """The fastest ``value_and_grad`` of ``repeats`` with 1 and 2 exact-stratum threads."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = rng.integers(0, K, n)
    out = []
    for model in (MultinomialLogisticModel(X, y, n_classes=K),
                  LogisticRegressionModel(X, (y > K // 2).astype(float))):
        theta_star = rng.normal(size=model.n_params) * 0.05
        cv = TaylorControlVariate(model, theta_star, order=2)
        exact, sampled = np.arange(n_exact), np.arange(n_exact, n)
        idx = rng.choice(sampled, m)
        row = {"model": type(model).__name__, "n_params": model.n_params, "n_exact": n_exact,
               "m": m, "chunks": -(-n_exact // EXACT_CHUNK)}
        values = {}
        with one_blas_thread():
            for threads in (1, 2):
                core = ECSCore(model.compiled, 2, model.prior.precision, "perturbed")
                core.set_strata(exact, sampled)
                core.set_exact_threads(threads)
                core.set_rows(idx, m // 100)
                core.set_reference(theta_star, cv.L_star, cv.A, cv.B)
                theta = theta_star + 0.01
                best = np.inf
                for _ in range(repeats):
                    t = time.perf_counter()
                    values[threads] = core.value_and_grad(theta)
                    best = min(best, time.perf_counter() - t)
                row[f"ms_{threads}_thread{'s' * (threads > 1)}"] = best * 1e3
        row["identical"] = bool(values[1][0] == values[2][0]
                                and np.array_equal(values[1][1], values[2][1]))
        out.append(row)
    return out


def covtype_chain(seed=0):
    """One chain of the default fit on covtype's 7 classes, the exact stratum on
    one thread, then on the chain's share of the cores."""
    from _hard_problems import covtype_split

    from bayes_subsample import BayesianLogisticRegression
    Xtr, _, ytr, _ = covtype_split(binary=False, seed=seed)
    new_potential = hmc_ecs.HMCECSKernel._new_potential
    rows, draws = [], []
    for forced in (1, None):
        def one_thread(self, _f=new_potential):
            pot = _f(self)
            if isinstance(pot, ECSCore):
                pot.set_exact_threads(1)
            return pot
        hmc_ecs.HMCECSKernel._new_potential = one_thread if forced else new_potential
        try:
            t = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                est = BayesianLogisticRegression(random_state=seed, n_chains=1,
                                                 progress=False).fit(Xtr, ytr)
            total = time.perf_counter() - t
        finally:
            hmc_ecs.HMCECSKernel._new_potential = new_potential
        wall = est.trace_.wall_time
        rows.append({"exact_stratum_threads": "1 thread" if forced
                     else "the chain's share of the cores",
                     "total_s": total, "prepare_s": float(wall["prepare"]),
                     "warmup_s": float(np.sum(wall["warmup"])),
                     "sampling_s": float(np.sum(wall["sampling"])),
                     "n_exact": est.diagnostics_["tuning"][0].get("n_exact")})
        draws.append(np.asarray(est.posterior_draws_))
    return {"seed": seed, "n_train": int(len(ytr)), "rows": rows,
            "identical_draws": bool(np.array_equal(draws[0], draws[1]))}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--covtype", action="store_true",
                    help="also one chain of the default covtype 7-class fit, 1 vs 2 threads")
    ap.add_argument("--out", default=os.path.join(RESULTS, "exact_threads.json"))
    args = ap.parse_args(argv)
    result = {"exact_chunk": EXACT_CHUNK, "evaluation": evaluation()}
    for r in result["evaluation"]:
        print(f"{r['model']}: {r['n_exact']:,} exact rows ({r['chunks']} chunks) + {r['m']} "
              f"subsampled: {r['ms_1_thread']:.3f} ms with one thread, "
              f"{r['ms_2_threads']:.3f} ms with two; identical: {r['identical']}")
    if args.covtype:
        result["covtype"] = cov = covtype_chain()
        for r in cov["rows"]:
            print(f"covtype 7 classes, one chain, exact stratum on "
                  f"{r['exact_stratum_threads']}: {r['total_s']:.1f} s (prepare "
                  f"{r['prepare_s']:.1f}, warmup {r['warmup_s']:.1f}, sampling "
                  f"{r['sampling_s']:.1f}); exact rows {r['n_exact']}")
        print(f"identical draws: {cov['identical_draws']}")
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(stamp(result), fh, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
