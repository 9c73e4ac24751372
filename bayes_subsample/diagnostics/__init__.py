"""MCMC diagnostics: autocorrelation, inefficiency factors, ESS, R-hat, MCSE and cost.

Two families of tools live here (see :ref:`algo-diagnostics`):

* **Single chain**: :func:`autocorrelation`, :func:`integrated_autocorr_time`
  (the inefficiency factor IF, by Geyer's initial monotone sequence or by a
  CODA-style AR(p) spectral estimate) and :func:`ess_single` ``= R / IF``.
* **Several chains** (Vehtari, Gelman, Simpson, Carpenter and Buerkner, 2021):
  :func:`rhat`, :func:`ess_bulk`, :func:`ess_tail`, :func:`ess_mean`,
  :func:`ess_quantile`, :func:`mcse_mean`, :func:`mcse_quantile` and the table
  :func:`summary`.  These follow the conventions of ArviZ's ``az.ess``,
  ``az.rhat(method="rank")`` and ``az.mcse`` and agree with them to rounding
  error on the same draws.

The cost helpers :func:`computing_time`, :func:`relative_computing_time` and
:func:`rct_summary` turn inefficiency factors and density-evaluation counts into
the computing time CT and relative computing time RCT used to compare samplers.

Conventions
-----------
Multi-chain functions take ``draws`` of shape ``(n_chains, n_draws)`` (one
scalar quantity; a 1-D array is read as a single chain) or
``(n_chains, n_draws, *param_shape)``; they return a Python ``float`` in the
first case and an array of shape ``param_shape`` in the second.

Edge cases (chosen to match ArviZ where ArviZ defines a value):

* Non-finite draws (NaN or inf) raise ``ValueError``.
* Fewer than 4 draws per chain raise ``ValueError``.
* :func:`rhat` with a single chain returns ``nan`` (as ArviZ).
* A constant quantity (max - min below ``np.finfo(float).resolution``) has
  ESS equal to the total number of split draws, R-hat ``nan`` and MCSE 0, as
  ArviZ.  The single-chain :func:`integrated_autocorr_time` and
  :func:`ess_single` return ``nan`` for a constant chain instead: the
  autocorrelation is 0/0, and a constant chain from a sampler is usually a
  stuck chain, for which "independent draws" would be the wrong message.
"""

from ._chains import (ess_bulk, ess_mean, ess_quantile, ess_tail, mcse_mean, mcse_quantile,
                      rhat)
from ._core import MIN_DRAWS  # noqa: F401  (the CLI's minimum for a summary)
from ._cost import RCTSummary, computing_time, rct_summary, relative_computing_time
from ._single import autocorrelation, ess_single, integrated_autocorr_time
from ._summary import Summary, summary

__all__ = [
    "RCTSummary",
    "Summary",
    "autocorrelation",
    "computing_time",
    "ess_bulk",
    "ess_mean",
    "ess_quantile",
    "ess_single",
    "ess_tail",
    "integrated_autocorr_time",
    "mcse_mean",
    "mcse_quantile",
    "rct_summary",
    "relative_computing_time",
    "rhat",
    "summary",
]
