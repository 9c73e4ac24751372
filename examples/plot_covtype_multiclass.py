"""
Seven forest cover types: multinomial logistic regression with HMC-ECS
=======================================================================

With more than two classes in ``y``, :class:`~bayes_subsample.BayesianLogisticRegression`
fits the multinomial (softmax) model: one coefficient vector and intercept per
class, ``P(y = k | x) = softmax(eta)_k`` with ``eta_k = x^T coef_k +
intercept_k``. Only differences between classes are identified by the data;
the Gaussian prior on every coefficient makes the posterior proper, and the
predictions do not depend on the part the data leave to the prior.

This example fits the full UCI Covertype data: 581,012 forest cells, the seven
cover types, the 10 quantitative attributes (standardised with the training
rows' statistics) and an intercept: 7 x 11 = 77 parameters, sampled with HMC
with energy-conserving subsampling (``sampler="hmc_ecs"``) on 80% of the rows.
(With the 44 wilderness-area and soil-type indicators too, the coefficients of
rare indicators are weakly identified and the Taylor control variates at the
posterior mode fit their rows poorly. HMC-ECS then runs a stratified warmup:
theta* moves to the mean of its draws and the rows with large residuals are
summed exactly. It still subsamples, but the fit takes minutes instead of
seconds; see the user guide, "Multiclass classification".) It compares the
held-out accuracy of the posterior-predictive classifier (``predict``, the
argmax of ``E[softmax(eta)]``) with scikit-learn's ``LogisticRegression`` at
the same Gaussian penalty (``C = prior_scale^2``: its fit is the posterior
mode), and draws the one-vs-rest ROC curves of every class with their AUC and
the macro average (:func:`bayes_subsample.plotting.plot_roc`), and the
posterior of each class's AUC.

The data file ``covtype.data.gz`` (UCI) is read from
``$BAYES_SUBSAMPLE_DATA/covtype/`` (see :func:`bayes_subsample.datasets.load_covtype`).
Run as a script: ``python examples/plot_covtype_multiclass.py``. The figure
``plot_covtype_multiclass.png`` goes to the current folder or to
``$BAYES_SUBSAMPLE_EXAMPLES_OUT``. ``BAYES_SUBSAMPLE_QUICK=1`` fits 2,000 of the
20,000 rows shipped with the package (no download) with short chains.
"""

# %%
# Data: 7 classes, 10 quantitative attributes
# -------------------------------------------
import os
import time
import warnings

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split

from bayes_subsample import BayesianLogisticRegression
from bayes_subsample.datasets import COVTYPE_CLASS_NAMES, load_covtype, load_covtype_sample
from bayes_subsample.plotting import plot_roc

QUICK = os.environ.get("BAYES_SUBSAMPLE_QUICK", "0") not in ("", "0")
OUT_DIR = os.environ.get("BAYES_SUBSAMPLE_EXAMPLES_OUT", ".")
N_SAMPLES, N_WARMUP, N_CHAINS = (100, 100, 2) if QUICK else (500, 500, 2)

if QUICK:
    X, y = load_covtype_sample(binary=False, return_X_y=True)
    X, y = X[::10], y[::10]      # 2,000 rows spread over the file (it is sorted by area)
else:
    X, y = load_covtype(binary=False, return_X_y=True)   # int64 cover types 1..7
X = np.ascontiguousarray(X[:, :10], dtype=np.float64)    # the quantitative attributes
# the labels as names: the estimator takes any labels (classes_ sorts them)
y = np.array(COVTYPE_CLASS_NAMES)[y - 1]
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, stratify=y,
                                                    random_state=0)
# standardise with the training rows' statistics
mean, scale = X_train[:, :10].mean(axis=0), X_train[:, :10].std(axis=0)
X_train[:, :10] = (X_train[:, :10] - mean) / scale
X_test[:, :10] = (X_test[:, :10] - mean) / scale
print(f"train {X_train.shape}, test {X_test.shape}; class shares "
      + ", ".join(f"{c} {np.mean(y_train == c):.3f}" for c in np.unique(y)))

# %%
# The posterior with HMC-ECS
# --------------------------
# The same estimator as for two classes: the number of classes in ``y``
# chooses the model. ``coef_`` is (7, 10), ``intercept_`` (7,), and the draws
# hold one block of 11 parameters per class.
t0 = time.perf_counter()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # short quick-mode chains trigger R-hat warnings
    clf = BayesianLogisticRegression(sampler="hmc_ecs", n_samples=N_SAMPLES, n_warmup=N_WARMUP,
                                     n_chains=N_CHAINS, n_jobs=2, random_state=0)
    clf.fit(X_train, y_train)
t_bayes = time.perf_counter() - t0
d = clf.diagnostics_
print(f"HMC-ECS: {t_bayes:.1f} s, coef_ {clf.coef_.shape}, draws {clf.posterior_draws_.shape}, "
      f"max R-hat {np.nanmax(d['r_hat']):.3f}, data per iteration "
      f"{100 * np.mean(d['data_fraction_per_iteration']):.1f}%")

# %%
# Held-out accuracy against scikit-learn
# --------------------------------------
# ``LogisticRegression(C=s**2)`` minimises the negative log posterior with the
# prior ``N(0, s^2)`` on every coefficient (but leaves the intercepts
# unpenalised): its posterior mode. The default priors give each standardised
# column about the same scale (2.5 / its sd on the training rows), so one ``C``
# nearly matches them.
t0 = time.perf_counter()
sk = LogisticRegression(C=float(np.mean(clf.prior_scale_ ** 2)), max_iter=2000).fit(
    X_train, y_train)
t_sk = time.perf_counter() - t0
acc, acc_sk = clf.score(X_test, y_test), sk.score(X_test, y_test)
agree = np.mean(clf.predict(X_test) == sk.predict(X_test))
print(f"held-out accuracy: posterior predictive {acc:.4f}, scikit-learn {acc_sk:.4f} "
      f"({t_sk:.1f} s); the two agree on {100 * agree:.1f}% of the held-out rows")

# %%
# One-vs-rest ROC curves and the posterior of each class's AUC
# -------------------------------------------------------------
# Class ``k``'s curve separates it from the six others, scoring rows by the
# posterior-predictive probability of ``k`` (the column of ``predict_proba``);
# the macro average weighs every class equally, its band covers the central
# 90% of the macro-averaged curves of single posterior draws.
import matplotlib.pyplot as plt
from sklearn.metrics import roc_auc_score

fig, (ax_roc, ax_auc) = plt.subplots(1, 2, figsize=(12, 5), layout="constrained",
                                     gridspec_kw={"width_ratios": [1.1, 1]})
plot_roc(clf, X_test, y_test, ax=ax_roc, max_draws=100)
res = ax_roc.roc_bands_[-1]              # the roc_ovr result behind the curves
ax_roc.set_title(f"one-vs-rest ROC, {X_test.shape[0]:,} held-out cells")

present = ~np.isnan(res.auc)
lo, hi = np.nanquantile(res.auc_draws[:, present], [0.05, 0.95], axis=0)
pos = np.arange(present.sum())
proba_sk = sk.predict_proba(X_test)
auc_sk = [np.nan] * len(res.classes)
for k, c in enumerate(res.classes):
    if present[k]:
        auc_sk[k] = roc_auc_score(y_test == c, proba_sk[:, k])
# the predictive probabilities average the draws: their AUC can exceed single draws'
ax_auc.hlines(pos, lo, hi, color="C0", lw=3, alpha=0.5,
              label="single posterior draws (central 90%)")
ax_auc.plot(res.auc[present], pos, "o", color="C0", label="posterior predictive")
ax_auc.plot(np.array(auc_sk)[present], pos, "x", color="C3", ms=8,
            label="scikit-learn (posterior mode)")
ax_auc.set_yticks(pos, res.classes[present])
ax_auc.invert_yaxis()
ax_auc.set_xlabel("one-vs-rest AUC on the held-out cells")
ax_auc.set_title(f"held-out accuracy: {acc:.3f} (scikit-learn {acc_sk:.3f})")
ax_auc.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=3)

out = os.path.join(OUT_DIR, "plot_covtype_multiclass.png")
fig.savefig(out, dpi=110)
print(f"wrote {out}")

# %%
# A linear model of the 10 quantitative attributes separates the cover types
# only in part. Measured on the full data (this script): the posterior
# predictive and scikit-learn's fit both classify 69.9% of the held-out cells
# correctly and agree on every one of them; the one-vs-rest AUCs range from
# 0.83 for Lodgepole Pine and 0.84 for Spruce/Fir, the two most common types,
# which overlap, to 0.99 for Cottonwood/Willow (macro average 0.92). The
# posterior adds how uncertain each class's curve is, most for the rare
# classes.
