"""The state of an HMC-ECS chain and the block updates of its subsample at
fixed theta (:ref:`algo-hmc-ecs`): perturbed, one of the G blocks
(``PerturbedUpdate``); signed, kappa of the lambda block-Poisson products
(``SignedUpdate``); each a pseudo-marginal MH step on the subsampled potential
(the compiled ``ECSCore`` or the NumPy ``NumpyECSPotential``)."""
from __future__ import annotations

import math
from typing import NamedTuple, Optional

import numpy as np

from .. import _rng
from ._inner import HMC_FIELDS, NUTS_FIELDS

__all__ = ["ECSState", "ECSInfo", "ECSNUTSInfo", "SignedECSInfo", "SignedECSNUTSInfo", "ECS_INFO",
           "PerturbedUpdate", "SignedUpdate"]


class ECSState(NamedTuple):
    theta: np.ndarray
    potential_energy: float
    #: the subsampled potential: the subsample, its residual banks and the position
    potential: object
    #: signed: the product each batch of rows belongs to (None when perturbed)
    batch_products: Optional[np.ndarray]


#: an HMC-ECS step's fields after the inner kernel's: the subsample update's
#: acceptance probability, the estimator's variance, the rows read
ECS_FIELDS = [("alpha_u", float), ("sigma2", float), ("subsample_rows", int),
              ("data_fraction", float)]
#: the signed estimator's draws carry a sign
SIGN_FIELDS = [("sign", int)]

#: an HMC-ECS step with the HMC inner kernel, with NUTS, and their signed forms
ECSInfo = NamedTuple("ECSInfo", HMC_FIELDS + ECS_FIELDS)
ECSNUTSInfo = NamedTuple("ECSNUTSInfo", NUTS_FIELDS + ECS_FIELDS)
SignedECSInfo = NamedTuple("SignedECSInfo", HMC_FIELDS + ECS_FIELDS + SIGN_FIELDS)
SignedECSNUTSInfo = NamedTuple("SignedECSNUTSInfo", NUTS_FIELDS + ECS_FIELDS + SIGN_FIELDS)

#: (signed, NUTS inner kernel) -> the kernel's Info
ECS_INFO = {(False, False): ECSInfo, (False, True): ECSNUTSInfo,
            (True, False): SignedECSInfo, (True, True): SignedECSNUTSInfo}


class PerturbedUpdate:
    """Refresh one of the G blocks of the subsample (``potential.u_step``)."""

    signed = False

    def __init__(self, n_data, m, n_blocks):
        self.n_data, self.m, self.n_blocks = n_data, m, n_blocks
        self.sampled = None          # the rows subsampled (None: all)

    def set_sampled(self, sampled):
        """Draw rows from ``sampled`` only (the rest are summed exactly)."""
        self.sampled = sampled
        self.n_data = sampled.shape[0]

    def fresh(self, rng):
        """``(rows, block_size, batch_products)`` of a new subsample."""
        rows = rng.integers(0, self.n_data, size=self.m)
        if self.sampled is not None:
            rows = self.sampled[rows]
        return rows, self.m // self.n_blocks, None

    def __call__(self, rng, state):
        acc, alpha, n_evals = state.potential.u_step(rng)
        return state, alpha, n_evals


class SignedUpdate:
    """Regenerate ``kappa = max(1, round(lambda (1 - rho)))`` of the lambda
    block-Poisson products by a pseudo-marginal MH step."""

    signed = True

    def __init__(self, n_data, m, n_products, correlation):
        self.n_data, self.m, self.lam, self.rho = n_data, m, n_products, correlation

    def fresh(self, rng):
        chi = rng.poisson(1.0, size=self.lam)
        return (rng.integers(0, self.n_data, size=int(chi.sum()) * self.m), self.m,
                np.repeat(np.arange(self.lam), chi))

    def __call__(self, rng, state):
        lam, m, pot = self.lam, self.m, state.potential
        kappa = max(1, int(round(lam * (1.0 - self.rho))))
        chosen = rng.choice(lam, size=min(kappa, lam), replace=False)
        chi_new = rng.poisson(1.0, size=chosen.shape[0])
        new_idx = rng.integers(0, self.n_data, size=int(chi_new.sum()) * m)
        log_u = _rng.log_uniform(rng)
        a, cn = -float(lam), self.n_data / m
        S_new, _ = pot.batch_stats(new_idx, m)
        old_mask = np.isin(state.batch_products, chosen)
        with np.errstate(divide="ignore"):
            new_term = np.sum(np.log(np.abs(cn * S_new - a)) - math.log(lam))
            old_term = np.sum(np.log(np.abs(cn * pot.block_sums()[old_mask] - a))
                              - math.log(lam))
        log_ratio = float(new_term - old_term)
        alpha = 1.0 if log_ratio >= 0 else (math.exp(log_ratio) if np.isfinite(log_ratio) else 0.0)
        n_evals = new_idx.shape[0]
        if not (np.isfinite(log_ratio) and log_u < log_ratio):
            return state, alpha, n_evals
        idx = np.concatenate([pot.indices[np.repeat(~old_mask, m)], new_idx])
        products = np.concatenate([state.batch_products[~old_mask], np.repeat(chosen, chi_new)])
        pot.set_rows(idx, m)
        U = pot.set_position(state.theta)
        return state._replace(potential_energy=U, batch_products=products), alpha, \
            n_evals + idx.shape[0]
