"""Several chains (Vehtari et al. 2021): R-hat, bulk, tail, mean and quantile
ESS, MCSE of the mean and of quantiles."""
import numpy as np

from ._core import (_by_columns, _check_draws, _check_prob, _columnwise, _ess_core,
                    _ess_mean_core, _ess_quantile_core, _finish, _rhat_core, _split_chains,
                    _z_scale)

__all__ = ["rhat", "ess_bulk", "ess_quantile", "ess_tail", "ess_mean", "mcse_mean",
           "mcse_quantile"]

# the start of the Parameters section every function here shares ({draws} in
# the docstrings; {draws_prob} with the quantile's probability)
_DRAWS_DOC = """Parameters
    ----------
    draws : array_like of shape (n_chains, n_draws) or (n_chains, n_draws, ...)"""
_DOC_PARTS = {
    "{draws}": _DRAWS_DOC,
    "{draws_prob}": _DRAWS_DOC + "\n    prob : float in (0, 1)",
    # and the start of the Returns section of the ESS functions
    "{returns_ess}": """Returns
    -------
    ess : float or ndarray of shape draws.shape[2:]""",
}


def _doc_draws(func):
    """Put the shared parts (the placeholders of ``_DOC_PARTS``) into ``func``'s docstring."""
    for key, text in _DOC_PARTS.items():
        func.__doc__ = func.__doc__.replace(key, text)
    return func


@_doc_draws
def rhat(draws):
    """Rank-normalised split R-hat (Vehtari et al. 2021): max of bulk and tail R-hat.

    Each chain is split in half.  The bulk R-hat is the classic R-hat
    ``sqrt(var_plus / W)`` with ``var_plus = (N-1)/N W + B/N`` on the pooled
    rank-normalised draws; the tail R-hat is the same on the rank-normalised
    folded draws ``|theta - median(theta)|``.  Values above 1.01 flag
    non-convergence.  Matches ``arviz.rhat(draws, method="rank")``.

    {draws}
        At least 4 draws per chain.

    Returns
    -------
    r_hat : float or ndarray
        ``nan`` with a single chain or for a constant quantity (as ArviZ).

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_subsample.diagnostics import rhat
    >>> draws = np.random.default_rng(0).normal(size=(4, 1000))
    >>> bool(rhat(draws) < 1.01)
    True
    """
    a, shape = _check_draws(draws)
    if a.shape[0] < 2:
        return _finish(np.full(a.shape[2], np.nan), shape)
    return _finish(_by_columns(_rank_rhat_core, a), shape)


def _rank_rhat_core(a):
    split = _split_chains(a)
    bulk = _rhat_core(_z_scale(split))
    folded = np.abs(split - np.median(split.reshape(-1, split.shape[2]), axis=0))
    tail = _rhat_core(_z_scale(folded))
    return np.where(np.isnan(tail), bulk, np.maximum(bulk, tail))


@_doc_draws
def ess_bulk(draws):
    """Bulk effective sample size: multi-chain ESS of the rank-normalised split chains.

    Matches ``arviz.ess(draws, method="bulk")``.

    {draws}

    {returns_ess}
        The ESS of the ranks: robust to heavy tails, what R-hat's bulk part
        pairs with.
    """
    return _columnwise(_ess_bulk_core, draws)


def _ess_bulk_core(a):
    return _ess_core(_z_scale(_split_chains(a)))


@_doc_draws
def ess_quantile(draws, prob):
    """ESS of the indicator ``I(theta <= q_prob)`` (split chains).

    The quantile is R's type-7 quantile of all draws.  Matches
    ``arviz.ess(draws, method="quantile", prob=prob)``.

    {draws_prob}

    {returns_ess}
    """
    prob = _check_prob(prob)
    return _columnwise(_ess_quantile_core, draws, prob)


@_doc_draws
def ess_tail(draws, prob=0.05):
    """Tail effective sample size: min ESS of ``I(theta <= q_p)`` and ``I(theta <= q_{1-p})``.

    Matches ``arviz.ess(draws, method="tail")`` (default ``prob=0.05``, i.e. the 5 %
    and 95 % quantiles).

    {draws}
    prob : float in (0, 1), default=0.05

    {returns_ess}
    """
    prob = _check_prob(prob)
    a, shape = _check_draws(draws)
    low = _by_columns(_ess_quantile_core, a, prob)
    high = _by_columns(_ess_quantile_core, a, 1.0 - prob)
    return _finish(np.minimum(low, high), shape)


@_doc_draws
def ess_mean(draws):
    """Effective sample size for the mean: multi-chain ESS of the split chains (no ranks).

    Matches ``arviz.ess(draws, method="mean")``.

    {draws}

    {returns_ess}
        The ESS of the draws themselves: the one behind the mean's MCSE
        (infinite variance makes it meaningless).
    """
    return _columnwise(_ess_mean_core, draws)


@_doc_draws
def mcse_mean(draws):
    """Monte Carlo standard error of the posterior mean, ``sd / sqrt(ess_mean)``.

    ``sd`` is the standard deviation of all draws (``ddof=1``).  Matches
    ``arviz.mcse(draws, method="mean")``.

    {draws}

    Returns
    -------
    mcse : float or ndarray of shape draws.shape[2:]
        In the draws' units.
    """
    return _columnwise(_mcse_mean_core, draws)


def _mcse_mean_core(a):
    return np.std(a.reshape(-1, a.shape[2]), axis=0, ddof=1) / np.sqrt(_ess_mean_core(a))


@_doc_draws
def mcse_quantile(draws, prob):
    """Monte Carlo standard error of the ``prob`` quantile.

    Half the width of the central ~68 % interval for the quantile's rank, from the
    Beta posterior of the indicator's mean with the quantile ESS.  Matches
    ``arviz.mcse(draws, method="quantile", prob=prob)``.

    {draws_prob}

    Returns
    -------
    mcse : float or ndarray
    """
    from scipy import stats  # 0.5 s to import: on first use

    prob = _check_prob(prob)
    a, shape = _check_draws(draws)
    ess = _by_columns(_ess_quantile_core, a, prob)
    flat = np.sort(a.reshape(-1, a.shape[2]), axis=0)
    size = flat.shape[0]
    out = np.empty(a.shape[2])
    for j in range(a.shape[2]):
        with np.errstate(invalid="ignore"):
            ppf = stats.beta.ppf(
                [0.1586553, 0.8413447], ess[j] * prob + 1.0, ess[j] * (1.0 - prob) + 1.0
            )
        pos = ppf * size - 1.0
        lo = int(np.floor(np.nanmax((pos[0], 0.0))))
        hi = int(np.ceil(np.nanmin((pos[1], size - 1.0))))
        out[j] = (flat[hi, j] - flat[lo, j]) / 2.0
    return _finish(out, shape)
