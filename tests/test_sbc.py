"""Simulation-based calibration (SBC) of the samplers (Talts, Betancourt, Simpson,
Vehtari and Gelman 2018, "Validating Bayesian inference algorithms with
simulation-based calibration").

If ``theta_true ~ prior`` and ``y ~ p(y | theta_true)``, then ``theta_true`` is a
draw from the posterior ``p(theta | y)``, exchangeable with ``L`` independent
posterior draws; its rank among them (the number of draws below it, per
parameter) is uniform on ``{0, ..., L}``. A sampler whose draws are too narrow,
too wide or shifted makes the ranks of many replications non-uniform.

Design (``slow``, one module-level run per sampler, shared by its tests):

* **Problem**: logistic regression, ``d = 2`` standard-normal features and an
  intercept (3 parameters), prior ``N(0, 1)`` on every parameter (small enough
  that the simulated data are never separable, so the posteriors are proper
  and well identified). MH, HMC and NUTS use ``n = 50`` rows (skewed,
  non-Gaussian posteriors). Signed HMC-ECS uses ``n = 200`` rows, second-order
  control variates and the smallest possible estimator (``batch_size=1``,
  ``n_products=1``): every iteration evaluates about one to two rows, so it
  subsamples (``tuning["full_data"]`` is never set, checked), and about 1.5%
  of its draws carry a negative sign (checked), while the sign-corrected
  estimates stay usable. Larger data or more products make negative signs
  rare (none at ``n = 2000``); first-order control variates or heavy-tailed
  features make them so frequent, or the chains so sticky, that the
  sign-corrected estimates are unusable.
* ``R = 500`` replications, each with its own seeds (deterministic); one
  chain per replication.
* **Thinning**: each chain keeps ``L = 99`` draws, every ``k``-th of
  ``k L`` retained iterations (``k`` = 10 for MH, 15 for signed HMC-ECS, 5
  for HMC and NUTS) after 500 warmup iterations. The draws are roughly
  independent when ``k`` is at least the integrated autocorrelation time
  ``k L / ESS``, i.e. ``ESS >= L``; ``k`` was chosen from the measured ESS
  (the smaller of bulk and tail ESS, worst parameter, of the unthinned chain)
  and the test asserts ``ESS >= L`` in at least 95% of the replications
  (measured: 99.4% MH, 99.8% HMC, 100% NUTS, 97% signed; medians 220-770,
  5% quantiles 150-230). The signed misses are chains that make long
  excursions into the tails, where ``|L_hat|`` overstates the likelihood and
  the negative signs that cancel it are rare (ESS down to about 20).
* **Ranks**: ``r = L q`` with ``q`` the fraction of the ``L`` draws below
  ``theta_true``, normalised to ``u = (r + 1/2) / (L + 1)``; ``B = 10`` bins
  of ``u``. For unsigned samplers ``r`` is an integer and each bin holds
  exactly ``(L + 1) / B = 10`` rank values, so the binned ranks of a correct
  sampler are exactly uniform.
* **Signed draws** (signed HMC-ECS): the chain targets ``p(theta) E|L_hat|``
  and a posterior expectation is ``E[s f] / E[s]``. The posterior CDF at
  ``theta_true`` is estimated by the sign-weighted fraction
  ``q = sum_j s_j 1[theta_j < theta_true] / sum_j s_j`` over the thinned draws
  (its numerator and denominator are unbiased up to the ratio), and
  ``r = L q`` as above. With all signs positive this is the ordinary rank
  (exactly uniform). Negative signs make ``q`` an estimate of the posterior
  CDF ``F(theta_true | y)``, which is uniform, with extra Monte Carlo noise
  (``q`` may even leave ``[0, 1]``: clipped into the outer bins); with 1.4%
  negative signs among the thinned draws that noise is a few percent at most,
  small against the bin width ``1 / B``, so the binned ``q`` are uniform to
  well within the test's resolution. The default suite
  checks on synthetic draws that this construction passes when the signs
  cancel a wrong component of the draws and that the unweighted ranks of the
  same draws fail.
* **Test**: Pearson chi-square of the ``B`` bin counts against uniform
  (``B - 1`` degrees of freedom), per sampler and parameter; family-wise level
  ``ALPHA = 0.01`` with a Bonferroni correction over the 4 samplers x 3
  parameters, i.e. each p-value is compared with ``0.01 / 12``.
* **Power** (negative controls, which must fail): the draws of the same runs
  (1) shrunk toward their (sign-weighted) mean by 20% (``sd x 0.8``), and (2)
  shifted by ``+0.3`` of their (sign-weighted) sd. Per parameter, the
  non-central chi-square power at ``0.01 / 12`` is 0.92 (shrunk) and 0.98
  (shifted) with ``R = 500`` and ``B = 10``; measured on 100 synthetic SBC
  experiments with exact draws (``test_power_against_wrong_posteriors``):
  0.91 and 0.97, and 0.3% false rejections of exact draws per parameter.
  With three parameters a control is missed only if all three miss
  (probability below 1e-3); all 100 experiments rejected both controls.

The helpers (thinning, ranks, uniformity test, wrong-posterior transforms) are
checked on synthetic draws in the default suite.
"""
import functools
import time
import warnings

import numpy as np
import pytest
from scipy import stats
from scipy.special import expit

from bayes_subsample import diagnostics as diag
from bayes_subsample import sample
from bayes_subsample.models import LogisticRegressionModel
from bayes_subsample.samplers import HMCECS

N_REPS = 500        # R
N_KEEP = 99         # L: thinned draws per replication (L + 1 divisible by N_BINS)
N_BINS = 10         # B
ALPHA = 0.01        # family-wise level
N_PARAMS = 3        # d = 2 features + intercept
SAMPLERS = ["mh", "hmc", "nuts", "hmc_ecs_signed"]
#: per-test level: Bonferroni over the samplers and parameters
LEVEL = ALPHA / (len(SAMPLERS) * N_PARAMS)
SHRINK = 0.8        # negative control 1: sd x 0.8
SHIFT = 0.3         # negative control 2: + 0.3 sd

#: per sampler: the sampler, rows of data, thinning interval k (k * L retained draws)
CONFIG = {
    "mh": {"sampler": "mh", "n_data": 50, "thin": 10, "n_warmup": 500},
    "hmc": {"sampler": "hmc", "n_data": 50, "thin": 5, "n_warmup": 500},
    "nuts": {"sampler": "nuts", "n_data": 50, "thin": 5, "n_warmup": 500},
    "hmc_ecs_signed": {"sampler": HMCECS(variant="signed", cv_order=2, batch_size=1,
                                         n_products=1),
                       "n_data": 200, "thin": 15, "n_warmup": 500},
}


# --------------------------------------------------------------------------------------
# helpers (tested below in the default suite)
# --------------------------------------------------------------------------------------
def thin(x, n_keep):
    """The last of every ``k = len(x) // n_keep`` entries of ``x`` (along axis 0):
    ``n_keep`` evenly spaced entries ending with the last one."""
    k = x.shape[0] // n_keep
    if k < 1:
        raise ValueError(f"{x.shape[0]} entries cannot be thinned to {n_keep}")
    return x[x.shape[0] - 1 - k * np.arange(n_keep)[::-1]]


def sbc_ranks(draws, theta_true, signs=None):
    """Normalised rank ``u = (r + 1/2) / (L + 1)`` of ``theta_true`` (params,)
    among ``draws`` (L, params), per parameter.

    ``r = L q`` with ``q`` the fraction of draws below ``theta_true``; for signed
    draws the sign-weighted fraction ``sum_j s_j 1[theta_j < theta_true] / sum_j s_j``
    (see the module docstring). Unsigned: ``r`` is the integer rank in ``{0..L}``.
    """
    draws = np.asarray(draws, dtype=float)
    L = draws.shape[0]
    below = draws < np.asarray(theta_true)[None, :]
    if signs is None:
        q = below.mean(axis=0)
    else:
        s = np.asarray(signs, dtype=float)
        if s.sum() <= 0:
            raise ValueError("non-positive sign sum: the sign-weighted rank is undefined")
        q = s @ below / s.sum()
    return (L * q + 0.5) / (L + 1)


def bin_counts(u, n_bins=N_BINS):
    """Counts of the normalised ranks ``u`` (R,) in ``n_bins`` equal bins of [0, 1]
    (values outside, possible with negative signs, go to the outer bins)."""
    idx = np.clip(np.floor(np.asarray(u) * n_bins).astype(int), 0, n_bins - 1)
    return np.bincount(idx, minlength=n_bins)


def uniformity_test(u, n_bins=N_BINS):
    """Pearson chi-square test of uniformity of the binned ranks, per parameter:
    ``(statistics, p-values)`` for ``u`` of shape (R, params)."""
    u = np.asarray(u)
    counts = np.stack([bin_counts(u[:, j], n_bins) for j in range(u.shape[1])])
    expected = u.shape[0] / n_bins
    stat = ((counts - expected) ** 2 / expected).sum(axis=1)
    return stat, stats.chi2.sf(stat, n_bins - 1)


def weighted_moments(draws, signs=None):
    """(Sign-weighted) mean and sd of ``draws`` (L, params)."""
    w = np.ones(draws.shape[0]) if signs is None else np.asarray(signs, dtype=float)
    w = w / w.sum()
    mean = w @ draws
    return mean, np.sqrt(np.maximum(w @ (draws - mean) ** 2, 0.0))


def shrunk(draws, signs=None, factor=SHRINK):
    """Negative control: the draws pulled toward their mean (sd x ``factor``)."""
    mean, _ = weighted_moments(draws, signs)
    return mean + factor * (draws - mean)


def shifted(draws, signs=None, delta=SHIFT):
    """Negative control: the draws moved by ``delta`` of their sd."""
    _, sd = weighted_moments(draws, signs)
    return draws + delta * sd


# --------------------------------------------------------------------------------------
# default suite: the helpers on synthetic draws
# --------------------------------------------------------------------------------------
def test_thin_keeps_evenly_spaced_last_draws():
    x = np.arange(50)
    np.testing.assert_array_equal(thin(x, 5), [9, 19, 29, 39, 49])
    np.testing.assert_array_equal(thin(np.arange(53), 5), [12, 22, 32, 42, 52])
    assert thin(np.zeros((990, 3)), 99).shape == (99, 3)
    with pytest.raises(ValueError):
        thin(np.arange(4), 5)


def test_sbc_ranks_unsigned_and_signed():
    draws = np.array([[0.1, 5.0], [0.2, 4.0], [0.3, 3.0], [0.4, 2.0]])
    theta = np.array([0.25, 10.0])
    # ranks 2 and 4 of L = 4
    np.testing.assert_allclose(sbc_ranks(draws, theta), (np.array([2, 4]) + 0.5) / 5)
    # all signs +1: the ordinary rank
    np.testing.assert_allclose(sbc_ranks(draws, theta, signs=np.ones(4)), sbc_ranks(draws, theta))
    # one negative sign below theta: q = (1 - 1) / (1 - 1 + 1 + 1) = 0 for param 0,
    # and (1 - 1 + 1 + 1) / 2 = 1 for param 1
    np.testing.assert_allclose(sbc_ranks(draws, theta, signs=[1, -1, 1, 1]), [0.5 / 5, 4.5 / 5])
    # negative sign above theta: q = 2 / 2 = 1 (the weighted fraction may pass 1)
    np.testing.assert_allclose(sbc_ranks(draws, theta, signs=[1, 1, -1, 1])[0], 4.5 / 5)
    with pytest.raises(ValueError, match="sign sum"):
        sbc_ranks(draws, theta, signs=[1, -1, -1, 1])


def test_bins_of_integer_ranks_are_exactly_uniform():
    """Every integer rank 0..L once: each of the B bins holds (L + 1) / B of them."""
    u = (np.arange(N_KEEP + 1) + 0.5) / (N_KEEP + 1)
    np.testing.assert_array_equal(bin_counts(u), np.full(N_BINS, (N_KEEP + 1) // N_BINS))
    np.testing.assert_array_equal(bin_counts([-0.2, 1.3]), [1] + [0] * (N_BINS - 2) + [1])
    stat, p = uniformity_test(np.tile(u, 5)[:, None])
    assert stat[0] == 0 and p[0] == 1


def conjugate_sbc(rng, n_reps, n_params=N_PARAMS, n_keep=N_KEEP):
    """Synthetic SBC with exact draws: theta ~ N(0, 1), y ~ N(theta, 1) per
    parameter, posterior N(y / 2, 1 / 2). Returns theta (R, p), y-posterior mean
    and sd, and iid posterior draws (R, L, p)."""
    theta = rng.normal(size=(n_reps, n_params))
    y = theta + rng.normal(size=theta.shape)
    mean, sd = y / 2, np.sqrt(0.5)
    draws = mean[:, None, :] + sd * rng.normal(size=(n_reps, n_keep, n_params))
    return theta, draws


def sbc_pvalues(theta, draws, signs=None, transform=None):
    u = []
    for r in range(theta.shape[0]):
        s = None if signs is None else signs[r]
        d = draws[r] if transform is None else transform(draws[r], s)
        u.append(sbc_ranks(d, theta[r], s))
    return uniformity_test(np.array(u))[1]


def test_uniformity_test_passes_exact_and_fails_wrong_posteriors():
    theta, draws = conjugate_sbc(np.random.default_rng(0), N_REPS)
    assert sbc_pvalues(theta, draws).min() > LEVEL
    assert sbc_pvalues(theta, draws, transform=shrunk).min() < LEVEL
    assert sbc_pvalues(theta, draws, transform=shifted).min() < LEVEL
    # the controls change what they should: sd x 0.8, mean + 0.3 sd
    m, s = weighted_moments(draws[0])
    m1, s1 = weighted_moments(shrunk(draws[0]))
    np.testing.assert_allclose([m1, s1], [m, 0.8 * s])
    m2, s2 = weighted_moments(shifted(draws[0]))
    np.testing.assert_allclose([m2, s2], [m + 0.3 * s, s])


def test_power_against_wrong_posteriors():
    """Size and power of the test at R = 500, B = 10, measured on 100 synthetic SBC
    experiments with exact iid draws: the per-parameter rejection rate at LEVEL is
    near LEVEL for exact draws, and near the non-central chi-square power (0.92
    shrunk, 0.98 shifted) for the negative controls; with 3 parameters every
    experiment's control is rejected."""
    rng = np.random.default_rng(1)
    n_exp = 100

    def ranks(d, theta):
        """Vectorised over replications: the same as sbc_ranks one by one."""
        return ((d < theta[:, None, :]).sum(axis=1) + 0.5) / (N_KEEP + 1)

    p_ok, p_shrunk, p_shift = [], [], []
    for _ in range(n_exp):
        theta, draws = conjugate_sbc(rng, N_REPS)
        centre = draws.mean(axis=1, keepdims=True)
        sd = draws.std(axis=1, keepdims=True)
        p_ok.append(uniformity_test(ranks(draws, theta))[1])
        p_shrunk.append(uniformity_test(ranks(centre + SHRINK * (draws - centre), theta))[1])
        p_shift.append(uniformity_test(ranks(draws + SHIFT * sd, theta))[1])
    p_ok, p_shrunk, p_shift = map(np.array, (p_ok, p_shrunk, p_shift))
    assert (p_ok < LEVEL).sum() <= 2                      # 300 tests at 8e-4: 0.25 expected
    assert (p_ok < 0.05).mean() < 0.1                     # the chi-square is not anti-conservative
    assert (p_shrunk < LEVEL).mean() > 0.8                # per parameter
    assert (p_shift < LEVEL).mean() > 0.9
    assert np.all(p_shrunk.min(axis=1) < LEVEL)           # every experiment rejects
    assert np.all(p_shift.min(axis=1) < LEVEL)
    # the vectorised ranks agree with sbc_ranks
    np.testing.assert_allclose(ranks(draws, theta)[7], sbc_ranks(draws[7], theta[7]))


def test_signed_ranks_use_the_signs():
    """Draws that are exact posterior draws (+1) plus pairs from a wrong
    distribution with opposite signs (+1, -1), which cancel in expectation:
    the sign-weighted ranks are uniform, the unweighted ranks of the same draws
    are not."""
    rng = np.random.default_rng(2)
    theta, exact = conjugate_sbc(rng, N_REPS, n_keep=69)
    sd = np.sqrt(0.5)
    # 15 pairs of draws 2 sd above the posterior mean, with signs + and -
    centre = exact.mean(axis=1, keepdims=True)
    extra = centre + 2 * sd + sd * rng.normal(size=(N_REPS, 30, N_PARAMS))
    draws = np.concatenate([exact, extra], axis=1)
    signs = np.tile(np.r_[np.ones(69 + 15), -np.ones(15)], (N_REPS, 1))
    assert draws.shape[1] == N_KEEP
    assert sbc_pvalues(theta, draws, signs).min() > LEVEL
    assert sbc_pvalues(theta, draws).max() < LEVEL
    assert sbc_pvalues(theta, draws, signs, transform=shrunk).min() < LEVEL


# --------------------------------------------------------------------------------------
# slow suite: SBC of the samplers
# --------------------------------------------------------------------------------------
def simulate(rng, n_data):
    """theta_true from the prior and logistic-regression data given it."""
    theta = rng.normal(size=N_PARAMS)               # prior N(0, 1): coefficients, intercept
    X = rng.normal(size=(n_data, N_PARAMS - 1))
    y = (rng.random(n_data) < expit(X @ theta[:-1] + theta[-1])).astype(float)
    model = LogisticRegressionModel(X, y, prior_scale=1.0, intercept_prior_scale=1.0)
    return model, theta


def replicate(name, r):
    """One SBC replication of sampler ``name``: the thinned draws and signs,
    theta_true and facts about the run."""
    cfg = CONFIG[name]
    model, theta = simulate(np.random.default_rng([14, SAMPLERS.index(name), r]),
                            cfg["n_data"])
    np.testing.assert_array_equal(model.prior.scale, np.ones(N_PARAMS))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # low-tau warnings of signed runs etc.
        tr = sample(model, cfg["sampler"], n_samples=cfg["thin"] * N_KEEP,
                    n_warmup=cfg["n_warmup"], n_chains=1, n_jobs=1,
                    random_state=10_000 * SAMPLERS.index(name) + r, check_convergence=False)
    ess = min(np.min(diag.ess_bulk(tr.draws)), np.min(diag.ess_tail(tr.draws)))
    signs = tr.signs
    out = {"theta": theta, "draws": thin(tr.draws[0], N_KEEP), "ess": ess, "signs": None}
    if signs is not None:
        out.update(signs=thin(signs[0], N_KEEP).astype(float),
                   neg_share=float((signs < 0).mean()),
                   full_data=bool(tr.tuning[0].get("full_data")),
                   rows=float(np.mean(tr.stats["subsample_rows"])))
    return out


@functools.cache
def sbc_run(name):
    """All replications of sampler ``name`` (computed once per session)."""
    t0 = time.perf_counter()
    reps = [replicate(name, r) for r in range(N_REPS)]
    run = {k: [rep[k] for rep in reps] for k in reps[0]}
    run = {k: (np.array(v) if v[0] is not None else None) for k, v in run.items()}
    run["seconds"] = time.perf_counter() - t0
    return run


#: the largest share of signed replications whose thinned sign sum may be
#: non-positive: their weighted rank is undefined, and they leave the
#: weighted-rank tests. A chain that sits where the block-Poisson estimator is
#: negative about half the time makes one: replication 275 had 43% negative signs
#: (thinned sign sum 3 of 99) at 480e441 and 47% (sum -1) after the p x p products
#: changed the last bits of every trajectory, so a test that asked for none
#: passed or failed by the luck of the rounding.
MAX_UNDEFINED = 0.01


def run_pvalues(run, transform=None, use_signs=True):
    signs = run["signs"] if use_signs else None
    u = []
    for r in range(N_REPS):
        s = None if signs is None else signs[r]
        if s is not None and s.sum() <= 0:
            continue           # undefined weighted rank (at most MAX_UNDEFINED of them)
        d = run["draws"][r] if transform is None else transform(run["draws"][r], s)
        u.append(sbc_ranks(d, run["theta"][r], s))
    return uniformity_test(np.array(u))


@pytest.mark.slow
@pytest.mark.parametrize("name", SAMPLERS)
def test_sbc_ranks_are_uniform(name):
    run = sbc_run(name)
    # the thinned draws are roughly independent (ESS >= L, see the module docstring)
    ess_ok = np.mean(run["ess"] >= N_KEEP)
    assert ess_ok >= 0.95, (ess_ok, np.quantile(run["ess"], [0, 0.05, 0.5]))
    stat, p = run_pvalues(run)
    print(f"\n{name}: {run['seconds']:.1f} s, ESS q05/median "
          f"{np.quantile(run['ess'], 0.05):.0f}/{np.median(run['ess']):.0f}, "
          f"share with ESS >= L {ess_ok:.3f}, "
          f"chi2 {np.round(stat, 1)}, p {np.round(p, 4)}")
    assert p.min() > LEVEL, p


@pytest.mark.slow
@pytest.mark.parametrize("name", SAMPLERS)
@pytest.mark.parametrize("control", [shrunk, shifted], ids=["shrunk", "shifted"])
def test_sbc_rejects_wrong_posterior(name, control):
    """Negative controls: the same runs' draws, made too narrow (sd x 0.8) or
    shifted (+0.3 sd), are rejected at the corrected level."""
    stat, p = run_pvalues(sbc_run(name), transform=control)
    print(f"\n{name} {control.__name__}: chi2 {np.round(stat, 1)}, p {p}")
    assert p.min() < LEVEL, p


@pytest.mark.slow
def test_signed_sbc_has_negative_signs_and_subsamples():
    """The signed runs subsample, carry a measurable share of negative signs
    (else the sign weighting would be untested), and all but at most
    ``MAX_UNDEFINED`` of the replications have a positive thinned sign sum (the
    weighted rank is defined)."""
    run = sbc_run("hmc_ecs_signed")
    assert not run["full_data"].any()
    assert run["rows"].mean() < 0.05 * CONFIG["hmc_ecs_signed"]["n_data"]
    share = run["neg_share"].mean()
    thinned_share = (run["signs"] < 0).mean()
    print(f"\nnegative signs: {share:.4f} of all draws ({thinned_share:.4f} thinned), "
          f"replications with any: {(run['neg_share'] > 0).mean():.3f}, "
          f"max {run['neg_share'].max():.3f}")
    assert share > 0.005 and thinned_share > 0.005
    undefined = np.mean(run["signs"].sum(axis=1) <= 0)
    print(f"replications with a non-positive thinned sign sum: {undefined:.3f}")
    assert undefined <= MAX_UNDEFINED
    # for the record: the ranks without the sign weighting
    stat, p = run_pvalues(run, use_signs=False)
    print(f"unweighted ranks: chi2 {np.round(stat, 1)}, p {np.round(p, 4)}")
