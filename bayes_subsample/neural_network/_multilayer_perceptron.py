"""Bayesian multilayer perceptrons: :class:`BayesianMLPClassifier` and
:class:`BayesianMLPRegressor`, the posterior of a network's weights sampled by
a stochastic-gradient sampler (SGHMC by default), with predictions averaged
over the retained networks (the posterior predictive)."""
from __future__ import annotations

from numbers import Real

import numpy as np
from scipy.special import softmax
from sklearn.base import ClassifierMixin, RegressorMixin
from sklearn.utils import Bunch
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets

from .._params import store_params
from ..linear_model._base import all_or_nothing
from ._base import ATTRS_DOC, INTERRUPT_NOTE, PARAMS_DOC, BaseBayesianMLP

__all__ = ["BayesianMLPClassifier", "BayesianMLPRegressor"]

#: the range of the automatic noise scale, in standard deviations of y
AUTO_NOISE = (0.1, 1.0)


# the start of the Parameters section the methods share: ``{inputs}`` (the
# predictions) and ``{training_inputs}`` (fit) in their docstrings
_INPUTS_DOC = """Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            {}"""
_DOC_PARTS = {
    "{inputs}": _INPUTS_DOC.format("The inputs."),
    "{training_inputs}": _INPUTS_DOC.format(
        "Inputs, of order one (float32 runs the network in float32)."),
}


def _doc_inputs(method):
    """Put the shared start of the Parameters section into ``method``'s docstring."""
    for key, text in _DOC_PARTS.items():
        method.__doc__ = method.__doc__.replace(key, text)
    return method


def _entropy(P):
    """Row entropies (nats) of the probability rows of ``P``."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.sum(np.where(P > 0, P * np.log(P), 0.0), axis=-1)


class BayesianMLPClassifier(ClassifierMixin, BaseBayesianMLP):
    __doc__ = f"""Bayesian multilayer perceptron classifier sampled by stochastic-gradient MCMC.

    The network of scikit-learn's :class:`~sklearn.neural_network.MLPClassifier`
    (dense hidden layers, a softmax output over the classes, two units for two
    classes) with an independent ``N(0, prior_scale^2)`` prior on every weight
    and bias, its posterior sampled on minibatches
    (:class:`~bayes_subsample.models.MLPModel`). :meth:`predict_proba` is the
    posterior predictive: the class probabilities averaged over the retained
    networks; :meth:`predict_uncertainty` says how spread they are.

    Parameters
    ----------{PARAMS_DOC % dict(no_hidden="multinomial logistic regression",
                               prior_units="", outputs="classes")}
    Attributes
    ----------
    classes_ : ndarray of shape (n_classes,)
        The class labels, sorted.{ATTRS_DOC % dict(out_activation='"softmax".',
                                                   sibling="BayesianMLPRegressor : The regressor.",
                                                   point_estimate="MLPClassifier")}

    Notes
    -----
    Cost: ``n_passes`` data passes per chain, each ``n / batch_size``
    minibatch forward and backward passes (EWSG: ``(M + 1)`` times as many
    gradients per step, the same passes); predictions cost one forward pass
    per retained network.
    {INTERRUPT_NOTE}
    Examples
    --------
    >>> from sklearn.datasets import load_iris
    >>> from sklearn.preprocessing import StandardScaler
    >>> from bayes_subsample import BayesianMLPClassifier
    >>> X, y = load_iris(return_X_y=True)
    >>> X = StandardScaler().fit_transform(X)
    >>> clf = BayesianMLPClassifier(hidden_layer_sizes=(10,), n_passes=100, n_samples=20,
    ...                             random_state=0).fit(X, y)
    >>> clf.predict_proba(X[:2]).shape
    (2, 3)
    >>> bool(clf.score(X, y) > 0.9)
    True
    >>> clf.predict_uncertainty(X[:2]).entropy.shape
    (2,)
    """

    _output = "softmax"

    def __init__(self, hidden_layer_sizes=(100,), activation="relu", *, sampler="sghmc",
                 step_size=None, batch_size=100, n_passes=200, n_samples=100,
                 prior_scale=1.0, n_chains=1, n_jobs=None, random_state=None,
                 warm_start=False, progress=None):
        store_params(self, locals())

    @all_or_nothing
    @_doc_inputs
    def fit(self, X, y):
        """Sample the posterior of the network's weights given ``X`` and the labels ``y``.

        {training_inputs}
        y : array-like of shape (n_samples,)
            Class labels (numbers or strings), at least two classes.

        Returns
        -------
        self : BayesianMLPClassifier
            The fitted estimator.
        """
        hidden, sampler = self._validate()
        X, y = self._check_X_y(X, y)
        check_classification_targets(y)
        classes, yi = np.unique(y, return_inverse=True)
        if classes.shape[0] < 2:
            raise ValueError(
                "This solver needs samples of at least 2 classes in the data, but the data "
                f"contains only one class: {classes[0]!r}")
        previous = self.__dict__.get("classes_") if self.warm_start else None
        if previous is not None and not np.array_equal(previous, classes):
            raise ValueError(f"warm_start: the classes changed from {previous.tolist()} to "
                             f"{classes.tolist()}")
        self.classes_ = classes
        return self._fit_model(X, yi.astype(np.float64), hidden, sampler, classes.shape[0])

    def _proba_moments(self, X):
        """Mean and sd over the retained networks of the class probabilities,
        and the mean of their entropies."""
        X = self._check_X(X)
        n, K = X.shape[0], self.n_outputs_
        mean, sd, h = np.empty((n, K)), np.empty((n, K)), np.empty(n)
        for rows in self._blocks(X):
            P = softmax(self._outputs(X, rows).astype(np.float64), axis=2)   # (S, m, K)
            mean[rows] = P.mean(axis=0)
            sd[rows] = P.std(axis=0)
            h[rows] = _entropy(P).mean(axis=0)
        return np.clip(mean, 0.0, 1.0), sd, h

    @_doc_inputs
    def predict_proba(self, X):
        """Posterior predictive class probabilities: the softmax outputs
        averaged over the retained networks.

        {inputs}

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.
        """
        return self._proba_moments(X)[0]

    @_doc_inputs
    def predict_log_proba(self, X):
        """The logarithm of :meth:`predict_proba`.

        {inputs}

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.
        """
        with np.errstate(divide="ignore"):
            return np.log(self.predict_proba(X))

    @_doc_inputs
    def predict(self, X):
        """The most probable class under the posterior predictive.

        {inputs}

        Returns
        -------
        y : ndarray of shape (n_samples,)
            Labels from ``classes_``.
        """
        proba = self.predict_proba(X)
        return self.classes_[np.argmax(proba, axis=1)]

    @_doc_inputs
    def predict_uncertainty(self, X):
        """How uncertain the posterior predictive is, row by row.

        The predictive entropy ``H[p]`` of ``p = predict_proba(X)`` (nats: 0
        for a sure prediction, ``log(n_classes)`` for a uniform one) splits
        into the expected entropy of the networks' own predictions, ``E[H[p_s]]``
        (noise in the labels that every network sees: aleatoric), and the
        mutual information ``H[p] - E[H[p_s]]`` between the label and the
        weights (disagreement between networks: epistemic, the part that more
        data would reduce; large away from the training data).

        {inputs}

        Returns
        -------
        result : Bunch
            ``proba`` (n_samples, n_classes): :meth:`predict_proba`;
            ``proba_std`` (n_samples, n_classes): the sd of each class
            probability over the retained networks; ``entropy``,
            ``expected_entropy`` and ``mutual_information`` (n_samples,): the
            decomposition above.
        """
        mean, sd, h = self._proba_moments(X)
        total = _entropy(mean)
        return Bunch(proba=mean, proba_std=sd, entropy=total, expected_entropy=h,
                     mutual_information=np.maximum(total - h, 0.0))


class BayesianMLPRegressor(RegressorMixin, BaseBayesianMLP):
    __doc__ = f"""Bayesian multilayer perceptron regressor sampled by stochastic-gradient MCMC.

    The network of scikit-learn's :class:`~sklearn.neural_network.MLPRegressor`
    (dense hidden layers, identity output) on the standardised targets
    ``(y - mean(y)) / std(y)``, with Gaussian noise of standard deviation
    ``noise_scale`` (in those units) and an independent ``N(0,
    prior_scale^2)`` prior on every weight and bias; its posterior is sampled
    on minibatches (:class:`~bayes_subsample.models.MLPModel`). Predictions
    are the posterior predictive mean and, with ``return_std=True``, its
    standard deviation (the networks' spread plus the noise), back on the
    scale of ``y``.

    Parameters
    ----------{PARAMS_DOC % dict(no_hidden="Bayesian linear regression with a known noise",
                               prior_units=" (on the standardised targets)",
                               outputs="targets' number of columns")}
    noise_scale : float or "auto", default="auto"
        The standard deviation of the Gaussian noise, in standard deviations
        of ``y`` (each target's own for several targets). ``"auto"``: the
        residual standard deviation of a least-squares linear fit of the
        standardised targets (the noise a linear model leaves, an upper bound
        for a network that fits better), clipped to [0.1, 1]. The value in
        the units of ``y`` is ``noise_scale_``.

    Attributes
    ----------
    noise_scale_ : float or ndarray of shape (n_targets,)
        The noise standard deviation in the units of ``y``.
    y_mean_, y_scale_ : float or ndarray of shape (n_targets,)
        The targets' mean and standard deviation used to standardise them.{
        ATTRS_DOC % dict(out_activation='"identity".',
                         sibling="BayesianMLPClassifier : The classifier.",
                         point_estimate="MLPRegressor")}

    Notes
    -----
    The noise is fixed, not sampled: a larger ``noise_scale`` gives wider
    predictive intervals and smoother fits.
    {INTERRUPT_NOTE}
    Examples
    --------
    >>> import numpy as np
    >>> from bayes_subsample import BayesianMLPRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-2, 2, size=(300, 1)); y = np.sin(2 * X[:, 0]) + 0.1 * rng.normal(size=300)
    >>> reg = BayesianMLPRegressor(hidden_layer_sizes=(20,), activation="tanh", n_passes=300,
    ...                            n_samples=30, noise_scale=0.15, random_state=0).fit(X, y)
    >>> mean, std = reg.predict(np.array([[0.5], [5.0]]), return_std=True)
    >>> bool(std[1] > std[0])      # wider away from the data (x in [-2, 2])
    True
    """

    _output = "gaussian"
    _parameter_constraints = {
        **BaseBayesianMLP._parameter_constraints,
        "noise_scale": [Interval(Real, 0, None, closed="neither"), StrOptions({"auto"})],
    }

    def __init__(self, hidden_layer_sizes=(100,), activation="relu", *, sampler="sghmc",
                 step_size=None, batch_size=100, n_passes=200, n_samples=100,
                 prior_scale=1.0, noise_scale="auto", n_chains=1, n_jobs=None,
                 random_state=None, warm_start=False, progress=None):
        store_params(self, locals())

    @staticmethod
    def _auto_noise(X, Ys):
        """Residual sd of a least-squares linear fit of the standardised ``Ys``
        (root mean over targets), clipped to ``AUTO_NOISE``."""
        n, d = X.shape
        if n <= d + 1:
            return AUTO_NOISE[0]
        Xc = np.asarray(X, dtype=np.float64)
        Xc = Xc - Xc.mean(axis=0)
        G = Xc.T @ Xc
        G[np.diag_indices_from(G)] += 1e-8 * max(1.0, np.trace(G) / d)
        W = np.linalg.solve(G, Xc.T @ Ys)
        resid = Ys - Xc @ W
        sd = float(np.sqrt(np.sum(resid**2) / (Ys.shape[1] * (n - d - 1))))
        return float(np.clip(sd, *AUTO_NOISE))

    @all_or_nothing
    @_doc_inputs
    def fit(self, X, y):
        """Sample the posterior of the network's weights given ``X`` and ``y``.

        {training_inputs}
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets (standardised internally).

        Returns
        -------
        self : BayesianMLPRegressor
            The fitted estimator.
        """
        hidden, sampler = self._validate()
        X, y = self._check_X_y(X, y, multi_output=True, y_numeric=True)
        Y = np.asarray(y, dtype=np.float64).reshape(y.shape[0], -1)
        continuing = self.warm_start and self.__dict__.get("_last_weights") is not None
        if continuing and self.__dict__.get("_y_stats", (None,))[0] == Y.shape[1]:
            # a continuation keeps the standardisation the weights were drawn in
            _, mean, scale, noise = self._y_stats
        else:
            mean, scale = Y.mean(axis=0), Y.std(axis=0)
            scale = np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)
            noise = (self._auto_noise(X, (Y - mean) / scale) if self.noise_scale == "auto"
                     else float(self.noise_scale))
        self._y_stats = (Y.shape[1], mean, scale, noise)
        one = y.ndim == 1
        self.y_mean_ = float(mean[0]) if one else mean
        self.y_scale_ = float(scale[0]) if one else scale
        self.noise_scale_ = float(noise * scale[0]) if one else noise * scale
        Ys = (Y - mean) / scale
        return self._fit_model(X, Ys[:, 0] if one else Ys, hidden, sampler, Y.shape[1],
                               noise_scale=noise)

    @_doc_inputs
    def predict_uncertainty(self, X):
        """The posterior predictive mean and its spread, split in two.

        {inputs}

        Returns
        -------
        result : Bunch
            ``mean``: the posterior predictive mean; ``epistemic_std``: the
            sd of the networks' outputs over the retained draws (what more
            data would reduce); ``noise_std``: the noise sd
            (``noise_scale_``, the same for every row); ``std``: the
            predictive sd, ``sqrt(epistemic_std^2 + noise_std^2)``. Each of
            shape (n_samples,) (or (n_samples, n_targets)), in the units of y.
        """
        X = self._check_X(X)
        K = self.n_outputs_
        _, mean_y, scale, noise = self._y_stats
        mean, sd = np.empty((X.shape[0], K)), np.empty((X.shape[0], K))
        for rows in self._blocks(X):
            Z = self._outputs(X, rows).astype(np.float64)
            mean[rows] = Z.mean(axis=0)
            sd[rows] = Z.std(axis=0)
        mean = mean * scale + mean_y
        sd = sd * scale
        noise_sd = np.broadcast_to(noise * scale, mean.shape)
        out = Bunch(mean=mean, epistemic_std=sd, noise_std=np.array(noise_sd),
                    std=np.sqrt(sd**2 + noise_sd**2))
        if self._y_stats[0] == 1 and not isinstance(self.y_mean_, np.ndarray):
            for k in out:
                out[k] = out[k][:, 0]
        return out

    @_doc_inputs
    def predict(self, X, return_std=False):
        """The posterior predictive mean (and standard deviation).

        {inputs}
        return_std : bool, default=False
            Also return the predictive standard deviation (the networks'
            spread and the noise; see :meth:`predict_uncertainty`).

        Returns
        -------
        y_mean : ndarray of shape (n_samples,) or (n_samples, n_targets)
            The mean over the retained networks, in the units of y.
        y_std : ndarray of the same shape
            Only with ``return_std=True``.
        """
        u = self.predict_uncertainty(X)
        return (u.mean, u.std) if return_std else u.mean

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags
