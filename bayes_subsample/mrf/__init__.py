"""Binary Markov random fields and exact / approximate (austerity) Gibbs sampling.

The model, the exact and approximate updates and the error measures are described in
:ref:`algo-mrf`; they follow Korattikara, Chen & Welling (2014), §5 and §6.3.
"""
from ._gibbs import (
    GibbsResult,
    GibbsSampler,
    calibration_curve,
    l1_error_trace,
    random_subsets,
    state_codes,
    subset_l1_error,
    subset_marginals,
)
from ._model import BinaryMRF

__all__ = [
    "BinaryMRF",
    "GibbsResult",
    "GibbsSampler",
    "calibration_curve",
    "l1_error_trace",
    "random_subsets",
    "state_codes",
    "subset_l1_error",
    "subset_marginals",
]
