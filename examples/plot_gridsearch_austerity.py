"""
Choosing the austerity tolerance epsilon with GridSearchCV
==========================================================

Austerity MH (Korattikara, Chen & Welling) decides each Metropolis-Hastings
step from a sequential t-test on mini-batches: the p-value tolerance
``epsilon`` trades the fraction of data examined per step against the error
of each decision (``epsilon = 0`` is exact MH). Because the sampler is a
scikit-learn style parameter object, ``GridSearchCV`` reaches it as
``sampler__epsilon``.

A held-out score cannot choose ``epsilon``: it changes how closely the chain
follows the posterior, not the model, and the posterior predictive's ROC AUC
is the same to four decimals for every setting. What decides is the
sampler's bias against its cost: ``SamplerScorer`` compares each fit with an
exact reference fit of the same model on the same data (NUTS, made once) and
scores a candidate by minus its cost (full data passes per effective draw)
when its posterior means are within ``tolerance`` posterior sds of the
reference's, and below every such candidate otherwise. ``cv=WholeData()``
fits and scores each candidate on all rows. The search returns the cheapest
``epsilon`` within the accuracy.

Here: a Bayesian logistic regression on the covertype data (Lodgepole Pine vs
the rest, the 10 quantitative attributes, standardised). Run as a script; set
``BAYES_SUBSAMPLE_QUICK=1`` for a version that finishes in under 30 seconds.
"""

# %%
# Data
# ----
# The 20,000 real covertype rows shipped with the package
# (``load_covtype_sample``); if the package's loaders are missing, the UCI file
# is read from ``$BAYES_SUBSAMPLE_DATA/covtype/covtype.data.gz``.
import argparse
import os
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import GridSearchCV

from bayes_subsample.linear_model import BayesianLogisticRegression
from bayes_subsample.model_selection import SamplerScorer, WholeData
from bayes_subsample.samplers.austerity import AusterityMH

parser = argparse.ArgumentParser(description="GridSearchCV over austerity epsilon")
parser.add_argument("--out", default="plot_gridsearch_austerity.png", help="output PNG file")
args, _ = parser.parse_known_args()  # tolerate foreign arguments (sphinx-gallery)

QUICK = os.environ.get("BAYES_SUBSAMPLE_QUICK", "0") not in ("", "0")


def load_data():
    try:
        from bayes_subsample.datasets import load_covtype_sample
        return load_covtype_sample(return_X_y=True)
    except ImportError:
        home = os.environ.get("BAYES_SUBSAMPLE_DATA", "/work/shared/data")
        raw = np.loadtxt(os.path.join(home, "covtype", "covtype.data.gz"), delimiter=",",
                         max_rows=20000, dtype=np.int64)
        return raw[:, :54].astype(np.float64), (raw[:, 54] == 2).astype(np.float64)


X, y = load_data()
X = np.asarray(X[:, :10], dtype=np.float64)
X = (X - X.mean(axis=0)) / X.std(axis=0)
if QUICK:
    X, y = X[:6000], y[:6000]
print(f"{X.shape[0]} rows, {X.shape[1]} attributes")

# %%
# Grid search over epsilon
# ------------------------
# The scorer keeps the reference fit it made and reuses it for every candidate;
# ``evaluate`` gives the figures behind each score.
EPSILONS = [0.0, 0.01, 0.05, 0.1, 0.2]
TOLERANCE = 0.1

clf = BayesianLogisticRegression(
    sampler=AusterityMH(batch_size=250 if QUICK else 500),
    n_samples=150 if QUICK else 1000, n_warmup=150 if QUICK else 500,
    n_chains=2, random_state=0)
scorer = SamplerScorer(tolerance=TOLERANCE, reference_samples=150 if QUICK else 1000)
grid = GridSearchCV(clf, {"sampler__epsilon": EPSILONS}, scoring=scorer, cv=WholeData(),
                    refit=False)
t0 = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)  # short chains in quick mode
    grid.fit(X, y)
    rows = []
    for eps in EPSILONS:
        est = clf.set_params(sampler__epsilon=eps).fit(X, y)
        r = scorer.evaluate(est, X, y)
        r["data_fraction"] = float(np.mean(est.diagnostics_["data_fraction_per_iteration"]))
        rows.append(r)
elapsed = time.perf_counter() - t0
print(f"grid search and the figures behind it: {elapsed:.1f} s")
print("| epsilon | bias (sd) | largest mean error (sd) | passes per effective draw | "
      "data per step |")
print("|---|---|---|---|---|")
for eps, r in zip(EPSILONS, rows):
    print(f"| {eps} | {r['bias']:.3f} | {r['max_mean_error_sd']:.3f} | {r['cost']:.3g} | "
          f"{r['data_fraction']:.3f} |")
best = grid.best_params_["sampler__epsilon"]
print(f"chosen epsilon {best}: the cheapest within {TOLERANCE} posterior sds of NUTS "
      f"(epsilon = 0 costs {rows[0]['cost'] / rows[EPSILONS.index(best)]['cost']:.1f}x as "
      "much per effective draw)")

# %%
# Plot
# ----
# Left: each setting's bias (net of Monte Carlo error) and the tolerance;
# right: its cost. With the default control-variate proxy (``proxy="auto"``)
# the first batch decides nearly every step at any epsilon > 0.
try:
    import matplotlib

    if __name__ == "__main__":
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:  # pragma: no cover - optional dependency
    plt = None
    print("matplotlib is not installed (pip install matplotlib): no figure written")

if plt is not None:
    fig, ax = plt.subplots(1, 2, figsize=(9, 3.5))
    ax[0].plot(EPSILONS, [r["max_mean_error_sd"] for r in rows], marker="o",
               label="largest mean error")
    ax[0].plot(EPSILONS, [r["bias"] for r in rows], marker="s", label="bias net of MC error")
    ax[0].axhline(TOLERANCE, color="k", ls="--", lw=1, label="tolerance")
    ax[0].set_xlabel("epsilon")
    ax[0].set_ylabel("posterior sds from NUTS")
    ax[0].legend(fontsize=8)
    ax[1].plot(EPSILONS, [r["cost"] for r in rows], marker="o", color="C1")
    ax[1].axvline(best, color="k", ls=":", lw=1)
    ax[1].set_yscale("log")
    ax[1].set_xlabel("epsilon (dotted: chosen)")
    ax[1].set_ylabel("data passes per effective draw")
    fig.suptitle("Austerity MH on covertype: GridSearchCV over epsilon with SamplerScorer")
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    print(f"wrote {args.out}")
