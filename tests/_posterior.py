"""Comparing a sampler's fit with a reference fit of the same posterior, with
tolerances from Monte Carlo error (shared by the test modules)."""
import numpy as np

from bayes_subsample import diagnostics as diag

#: samplers whose stationary distribution is biased by design (their own bias is
#: bounded in test_sgmcmc): their means are allowed this many reference sds more
APPROXIMATE_SLACK = {"sgld": 0.5}


def assert_means_match(ref, est, sampler, slack_sd=0.05, z=5.0):
    """``est``'s posterior means within ``z`` standard errors (both runs' Monte
    Carlo error) plus ``slack_sd`` reference sds (more for approximate samplers)
    of ``ref``'s; ``ref`` and ``est`` are fitted estimators. Returns the pooled
    draws ``(ref, est)`` as (n, p) arrays for further checks."""
    p = ref.posterior_draws_.shape[-1]
    r = ref.posterior_draws_.reshape(-1, p)
    e = est.posterior_draws_.reshape(-1, p)
    sd = r.std(0)
    se = np.hypot(diag.mcse_mean(ref.posterior_draws_), diag.mcse_mean(est.posterior_draws_))
    slack = APPROXIMATE_SLACK.get(sampler, slack_sd) * sd
    gap = np.abs(e.mean(0) - r.mean(0))
    assert np.all(gap < z * se + slack), (gap / sd, se / sd)
    return r, e
