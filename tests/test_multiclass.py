"""BayesianLogisticRegression with more than two classes (multinomial)."""
import pickle
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GridSearchCV, cross_val_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from bayes_subsample import BayesianLogisticRegression

FAST = {"n_samples": 200, "n_warmup": 200, "n_chains": 2, "random_state": 0}


def _three_classes(n=600, seed=0, labels=("a", "b", "c")):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    B = np.array([[1.5, 0.0], [-1.0, 1.2], [-0.5, -1.2]])
    eta = X @ B.T
    P = np.exp(eta - eta.max(axis=1, keepdims=True))
    P /= P.sum(axis=1, keepdims=True)
    y = (P.cumsum(axis=1) > rng.random((n, 1))).argmax(axis=1)
    return X, np.asarray(labels)[y]


@pytest.fixture(scope="module")
def fitted():
    X, y = _three_classes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = BayesianLogisticRegression(sampler="hmc", **FAST).fit(X, y)
    return clf, X, y


def test_shapes_and_invariants(fitted):
    clf, X, y = fitted
    K, d = 3, X.shape[1]
    assert clf.classes_.tolist() == ["a", "b", "c"]
    assert clf.coef_.shape == (K, d) and clf.intercept_.shape == (K,)
    # centred: the identified part, summing to zero over classes
    np.testing.assert_allclose(clf.coef_.sum(axis=0), 0.0, atol=1e-12)
    assert clf.posterior_draws_.shape == (2, 200, K * (d + 1))
    P = clf.predict_proba(X)
    assert P.shape == (len(X), K)
    np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(np.exp(clf.predict_log_proba(X)), P, rtol=1e-10)
    np.testing.assert_array_equal(clf.predict(X), clf.classes_[P.argmax(axis=1)])
    np.testing.assert_array_equal(clf.decision_function(X).argmax(axis=1), P.argmax(axis=1))
    assert clf.sample_posterior().shape == (400, K * (d + 1))
    assert clf.diagnostics_["r_hat"].shape == (K * (d + 1),)
    # summaries describe the centred draws, whose means are coef_ and intercept_
    means = clf.diagnostics_["summary"]["mean"]
    centred = clf.trace_.reported_draws().reshape(-1, K, d + 1).mean(axis=0)
    np.testing.assert_allclose(centred[:, :d], clf.coef_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(centred[:, d], clf.intercept_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(means, centred.ravel(), rtol=1e-8, atol=1e-12)


def test_predict_proba_is_the_posterior_predictive_mean(fitted):
    clf, X, _ = fitted
    draws = clf.sample_posterior().reshape(-1, 3, 3)
    eta = np.einsum("nd,skd->snk", X[:5], draws[:, :, :2]) + draws[None, :, :, 2].transpose(1, 0, 2)
    eta -= eta.max(axis=2, keepdims=True)
    P = np.exp(eta)
    P /= P.sum(axis=2, keepdims=True)
    np.testing.assert_allclose(clf.predict_proba(X[:5]), P.mean(axis=0), rtol=1e-10)


def test_accuracy_matches_scikit_learn():
    X, y = _three_classes(n=3000, seed=1)
    Xt, yt = _three_classes(n=3000, seed=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = BayesianLogisticRegression(**FAST).fit(X, y)
    sk = LogisticRegression(C=1e4).fit(X, y)
    assert abs(clf.score(Xt, yt) - sk.score(Xt, yt)) < 0.01
    # the centred posterior means sit near scikit-learn's (symmetric) estimate
    np.testing.assert_allclose(clf.coef_, sk.coef_, atol=0.15)


@pytest.mark.parametrize("sampler", ["hmc_ecs", "nuts", "mh", "austerity", "sgld"])
def test_samplers_fit_multiclass(sampler):
    X, y = _three_classes(n=3000, seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore")
        clf = BayesianLogisticRegression(sampler=sampler, **FAST).fit(X, y)
    assert clf.score(X, y) > 0.6
    assert np.isfinite(clf.predict_proba(X)).all()


def test_labels_with_gaps_and_binary_unchanged():
    X, y = _three_classes()
    codes = np.searchsorted(["a", "b", "c"], y) * 5 + 2      # 2, 7, 12
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = BayesianLogisticRegression(sampler="hmc", **FAST).fit(X, codes)
        assert set(clf.predict(X)) <= {2, 7, 12}
        binary = BayesianLogisticRegression(sampler="hmc", **FAST).fit(X, y == "a")
    assert binary.coef_.shape == (2,) and isinstance(binary.intercept_, float)
    assert binary.posterior_draws_.shape == (2, 200, 3)


def test_warm_start_continues_and_pickles(fitted):
    X, y = _three_classes()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        clf = BayesianLogisticRegression(sampler="hmc", warm_start=True, **FAST).fit(X, y)
        clf.fit(X, y)
        assert clf.posterior_draws_.shape[1] == 400
        with pytest.raises(ValueError, match="classes changed"):
            clf.fit(X[y != "c"], y[y != "c"])
    again = pickle.loads(pickle.dumps(fitted[0]))
    np.testing.assert_array_equal(again.predict_proba(X[:10]), fitted[0].predict_proba(X[:10]))


def test_pipeline_cross_validation_and_grid_search():
    X, y = _three_classes(n=300)
    pipe = make_pipeline(StandardScaler(), BayesianLogisticRegression(sampler="hmc", **FAST))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        scores = cross_val_score(pipe, X, y, cv=3)
        grid = GridSearchCV(pipe, {"bayesianlogisticregression__prior_scale": [1.0, 10.0]},
                            cv=2).fit(X, y)
    assert scores.mean() > 0.6
    assert grid.best_estimator_.predict(X).shape == (300,)
