"""The Bayesian MLP estimators (``BayesianMLPClassifier``, ``BayesianMLPRegressor``).

* With no hidden layer the classifier is multinomial (or, for two classes,
  binary) logistic regression: its posterior predictive agrees with the GLM
  estimator's (sampled by NUTS) within Monte Carlo error plus a stated
  allowance for the SG samplers' step bias.
* With no hidden layer the regressor is Bayesian linear regression with a
  known noise: its predictive mean and sd agree with the exact conjugate
  answer (tolerances from each run's ESS).
* On held-out digits the predictive clearly beats chance.
* Inputs are validated (NaN, one class, shapes, sparse, samplers that need a
  mode); raw pixels warn.
* ``warm_start`` continues from the last networks; the same ``random_state``
  gives the same draws for any ``n_jobs``; a fitted estimator pickles (one
  copy of its draws) and keeps its predictions; an interrupt keeps the draws.
"""
import pickle
import warnings

import numpy as np
import pytest
from scipy import sparse
from scipy.special import softmax
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split

from bayes_subsample import (BayesianLogisticRegression, BayesianMLPClassifier,
                             BayesianMLPRegressor)
from bayes_subsample.diagnostics import ess_bulk, mcse_mean
from bayes_subsample.neural_network import InputScaleWarning
from bayes_subsample.samplers import NUTS, SGHMC

SG = ["sgld", "sghmc", "ewsg", "psgld"]
#: the SG samplers' step bias allowed on top of Monte Carlo error, in
#: probability. Measured on the problem of test_no_hidden_layer_is_logistic
#: (300 rows, 1000 passes, 4 chains x 200 draws) over random_state 0-2: the
#: largest error in a predictive probability was 0.009 (SGLD, SGHMC), 0.015
#: (pSGLD) and 0.024 (EWSG), 1.6 to 3.0 combined MCSE. A prior sd of 0.5
#: instead of 1 (three classes, SGHMC) gave errors 1.5 times the tolerance.
STEP_BIAS = 0.01


@pytest.fixture(scope="module")
def three_classes():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 2))
    logits = X @ np.array([[1.5, -1.0, 0.0], [0.0, 1.0, -1.5]])
    u = rng.random(300)[:, None]
    y = (u > np.cumsum(softmax(logits, axis=1), axis=1)).sum(axis=1)
    return X, y


def _predictive_draws(clf, Xq):
    """Class probabilities of each retained network at ``Xq``: (chains, draws, q, K)."""
    W, b = clf.coefs_draws_[0], clf.intercepts_draws_[0]
    P = softmax(np.einsum("qd,sdk->sqk", Xq, W) + b[:, None, :], axis=-1)
    return P.reshape(clf.n_chains, -1, *P.shape[1:])


def _glm_predictive_draws(glm, Xq):
    d = glm.posterior_draws_
    K = glm.classes_.shape[0]
    if K == 2:
        eta = np.einsum("qd,csd->csq", Xq, d[..., :-1]) + d[..., -1][..., None]
        p1 = 1 / (1 + np.exp(-eta))
        return np.stack([1 - p1, p1], axis=-1)
    t = d.reshape(*d.shape[:2], K, -1)
    eta = np.einsum("qd,cskd->csqk", Xq, t[..., :-1]) + t[..., -1][:, :, None, :]
    return softmax(eta, axis=-1)


def _mcse(P):
    """MCSE of each entry's mean over (chains, draws, ...)."""
    flat = P.reshape(*P.shape[:2], -1)
    return np.array([mcse_mean(flat[:, :, j]) for j in range(flat.shape[2])]).reshape(
        P.shape[2:])


@pytest.fixture(scope="module")
def logistic_reference(three_classes):
    """NUTS on the GLM with the priors the MLP with no hidden layer has,
    for 3 and 2 classes: ``{n_classes: (X, y, fitted)}``."""
    X, y = three_classes
    out = {}
    for K, labels in ((3, y), (2, (y == 0).astype(int))):
        # the MLP puts N(0, 1) on every class's weights; for two classes only
        # the difference of the two classes' weights matters, whose prior is
        # N(0, 2): logistic regression with prior sd sqrt(2)
        scale = 1.0 if K == 3 else np.sqrt(2.0)
        out[K] = (X, labels, BayesianLogisticRegression(
            sampler=NUTS(), prior_scale=scale, intercept_prior_scale=scale, n_samples=1000,
            n_warmup=300, n_chains=4, random_state=0).fit(X, labels))
    return out


@pytest.mark.parametrize("n_classes", [3, 2])
@pytest.mark.parametrize("sampler", SG)
def test_no_hidden_layer_is_logistic_regression(sampler, n_classes, logistic_reference):
    X, y, glm = logistic_reference[n_classes]
    Xq = np.array([[0.0, 0.0], [1.0, 1.0], [-1.0, 2.0], [2.0, -1.0]])
    clf = BayesianMLPClassifier(hidden_layer_sizes=(), sampler=sampler, n_passes=1000,
                                n_samples=200, n_chains=4, random_state=0).fit(X, y)
    assert clf.n_layers_ == 2 and clf.coefs_draws_[0].shape == (800, 2, n_classes)
    P, R = _predictive_draws(clf, Xq), _glm_predictive_draws(glm, Xq)
    np.testing.assert_allclose(clf.predict_proba(Xq), P.mean(axis=(0, 1)), atol=1e-12)
    err = np.abs(clf.predict_proba(Xq) - glm.predict_proba(Xq))
    tol = 4 * np.sqrt(_mcse(P) ** 2 + _mcse(R) ** 2) + STEP_BIAS
    assert np.all(err <= tol), (err, tol)


@pytest.fixture(scope="module")
def linear():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(200, 2))
    y = 1.0 + X @ [1.0, -2.0] + 0.5 * rng.normal(size=200)
    return X, y, 0.5


def _conjugate(X, y, sigma, Xq):
    """The exact predictive mean, sd of the mean, and sd of y at ``Xq`` of
    Bayesian linear regression on the standardised targets, N(0, 1) priors."""
    m, s = y.mean(), y.std()
    A = np.column_stack([X, np.ones(len(X))])
    st = sigma / s
    cov = np.linalg.inv(A.T @ A / st**2 + np.eye(A.shape[1]))
    mu = cov @ A.T @ ((y - m) / s) / st**2
    Aq = np.column_stack([Xq, np.ones(len(Xq))])
    epi = s * np.sqrt(np.einsum("qi,ij,qj->q", Aq, cov, Aq))
    return m + s * Aq @ mu, epi, np.sqrt(epi**2 + sigma**2)


@pytest.mark.parametrize("seed", [0, 1])
def test_no_hidden_layer_regressor_is_conjugate_linear_regression(seed, linear):
    """SGLD at a tenth of its default step (at the default step its sd of the
    mean is 1.6 to 1.9 times the exact one on this tight posterior; SGHMC's,
    at friction 0.1, 3 to 5 times: the SG samplers' bias, see the user
    guide)."""
    X, y, sigma = linear
    Xq = np.array([[0.0, 0.0], [1.0, 1.0], [-2.0, 1.5]])
    mean, epi, sd = _conjugate(X, y, sigma, Xq)
    kw = dict(hidden_layer_sizes=(), sampler="sgld", noise_scale=sigma / y.std())
    default = BayesianMLPRegressor(n_passes=1, n_samples=1, **kw).fit(X, y)
    step = default.diagnostics_["step_size"] / 10
    reg = BayesianMLPRegressor(step_size=step, n_passes=3000, n_samples=200, n_chains=4,
                               random_state=seed, **kw).fit(X, y)
    assert reg.noise_scale_ == pytest.approx(sigma)
    W, b = reg.coefs_draws_[0][:, :, 0], reg.intercepts_draws_[0][:, 0]
    f = ((Xq @ W.T + b).T * reg.y_scale_ + reg.y_mean_).reshape(4, -1, len(Xq))
    mcse = np.array([mcse_mean(f[:, :, q]) for q in range(len(Xq))])
    ess = np.array([ess_bulk(f[:, :, q]) for q in range(len(Xq))])
    u = reg.predict_uncertainty(Xq)
    np.testing.assert_allclose(u.mean, f.mean(axis=(0, 1)), rtol=1e-10)
    assert np.all(np.abs(u.mean - mean) <= 4 * mcse + 1e-3 * epi)
    # the sd of the mean: relative MC error about 1 / sqrt(2 ESS), plus 10%
    # for the step's bias (ratios 1.01 to 1.12 measured at this step, seeds 0, 1)
    assert np.all(np.abs(u.epistemic_std / epi - 1) <= 4 / np.sqrt(2 * ess) + 0.10)
    y_mean, y_std = reg.predict(Xq, return_std=True)
    np.testing.assert_allclose(y_mean, u.mean)
    np.testing.assert_allclose(y_std, sd, rtol=0.01)
    np.testing.assert_allclose(u.noise_std, sigma)


@pytest.fixture(scope="module")
def digits():
    X, y = load_digits(return_X_y=True)
    return train_test_split((X / 16).astype(np.float32), y, test_size=0.25, random_state=0)


@pytest.mark.parametrize("sampler", ["sghmc", "sgld"])
def test_predictive_beats_chance_on_digits(sampler, digits):
    """64-16-10 relu, 50 passes: 10 classes, chance is 0.1. Measured over
    random_state 0-4: test accuracy 0.949 to 0.967 (SGHMC), 0.944 to 0.960
    (SGLD); the mean entropy of the misclassified digits 4.8 to 6.2 (SGHMC)
    and 3.5 to 4.8 (SGLD) times the others'."""
    Xtr, Xte, ytr, yte = digits
    clf = BayesianMLPClassifier(hidden_layer_sizes=(16,), sampler=sampler, n_passes=50,
                                n_samples=20, random_state=0).fit(Xtr, ytr)
    assert clf.score(Xte, yte) > 0.9
    u = clf.predict_uncertainty(Xte)
    np.testing.assert_allclose(u.proba.sum(axis=1), 1.0)
    np.testing.assert_allclose(u.entropy, u.expected_entropy + u.mutual_information,
                               atol=1e-12)
    assert np.all(u.mutual_information >= 0) and np.all(u.entropy <= np.log(10) + 1e-12)
    # the misclassified digits are the uncertain ones
    wrong = clf.predict(Xte) != yte
    assert u.entropy[wrong].mean() > 2 * u.entropy[~wrong].mean()


def test_string_labels_and_fitted_attributes():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 3))
    y = np.where(X[:, 0] > 0, "yes", "no")
    clf = BayesianMLPClassifier(hidden_layer_sizes=(5, 4), activation="tanh", n_passes=50,
                                n_samples=7, random_state=0).fit(X, y)
    assert clf.classes_.tolist() == ["no", "yes"]
    assert set(clf.predict(X)) <= {"no", "yes"} and clf.score(X, y) > 0.9
    assert (clf.n_layers_, clf.n_outputs_, clf.out_activation_) == (4, 2, "softmax")
    assert [W.shape for W in clf.coefs_draws_] == [(7, 3, 5), (7, 5, 4), (7, 4, 2)]
    assert [b.shape for b in clf.intercepts_draws_] == [(7, 5), (7, 4), (7, 2)]
    assert clf.sample_posterior().shape == (7, 3 * 5 + 5 + 5 * 4 + 4 + 4 * 2 + 2)
    assert clf.sample_posterior(3, random_state=0).shape == (3, 54)
    d = clf.diagnostics_
    assert d["sampler"] == "sghmc" and d["n_draws"] == 7 and not d["interrupted"]
    assert d["data_passes"][0] == pytest.approx(50, rel=0.02)


def test_regressor_multioutput_and_auto_noise():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    Y = np.column_stack([X[:, 0] + 0.3 * rng.normal(size=300),
                         100 + 50 * X[:, 1] + 20 * rng.normal(size=300)])
    reg = BayesianMLPRegressor(hidden_layer_sizes=(8,), n_passes=100, n_samples=10,
                               random_state=0).fit(X, Y)
    mean, std = reg.predict(X[:5], return_std=True)
    assert mean.shape == std.shape == (5, 2) and reg.n_outputs_ == 2
    # "auto": the linear fit's residual sd in standard deviations of y (both
    # targets' residuals are about 0.3 to 0.4 sd), in the units of each target
    ratio = reg.noise_scale_ / Y.std(axis=0)
    assert ratio[0] == pytest.approx(ratio[1]) and 0.2 < ratio[0] < 0.5
    assert reg.score(X, Y) > 0.7


def test_bad_inputs():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 3)), np.repeat([0, 1], 25)
    clf = BayesianMLPClassifier(hidden_layer_sizes=(4,), n_passes=5, n_samples=2)
    Xnan = X.copy()
    Xnan[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        clf.fit(Xnan, y)
    with pytest.raises(ValueError, match="at least 2 classes"):
        clf.fit(X, np.zeros(50))
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        clf.fit(X, y[:-1])
    with pytest.raises(TypeError, match="[Ss]parse"):
        clf.fit(sparse.csr_matrix(X), y)
    with pytest.raises(ValueError, match="does not run on a neural network"):
        BayesianMLPClassifier(sampler=NUTS(), n_passes=5).fit(X, y)
    with pytest.raises(ValueError, match="sampler"):
        BayesianMLPClassifier(sampler="nuts").fit(X, y)
    with pytest.raises(ValueError, match="hidden_layer_sizes"):
        BayesianMLPClassifier(hidden_layer_sizes=(4, 0)).fit(X, y)
    with pytest.raises(ValueError, match="continuous"):
        clf.fit(X, rng.normal(size=50))
    clf.fit(X, y)
    with pytest.raises(ValueError, match="3 features"):
        clf.predict(X[:, :2])
    with pytest.raises(ValueError, match="NaN"):
        BayesianMLPRegressor(n_passes=5).fit(X, np.where(y, np.nan, 1.0))
    with pytest.warns(InputScaleWarning, match="far from unit scale"):
        BayesianMLPClassifier(hidden_layer_sizes=(4,), n_passes=2, n_samples=2).fit(
            255 * np.abs(X), y)
    with warnings.catch_warnings():
        warnings.simplefilter("error", InputScaleWarning)
        clf.fit(X, y)


def test_warm_start_continues_from_the_last_networks():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 2)), np.repeat([0, 1], 100)
    kw = dict(hidden_layer_sizes=(6,), n_samples=5, n_chains=2, random_state=0)
    clf = BayesianMLPClassifier(warm_start=True, n_passes=20, **kw).fit(X, y)
    last = clf.posterior_draws_.reshape(2, 5, -1)[:, -1]
    # a step too small to move: the continuation's draws are its start, the
    # previous fit's last networks
    clf.set_params(step_size=1e-12, sampler=SGHMC(friction=0.1)).fit(X, y)
    np.testing.assert_allclose(clf.posterior_draws_.reshape(2, 5, -1)[:, -1], last, atol=1e-6)
    # a continuation is not a fresh fit
    clf.set_params(step_size=None, sampler="sghmc").fit(X, y)
    fresh = BayesianMLPClassifier(n_passes=20, **kw).fit(X, y)
    assert not np.allclose(clf.posterior_draws_, fresh.posterior_draws_)
    # a fresh fit with the same random_state repeats itself
    again = BayesianMLPClassifier(n_passes=20, **kw).fit(X, y)
    np.testing.assert_array_equal(again.posterior_draws_, fresh.posterior_draws_)
    with pytest.raises(ValueError, match="classes changed"):
        clf.fit(X, np.repeat([0, 2], 100))
    with pytest.raises(ValueError, match="n_chains"):
        clf.set_params(n_chains=3).fit(X, y)
    # the failed fits left the estimator as it was
    np.testing.assert_array_equal(clf.classes_, [0, 1])


def test_same_draws_for_any_n_jobs():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(150, 3)), np.repeat([0, 1, 2], 50)
    kw = dict(hidden_layer_sizes=(5,), sampler="ewsg", n_passes=10, n_samples=4, n_chains=2,
              random_state=3)
    a = BayesianMLPClassifier(n_jobs=1, **kw).fit(X, y)
    b = BayesianMLPClassifier(n_jobs=2, **kw).fit(X, y)
    np.testing.assert_array_equal(a.posterior_draws_, b.posterior_draws_)
    assert not np.array_equal(a.posterior_draws_[:4], a.posterior_draws_[4:])


def test_pickle_keeps_predictions_and_one_copy_of_the_draws():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 20))
    y = X[:, 0] + rng.normal(size=100)
    reg = BayesianMLPRegressor(hidden_layer_sizes=(50,), n_passes=20, n_samples=20,
                               random_state=0).fit(X, y)
    blob = pickle.dumps(reg)
    assert len(blob) < 1.3 * reg.posterior_draws_.nbytes
    back = pickle.loads(blob)
    np.testing.assert_array_equal(back.predict(X), reg.predict(X))
    assert [W.shape for W in back.coefs_draws_] == [W.shape for W in reg.coefs_draws_]
    assert np.shares_memory(back.coefs_draws_[0], back.posterior_draws_)
    # the live estimator was not changed by pickling
    assert reg.posterior_draws_ is not None and len(reg.coefs_draws_) == 2


class InterruptingSGHMC(SGHMC):
    """SGHMC whose kernels raise KeyboardInterrupt once, at iteration ``after
    + 1`` (a user pressing Ctrl-C); a test-only sampler object."""

    def __init__(self, step_size=None, batch_size=None, n_steps=10, friction=None, after=10):
        super().__init__(step_size=step_size, batch_size=batch_size, n_steps=n_steps,
                         friction=friction)
        self.after = after

    def build(self, model, prepared, n_warmup):
        kernel = super().build(model, prepared, n_warmup)
        count, after = [0], self.after
        step, warmup_step = kernel.step, kernel.warmup_step

        def tick():
            count[0] += 1
            if count[0] == after + 1:
                raise KeyboardInterrupt

        def new_step(rng, state):
            tick()
            return step(rng, state)

        def new_warmup_step(rng, state, i):
            tick()
            return warmup_step(rng, state, i)

        kernel.step, kernel.warmup_step = new_step, new_warmup_step
        return kernel


@pytest.mark.filterwarnings("ignore::bayes_subsample.exceptions.LongFitWarning")
def test_keyboard_interrupt_keeps_the_draws():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 2)), np.repeat([0, 1], 100)
    kw = dict(hidden_layer_sizes=(4,), n_passes=20, n_samples=10, random_state=0)
    full = BayesianMLPClassifier(sampler=InterruptingSGHMC(after=10**9), **kw).fit(X, y)
    n_warmup = full.trace_.warmup_lengths[0]
    clf = BayesianMLPClassifier(sampler=InterruptingSGHMC(after=n_warmup + 4), **kw)
    with pytest.warns(RuntimeWarning, match="kept 4 draws"):
        clf.fit(X, y)
    assert clf.diagnostics_["interrupted"] and not clf.diagnostics_["draws_from_burn_in"]
    np.testing.assert_array_equal(clf.posterior_draws_, full.posterior_draws_[:4])
    assert np.isfinite(clf.predict_proba(X)).all()
    # stopped in burn-in: the last burn-in draws serve, with a warning
    clf = BayesianMLPClassifier(sampler=InterruptingSGHMC(after=3), **kw)
    with pytest.warns(RuntimeWarning, match="during burn-in"):
        clf.fit(X, y)
    assert clf.diagnostics_["draws_from_burn_in"] and clf.posterior_draws_.shape[0] == 3
    # stopped before any iteration: the interrupt propagates, nothing is fitted
    clf = BayesianMLPClassifier(sampler=InterruptingSGHMC(after=0), **kw)
    with pytest.raises(KeyboardInterrupt), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        clf.fit(X, y)
    assert not hasattr(clf, "classes_")


@pytest.mark.slow
@pytest.mark.parametrize("sampler", SG)
def test_no_hidden_layer_logistic_more_seeds(sampler, three_classes):
    """The agreement of test_no_hidden_layer_is_logistic_regression over five
    more seeds (the allowance is not one seed's luck)."""
    X, y = three_classes
    Xq = np.array([[0.0, 0.0], [1.0, 1.0], [-1.0, 2.0], [2.0, -1.0]])
    glm = BayesianLogisticRegression(sampler=NUTS(), prior_scale=1.0, intercept_prior_scale=1.0,
                                     n_samples=2000, n_warmup=500, n_chains=4,
                                     random_state=0).fit(X, y)
    R = _glm_predictive_draws(glm, Xq)
    for seed in range(1, 6):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf = BayesianMLPClassifier(hidden_layer_sizes=(), sampler=sampler, n_passes=1000,
                                        n_samples=200, n_chains=4, random_state=seed).fit(X, y)
        P = _predictive_draws(clf, Xq)
        err = np.abs(clf.predict_proba(Xq) - glm.predict_proba(Xq))
        assert np.all(err <= 4 * np.sqrt(_mcse(P) ** 2 + _mcse(R) ** 2) + STEP_BIAS)
