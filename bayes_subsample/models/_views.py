"""Models made from another model: the posterior of a subset of its data, and
its log-likelihood weighted (the same prior)."""
from __future__ import annotations

from ._base import Model

__all__ = ["SubsetModel", "WeightedModel"]


class SubsetModel(Model):
    """The posterior of a subset ``idx`` of another model's data (same prior).

    Parameters
    ----------
    model : Model
    idx : array-like of int
        Data indices of ``model`` (duplicates allowed).
    """

    def __init__(self, model, idx):
        self.parent = model
        self.idx = model.check_indices(idx)
        self.n_data = int(self.idx.shape[0])
        self.n_params = model.n_params
        self.prior = model.prior
        self.max_cv_order = model.max_cv_order
        self.numerical_hess_terms = model.numerical_hess_terms
        self.analytic_hessian = model.analytic_hessian
        self.has_hessian = model.has_hessian
        self.evaluation_overhead = model.evaluation_overhead

    def init_params(self, rng=None):
        return self.parent.init_params(rng)

    def loglik_terms(self, theta, idx):
        return self.parent.loglik_terms(theta, self.idx[self.check_indices(idx)])

    def grad_terms(self, theta, idx):
        return self.parent.grad_terms(theta, self.idx[self.check_indices(idx)])

    def hess_terms(self, theta, idx):
        if self.numerical_hess_terms:
            return super().hess_terms(theta, idx)
        return self.parent.hess_terms(theta, self.idx[self.check_indices(idx)])

    def grad_sum(self, theta, idx):
        return self.parent.grad_sum(theta, self.idx[self.check_indices(idx)])


class WeightedModel(Model):
    """Another model's log-likelihood multiplied by ``weight`` (same prior): a
    subset of ``n_sub`` of ``n`` data with ``weight = n / n_sub`` approximates the
    full-data posterior (HMC-ECS starts its expansion point from its mode).

    Only the full-data pass is provided (what the mode search uses).
    """

    def __init__(self, model, weight):
        self.base = model
        self.weight = float(weight)
        self.analytic_hessian = model.analytic_hessian
        self.has_hessian = model.has_hessian
        self.n_data = model.n_data
        self.n_params = model.n_params
        self.prior = model.prior

    def full_pass(self, theta, *, gradient=True, hessian=False):
        ll, g, h = self.base.full_pass(theta, gradient=gradient, hessian=hessian)
        w = self.weight
        return ll * w, (g * w if g is not None else None), (h * w if h is not None else None)
