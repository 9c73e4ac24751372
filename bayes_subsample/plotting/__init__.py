"""Plots of MCMC output: traces, marginal densities, autocorrelations, ROC bands.

matplotlib is an optional dependency (``pip install matplotlib`` or
``pip install 'bayes_subsample[plot]'``); it is imported only when a plot is
drawn, so ``import bayes_subsample.plotting`` and :func:`roc_band` work
without it.

Every function accepts, as the posterior to plot,

* a fitted estimator (``BayesianLogisticRegression`` and friends),
* a :class:`~bayes_subsample.Trace` (returned by :func:`bayes_subsample.sample`),
* an array of draws: ``(n_chains, n_draws, n_params)``, or ``(n_draws, n_params)``
  for pooled draws such as the output of ``sample_posterior`` (one chain), or
  ``(n_draws,)`` for a single parameter.

Draws of signed samplers (``sampler="hmc_ecs_signed"``) carry a sign; density,
quantile and ROC plots use the draws with a positive sign, as
``sample_posterior()`` does (exact when every sign is positive, which is the
usual case; see the estimator's ``tau_hat_``). Trace and autocorrelation plots
show every draw.

Multi-panel functions return a NumPy array of matplotlib ``Axes`` (the figure
is ``axes.flat[0].figure``); :func:`plot_roc` returns one ``Axes``.
"""
from ._draws import plot_autocorrelation, plot_marginals, plot_trace
from ._roc import plot_roc, roc_band, roc_ovr

__all__ = ["plot_autocorrelation", "plot_marginals", "plot_roc", "plot_trace", "roc_band",
           "roc_ovr"]
