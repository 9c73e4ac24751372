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
    np.testing.assert_allclose(post["coef[0]"].values, clf.posterior_draws_[:, :, 0])
    assert "acceptance_rate" in idata.sample_stats
    idata2 = clf.trace_.to_inference_data()
    assert set(idata2.posterior.data_vars) == set(post.data_vars)
