"""Tests of ConfidenceMH (the confidence sampler MHSubLhd, doc/algorithms/confidence.rst).

* exactness: delta = 0 is the full-data MH chain draw for draw;
* the stopping rule's formulas against a NumPy transcription, the GLM
  range bounds and the derived Taylor-residual range bound against brute force;
* statistical: the per-step error bound (wrong decisions <= delta) on logistic
  regression and on the heavy-tailed lognormal toy where the t-test of
  austerity MH is unreliable; the exact Gaussian-regression posterior;
* API: bad input and clear errors for models without a range bound.
"""
import math
import warnings

import numpy as np
import pytest
from scipy import stats
from sklearn.exceptions import ConvergenceWarning

from bayes_subsample import diagnostics as diag
from bayes_subsample._driver import sample
from bayes_subsample.models import (
    FunctionModel,
    LogisticRegressionModel,
    PoissonRegressionModel,
)
from bayes_subsample.samplers import MH
from bayes_subsample import _seqtest
from bayes_subsample.samplers import _approx_mh_fast as fast
from bayes_subsample.samplers.austerity import AusterityMH
from bayes_subsample.models import logistic_residual_range_bound
from bayes_subsample.samplers.confidence import ConfidenceMH




def lognormal_toy(n, seed=0, log_sd=2.0):
    """1-D Gaussian model N(mu, sigma^2), theta = (mu, log sigma), on lognormal
    data (BDH §4.1), with the range bound of doc/algorithms/building_blocks.rst: the log-ratio
    is a quadratic in x, so its max modulus over [min x, max x] is attained at
    an end point or at the vertex."""
    x = np.random.default_rng(seed).lognormal(0.0, log_sd, size=n)
    lo, hi = float(x.min()), float(x.max())

    def loglik(theta, idx):
        mu, ls = theta
        z = (x[idx] - mu) * math.exp(-ls)
        return -0.5 * z * z - ls

    def grad(theta, idx):
        mu, ls = theta
        z = (x[idx] - mu) * math.exp(-ls)
        return np.column_stack([z * math.exp(-ls), z * z - 1.0])

    def range_bound(theta, theta_new):
        (m0, l0), (m1, l1) = theta, theta_new
        v0, v1 = math.exp(-2 * l0), math.exp(-2 * l1)
        a = 0.5 * (v0 - v1)                     # l(theta') - l(theta) = a x^2 + b x + c
        b = m1 * v1 - m0 * v0
        c = 0.5 * (m0 * m0 * v0 - m1 * m1 * v1) + l0 - l1
        pts = [lo, hi]
        if a != 0.0 and lo < -b / (2 * a) < hi:
            pts.append(-b / (2 * a))
        return max(abs(a * t * t + b * t + c) for t in pts)

    model = FunctionModel(loglik, grad, n_data=n, n_params=2, prior_scale=1e3,
                          range_bound=range_bound)
    return model, x


RUN = {"n_chains": 2, "random_state": 7, "check_convergence": False}


def _binomial_upper(n_trials, p, level=1e-4):
    return stats.binom.ppf(1.0 - level, n_trials, p)


# ---------------------------------------------------------------------------
# exactness and formulas
# ---------------------------------------------------------------------------
def test_delta_zero_is_mh_draw_for_draw(logistic_model):
    ref = sample(logistic_model, MH(), n_samples=300, n_warmup=300, **RUN)
    tr = sample(logistic_model, ConfidenceMH(delta=0.0), n_samples=300, n_warmup=300, **RUN)
    assert np.allclose(tr.draws, ref.draws, rtol=0, atol=1e-12)
    assert np.array_equal(tr.stats["accepted"], ref.stats["accepted"])
    assert np.all(tr.stats["data_fraction"] == 1.0)


def test_all_data_examined_matches_mh(logistic_model):
    """A positive delta whose bound never stops early (tiny delta, loose
    Hoeffding bound) examines all data in random order: still MH's decisions."""
    ref = sample(logistic_model, MH(), n_samples=200, n_warmup=100, **RUN)
    tr = sample(logistic_model, ConfidenceMH(delta=1e-300, bound="hoeffding_serfling",
                                             proxy=None, stratify=False),
                n_samples=200, n_warmup=100, **RUN)
    frac = tr.stats["data_fraction"]
    full = np.concatenate([tr.warmup_stats["data_fraction"], frac], axis=1) == 1.0
    # wherever every datum was examined the decision is exact, so the chains agree
    # until the first early stop
    first_early = np.argmin(np.concatenate([full, np.zeros((2, 1), bool)], axis=1), axis=1)
    ref_all = np.concatenate([ref.warmup_draws, ref.draws], axis=1)
    tr_all = np.concatenate([tr.warmup_draws, tr.draws], axis=1)
    for c in range(2):
        k = first_early[c]
        assert k > 50
        assert np.allclose(tr_all[c, :k], ref_all[c, :k], rtol=0, atol=1e-12)


def ref_bound(kind, t, n, sd, C, dk):
    """The bounds of doc/algorithms/confidence.rst, transcribed."""
    if kind == "hoeffding_serfling":
        return C * math.sqrt(2 * (1 - (t - 1) / n) * math.log(2 / dk) / t)
    if kind == "empirical_bernstein":
        return sd * math.sqrt(2 * math.log(3 / dk) / t) + 6 * C * math.log(3 / dk) / t
    kappa = 7 / 3 + 3 / math.sqrt(2)
    rho = 1 - (t - 1) / n if t <= n / 2 else (1 - t / n) * (1 + 1 / t)
    return sd * math.sqrt(2 * rho * math.log(5 / dk) / t) + 2 * kappa * C * math.log(5 / dk) / t


@pytest.mark.parametrize("kind", ["bernstein_serfling", "empirical_bernstein",
                                  "hoeffding_serfling"])
def test_bound_formulas(kind):
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(2, 10**6))
        t = int(rng.integers(1, n))
        sd, C, dk = rng.random(), rng.random() * 10, 10 ** rng.uniform(-8, -1)
        assert _seqtest.bound_value(kind, t, n, sd, C, dk) == pytest.approx(
            ref_bound(kind, t, n, sd, C, dk), rel=1e-12)


def python_confidence_test(terms, psi, C, delta, kind, gamma, p, b1):
    """Independent transcription of the stopping loop on terms in draw order."""
    n = len(terms)
    t, k, b = 0, 0, b1
    while True:
        t = b
        k += 1
        lam = terms[:t].mean()
        if t == n:
            break
        dk = (p - 1) / (p * k**p) * delta
        if abs(lam - psi) > ref_bound(kind, t, n, terms[:t].std(), C, dk):
            break
        b = min(n, math.ceil(gamma * t))
    return lam > psi, t, k


def test_confidence_test_wrapper_matches_reference_loop():
    rng = np.random.default_rng(1)
    for _ in range(100):
        n = int(rng.integers(5, 5000))
        terms = rng.uniform(-1, 1, size=n) * rng.random()
        psi = rng.normal(scale=0.2)
        kind = str(rng.choice(list(_seqtest.BOUNDS)))
        delta = float(rng.choice([0.001, 0.05, 0.3]))
        gamma, p = float(rng.uniform(1.1, 3)), float(rng.uniform(1.1, 3))
        b1 = int(rng.integers(1, 20))
        b1 = min(b1, n)
        accept, n_examined, n_checks, _ = _seqtest.conf_test(terms, psi, 1.0, delta, kind,
                                                             gamma, p, b1)
        assert (accept, n_examined, n_checks) == python_confidence_test(
            terms, psi, 1.0, delta, kind, gamma, p, b1)


def test_glm_loop_and_python_path_agree(logistic_model, as_user_model):
    user = as_user_model(logistic_model)
    s = ConfidenceMH(delta=0.1, first_batch_size=20, proxy=None, stratify=False)
    prepared = s.prepare(logistic_model, np.random.default_rng(0))
    recs = []
    for model in (logistic_model, user):
        kernel = s.build(model, prepared, 0)
        rng = np.random.default_rng(5)
        state = kernel.init(rng, prepared.theta_init.copy())
        rec = []
        for _ in range(150):
            state, info = kernel.step(rng, state)
            rec.append((info.accepted, info.data_fraction, info.n_batches))
        recs.append((state.theta, rec))
    assert recs[0][1] == recs[1][1]
    assert np.allclose(recs[0][0], recs[1][0], rtol=0, atol=1e-12)


def test_range_bounds_hold(logistic_data):
    rng = np.random.default_rng(2)
    X, y = logistic_data(3000, 4, seed=2)
    model = LogisticRegressionModel(X, y)
    idx = np.arange(model.n_data)
    for _ in range(30):
        th_star = rng.normal(size=5)
        th = th_star + rng.normal(scale=rng.choice([0.01, 0.3, 2.0]), size=5)
        th_new = th + rng.normal(scale=rng.choice([0.001, 0.1, 1.0]), size=5)
        diff = np.abs(model.loglik_terms(th_new, idx) - model.loglik_terms(th, idx)).max()
        assert diff <= model.range_bound(th, th_new) * (1 + 1e-12)
        rdiff = fast.term_abs_max(model.compiled, th, th_new, cv_order=2, theta_star=th_star)
        bound = logistic_residual_range_bound(th, th_new, th_star, model.row_norm_max)
        assert bound == model.cv_range_bound(th, th_new, th_star, 2)
        assert rdiff <= bound * (1 + 1e-9) + 1e-300
    # the lognormal toy's bound
    toy, _x = lognormal_toy(2000)
    for _ in range(30):
        th = np.array([rng.normal(5, 3), rng.normal(2, 1)])
        th_new = th + rng.normal(scale=0.3, size=2)
        diff = np.abs(toy.loglik_terms(th_new, np.arange(2000))
                      - toy.loglik_terms(th, np.arange(2000))).max()
        assert diff <= toy.range_bound(th, th_new) * (1 + 1e-12)


# ---------------------------------------------------------------------------
# statistical behaviour
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("seed, delta, proxy", [
    (0, 0.05, None), (1, 0.01, None), (0, 0.05, "taylor"),
    pytest.param(1, 0.01, "taylor", marks=pytest.mark.slow),
])
def test_wrong_decisions_below_delta(seed, delta, proxy, logistic_data):
    X, y = logistic_data(10000, 3, seed=30 + seed)
    model = LogisticRegressionModel(X, y)
    tr = sample(model, ConfidenceMH(delta=delta, proxy=proxy, check_exact=True, n_steps=1),
                n_samples=1000, n_warmup=300, n_chains=2, random_state=seed,
                check_convergence=False)
    wrong = np.concatenate([tr.warmup_stats["wrong_decision"], tr.stats["wrong_decision"]],
                           axis=1)
    assert wrong.size == 2600
    assert wrong.sum() <= _binomial_upper(wrong.size, delta)
    if proxy == "taylor":
        # near the mode the residual differences are tiny: far fewer data
        assert tr.stats["data_fraction"].mean() < 0.5


def _agrees_with_mh(trace, ref):
    """Marginals within 4.5 MCSE (means) and 15% (sds) of exact MH."""
    for j in range(2):
        a, b = trace.draws[..., j], ref.draws[..., j]
        tol = 4.5 * math.hypot(diag.mcse_mean(a), diag.mcse_mean(b))
        if not (abs(a.mean() - b.mean()) < tol and abs(a.std() / b.std() - 1.0) < 0.15):
            return False
    return True


def test_lognormal_toy_confidence_vs_tiny_batch_ttest():
    """Heavy-tailed log-likelihood differences (BDH §4.1): the confidence
    sampler keeps its per-step guarantee and its marginals agree with exact
    MH. Austerity MH with a first batch of 2 -- a t-test on a heavy-tailed
    mean -- is the negative control: the same checks must reject it (measured:
    ~50% wrong decisions at epsilon = 0.05). Its warmup checks, a tenth of the
    little it reads, are one per chain here: too few to see it."""
    model, _x = lognormal_toy(5000, seed=3)
    kw = {"n_samples": 1500, "n_warmup": 500, "n_chains": 4, "random_state": 11,
          "check_convergence": False}
    delta = 0.05
    conf = sample(model, ConfidenceMH(delta=delta, check_exact=True, n_steps=1), **kw)
    ref = sample(model, MH(n_steps=1), **kw)
    wrong = conf.stats["wrong_decision"]
    assert wrong.sum() <= _binomial_upper(wrong.size, delta)
    assert _agrees_with_mh(conf, ref)
    aus = sample(model, AusterityMH(epsilon=0.05, first_batch_size=2, batch_size=50,
                                    check_exact=True, n_steps=1), **kw)
    aus_wrong = aus.stats["wrong_decision"]
    assert aus_wrong.sum() > _binomial_upper(aus_wrong.size, 4 * delta)
    assert not _agrees_with_mh(aus, ref)


def _check_exact_posterior(tr, mean, cov, n_mcse=4.0, sd_tol=0.10):
    draws = tr.draws
    mcse = diag.mcse_mean(draws)
    est = draws.reshape(-1, draws.shape[-1])
    assert np.all(np.abs(est.mean(axis=0) - mean) < n_mcse * mcse), (est.mean(0), mean, mcse)
    sd = np.sqrt(np.diag(cov))
    assert np.all(np.abs(est.std(axis=0) / sd - 1.0) < sd_tol), (est.std(axis=0), sd)


@pytest.mark.parametrize("seed, proxy", [
    (0, None), pytest.param(1, None, marks=pytest.mark.slow), (0, "taylor"), (1, "taylor")])
def test_exact_gaussian_posterior(gaussian_model, seed, proxy):
    mean, cov = gaussian_model.exact_posterior()
    tr = sample(gaussian_model, ConfidenceMH(delta=0.01, proxy=proxy, first_batch_size=10),
                n_samples=3000, n_warmup=1000, n_chains=4, random_state=seed,
                check_convergence=False)
    _check_exact_posterior(tr, mean, cov)
    if proxy == "taylor":
        # Gaussian second-order residuals vanish: exact decisions from the proxies'
        # total alone, without data
        assert np.all(tr.stats["data_fraction"] == 0.0)


# ---------------------------------------------------------------------------
# API
# ---------------------------------------------------------------------------
@pytest.mark.parametrize("params, match", [
    ({"delta": 1.0}, "delta"),
    ({"delta": -0.01}, "delta"),
    ({"bound": "chernoff"}, "bound"),
    ({"batch_growth": 1.0}, "batch_growth"),
    ({"p": 1.0}, "'p'"),
    ({"first_batch_size": 0}, "first_batch_size"),
    ({"proxy": "linear"}, "proxy"),
])
def test_bad_parameters(logistic_model, params, match):
    with pytest.raises(ValueError, match=match):
        sample(logistic_model, ConfidenceMH(**params), n_samples=5, n_warmup=0, n_chains=1)


def test_first_batch_larger_than_data(logistic_model):
    with pytest.raises(ValueError, match="first_batch_size=5001 is larger than the number of data"):
        sample(logistic_model, ConfidenceMH(first_batch_size=5001), n_samples=5, n_chains=1)


def test_user_model_without_range_bound_fails_at_prepare():
    toy, _ = lognormal_toy(100)
    no_bound = FunctionModel(toy._loglik, toy._grad, 100, 2)
    with pytest.raises(NotImplementedError, match=r"range_bound\(theta, theta_new\)"):
        ConfidenceMH().prepare(no_bound, np.random.default_rng(0))


def test_proxy_needs_logistic_or_gaussian_glm():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    pois = PoissonRegressionModel(X, rng.poisson(1.0, size=200).astype(float))
    with pytest.raises(ValueError, match="logistic and Gaussian families"):
        ConfidenceMH(proxy="taylor").prepare(pois, rng)
    toy, _ = lognormal_toy(100)
    with pytest.raises(ValueError, match="has no second-order Taylor control variates"):
        ConfidenceMH(proxy="taylor").prepare(toy, rng)
    # proxy="auto" falls back to the plain bound on both
    for model in (pois, toy):
        assert ConfidenceMH().build(model, ConfidenceMH().prepare(model, rng), 0).rule.cv is None


def test_reading_most_of_the_data_warns(logistic_data):
    """The user-visible symptom: a confidence sampler reading (nearly)
    everything is slower than exact MH, and the run now says so; a run that
    subsamples does not warn."""
    from sklearn.exceptions import EfficiencyWarning
    X, y = logistic_data(3000, 3, seed=40)
    model = LogisticRegressionModel(X, y)
    kw = {"n_samples": 200, "n_warmup": 100, "n_chains": 2, "random_state": 0}
    with pytest.warns(EfficiencyWarning, match=r"confidence read \d+% of the data.*proxy='taylor'"):
        tr = sample(model, ConfidenceMH(delta=0.01, n_steps=1, proxy=None), **kw)
    assert tr.stats["data_fraction"].mean() > 0.5
    with warnings.catch_warnings():
        warnings.simplefilter("error", EfficiencyWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        tr = sample(model, AusterityMH(epsilon=0.1, batch_size=100, n_steps=1), **kw)
    assert tr.stats["data_fraction"].mean() < 0.5
