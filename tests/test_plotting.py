"""Tests of bayes_subsample.plotting and of the ArviZ export."""
import sys
import warnings

import numpy as np
import pytest

from bayes_subsample import BayesianLogisticRegression, plotting
from bayes_subsample.plotting import roc_band

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 3))
    y = (X @ [1.0, -0.5, 0.0] + 0.3 + rng.logistic(size=400) > 0).astype(int)
    return X, y


@pytest.fixture(scope="module")
def clf(data):
    X, y = data
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # short chains: convergence warnings are expected
        return BayesianLogisticRegression(n_samples=150, n_warmup=150, n_chains=2,
                                          random_state=0).fit(X, y)


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def test_plot_trace_accepts_estimator_trace_and_array(clf):
    for obj in (clf, clf.trace_, clf.posterior_draws_):
        axes = plotting.plot_trace(obj, max_params=2)
        assert axes.shape == (2, 2)
        # one line per chain
        assert len(axes[0, 0].lines) == 2
    axes = plotting.plot_trace(clf, params=["intercept"], warmup=True)
    assert axes.shape == (1, 2)
    assert axes[0, 0].get_ylabel() == "intercept"
    axes = plotting.plot_trace(clf, params=[0, 1], density=False)
    assert axes.shape == (2,)


def test_plot_marginals_against_reference(clf):
    rng = np.random.default_rng(1)
    other = clf.posterior_draws_ + 0.01 * rng.normal(size=clf.posterior_draws_.shape)
    axes = plotting.plot_marginals({"noisy": other, "same": clf.trace_}, reference=clf,
                                   params=[0, "intercept"])
    assert axes.flat[0].get_title() == "coef[0]"
    assert axes.flat[1].get_title() == "intercept"
    assert len(axes.flat[0].lines) == 3  # reference + two sets
    # pooled 2-D draws (as from sample_posterior) are one chain
    axes = plotting.plot_marginals(clf.sample_posterior())
    assert axes.flat[0].figure is not None


def test_plot_marginals_errors(clf):
    with pytest.raises(ValueError, match="unknown parameter"):
        plotting.plot_marginals(clf, params=["nope"])
    with pytest.raises(ValueError, match="parameters"):
        plotting.plot_marginals(np.zeros((1, 10, 2)), reference=clf)
    with pytest.raises(ValueError, match="not fitted"):
        plotting.plot_marginals(BayesianLogisticRegression())


def test_plot_autocorrelation(clf):
    axes = plotting.plot_autocorrelation({"a": clf, "b": clf.trace_}, params=[0], max_lag=10)
    ax = axes.flat[0]
    assert len(ax.lines) == 3  # two ACFs and the zero line
    np.testing.assert_allclose(ax.lines[0].get_ydata()[0], 1.0)
    assert "IF" in ax.get_legend().get_texts()[0].get_text()


def test_roc_band_matches_sklearn(clf, data):
    from sklearn.metrics import roc_auc_score

    X, y = data
    band = roc_band(clf, X, y, max_draws=50)
    assert band.n_draws == 50
    assert np.all(band.tpr_low <= band.tpr_median + 1e-12)
    assert np.all(band.tpr_median <= band.tpr_high + 1e-12)
    np.testing.assert_allclose(band.auc, roc_auc_score(y, clf.predict_proba(X)[:, 1]),
                               atol=5e-3)  # predict_proba averages 1000 draws, the band 50
    # the same from the raw draws (intercept last) and from the Trace
    band2 = roc_band(clf.trace_, X, y, max_draws=50)
    np.testing.assert_allclose(band2.auc_draws, band.auc_draws)
    with pytest.raises(ValueError, match="columns"):
        roc_band(clf.posterior_draws_, X[:, :1], y)
    with pytest.raises(ValueError, match="both classes"):
        roc_band(clf, X, np.ones_like(y))


def test_plot_roc_two_samplers_on_one_axes(clf, data):
    X, y = data
    ax = plotting.plot_roc(clf, X, y, label="a")
    plotting.plot_roc(clf.posterior_draws_, X, y, ax=ax, label="b")
    assert len(ax.roc_bands_) == 2
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("a (AUC") for t in labels)


def test_missing_matplotlib_message(monkeypatch, clf):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    with pytest.raises(ImportError, match="pip install matplotlib"):
        plotting.plot_trace(clf)


def test_bad_array_shape():
    with pytest.raises(ValueError, match="dimensions"):
        plotting.plot_trace(np.zeros((1, 2, 3, 4)))


def test_to_inference_data(clf):
    az = pytest.importorskip("arviz")
    idata = clf.to_inference_data()
    assert isinstance(idata, az.InferenceData)
    post = idata.posterior
    assert post["intercept"].shape == (2, 150)
    np.testing.assert_allclose(post["coef"].sel(feature=0).values, clf.posterior_draws_[:, :, 0])
    assert "acceptance_rate" in idata.sample_stats
    idata2 = clf.trace_.to_inference_data()
    assert set(idata2.posterior.data_vars) == set(post.data_vars)


# ---- more than two classes: one-vs-rest curves -----------------------------------------------
@pytest.fixture(scope="module")
def data3():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(400, 2))
    eta = X @ np.array([[1.5, 0.0], [-1.0, 1.2], [-0.5, -1.2]]).T
    p = np.exp(eta) / np.exp(eta).sum(axis=1, keepdims=True)
    y = (rng.random(400)[:, None] > np.cumsum(p, axis=1)).sum(axis=1)
    return X, np.array(["a", "b", "c"])[y]


@pytest.fixture(scope="module")
def clf3(data3):
    X, y = data3
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return BayesianLogisticRegression(sampler="hmc", n_samples=60, n_warmup=100, n_chains=2,
                                          random_state=0).fit(X, y)


def test_roc_ovr_matches_sklearn(clf3, data3):
    from sklearn.metrics import roc_auc_score

    X, y = data3
    res = plotting.roc_ovr(clf3, X, y)      # 120 draws <= max_draws: every draw
    proba = clf3.predict_proba(X)
    np.testing.assert_array_equal(res.classes, ["a", "b", "c"])
    assert res.n_draws == 120 and res.auc_draws.shape == (120, 3)
    for k, c in enumerate(res.classes):
        # the posterior-predictive curve scores by the column of predict_proba
        np.testing.assert_allclose(res.auc[k], roc_auc_score(y == c, proba[:, k]), atol=1e-12)
        band = res.bands[k]
        assert np.all(band.tpr_low <= band.tpr_median + 1e-12)
        assert np.all(band.tpr_median <= band.tpr_high + 1e-12)
    np.testing.assert_allclose(res.macro_auc, roc_auc_score(y, proba, multi_class="ovr"),
                               atol=1e-12)
    np.testing.assert_allclose(res.macro_auc_draws, res.auc_draws.mean(axis=1))
    # one draw's AUC: the ranking of its log-softmax (= its softmax) scores
    t = clf3.sample_posterior()[7].reshape(3, 3)
    p7 = np.exp(X @ t[:, :2].T + t[:, 2])
    p7 /= p7.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(res.auc_draws[7, 1], roc_auc_score(y == "b", p7[:, 1]))
    assert np.all(res.tpr_low <= res.tpr_high) and res.tpr_mean[0] == 0.0
    # the same from the Trace and the raw draws, given the classes
    res2 = plotting.roc_ovr(clf3.trace_, X, y, classes=clf3.classes_)
    res3 = plotting.roc_ovr(clf3.posterior_draws_, X, y, classes=["a", "b", "c"])
    np.testing.assert_allclose(res2.auc_draws, res.auc_draws)
    np.testing.assert_allclose(res3.auc_draws, res.auc_draws)
    # thinning: evenly spaced draws
    assert plotting.roc_ovr(clf3, X, y, max_draws=30).n_draws == 30


def test_roc_band_one_class_of_several(clf3, data3):
    X, y = data3
    band = roc_band(clf3, X, y, pos_label="c")
    res = plotting.roc_ovr(clf3, X, y)
    np.testing.assert_allclose(band.auc_draws, res.bands[2].auc_draws)
    np.testing.assert_allclose(band.tpr_median, res.bands[2].tpr_median)
    assert band.auc == res.auc[2]
    with pytest.raises(ValueError, match="3 classes: pass pos_label"):
        roc_band(clf3, X, y)
    with pytest.raises(ValueError, match="not one of the classes"):
        roc_band(clf3, X, y, pos_label="d")


def test_roc_ovr_absent_class_and_errors(clf3, clf, data3, data):
    X, y = data3
    keep = y != "b"
    res = plotting.roc_ovr(clf3, X[keep], y[keep])
    assert res.bands[1] is None and np.isnan(res.auc[1])
    np.testing.assert_allclose(res.macro_auc, np.mean(res.auc[[0, 2]]))
    assert np.isfinite(res.macro_auc_draws).all()
    with pytest.raises(ValueError, match="at least two of the classes"):
        plotting.roc_ovr(clf3, X[y == "a"], y[y == "a"])
    with pytest.raises(ValueError, match="not among the classes"):
        plotting.roc_ovr(clf3, X, np.where(y == "a", "z", y))
    with pytest.raises(ValueError, match="more than two classes"):
        plotting.roc_ovr(clf, *data)
    with pytest.raises(ValueError, match="9 parameters but X has 1 columns"):
        plotting.roc_ovr(clf3.posterior_draws_, X[:, :1], y, classes=["a", "b", "c"])
    with pytest.raises(ValueError, match="fitted on 2"):
        plotting.roc_ovr(clf3, X[:, :1], y)
    with pytest.raises(ValueError, match="distinct labels"):
        plotting.roc_ovr(clf3.posterior_draws_, X, y, classes=["a", "a", "c"])


def test_plot_roc_one_vs_rest(clf3, data3):
    X, y = data3
    ax = plotting.plot_roc(clf3, X, y, label="HMC")
    res = ax.roc_bands_[0]
    assert len(ax.lines) == 3 + 1 + 1             # classes, macro average, chance
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    for k, c in enumerate(res.classes):
        assert f"HMC: {c} (AUC {res.auc[k]:.3f})" in labels
    assert f"HMC: macro average (AUC {res.macro_auc:.3f})" in labels
    assert any(t.startswith("90% band over 120 draws") for t in labels)
    # one class's curve, as for two classes
    ax2 = plotting.plot_roc(clf3, X, y, pos_label="a", band=False)
    assert len(ax2.lines) == 2 and ax2.roc_bands_[0].auc == res.auc[0]
