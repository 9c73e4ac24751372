"""Binary Markov random fields and exact / approximate (austerity) Gibbs sampling.

See ALGORITHMS.md §2.2 and Korattikara, Chen & Welling (2014), §5 and §6.3.
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
