"""Priors on the data's scale (the default ``prior_scale="auto"``,
``intercept_prior_scale="auto"``) against the fixed ``N(0, 10^2)`` of version 0.2.

Sections:

- ``diabetes``: scikit-learn's load_diabetes through ``make_pipeline(StandardScaler(),
  BayesianLinearRegression())``: the intercept's distance from the mean of ``y`` in
  posterior sds (all 442 rows), and the 5-fold CV R² (``cv=5``, and three shuffled
  ``KFold`` splits) against ``BayesianRidge``'s, fold by fold, for each prior and
  seed.
- ``covtype``: covtype with all 54 attributes, class 2 against the rest (the ten
  quantitative columns standardised, the indicators 0/1; the 80% training split,
  464,809 rows): ``BayesianLogisticRegression()`` with each prior, fit time, min
  bulk ESS, max R-hat, held-out ROC AUC, per seed.
- ``multiclass``: the same 54 attributes and 7 classes on ``--multiclass-rows``
  training rows (one chain of 1000 + 1000): fit time, min bulk ESS of the centred
  draws, accuracy, the step size and leapfrog steps HMC-ECS tuned.

- ``digits``: scikit-learn's load_digits (1,797 x 64 pixel counts 0-16, 10 classes;
  a stratified 75/25 split), ``BayesianLogisticRegression()`` at its defaults (4
  chains) on the raw pixels and through ``make_pipeline(StandardScaler(), ...)``:
  fit time against scikit-learn's ``LogisticRegression(max_iter=5000)`` measured
  in the same run, min bulk ESS, max R-hat, held-out accuracy, per seed (default
  priors only: the fixed prior's fit took 67 minutes in the report that asked
  for this figure).

Results go to ``results/priors.json``.
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
from _provenance import stamp, started  # noqa: E402
from _hard_problems import RESULTS, covtype_split  # noqa: E402

from bayes_subsample import BayesianLinearRegression, BayesianLogisticRegression  # noqa: E402
from bayes_subsample import diagnostics as diag  # noqa: E402

PRIORS = {"auto (default)": {},
          "fixed 10 (0.2)": {"prior_scale": 10.0, "intercept_prior_scale": 10.0}}


def _quiet(call, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return call(*args)


def diabetes(seeds):
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import BayesianRidge
    from sklearn.model_selection import KFold, cross_val_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler
    X, y = load_diabetes(return_X_y=True)
    splits = {"cv=5": 5, **{f"KFold(shuffle, {s})": KFold(5, shuffle=True, random_state=s)
                            for s in (0, 1, 2)}}
    ridge = {name: cross_val_score(make_pipeline(StandardScaler(), BayesianRidge()), X, y,
                                   cv=cv) for name, cv in splits.items()}
    rows = []
    for label, kw in PRIORS.items():
        for seed in seeds:
            pipe = _quiet(make_pipeline(StandardScaler(), BayesianLinearRegression(
                random_state=seed, **kw)).fit, X, y)
            icpt = pipe[-1].posterior_draws_[..., X.shape[1]].ravel()
            row = {"prior": label, "seed": seed,
                   "intercept_z": float((icpt.mean() - y.mean()) / icpt.std())}
            for name, cv in splits.items():
                pipe = make_pipeline(StandardScaler(),
                                     BayesianLinearRegression(random_state=seed, **kw))
                r2 = _quiet(lambda: cross_val_score(pipe, X, y, cv=cv))
                row[name] = (r2 - ridge[name]).tolist()
            rows.append(row)
            worst = {k: min(v) for k, v in row.items() if k.startswith(("cv", "KFold"))}
            print(f"diabetes {label:15s} seed {seed}: intercept {row['intercept_z']:+.3f} sd "
                  f"from mean(y); worst fold R2 - BayesianRidge: " +
                  ", ".join(f"{k} {v:+.4f}" for k, v in worst.items()), flush=True)
    return {"rows": rows, "bayesian_ridge": {k: v.tolist() for k, v in ridge.items()}}


def covtype(seeds):
    from sklearn.metrics import roc_auc_score
    Xtr, Xte, ytr, yte = covtype_split(binary=True)
    rows = []
    for seed in seeds:
        for label, kw in PRIORS.items():
            t = time.perf_counter()
            est = _quiet(BayesianLogisticRegression(random_state=seed, **kw).fit, Xtr, ytr)
            elapsed = time.perf_counter() - t
            d = est.posterior_draws_
            row = {"prior": label, "seed": seed, "time_s": elapsed,
                   "min_ess_bulk": float(diag.ess_bulk(d).min()),
                   "max_rhat": float(diag.rhat(d).max()),
                   "auc": float(roc_auc_score(yte, est.predict_proba(Xte)[:, 1])),
                   "prior_scale_range": [float(est.prior_scale_.min()),
                                         float(est.prior_scale_.max())],
                   "load_average": list(os.getloadavg())}
            rows.append(row)
            print(f"covtype binary {label:15s} seed {seed}: {elapsed:6.1f} s, min ESS "
                  f"{row['min_ess_bulk']:.0f}, max R-hat {row['max_rhat']:.4f}, AUC "
                  f"{row['auc']:.4f}, prior scales {row['prior_scale_range'][0]:.3g}.."
                  f"{row['prior_scale_range'][1]:.3g}", flush=True)
    return {"n_train": int(len(ytr)), "rows": rows}


def multiclass(seeds, n_rows):
    Xtr, Xte, ytr, yte = covtype_split(binary=False)
    if n_rows < len(ytr):
        keep = np.sort(np.random.default_rng(0).choice(len(ytr), n_rows, replace=False))
        Xtr, ytr = Xtr[keep], ytr[keep]
    rows = []
    for seed in seeds:
        for label, kw in PRIORS.items():
            t = time.perf_counter()
            est = _quiet(BayesianLogisticRegression(random_state=seed, n_chains=1,
                                                    progress=False, **kw).fit, Xtr, ytr)
            elapsed = time.perf_counter() - t
            tun = est.diagnostics_["tuning"][0]
            ess = est.trace_.summary()["ess_bulk"]
            row = {"prior": label, "seed": seed, "time_s": elapsed,
                   "warmup_s": float(np.sum(est.trace_.wall_time["warmup"])),
                   "min_ess_bulk": float(np.min(ess)),
                   "accuracy": float(np.mean(est.predict(Xte) == yte)),
                   "step_size": tun.get("step_size"), "n_leapfrog": tun.get("n_leapfrog"),
                   "load_average": list(os.getloadavg())}
            rows.append(row)
            print(f"covtype 7 classes, {len(ytr):,} rows, {label:15s} seed {seed}: "
                  f"{elapsed:6.1f} s (warmup {row['warmup_s']:.0f}), min ESS "
                  f"{row['min_ess_bulk']:.0f} (one chain), accuracy {row['accuracy']:.4f}, "
                  f"step {row['step_size']}, leapfrog {row['n_leapfrog']}", flush=True)
    return {"n_train": int(len(ytr)), "rows": rows}


def digits(seeds):
    from sklearn.datasets import load_digits
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split(X, y, test_size=0.25, stratify=y, random_state=0)
    rows = []
    for seed in seeds:
        for form in ("raw", "StandardScaler"):
            def make(est):
                return make_pipeline(StandardScaler(), est) if form != "raw" else est
            t = time.perf_counter()
            sk = _quiet(make(LogisticRegression(max_iter=5000)).fit, Xtr, ytr)
            sk_time = time.perf_counter() - t
            t = time.perf_counter()
            fit = _quiet(make(BayesianLogisticRegression(random_state=seed,
                                                         progress=False)).fit, Xtr, ytr)
            elapsed = time.perf_counter() - t
            est = fit[-1] if form != "raw" else fit
            summ = est.trace_.summary()
            row = {"form": form, "seed": seed, "time_s": elapsed, "sklearn_time_s": sk_time,
                   "ratio": elapsed / sk_time, "min_ess_bulk": float(np.min(summ["ess_bulk"])),
                   "max_rhat": float(np.nanmax(summ["r_hat"])),
                   "accuracy": float(np.mean(fit.predict(Xte) == yte)),
                   "sklearn_accuracy": float(np.mean(sk.predict(Xte) == yte)),
                   "engine": est.diagnostics_.get("choice", {}).get("engine"),
                   "load_average": list(os.getloadavg())}
            rows.append(row)
            print(f"digits {form:14s} seed {seed}: {elapsed:6.1f} s ({row['ratio']:.0f}x "
                  f"scikit-learn's {sk_time:.2f} s), min ESS {row['min_ess_bulk']:.0f}, max "
                  f"R-hat {row['max_rhat']:.4f}, accuracy {row['accuracy']:.4f} (scikit-learn "
                  f"{row['sklearn_accuracy']:.4f}), engine {row['engine']}", flush=True)
    return {"n_train": int(len(ytr)), "rows": rows}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sections", nargs="+", default=["diabetes", "covtype"],
                    choices=["diabetes", "covtype", "multiclass", "digits"])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--multiclass-rows", type=int, default=50_000)
    ap.add_argument("--out", default=os.path.join(RESULTS, "priors.json"))
    args = ap.parse_args(argv)
    result = {}
    if os.path.exists(args.out):
        with open(args.out) as f:
            result = json.load(f)
    for name in args.sections:
        if name == "diabetes":
            result[name] = diabetes(args.seeds)
        elif name == "covtype":
            result[name] = covtype(args.seeds)
        elif name == "digits":
            result[name] = digits(args.seeds)
        else:
            result[name] = multiclass(args.seeds, args.multiclass_rows)
        # sections are merged into the file: each keeps the run that made it
        result[name]["provenance"] = dict(started(), load_average_after=list(os.getloadavg()))
    with open(args.out, "w") as f:
        json.dump(stamp(result), f, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
