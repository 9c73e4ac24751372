"""What the Bayesian MLP estimators share: their parameters, the run of a
stochastic-gradient sampler on :class:`~bayes_subsample.models.MLPModel` for a
budget of data passes (thinned draws from its second half), the forward pass
of the retained networks, and the fitted attributes.

The model (with the training data) is not kept: predictions run the retained
weights through a NumPy forward pass, chunked over rows, so a fitted
estimator holds its draws and nothing of ``X``."""
from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from .._driver import sample, seed_sequence
from .._interrupt import stop_description
from ..models import MLPModel
from ..models._cymlp import layer_offsets
from ..samplers import BaseSampler, resolve_sampler
from ..samplers import iterations_for_passes

#: the samplers that run on a network (no Hessian, no mode): sampler names
SG_SAMPLERS = ("sgld", "sghmc", "ewsg", "psgld")

#: rows per block of the forward passes in predictions (a block's hidden
#: activations are rows x width values per draw)
_ROWS = 4096

#: the input scale above which fit warns (the largest column root mean square)
SCALE_WARN = 10.0

#: rows read to measure the input scale (evenly spaced)
_SCALE_ROWS = 10_000


class InputScaleWarning(UserWarning):
    """The inputs are far from unit scale (raw 0-255 pixels, say): the
    network's N(0, prior_scale^2) prior and its default step sizes assume
    features of order one."""


def _hidden_sizes(hidden_layer_sizes):
    hidden = np.atleast_1d(np.asarray(hidden_layer_sizes, dtype=object))
    if hidden.ndim != 1 or not all(isinstance(h, Integral) and not isinstance(h, bool)
                                   for h in hidden):
        raise ValueError("hidden_layer_sizes must be an int or a sequence of ints, got "
                         f"{hidden_layer_sizes!r}")
    if any(h < 1 for h in hidden):
        raise ValueError(f"hidden_layer_sizes must be > 0, got {hidden_layer_sizes!r}")
    return tuple(int(h) for h in hidden)


def check_input_scale(X):
    """Warn (:class:`InputScaleWarning`) when the largest column root mean
    square of ``X`` (on up to 10,000 evenly spaced rows) exceeds 10."""
    n = X.shape[0]
    rows = X if n <= _SCALE_ROWS else X[np.linspace(0, n - 1, _SCALE_ROWS).astype(np.intp)]
    rms = float(np.sqrt(np.max(np.mean(np.square(rows, dtype=np.float64), axis=0))))
    if rms > SCALE_WARN:
        warnings.warn(
            f"the inputs are far from unit scale (largest column root mean square {rms:.3g}): "
            "the N(0, prior_scale^2) prior on the weights and the default step sizes assume "
            "features of order one. Scale them first (divide pixels by 255, or put a "
            "StandardScaler in a Pipeline)", InputScaleWarning, stacklevel=3)


def forward(X, layers, activation):
    """Outputs ``z`` (n, K) of one network ``layers = [(W, b), ...]`` for the rows
    of ``X``, in ``X``'s dtype (float32 or float64)."""
    a = X
    last = len(layers) - 1
    for l, (W, b) in enumerate(layers):
        a = a @ W
        a += b
        if l < last:
            if activation == "relu":
                np.maximum(a, 0, out=a)
            elif activation == "tanh":
                np.tanh(a, out=a)
            else:
                # logistic, without overflow warnings for large |z|
                np.negative(a, out=a)
                np.clip(a, -88.0, 88.0, out=a)
                np.exp(a, out=a)
                a += 1
                np.reciprocal(a, out=a)
    return a


class BaseBayesianMLP(BaseEstimator):
    """Base of :class:`BayesianMLPClassifier` and :class:`BayesianMLPRegressor`;
    subclasses set ``_output`` and encode the targets."""

    _parameter_constraints: dict = {
        "hidden_layer_sizes": ["array-like", Interval(Integral, 1, None, closed="left")],
        "activation": [StrOptions({"relu", "tanh", "logistic"})],
        "sampler": [StrOptions(set(SG_SAMPLERS)), BaseSampler],
        "step_size": [Interval(Real, 0, None, closed="neither"), None],
        "batch_size": [Interval(Integral, 1, None, closed="left"), None],
        "n_passes": [Interval(Real, 0, None, closed="neither")],
        "n_samples": [Interval(Integral, 1, None, closed="left")],
        "prior_scale": [Interval(Real, 0, None, closed="neither")],
        "n_chains": [Interval(Integral, 1, None, closed="left")],
        "n_jobs": [Integral, None],
        "random_state": ["random_state", np.random.Generator, np.random.SeedSequence],
        "warm_start": ["boolean"],
        "progress": ["boolean", None],
    }

    # ---- fitting -------------------------------------------------------------------------
    def _validate(self):
        self._validate_params()
        if self.n_jobs == 0:
            raise ValueError("n_jobs == 0 has no meaning; use None, -1 or a positive integer")
        hidden = _hidden_sizes(self.hidden_layer_sizes)
        sampler = resolve_sampler(self.sampler)
        if sampler.name not in SG_SAMPLERS:
            raise ValueError(
                f"the sampler {sampler.name!r} does not run on a neural network (it needs "
                f"a posterior mode or its Hessian); use one of {list(SG_SAMPLERS)}")
        return hidden, sampler

    def _check_X_y(self, X, y, **kwargs):
        X, y = validate_data(self, X, y, dtype=[np.float64, np.float32], order="C", **kwargs)
        check_input_scale(X)
        return X, y

    def _plan(self, sampler, n):
        """The sampler set up for the budget: ``(sampler, n_warmup)``, the
        sampler's ``n_steps`` being the thinning (steps per recorded
        iteration), so that ``n_warmup + n_samples`` iterations spend
        ``n_passes`` data passes and the ``n_samples`` kept ones cover the
        second half of them."""
        batch = self.batch_size if self.batch_size is not None else sampler.batch_size
        batch = min(100 if batch is None else int(batch), n)
        updates = {"batch_size": batch}
        if self.step_size is not None:
            updates["step_size"] = float(self.step_size)
        M = int(sampler.index_chain_length) if sampler.name == "ewsg" else 0
        steps = iterations_for_passes(float(self.n_passes), n, batch, M)
        thin = max(1, steps // (2 * self.n_samples))
        n_warmup = max(0, int(round(steps / thin)) - self.n_samples)
        updates["n_steps"] = thin
        return sampler.set_params(**updates), n_warmup

    def _continued(self, model):
        """The starting weights of a ``warm_start`` fit (each chain's last
        draw), or None for a fresh fit."""
        last = getattr(self, "_last_weights", None)
        if not self.warm_start or last is None:
            return None
        if last.shape != (self.n_chains, model.n_params):
            raise ValueError(
                f"warm_start continues the previous fit's {last.shape[0]} network(s) of "
                f"{last.shape[1]} weights; n_chains, hidden_layer_sizes, the number of "
                f"features and of outputs cannot change (got {self.n_chains} chain(s) of "
                f"{model.n_params} weights)")
        return last

    def _fit_model(self, X, y, hidden, sampler, n_outputs, noise_scale=1.0):
        model = MLPModel(X, y, hidden_layer_sizes=hidden, activation=self.activation,
                         output=self._output, noise_scale=noise_scale,
                         prior_scale=self.prior_scale,
                         **({"n_classes": n_outputs} if self._output == "softmax" else {}))
        init = self._continued(model)
        sampler, n_warmup = self._plan(sampler, model.n_data)
        rs = self.random_state
        if isinstance(rs, np.random.RandomState):
            rs = int(rs.randint(2**31))
        seed = seed_sequence(rs)
        k = self.__dict__.get("_n_continued", 0) + 1 if init is not None else 0
        if k:
            # a continuation gets its own streams (a fresh fit's would repeat the noise)
            seed = np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, k))
        trace = sample(model, sampler, n_samples=self.n_samples, n_warmup=n_warmup,
                       n_chains=self.n_chains, n_jobs=self.n_jobs, random_state=seed,
                       progress=self.progress, init=init, check_convergence=False)
        trace.run_state = None            # it references the data: not kept
        draws, from_burn_in = self._kept_draws(trace)
        self._n_continued = k
        self._set_fitted(model, sampler, trace, draws, from_burn_in)
        return self

    def _kept_draws(self, trace):
        """The pooled draws ``(S, n_params)`` the predictive uses, and whether
        they come from burn-in (a run interrupted before its second half: the
        last ``n_samples`` burn-in draws of each chain)."""
        if trace.chain_lengths.sum() > 0:
            return trace.pooled_draws(), False
        w = trace.warmup_lengths
        parts = [trace.warmup_draws[c, max(0, w[c] - self.n_samples):w[c]]
                 for c in range(trace.n_chains)]
        draws = np.concatenate(parts) if parts else np.empty((0, trace.draws.shape[-1]))
        if draws.shape[0] == 0:
            raise KeyboardInterrupt(f"sampling was {stop_description()} before any draw")
        warnings.warn(
            f"sampling stopped during burn-in: the predictive uses the last {draws.shape[0]} "
            "burn-in draw(s), made before the chains had spent half their passes",
            RuntimeWarning, stacklevel=4)
        return draws, True

    def _layer_views(self):
        """``coefs_draws_`` and ``intercepts_draws_``: views of ``posterior_draws_``."""
        draws, sizes = self.posterior_draws_, self._sizes
        S, off = draws.shape[0], layer_offsets(sizes)
        self.coefs_draws_ = [draws[:, off[l]: off[l] + sizes[l] * sizes[l + 1]]
                             .reshape(S, sizes[l], sizes[l + 1]) for l in range(len(sizes) - 1)]
        self.intercepts_draws_ = [draws[:, off[l] + sizes[l] * sizes[l + 1]: off[l + 1]]
                                  for l in range(len(sizes) - 1)]

    def _set_fitted(self, model, sampler, trace, draws, from_burn_in):
        S = draws.shape[0]
        sizes = model.sizes
        self._sizes = tuple(int(s) for s in sizes)
        self.posterior_draws_ = np.ascontiguousarray(draws)
        self._layer_views()
        self.n_layers_ = len(sizes)
        self.n_outputs_ = int(sizes[-1])
        self.out_activation_ = "softmax" if self._output == "softmax" else "identity"
        # each chain's last state: where a warm_start fit continues
        last = []
        for c in range(trace.n_chains):
            if trace.chain_lengths[c]:
                last.append(trace.draws[c, trace.chain_lengths[c] - 1])
            elif trace.warmup_lengths[c]:
                last.append(trace.warmup_draws[c, trace.warmup_lengths[c] - 1])
            else:
                last.append(np.full(model.n_params, np.nan))
        self._last_weights = np.array(last)
        if np.isnan(self._last_weights).any():
            self._last_weights = None      # a chain never moved: nothing to continue
        # the burn-in draws serve nothing after the fit (their statistics stay)
        trace.warmup_draws = np.empty((trace.n_chains, 0, model.n_params))
        self.trace_ = trace
        passes = np.zeros(trace.n_chains)
        for stats, lengths in ((trace.stats, trace.chain_lengths),
                               (trace.warmup_stats, trace.warmup_lengths)):
            if "data_passes" in stats:
                for c in range(trace.n_chains):
                    if lengths[c]:
                        passes[c] = max(passes[c], stats["data_passes"][c, lengths[c] - 1])
        seconds = trace.wall_time["warmup"] + trace.wall_time["sampling"]
        with np.errstate(divide="ignore", invalid="ignore"):
            per_pass = np.where(passes > 0, seconds / passes, np.nan)
        self.diagnostics_ = {
            "sampler": sampler.name,
            "step_size": float(sampler.step_size) if sampler.step_size is not None
            else float(trace.tuning[0].get("step_size", np.nan)) if trace.tuning else np.nan,
            "batch_size": int(sampler.batch_size),
            "thinning": int(sampler.n_steps),
            "n_draws": int(S),
            "draws_from_burn_in": bool(from_burn_in),
            "data_passes": passes,
            "seconds": seconds,
            "seconds_per_pass": per_pass,
            "prepare_seconds": float(trace.wall_time["prepare"]),
            "tuning": trace.tuning,
            "interrupted": bool(trace.interrupted),
        }

    # ---- prediction -------------------------------------------------------------------------
    def _check_X(self, X):
        check_is_fitted(self)
        return validate_data(self, X, reset=False, dtype=[np.float64, np.float32])

    def _outputs(self, X, rows):
        """Network outputs of every retained draw on ``X[rows]``: shape (S, m, K),
        in ``X``'s dtype."""
        Xb = X[rows]
        out = np.empty((self.posterior_draws_.shape[0], Xb.shape[0], self.n_outputs_),
                       dtype=X.dtype)
        for s in range(out.shape[0]):
            layers = [(W[s].astype(X.dtype, copy=False), b[s].astype(X.dtype, copy=False))
                      for W, b in zip(self.coefs_draws_, self.intercepts_draws_)]
            out[s] = forward(Xb, layers, self.activation)
        return out

    def _blocks(self, X):
        for s in range(0, X.shape[0], _ROWS):
            yield slice(s, s + _ROWS)

    def sample_posterior(self, n_samples=None, random_state=None):
        """Retained draws of the network's weights and biases, flattened.

        Parameters
        ----------
        n_samples : int, optional
            ``None`` returns every retained draw (chains concatenated). An
            integer returns that many draws resampled with replacement.
        random_state : int, Generator or None
            For the resampling.

        Returns
        -------
        ndarray of shape (n_draws, n_params)
            Each row one network, layer after layer: the weights ``W_l``
            (``coefs_draws_[l]``, row-major, shape (n_in, n_out)) then the
            biases ``b_l`` (``intercepts_draws_[l]``), the layout of
            :class:`~bayes_subsample.models.MLPModel`.
        """
        check_is_fitted(self)
        draws = self.posterior_draws_
        if n_samples is None:
            return draws.copy()
        if not isinstance(n_samples, Integral) or n_samples < 1:
            raise ValueError(f"n_samples must be a positive integer or None, got {n_samples!r}")
        rng = np.random.default_rng(seed_sequence(random_state))
        return draws[rng.integers(0, draws.shape[0], size=n_samples)].copy()

    def __getstate__(self):
        # a copy: object.__getstate__ may return the live __dict__
        state = dict(super().__getstate__())
        # views, rebuilt on unpickling (pickled, each would be a copy)
        state.pop("coefs_draws_", None)
        state.pop("intercepts_draws_", None)
        trace = state.get("trace_")
        draws = state.get("posterior_draws_")
        if trace is not None and draws is not None and not trace.ragged \
                and np.shares_memory(draws, trace.draws):
            state["posterior_draws_"] = None     # the trace's draws, pooled
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if "posterior_draws_" in self.__dict__:
            if self.posterior_draws_ is None:
                self.posterior_draws_ = self.trace_.pooled_draws()
            self._layer_views()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.non_deterministic = False
        tags.input_tags.sparse = False
        return tags


#: the parameter docs the two estimators share
PARAMS_DOC = """
    hidden_layer_sizes : array-like of shape (n_layers - 2,), default=(100,)
        The widths of the hidden layers; ``()`` for none (then the model is
        %(no_hidden)s).
    activation : {"relu", "tanh", "logistic"}, default="relu"
        The hidden layers' activation.
    sampler : {"sghmc", "sgld", "ewsg", "psgld"} or sampler object, default="sghmc"
        The stochastic-gradient sampler (:mod:`bayes_subsample.samplers`):
        SGHMC, SGLD, EWSG (exponentially weighted minibatches; each step
        costs ``(M + 1)`` minibatch gradients) or pSGLD (RMSprop-preconditioned
        SGLD). An object carries its own settings (friction, EWSG's index
        chain, ...); its ``batch_size``, ``step_size`` and ``n_steps`` are set
        from this estimator's parameters (``batch_size`` and ``step_size``
        only when they are not None).
    step_size : float, default=None
        The sampler's step size, in its own units (see each sampler; SGLD,
        SGHMC and EWSG state it in ``z = sqrt(n) theta``). ``None``: the
        sampler's default for networks, from the curvature at a typical start
        (:ref:`algo-sg-no-hessian`); no grid search is needed.
    batch_size : int, default=100
        Rows per minibatch gradient (at most the number of rows); ``None``
        uses the sampler object's own (100 by default).
    n_passes : float, default=200
        The budget of each chain in data passes (per-datum gradients over the
        number of rows; EWSG's index chain included), like scikit-learn's
        ``max_iter`` epochs. The first half is burn-in.
    n_samples : int, default=100
        Networks kept per chain, evenly spaced over the second half of the
        passes. The predictions average over them; memory is ``n_samples *
        n_chains * n_params * 8`` bytes (twice that while fitting: the
        burn-in is recorded as coarsely), 64 MB per 100 draws of a 784-100-10
        network.
    prior_scale : float, default=1.0
        The standard deviation of the independent ``N(0, prior_scale^2)``
        prior on every weight and bias%(prior_units)s.
    n_chains : int, default=1
        Independent chains, each from its own random start and spending
        ``n_passes``; their draws are pooled (several chains explore several
        modes, as an ensemble does).
    n_jobs : int, default=None
        Chains run in parallel threads; ``None`` means 1, ``-1`` all cores.
        Draws do not depend on it.
    random_state : int, Generator, SeedSequence, RandomState or None, default=None
        Seeds the chains' streams (one each) and their starting weights
        (scikit-learn's Glorot-uniform initialisation).
    warm_start : bool, default=False
        When True, fitting again starts each chain from its last network
        (momenta and pSGLD's preconditioner start afresh) and spends
        ``n_passes`` more; the new draws replace the old ones. The
        architecture, ``n_chains``, the features and the %(outputs)s must not
        change.
    progress : bool or None, default=None
        Show a progress bar (needs tqdm): True from the start, False never,
        None from the moment the fit is estimated to take more than a few
        minutes (:class:`~bayes_subsample.exceptions.LongFitWarning`).
"""

ATTRS_DOC = """
    n_features_in_ : int
        Number of features seen during fit.
    feature_names_in_ : ndarray of str
        Names of the features (one per feature), when ``X`` has string
        column names.
    n_layers_ : int
        Layers, input and output included.
    n_outputs_ : int
        Output units.
    out_activation_ : str
        %(out_activation)s
    coefs_draws_ : list of ndarray
        ``coefs_draws_[l]`` of shape (n_draws, n_in, n_out): the retained
        draws of the weights of layer ``l``, chains pooled (chain-major).
    intercepts_draws_ : list of ndarray
        ``intercepts_draws_[l]`` of shape (n_draws, n_out): the biases.
    posterior_draws_ : ndarray of shape (n_draws, n_params)
        The same draws flattened (:meth:`sample_posterior`).
    trace_ : Trace
        The sampling result: per-iteration statistics (``data_passes``,
        ``n_evals``), tuning and times (its burn-in draws are dropped).
    diagnostics_ : dict
        ``sampler``, ``step_size``, ``batch_size``, ``thinning`` (steps per
        recorded draw), ``n_draws``, ``data_passes`` and ``seconds`` per
        chain, ``seconds_per_pass``, ``prepare_seconds`` (the default step
        size's measurement), ``tuning`` per chain, ``interrupted`` and
        ``draws_from_burn_in``.

    See Also
    --------
    %(sibling)s
    sklearn.neural_network.%(point_estimate)s : The point estimate of the same network.
"""

INTERRUPT_NOTE = """
    A ``KeyboardInterrupt`` (Ctrl-C) during ``fit`` stops the chains at the end
    of their current iteration and keeps the networks drawn so far (with a
    ``RuntimeWarning``; ``diagnostics_["interrupted"]`` is True); stopped
    before the second half of the passes, the predictive uses the last
    burn-in draws (``diagnostics_["draws_from_burn_in"]``).
    ``warm_start=True`` then continues from the last networks.

    Inputs should be of order one (standardised, or pixels divided by 255):
    ``fit`` warns (:class:`InputScaleWarning`) when a column's root mean
    square exceeds 10. Chains run BLAS on one thread.
"""
