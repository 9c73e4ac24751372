"""Per-iteration cost of every registered sampler, through the public API only.

For synthetic HIGGS-shaped logistic regression (``make_logistic_data``,
d = 28 + intercept) each sampler runs one chain at its defaults; the table
gives the sampling time per retained iteration (``Trace.wall_time``), the
per-datum evaluations per iteration and the preparation time, and the fused
full-data pass (log-likelihood + gradient) is timed in float64 and float32.
It uses nothing but ``sample``, ``SAMPLERS`` and the models, so the same
script measures two versions of the package in one session (run it with each
installation and compare): the refactoring check of the architecture issue.

Usage::

    python benchmarks/bench_sampler_cost.py                 # n = 100,000, about 1 minute
    python benchmarks/bench_sampler_cost.py --n 1000000 --samplers hmc_ecs sgld
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from bayes_subsample import sample
from bayes_subsample.datasets import make_logistic_data
from bayes_subsample.exceptions import SamplingError
from bayes_subsample.models import LogisticRegressionModel
from bayes_subsample.samplers import SAMPLERS
from _provenance import stamp  # noqa: E402

warnings.simplefilter("ignore", ConvergenceWarning)
warnings.simplefilter("ignore", RuntimeWarning)


def full_pass_time(model, repeat):
    theta = np.full(model.n_params, 0.01)
    model.full_pass(theta)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        model.full_pass(theta)
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


def sampler_cost(model, name, n_warmup, n_samples, seed):
    trace = sample(model, name, n_samples=n_samples, n_warmup=n_warmup, n_chains=1,
                   random_state=seed, check_convergence=False)
    per_iter = float(trace.wall_time["sampling"][0]) / n_samples
    return {"sampler": name, "ms_per_iter": 1e3 * per_iter,
            "evals_per_iter": float(np.mean(trace.stats["n_evals"])),
            "prepare_s": float(trace.wall_time["prepare"]),
            "elapsed_s": float(trace.wall_time.get("elapsed", trace.wall_time["total"]))}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="rows (default 1e5)")
    ap.add_argument("--samplers", nargs="*", default=sorted(SAMPLERS))
    ap.add_argument("--n-warmup", type=int, default=300)
    ap.add_argument("--n-samples", type=int, default=1000,
                    help="retained iterations (full-data samplers use a tenth)")
    ap.add_argument("--repeat", type=int, default=15, help="full-pass repetitions")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(Path(__file__).parent / "results" / "sampler_cost.json"))
    args = ap.parse_args(argv)

    X, y = make_logistic_data(args.n, random_state=args.seed)
    model = LogisticRegressionModel(X, y)
    model32 = LogisticRegressionModel(X.astype(np.float32), y)
    rows = [{"what": "full pass float64", "ms": 1e3 * full_pass_time(model, args.repeat)},
            {"what": "full pass float32", "ms": 1e3 * full_pass_time(model32, args.repeat)}]
    print(f"n = {args.n:,}, d = {X.shape[1]} + intercept, one chain at the defaults\n")
    print("| what | ms |\n|---|---|")
    for r in rows:
        print(f"| {r['what']} | {r['ms']:.2f} |")
    out = []
    print("\n| sampler | ms / iteration | evaluations / iteration | prepare s |\n|---|---|---|---|")
    for name in args.samplers:
        full = name in ("mh", "hmc")
        try:
            r = sampler_cost(model, name, args.n_warmup // (10 if full else 1),
                             args.n_samples // (10 if full else 1), args.seed)
        except SamplingError as exc:     # a sampler that refuses this posterior (pSGLD)
            out.append({"sampler": name, "refused": str(exc)})
            print(f"| {name} | refused: {str(exc)[:60]}... | | |")
            continue
        out.append(r)
        print(f"| {name} | {r['ms_per_iter']:.3f} | {r['evals_per_iter']:.0f} | "
              f"{r['prepare_s']:.2f} |")
    result = {"n": args.n, "d": int(X.shape[1]), "full_pass": rows, "samplers": out,
              "platform": platform.platform(), "cpus": os.cpu_count(),
              "load_average": os.getloadavg()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(stamp(result), indent=2))
    print(f"\nwritten {args.out}")


if __name__ == "__main__":
    main()
