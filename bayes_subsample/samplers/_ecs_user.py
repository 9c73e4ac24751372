"""HMC-ECS's rules where the costs of user models differ from the GLMs'
(:ref:`algo-hmc-ecs-user-models`): the control variates' default order, and
the comparison of a subsampled evaluation with a full-data gradient when
every call of a Python model has a fixed cost besides its rows."""
from __future__ import annotations

import numpy as np

from ..control_variates import row_table_fits
from ..models._base import taylor_residuals
from ._ecs_tuning import PILOT_ROWS, subsample_size_for, typical_thetas

__all__ = ["subsample_pays", "user_model_order", "choose_user_order"]


def subsample_pays(rows, pass_cost, overhead=0):
    """Whether an evaluation of the subsampled estimator on ``rows`` rows costs
    at most half a full-data gradient (``pass_cost`` per-datum evaluations),
    with ``overhead`` (the model's ``evaluation_overhead``: the rows' worth of
    one call of a Python model, 0 for the compiled models) added to both."""
    return rows + overhead <= (pass_cost + overhead) / 2


def user_model_order(model, diagonal):
    """The highest Taylor order HMC-ECS's control variates take by default on a
    Python model: 2 where its per-datum Hessians cost one call per set of rows
    (the user gave ``hess``) or where every row's Taylor constants fit in a
    table (``row_table_fits``: computed once at preparation, from ``2 p``
    gradient passes without ``hess``); else 1, because central differences
    on every block of rows that joins the subsample would cost ``2 p`` calls
    per iteration, more than the rows they save on tall data, where order-1
    control variates already need few rows. Order 1 with a diagonal metric
    (no ``p x p`` Hessian sum). ``choose_user_order`` then keeps order 2
    only where it needs a smaller subsample."""
    if diagonal:
        return 1
    if not model.numerical_hess_terms or row_table_fits(model, 2):
        return 2
    return 1


def choose_user_order(cv, chol_cov, rng, *, n_blocks=100, target_variance=1.0, n_theta=50,
                      pilot_size=PILOT_ROWS, centre=None):
    """The order (1 or 2) and subsample size of a Python model's control
    variates from one pilot: the rows and points of ``choose_subsample_size``
    (drawn in the same order from ``rng``), the residuals of both orders from
    the rows' Taylor constants at theta* (``cv``: order 2), and the size rule
    on each (``subsample_size_for``). Order 2 where it needs fewer rows per
    evaluation; at equal sizes (both at the floor) order 1, whose evaluations
    skip the ``p x p`` products and whose preparation needs no Hessians.
    Returns ``(order, m, n_evals)``."""
    model, n = cv.model, cv.n_data
    pilot = rng.integers(0, n, size=min(n, pilot_size))
    thetas = typical_thetas(cv, chol_cov, rng, n_theta, centre)
    l0, g0, H0 = cv.row_terms(pilot)
    R1, R2 = [], []
    for th in thetas:
        delta, ll = th - cv.theta_star, model.loglik_terms(th, pilot)
        R1.append(taylor_residuals(delta, ll, None, l0, g0)[0])
        R2.append(taylor_residuals(delta, ll, None, l0, g0, H0)[0])
    kw = dict(n_blocks=n_blocks, target_variance=target_variance)
    m1, m2 = subsample_size_for(np.array(R1), n, **kw), subsample_size_for(np.array(R2), n, **kw)
    k = pilot.shape[0]
    n_evals = (n_theta + 2 + (2 * model.n_params if model.numerical_hess_terms else 1)) * k
    return (2, m2, n_evals) if m2 < m1 else (1, m1, n_evals)
