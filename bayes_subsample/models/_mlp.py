"""Bayesian multilayer perceptron (dense layers) posterior.

Architecture: layer sizes ``(d, h_1, ..., h_H, K)``; hidden layers
``a <- act(a W + b)`` with ``act`` one of ``relu``, ``tanh``, ``logistic``;
the output layer ``z = a W + b`` (no activation) gives the logits of a softmax
over ``K`` classes, or the means of ``K`` independent Gaussian outputs with a
fixed standard deviation ``noise_scale``.

Parameter layout: one flat float64 vector ``theta``, layer after layer, each
layer's weights ``W`` (shape ``(n_in, n_out)``, row-major: ``theta[o + i * n_out
+ j]`` is the weight from input ``i`` to output ``j``) followed by its biases
``b`` (``n_out``); :meth:`MLPModel.unpack` returns the ``(W, b)`` views. With no
hidden layer, ``sizes = (d, K)``, the model is multinomial logistic
regression: ``W`` is the transpose of :class:`MultinomialLogisticModel`'s
``coef`` and ``b`` its intercepts.

The per-datum methods run on the compiled :class:`CyMLP` (``model.compiled``,
the object sampler kernels take), through BLAS; the functions
``mlp_*_reference`` are the plain NumPy definitions it is tested against.
"""
from __future__ import annotations

import numpy as np
from scipy.special import expit, logsumexp, softmax

from ._base import CompiledModel, GaussianPrior, _digest
from ._cymlp import ACTIVATIONS, OUTPUTS, CyMLP, layer_offsets
from ._glm import check_design, design_fingerprint
from ._rows import DenseRows

__all__ = ["MLPModel"]


# ---- plain NumPy definitions (the reference of the compiled passes) ---------------------
def _reference_layers(theta, sizes):
    """``[(W, b), ...]`` of ``theta`` (float64 copies) for layer ``sizes``."""
    theta = np.asarray(theta, dtype=np.float64)
    off = layer_offsets(sizes)
    out = []
    for l in range(len(sizes) - 1):
        a, b = sizes[l], sizes[l + 1]
        out.append((theta[off[l]: off[l] + a * b].reshape(a, b),
                    theta[off[l] + a * b: off[l + 1]]))
    return out


def _act(name, z):
    if name == "relu":
        return np.maximum(z, 0.0)
    if name == "tanh":
        return np.tanh(z)
    return expit(z)


def _act_grad(name, a):
    """``act'(z)`` from ``a = act(z)``."""
    if name == "relu":
        return (a > 0).astype(np.float64)
    if name == "tanh":
        return 1.0 - a * a
    return a * (1.0 - a)


def mlp_forward_reference(X, theta, sizes, activation):
    """The activations ``[A_0 = X, A_1, ..., A_{L-1}, Z_out]`` in float64."""
    A = [np.asarray(X, dtype=np.float64)]
    layers = _reference_layers(theta, sizes)
    for l, (W, b) in enumerate(layers):
        z = A[-1] @ W + b
        A.append(z if l == len(layers) - 1 else _act(activation, z))
    return A


def _reference_output(Z, y, output, noise_scale):
    """Per-datum ``(l, dl/dZ)`` of the output values ``Z`` (m, K)."""
    if output == "softmax":
        yi = np.asarray(y).astype(np.int64)
        ll = Z[np.arange(len(yi)), yi] - logsumexp(Z, axis=1)
        r = -softmax(Z, axis=1)
        r[np.arange(len(yi)), yi] += 1.0
        return ll, r
    t = np.asarray(y, dtype=np.float64).reshape(Z.shape) - Z
    s2 = noise_scale**2
    ll = np.sum(-0.5 * t * t / s2 - 0.5 * np.log(2 * np.pi * s2), axis=1)
    return ll, t / s2


def mlp_loglik_reference(X, y, theta, sizes, activation="relu", output="softmax",
                         noise_scale=1.0):
    """Per-datum log-likelihoods ``l_k(theta)`` of the rows of ``X`` (float64)."""
    Z = mlp_forward_reference(X, theta, sizes, activation)[-1]
    return _reference_output(Z, y, output, noise_scale)[0]


def mlp_grad_reference(X, y, theta, sizes, activation="relu", output="softmax",
                       noise_scale=1.0):
    """Per-datum gradients ``grad l_k(theta)``, shape (n, n_params), by
    backpropagation in float64, in the layout of ``theta``."""
    A = mlp_forward_reference(X, theta, sizes, activation)
    layers = _reference_layers(theta, sizes)
    _, D = _reference_output(A[-1], y, output, noise_scale)
    parts = []
    for l in range(len(layers) - 1, -1, -1):
        W, _ = layers[l]
        parts.append(D)                                           # the biases
        parts.append(np.einsum("mi,mj->mij", A[l], D).reshape(len(D), -1))
        if l:
            D = (D @ W.T) * _act_grad(activation, A[l])
    return np.concatenate(parts[::-1], axis=1)


class MLPModel(CompiledModel):
    """Posterior of a multilayer perceptron's weights and biases under an
    independent ``N(0, prior_scale^2)`` prior on each (see the module notes for
    the architecture and the layout of ``theta``).

    The log-likelihood, its gradient over a minibatch, per-datum gradients and
    the full-data pass are compiled forward and backward passes through BLAS
    (:class:`CyMLP`), computed in the dtype of ``X``: float32 ``X`` runs the
    layers in float32 (on a 784-100-10 network, per-datum log-likelihoods
    and minibatch gradients within 5e-7 of their largest entry, measured
    against float64; the log-likelihood's sum over rows and the bias
    gradients are accumulated in float64), float64 ``X`` in float64. The
    full pass runs in BLAS's threads. Taylor
    control variates and Hessians are not provided (a network's Hessian is
    ``p x p`` with ``p`` in the tens of thousands, and a Taylor expansion
    around one mode describes a multimodal posterior poorly): those methods
    raise ``NotImplementedError``, and ``has_hessian`` is False. The
    stochastic-gradient samplers (``"sgld"``, ``"sghmc"``, ``"ewsg"``,
    ``"psgld"``) run on it without a mode or a Laplace approximation: each
    chain starts from :meth:`init_params` drawn from its own generator
    (:ref:`algo-sg-no-hessian`); the other samplers refuse it. The
    scikit-learn estimators built on it are
    :class:`~bayes_subsample.BayesianMLPClassifier` and
    :class:`~bayes_subsample.BayesianMLPRegressor`.

    Parameters
    ----------
    X : array-like of shape (n_samples, n_features)
        Inputs, float32 or float64 (kept in their dtype; integers become
        float64), dense and finite.
    y : array-like
        Class indices ``0 .. K - 1`` of shape (n_samples,) for
        ``output="softmax"``; targets of shape (n_samples, K) or (n_samples,)
        for ``output="gaussian"``.
    hidden_layer_sizes : sequence of int, default=(100,)
        Widths of the hidden layers; ``()`` for none (then the model is
        multinomial logistic regression or linear regression).
    activation : {"relu", "tanh", "logistic"}, default="relu"
        The hidden layers' activation.
    output : {"softmax", "gaussian"}, default="softmax"
        Classification (softmax over ``K`` classes) or regression
        (independent Gaussians of standard deviation ``noise_scale``).
    n_classes : int, optional
        ``K`` for ``output="softmax"`` (default: ``max(y) + 1``, at least 2).
    noise_scale : float, default=1.0
        The Gaussian output's standard deviation.
    prior_scale : float, default=1.0
        Prior standard deviation of every weight and bias.

    Attributes
    ----------
    sizes : tuple of int
        ``(n_features, *hidden_layer_sizes, K)``.

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_subsample.models import MLPModel
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 4)).astype(np.float32)
    >>> y = (X[:, 0] + X[:, 1] > 0).astype(int)
    >>> model = MLPModel(X, y, hidden_layer_sizes=(8,), activation="tanh")
    >>> model.sizes, model.n_params      # 4*8 + 8 + 8*2 + 2
    ((4, 8, 2), 58)
    >>> theta = model.init_params(rng)
    >>> g = model.grad_sum(theta, np.arange(20))       # a minibatch's gradient sum
    >>> g.shape
    (58,)
    >>> model.predict_proba(theta, X[:3]).sum(axis=1)
    array([1., 1., 1.])
    """

    #: no Hessian, no mode search: see the class notes
    has_hessian = False

    def __init__(self, X, y, *, hidden_layer_sizes=(100,), activation="relu",
                 output="softmax", n_classes=None, noise_scale=1.0, prior_scale=1.0):
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown activation {activation!r}: use one of "
                             f"{sorted(ACTIVATIONS)}")
        if output not in OUTPUTS:
            raise ValueError(f"unknown output {output!r}: use one of {sorted(OUTPUTS)}")
        hidden = tuple(int(h) for h in np.atleast_1d(np.asarray(hidden_layer_sizes,
                                                                dtype=np.int64)))
        if any(h < 1 for h in hidden):
            raise ValueError(f"hidden_layer_sizes must be positive, got {hidden}")
        self.X = check_design(X)
        n, d = self.X.shape
        y = np.asarray(y)
        if y.dtype.kind not in "iubf":
            raise TypeError(f"y must be numeric, got dtype {y.dtype}")
        y = np.asarray(y, dtype=np.float64)
        if output == "softmax":
            if y.shape != (n,):
                raise ValueError(f"y must have shape ({n},) to match X, got {y.shape}")
            if not np.isfinite(y).all() or np.any(y < 0) or np.any(y != np.round(y)):
                raise ValueError("y must hold class indices 0, 1, ..., n_classes - 1")
            K = int(y.max()) + 1 if n_classes is None else int(n_classes)
            if K < 2:
                raise ValueError(f"a softmax output needs n_classes >= 2, got {K}")
            if y.max() >= K:
                raise ValueError(f"y has class index {int(y.max())} >= n_classes = {K}")
        else:
            if y.ndim not in (1, 2) or y.shape[0] != n:
                raise ValueError(f"y must have shape ({n},) or ({n}, K) to match X, "
                                 f"got {y.shape}")
            if not np.isfinite(y).all():
                raise ValueError("y contains NaN or infinity")
            K = 1 if y.ndim == 1 else y.shape[1]
            if not (np.isfinite(noise_scale) and noise_scale > 0):
                raise ValueError(f"noise_scale must be finite and > 0, got {noise_scale}")
        self.y = np.ascontiguousarray(y)
        self.hidden_layer_sizes = hidden
        self.activation = activation
        self.output = output
        self.n_outputs = K
        self.noise_scale = float(noise_scale)
        self.sizes = (d, *hidden, K)
        self.n_data = n
        self.n_features = d
        self._offsets = layer_offsets(self.sizes)
        self.n_params = self._offsets[-1]
        self.prior = GaussianPrior(float(prior_scale), self.n_params)
        self._cy = self._make_compiled()

    def _make_compiled(self):
        return CyMLP(DenseRows(self.X, False), self.y, self.sizes, self.activation,
                     self.output, self.noise_scale)

    @property
    def compiled(self):
        """The compiled model (:class:`CyMLP`) that sampler kernels take."""
        return self._cy

    @property
    def float32_noise(self):
        """True on float32 inputs: the network computes in float32, and the
        stochastic-gradient samplers draw its noise as float32 normals."""
        return self.X.dtype == np.float32

    def fingerprint(self):
        fp = super().fingerprint()
        fp.update(family="mlp", sizes=str(self.sizes), activation=self.activation,
                  output=self.output, noise_scale=repr(self.noise_scale), y=_digest(self.y),
                  **design_fingerprint(self.X))
        return fp

    # ---- layout -------------------------------------------------------------------------
    def unpack(self, theta):
        """``[(W_0, b_0), ..., (W_{L-1}, b_{L-1})]``: views of ``theta`` (n_params,)
        with ``W_l`` of shape ``(sizes[l], sizes[l + 1])``."""
        theta = self.check_theta(theta)
        return _reference_layers(theta, self.sizes)

    def pack(self, layers):
        """The flat ``theta`` of ``[(W_0, b_0), ...]`` (the inverse of :meth:`unpack`)."""
        layers = list(layers)
        if len(layers) != len(self.sizes) - 1:
            raise ValueError(f"expected {len(self.sizes) - 1} (W, b) pairs, got {len(layers)}")
        parts = []
        for l, (W, b) in enumerate(layers):
            shape = (self.sizes[l], self.sizes[l + 1])
            W, b = np.asarray(W, dtype=np.float64), np.asarray(b, dtype=np.float64)
            if W.shape != shape or b.shape != shape[1:]:
                raise ValueError(f"layer {l}: W must have shape {shape} and b "
                                 f"({shape[1]},), got {W.shape} and {b.shape}")
            parts += [W.ravel(), b]
        return np.concatenate(parts)

    def init_params(self, rng=None):
        """Initial weights as scikit-learn's ``MLPClassifier`` draws them (Glorot
        uniform): every weight and bias of a layer with ``n_in`` inputs and
        ``n_out`` outputs uniform on ``[-a, a]``, ``a = sqrt(f / (n_in +
        n_out))``, ``f = 6`` (``f = 2`` for the logistic activation).

        Parameters
        ----------
        rng : numpy.random.Generator, int or None
            The random generator (or a seed for one).
        """
        rng = np.random.default_rng(rng)
        f = 2.0 if self.activation == "logistic" else 6.0
        layers = []
        for a, b in zip(self.sizes[:-1], self.sizes[1:]):
            bound = np.sqrt(f / (a + b))
            layers.append((rng.uniform(-bound, bound, (a, b)), rng.uniform(-bound, bound, b)))
        return self.pack(layers)

    # ---- full passes -----------------------------------------------------------------------
    def full_pass(self, theta, *, gradient=True, hessian=False, loglik=True):
        """One read of X: ``(sum l_k, sum grad l_k, None)``; ``hessian`` is not
        supported (``NotImplementedError``)."""
        if hessian:
            raise NotImplementedError(
                "MLPModel provides no Hessian (p x p with p the number of weights); "
                "samplers that need one (Laplace preconditioning, HMC-ECS, control "
                "variates) do not run on it")
        return self._cy.full_pass(self.check_theta(theta), loglik, gradient, False, 1)

    def hess_terms(self, theta, idx):
        raise NotImplementedError("MLPModel provides no per-datum Hessians")

    def taylor_terms(self, theta_star, idx, order):
        raise NotImplementedError("MLPModel provides no Taylor control variates")

    def cv_residuals_and_grads(self, theta, theta_star, idx, order):
        raise NotImplementedError("MLPModel provides no Taylor control variates")

    # ---- predictions for one theta -----------------------------------------------------------
    def _outputs(self, theta, X):
        theta = self.check_theta(theta)
        X = check_design(X)
        if X.shape[1] != self.n_features:
            raise ValueError(f"X must have shape (n, {self.n_features}), got {X.shape}")
        return self._cy.outputs(theta, X)

    def predict_proba(self, theta, X):
        """Class probabilities ``softmax(z(x))`` for the rows of ``X`` at one
        ``theta``, shape (n, K) (softmax output only)."""
        if self.output != "softmax":
            raise ValueError("predict_proba needs output='softmax'; use predict")
        return softmax(self._outputs(theta, X), axis=1)

    def predict(self, theta, X):
        """Most probable classes (softmax output, shape (n,)) or Gaussian means
        (shape (n, K), or (n,) when K = 1) for the rows of ``X`` at one ``theta``."""
        z = self._outputs(theta, X)
        if self.output == "softmax":
            return np.argmax(z, axis=1)
        return z[:, 0] if self.n_outputs == 1 else z

    def __repr__(self):
        return (f"{type(self).__name__}(n_data={self.n_data}, sizes={self.sizes}, "
                f"activation={self.activation!r}, output={self.output!r}, "
                f"dtype={self.X.dtype})")
