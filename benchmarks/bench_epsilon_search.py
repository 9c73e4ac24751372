"""GridSearchCV over austerity MH's epsilon with ``SamplerScorer``: the setting
it picks, its bias against the exact posterior and its cost against epsilon = 0.

Per data set and seed: ``GridSearchCV(BayesianLogisticRegression(sampler=
AusterityMH(), random_state=seed), {"sampler__epsilon": EPSILONS},
scoring=SamplerScorer(tolerance=0.1), cv=WholeData())`` (4 chains x (1000
warmup + 1000 draws) per candidate, ``--draws`` to change; the scorer's
reference, full-data NUTS of the same length, is fitted once per data set and
shared by the seeds). Exact MH (epsilon = 0) reads every row at each of
AusterityMH's MH steps per iteration (58 at d = 29): on 1e6 rows run with
``--draws 500 --n-steps 10`` (every candidate then makes 10 MH steps per
iteration), about 7 minutes for epsilon = 0 on 2 cores. Printed
per candidate: the bias the scorer measured (net of Monte Carlo error), the
largest distance of a posterior mean from NUTS's and from exact MH's
(epsilon = 0, the same sampler reading every row) in their posterior sds, full
data passes per effective draw, fit time; then the chosen epsilon and its
cost against epsilon = 0.

``--verify``: instead of the search, the epsilon each seed's search chose (read
from the results; ``--epsilon`` to give one) run long (``--draws`` per chain,
e.g. 10,000) against a long full-data NUTS fit (``--reference-draws``, 4
chains): the largest distance of a posterior mean in NUTS's sds, its z against
both runs' Monte Carlo error, and the smallest distance the two runs can
resolve (their standard errors at z = 2): where the search's own fits are too
short to tell 0.1 sd from Monte Carlo error, this says whether the chosen
setting is within it. Results: ``results/epsilon_verify.json``.

Data sets: ``higgs``, the 10,984 random UCI HIGGS rows in
``$BAYES_SUBSAMPLE_DATA/higgs/sas_viya_higgs.csv.gz`` (28 features,
standardised); ``synthetic``, ``make_logistic_data(1_000_000, 28,
random_state=0)`` (HIGGS-shaped). Results: ``results/epsilon_search.json``.
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
from _hard_problems import RESULTS  # noqa: E402

from bayes_subsample import BayesianLogisticRegression  # noqa: E402
from bayes_subsample.model_selection import SamplerScorer, WholeData  # noqa: E402
from bayes_subsample.samplers import AusterityMH  # noqa: E402

EPSILONS = [0.0, 0.01, 0.05, 0.1, 0.2]
TOLERANCE = 0.1


def load(name, quick):
    if name == "higgs":
        from bayes_subsample.datasets import load_higgs
        home = os.environ.get("BAYES_SUBSAMPLE_DATA", "/work/shared/data")
        X, y = load_higgs(os.path.join(home, "higgs", "sas_viya_higgs.csv.gz"),
                          standardize=True, return_X_y=True)
        return (X[:3000], y[:3000]) if quick else (X, y)
    from bayes_subsample.datasets import make_logistic_data
    return make_logistic_data(50_000 if quick else 1_000_000, 28, random_state=0)


def search(X, y, seed, scorer, n, n_steps=None):
    """One GridSearchCV; returns a row per candidate. The figures behind each
    score are recorded from the fits GridSearchCV scores (no refit)."""
    from sklearn.model_selection import GridSearchCV
    seen = {}

    def score(est, X_, y_):
        r = scorer.evaluate(est, X_, y_)
        s = est.trace_.summary()
        seen[est.sampler.epsilon] = dict(
            r, mean=np.asarray(s["mean"]), sd=np.asarray(s["sd"]),
            mcse=np.asarray(s["mcse_mean"]),
            data_fraction=float(np.mean(est.diagnostics_["data_fraction_per_iteration"])))
        return r["score"]

    sampler = AusterityMH() if n_steps is None else AusterityMH(n_steps=n_steps)
    est = BayesianLogisticRegression(sampler=sampler, n_samples=n, n_warmup=n,
                                     random_state=seed, progress=False)
    grid = GridSearchCV(est, {"sampler__epsilon": EPSILONS}, scoring=score, cv=WholeData(),
                        refit=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t = time.perf_counter()
        grid.fit(X, y)
        elapsed = time.perf_counter() - t
    exact = seen[0.0]
    ref = next(iter(scorer.reference_fits_.values()))
    rs = ref.trace_.summary()
    rows = []
    for i, eps in enumerate(EPSILONS):
        r = seen[eps]
        vs_mh = np.abs(r["mean"] - exact["mean"]) / exact["sd"]
        z_mh = np.abs(r["mean"] - exact["mean"]) / np.hypot(r["mcse"], exact["mcse"])
        rows.append({
            "epsilon": eps, "score": float(grid.cv_results_["mean_test_score"][i]),
            "bias": r["bias"], "max_mean_error_sd_vs_nuts": r["max_mean_error_sd"],
            "max_mean_error_sd_vs_exact_mh": float(vs_mh.max()),
            "max_z_vs_exact_mh": float(np.nanmax(z_mh)) if eps else 0.0,
            "max_sd_ratio_vs_nuts": float(np.max(np.abs(r["sd"] / np.asarray(rs["sd"]) - 1))),
            "passes_per_ess": r["cost"], "data_fraction": r["data_fraction"],
            "fit_time_s": float(grid.cv_results_["mean_fit_time"][i]), "within": r["within"]})
    best = grid.best_params_["sampler__epsilon"]
    return {"seed": seed, "chosen_epsilon": best, "search_s": elapsed, "candidates": rows,
            "reference_passes_per_ess": seen[best]["reference_cost"]}


def verify(X, y, seeds, epsilons, n, n_ref, n_steps):
    """The chosen epsilons run long against a long NUTS fit (``--verify``)."""
    from bayes_subsample import diagnostics as diag
    t = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = BayesianLogisticRegression(sampler="nuts", n_samples=n_ref, n_warmup=1000,
                                         random_state=100, progress=False).fit(X, y)
    ref_s = time.perf_counter() - t
    r_draws = ref.posterior_draws_
    r_mean, r_sd = r_draws.mean((0, 1)), r_draws.reshape(-1, r_draws.shape[-1]).std(0)
    r_se = diag.mcse_mean(r_draws)
    print(f"NUTS reference: {n_ref} draws x 4 chains in {ref_s:.0f} s, min ESS "
          f"{float(np.min(ref.trace_.summary()['ess_bulk'])):.0f}", flush=True)
    rows = []
    for seed, eps in zip(seeds, epsilons):
        sampler = AusterityMH(epsilon=eps) if n_steps is None else \
            AusterityMH(epsilon=eps, n_steps=n_steps)
        t = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            est = BayesianLogisticRegression(sampler=sampler, n_samples=n, n_warmup=n,
                                             random_state=seed, progress=False).fit(X, y)
        elapsed = time.perf_counter() - t
        d = est.posterior_draws_
        gap = np.abs(d.mean((0, 1)) - r_mean)
        se = np.hypot(diag.mcse_mean(d), r_se)
        row = {"seed": seed, "epsilon": eps, "fit_s": elapsed,
               "min_ess_bulk": float(np.min(est.trace_.summary()["ess_bulk"])),
               "max_mean_error_sd": float(np.max(gap / r_sd)),
               "max_z": float(np.max(gap / se)),
               "resolution_sd": float(np.max(2 * se / r_sd)),
               "max_sd_ratio": float(np.max(np.abs(d.reshape(-1, d.shape[-1]).std(0) / r_sd
                                                   - 1))),
               "data_fraction": float(np.mean(est.diagnostics_["data_fraction_per_iteration"]))}
        rows.append(row)
        print(f"  seed {seed}, epsilon {eps}: {elapsed:.0f} s, min ESS {row['min_ess_bulk']:.0f},"
              f" max |mean - NUTS| {row['max_mean_error_sd']:.3f} sd (z {row['max_z']:.2f}; "
              f"resolvable {row['resolution_sd']:.3f} sd), max |sd ratio - 1| "
              f"{row['max_sd_ratio']:.3f}", flush=True)
    return {"reference_draws": n_ref, "reference_s": ref_s, "draws": n, "n_steps": n_steps,
            "rows": rows}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sets", nargs="+", default=["higgs", "synthetic"],
                    choices=["higgs", "synthetic"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--quick", action="store_true", help="small data, short chains")
    ap.add_argument("--draws", type=int, default=None,
                    help="n_samples = n_warmup of every fit (default 1000, --quick 200)")
    ap.add_argument("--n-steps", type=int, default=None,
                    help="AusterityMH's MH steps per iteration (default: its own rule)")
    ap.add_argument("--verify", action="store_true",
                    help="run the chosen epsilons long against long NUTS (no search)")
    ap.add_argument("--epsilon", type=float, default=None,
                    help="--verify: this epsilon for every seed (default: the search's)")
    ap.add_argument("--reference-draws", type=int, default=4000)
    ap.add_argument("--out", default=os.path.join(RESULTS, "epsilon_search.json"))
    args = ap.parse_args(argv)
    n = args.draws or (200 if args.quick else 1000)
    result = {}
    if os.path.exists(args.out) and not args.quick:
        with open(args.out) as f:
            result = json.load(f)
    for name in args.sets:
        X, y = load(name, args.quick)
        if args.verify:
            chosen = {r["seed"]: r["chosen_epsilon"] for r in result.get(name, {})
                      .get("runs", [])}
            eps = [args.epsilon if args.epsilon is not None else chosen[s] for s in args.seeds]
            out = os.path.join(os.path.dirname(args.out), "epsilon_verify.json")
            done = {}
            if os.path.exists(out):
                with open(out) as f:
                    done = json.load(f)
            done[name] = verify(X, y, args.seeds, eps, n, args.reference_draws, args.n_steps)
            with open(out, "w") as f:
                json.dump(stamp(done), f, indent=1)
            print(f"wrote {out}")
            continue
        scorer = SamplerScorer(tolerance=TOLERANCE, reference_samples=n)
        t = time.perf_counter()
        runs = []
        for seed in args.seeds:
            run = search(X, y, seed, scorer, n, args.n_steps)
            runs.append(run)
            print(f"\n{name} ({X.shape[0]:,} x {X.shape[1]}), seed {seed}: chosen epsilon "
                  f"{run['chosen_epsilon']} (search {run['search_s']:.0f} s)")
            print("  epsilon  bias(sd)  vs NUTS(sd)  vs exact MH(sd)  max z vs MH  "
                  "sd ratio-1  passes/ESS  data/iter  fit s")
            for r in run["candidates"]:
                print(f"  {r['epsilon']:7}  {r['bias']:8.3f}"
                      f"  {r['max_mean_error_sd_vs_nuts']:11.3f}"
                      f"  {r['max_mean_error_sd_vs_exact_mh']:15.3f}"
                      f"  {r['max_z_vs_exact_mh']:11.2f}  {r['max_sd_ratio_vs_nuts']:10.3f}"
                      f"  {r['passes_per_ess']:10.3g}  {r['data_fraction']:9.3f}"
                      f"  {r['fit_time_s']:5.1f}")
            c = {r["epsilon"]: r for r in run["candidates"]}
            best = c[run["chosen_epsilon"]]
            print(f"  chosen: {c[0.0]['passes_per_ess'] / best['passes_per_ess']:.1f}x fewer "
                  f"passes per effective draw than epsilon = 0, "
                  f"{c[0.0]['fit_time_s'] / best['fit_time_s']:.1f}x less fit time", flush=True)
        result[name] = {"n": int(X.shape[0]), "d": int(X.shape[1]), "epsilons": EPSILONS,
                        "tolerance": TOLERANCE, "draws": n, "n_steps": args.n_steps,
                        "total_s": time.perf_counter() - t, "runs": runs}
        if not args.quick:       # written after each data set
            with open(args.out, "w") as f:
                json.dump(stamp(result), f, indent=1)
            print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
