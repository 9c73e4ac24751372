"""The easy cases stay where they were: HMC-ECS at its defaults (4 chains x
(1000 warmup + 1000 draws), one thread) on the three problems of
``bench_mixing.py`` -- covtype.binary (200,000 random rows, the 10 quantitative
attributes standardised), the shipped HIGGS sample and n = 1e6 synthetic
logistic data (d = 28).

Per seed: min bulk ESS per draw (the figure ``results/mixing.json`` holds, shown
beside it), min tail ESS per draw, min ESS per draw of the squared deviations
from the mean (the draws' second moment, which the sds come from), max R-hat,
all-in wall time. Bulk ESS alone rewards antithetic trajectories: a
trajectory near half an orbit of a Gaussian posterior sends x to about -x,
which makes the bulk ESS of the mean exceed the number of draws while the
squares (x^2 to about x^2) mix badly. The criteria therefore compare the
least of the three ESS (``min_ess_all``) with a baseline measured by this
same script on an earlier version (``results/easy_baseline.json``; its
``command`` and ``commit`` say which)::

    git worktree add /tmp/base cabfcc4 && (cd /tmp/base && python setup.py build_ext --inplace)
    PYTHONPATH=/tmp/base python benchmarks/_hard_easy.py \
        --baseline benchmarks/results/easy_baseline.json

Wall-clock ratios are only as good as the machine is quiet: the load average is
recorded.
"""
from __future__ import annotations

import json
import os
import sys
import time
import warnings

import numpy as np

from _hard_problems import RESULTS
from bayes_subsample import diagnostics as diag
from bayes_subsample import sample
from bayes_subsample.datasets import make_logistic_data
from bayes_subsample.models import LogisticRegressionModel

sys.path.insert(0, os.path.dirname(__file__))
from bench_mixing import covtype_model, higgs_model  # noqa: E402

#: the mean over the seeds of the least ESS per draw may not fall below this
#: fraction of the baseline's
ESS_FRACTION = 0.9
BASELINE = os.path.join(RESULTS, "easy_baseline.json")


def problems(quick):
    yield "covtype", covtype_model(50_000 if quick else 200_000), ("covtype", "hmc_ecs")
    yield "higgs", higgs_model(), ("higgs", "hmc_ecs")
    X, y = make_logistic_data(200_000 if quick else 1_000_000, 28, random_state=0)
    yield "synthetic", LogisticRegressionModel(X, y), ("synthetic", "HMCECS() (default)")


def measure(model, seed):
    """HMC-ECS at its defaults: the ESS figures of one run (per draw) and its wall time."""
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tr = sample(model, "hmc_ecs", random_state=seed, check_convergence=False)
    elapsed = time.perf_counter() - t
    D = tr.draws
    n_draws = D.shape[0] * D.shape[1]
    squares = (D - D.reshape(-1, D.shape[2]).mean(axis=0)) ** 2
    bulk = float(np.min(diag.ess_bulk(D)) / n_draws)
    tail = float(np.min(diag.ess_tail(D)) / n_draws)
    sq = float(np.min(diag.ess_mean(squares)) / n_draws)
    least = min(bulk, tail, sq)
    choice = tr.choice() if hasattr(tr, "choice") else None
    return {"seed": seed, "wall_s": elapsed, "min_ess_per_draw": bulk,
            "min_tail_ess_per_draw": tail, "min_sq_ess_per_draw": sq,
            "min_ess_all_per_draw": least, "min_ess_all_per_s": least * n_draws / elapsed,
            "max_rhat": float(np.max(diag.rhat(D))), "choice": choice}


def run(seeds=(0, 1, 2), quick=False):
    with open(os.path.join(RESULTS, "mixing.json")) as fh:
        before = json.load(fh)
    base = None
    if os.path.exists(BASELINE) and not quick:
        with open(BASELINE) as fh:
            base = json.load(fh)
    rows, crit = [], {}
    for label, model, (sec, key) in problems(quick):
        old = before[sec][key]
        for seed in seeds:
            row = {"problem": label, **measure(model, seed),
                   "mixing_json": {k: old[k] for k in ("min_ess_per_draw", "max_rhat", "wall_s",
                                                       "min_ess_per_s")}}
            rows.append(row)
            key_r = f"{label}: max R-hat <= 1.01 (every seed)"
            crit[key_r] = crit.get(key_r, True) and row["max_rhat"] <= 1.01
        if base is None:
            continue
        # a seed's ESS per draw varies by about 15%: the means over the seeds are compared
        mine = [r for r in rows if r["problem"] == label]
        theirs = [r for r in base["rows"] if r["problem"] == label]
        for field, name in (("min_ess_all_per_draw", "least ESS per draw"),
                            ("min_ess_all_per_s", "least ESS per second")):
            ratio = np.mean([r[field] for r in mine]) / np.mean([r[field] for r in theirs])
            frac = ESS_FRACTION if field.endswith("draw") else 1.0
            crit[f"{label}: mean {name} >= {frac} x the baseline's (ratio {ratio:.2f})"] = bool(
                ratio >= frac)
    return {"rows": rows, "criteria": crit,
            "baseline": None if base is None else {k: base.get(k) for k in
                                                   ("command", "commit", "date", "load_average")},
            "quick_note": "quick runs use fewer rows than mixing.json's and skip the baseline"
            if quick else None}


def table(result):
    out = ["| problem | seed | min bulk ESS / draw (mixing.json) | min tail ESS / draw "
           "| min ESS / draw of squares | least ESS / s | max R-hat | wall s "
           "| rows per evaluation |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        b = r["mixing_json"]
        rows = (r["choice"] or {}).get("rows_per_evaluation")
        out.append(f"| {r['problem']} | {r['seed']} | {r['min_ess_per_draw']:.2f} "
                   f"({b['min_ess_per_draw']:.2f}) | {r['min_tail_ess_per_draw']:.2f} "
                   f"| {r['min_sq_ess_per_draw']:.2f} | {r['min_ess_all_per_s']:.0f} "
                   f"| {r['max_rhat']:.3f} | {r['wall_s']:.2f} | {rows} |")
    return "\n".join(out)


def main(argv=None):
    """``--baseline OUT``: measure the three problems x three seeds with whatever
    version of the package is on the path and write them as the baseline."""
    import argparse

    from _provenance import stamp
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", required=True, help="JSON file to write")
    args = ap.parse_args(argv)
    rows = []
    for label, model, _ in problems(False):
        for seed in (0, 1, 2):
            rows.append({"problem": label, **measure(model, seed)})
            print(label, seed, {k: round(v, 3) for k, v in rows[-1].items()
                                if isinstance(v, float)}, flush=True)
    with open(args.baseline, "w") as fh:
        json.dump(stamp({"rows": rows}), fh, indent=1)


if __name__ == "__main__":
    main()
