"""
Posterior marginals of the subsampling samplers against full HMC
================================================================

Every sampler in :data:`bayes_subsample.samplers.SAMPLERS` targets the same
posterior of a Bayesian logistic regression, but they pay for their speed in
different ways:

* ``hmc_ecs`` (perturbed HMC-ECS) samples a posterior perturbed by
  ``O(1 / (n m^2))``; ``hmc_ecs_signed`` is exact after the sign correction;
* ``austerity`` and ``confidence`` are Metropolis-Hastings samplers whose
  accept/reject test reads a growing subsample; their error per step is
  controlled by ``epsilon`` and ``delta``;
* ``sgld``, ``sghmc`` and ``ewsg`` use stochastic gradients without an MH
  correction: their bias grows with the step size, and random-walk-like mixing
  needs many cheap iterations.

This example fits each registered sampler to the 7,000 real HIGGS events shipped
with the package and draws its marginal densities of eight coefficients against a
long full-data HMC run (:func:`bayes_subsample.plotting.plot_marginals`). It also
prints the largest error of the posterior means and standard deviations, in units
of the reference posterior standard deviation.

Run as a script: ``python examples/plot_posterior_marginals.py``. The figure
``plot_posterior_marginals.png`` goes to the current folder or to
``$BAYES_SUBSAMPLE_EXAMPLES_OUT``; ``BAYES_SUBSAMPLE_QUICK=1`` runs short chains.
"""

# %%
# Data and the reference posterior
# --------------------------------
import os
import time
import warnings

import numpy as np

from bayes_subsample import BayesianLogisticRegression
from bayes_subsample.datasets import HIGGS_FEATURE_NAMES, load_higgs_sample
from bayes_subsample.plotting import plot_marginals
from bayes_subsample.samplers import SAMPLERS

QUICK = os.environ.get("BAYES_SUBSAMPLE_QUICK", "0") not in ("", "0")
OUT_DIR = os.environ.get("BAYES_SUBSAMPLE_EXAMPLES_OUT", ".")
SCALE = 0.2 if QUICK else 1.0  # quick mode: a fifth of the iterations

X, y = load_higgs_sample(standardize=True, return_X_y=True)


def fit(sampler, n_samples, n_warmup):
    clf = BayesianLogisticRegression(sampler=sampler, n_samples=max(100, int(SCALE * n_samples)),
                                     n_warmup=max(100, int(SCALE * n_warmup)), n_chains=2,
                                     n_jobs=2, random_state=1)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence warnings are part of the story here
        clf.fit(X, y)
    return clf, time.perf_counter() - t0


reference, seconds = fit("hmc", 2000, 500)
print(f"reference: full HMC, {reference.posterior_draws_.shape[1]} draws x 2 chains, "
      f"{seconds:.1f} s")

# %%
# The samplers
# ------------
# Every sampler at its defaults, 1000 draws after 500 warmup iterations
# (signed HMC-ECS, whose draws carry signs, gets twice as many). Each
# retained iteration of the random-walk samplers (austerity, confidence) makes
# one transition per parameter, and each of the SG samplers makes ten steps,
# so the draws of all of them are comparable. The list is filtered by what is
# registered in this installation.
settings = {  # name: (n_samples, n_warmup)
    "hmc_ecs": (1000, 500),
    "hmc_ecs_signed": (2000, 500),
    "austerity": (1000, 500),
    "confidence": (1000, 500),
    "sgld": (1000, 500),
    "sghmc": (1000, 500),
    "ewsg": (1000, 500),
}
fits = {}
ref_draws = reference.sample_posterior()
ref_mean, ref_sd = ref_draws.mean(axis=0), ref_draws.std(axis=0)
print(f"{'sampler':15s} {'time s':>7s} {'data/draw':>9s} {'mean err':>8s} {'sd ratio':>14s}")
for name, (n_samples, n_warmup) in settings.items():
    if name not in SAMPLERS:
        print(f"{name:15s} (not registered in this installation)")
        continue
    clf, seconds = fit(name, n_samples, n_warmup)
    fits[name] = clf
    draws = clf.sample_posterior()
    err = np.max(np.abs(draws.mean(axis=0) - ref_mean) / ref_sd)
    ratio = draws.std(axis=0) / ref_sd
    frac = np.mean(clf.diagnostics_["data_fraction_per_iteration"])
    print(f"{name:15s} {seconds:7.1f} {100 * frac:8.1f}% {err:8.2f} "
          f"{ratio.min():6.2f}-{ratio.max():.2f}")

# %%
# Marginal densities
# ------------------
# Eight parameters: four low-level and three high-level (invariant-mass)
# features, and the intercept.
import matplotlib.pyplot as plt

params = [0, 3, 5, 21, 24, 25, 27, 28]
axes = plot_marginals(fits, reference=reference, params=params, ncols=3,
                      reference_label="full HMC (reference)")
names = HIGGS_FEATURE_NAMES + ["intercept"]
for ax, j in zip(axes.flat, params):
    ax.set_title(names[j], fontsize="medium")
    # the reference is the first line: clip much taller spikes of stuck chains
    ax.set_ylim(0, 2.0 * ax.lines[0].get_ydata().max())
fig = axes.flat[0].figure
fig.set_size_inches(10, 8)
fig.suptitle("HIGGS sample: posterior marginals of each sampler against full HMC")
out = os.path.join(OUT_DIR, "plot_posterior_marginals.png")
fig.savefig(out, dpi=100)
print(f"wrote {out}")

# %%
# HMC-ECS (both variants) lies on top of the reference. The approximate MH
# samplers are unbiased up to their per-step error but mix like random-walk
# Metropolis in 29 dimensions, so their densities are noisy for the same wall
# time; the SG-MCMC samplers, with no accept/reject step, show both slow mixing
# and a step-size bias. See the user guide's "Choosing a sampler".
plt.close(fig)
