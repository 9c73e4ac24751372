"""Exact and approximate (austerity) Gibbs sampling for binary MRFs, and the error
measures of Korattikara, Chen & Welling (2014, §6.3); the public names are those
that :mod:`bayes_subsample.mrf` lists."""

import threading
import warnings
from dataclasses import dataclass, field
from numbers import Real
from typing import Optional

import numpy as np
from joblib import Parallel, delayed, effective_n_jobs
from sklearn.base import BaseEstimator

from .._deprecation import DEPRECATED, renamed
from .._interrupt import run_stoppable, stop_description
from .._params import store_params
from .._seeding import chain_generators, seed_sequence
from . import _gibbs_fast
from ._model import BinaryMRF, _as_int, _check_states

#: wall time of one compiled call of a chain's sweeps: a stop request (Ctrl-C,
#: SIGTERM, SIGHUP) is seen between calls, so within about this time plus a sweep
_CHUNK_SECONDS = 0.1
#: the largest ``block_size`` of :class:`GibbsSampler`: a block is that many
#: consecutive factor terms of one variable (larger blocks only mean "all of a
#: variable's terms" on any real model, and their counts overflow int64 sums)
MAX_BLOCK_SIZE = 1 << 20


@dataclass(eq=False)
class GibbsResult:
    """Output of :meth:`GibbsSampler.sample`.

    Attributes
    ----------
    states : ndarray of uint8, shape (n_chains, n_sweeps, D)
        State after every sweep.
    fraction_examined : ndarray of float64, shape (n_chains, n_sweeps)
        Factor terms examined in the sweep divided by the terms an exact sweep
        examines (1.0 for exact Gibbs).
    time_per_sweep : ndarray of float64, shape (n_chains, n_sweeps)
        Wall time of every sweep in seconds (measured inside the compiled loop,
        excluding the ``record_conditionals`` bookkeeping).
    exact_conditionals, decisions, updated_variables : ndarray or None
        With ``record_conditionals=True``, shape (n_chains, n_sweeps * D): the exact
        P(x_i = 1 | rest) before each update, the value the sampler gave x_i, and i.
    final_state : ndarray of uint8, shape (n_chains, D)
        Last state of each chain (pass as ``x0`` to continue from it).
    interrupted : bool
        True if the run was stopped (Ctrl-C, or SIGTERM / SIGHUP in the main
        thread) before every chain made its ``n_sweeps``; the sweeps made are
        kept.
    chain_lengths : ndarray of int64, shape (n_chains,)
        Sweeps made by each chain (all ``n_sweeps`` unless interrupted). Past a
        chain's length the arrays hold no sweep: ``states`` is 255,
        ``fraction_examined`` and ``time_per_sweep`` are NaN (and with
        ``record_conditionals`` the conditionals NaN, the decisions 255, the
        variables -1).
    """

    states: np.ndarray
    fraction_examined: np.ndarray
    time_per_sweep: np.ndarray
    exact_conditionals: Optional[np.ndarray] = None
    decisions: Optional[np.ndarray] = None
    updated_variables: Optional[np.ndarray] = None
    interrupted: bool = False
    chain_lengths: Optional[np.ndarray] = None
    # the state of each chain when it stopped (its initial state if it made no sweep)
    _final: Optional[np.ndarray] = field(default=None, repr=False)

    def __post_init__(self):
        if self.chain_lengths is None:
            self.chain_lengths = np.full(self.states.shape[0], self.states.shape[1],
                                         dtype=np.int64)

    @property
    def final_state(self):
        if self._final is not None:
            return self._final.copy()
        return self.states[:, -1, :].copy()

    @property
    def n_chains(self):
        return self.states.shape[0]

    @property
    def n_sweeps(self):
        return self.states.shape[1]

    @property
    def elapsed(self):
        """ndarray, shape (n_chains, n_sweeps): cumulative wall time after each sweep."""
        return np.cumsum(self.time_per_sweep, axis=1)

    def __repr__(self):
        lengths = "" if not self.interrupted else (
            ", interrupted, chain_lengths=" + str(self.chain_lengths.tolist()))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)   # no sweep at all: NaN
            frac, t = np.nanmean(self.fraction_examined), np.nanmean(self.time_per_sweep)
        return (f"GibbsResult(n_chains={self.n_chains}, n_sweeps={self.n_sweeps}, "
                f"n_vars={self.states.shape[2]}{lengths}, "
                f"mean fraction_examined={frac:.3g}, mean time_per_sweep={t:.3g} s)")


class GibbsSampler(BaseEstimator):
    """Exact or approximate (austerity) Gibbs sampler for a :class:`BinaryMRF`.

    Updating x_i draws ``u ~ U(0, 1)`` and sets ``x_i = 1`` iff the mean of the
    factor terms ``l_f = log psi_f(x_i=1, .) - log psi_f(x_i=0, .)`` over the N_i
    factors touching i exceeds ``mu0 = (log u - log1p(-u)) / N_i``, which is the
    Gibbs update ``u < P(x_i = 1 | rest)``.  With ``epsilon > 0`` the mean is judged
    by the sequential t-test of Korattikara et al. (:ref:`algo-seq-ttest`,
    :ref:`algo-gibbs-approx`) on mini-batches of terms drawn without replacement, so
    an update may stop after a fraction of the factors at the price of a small error
    in the conditional.

    Parameters
    ----------
    epsilon : float, default=0.0
        p-value tolerance of the sequential test, in [0, 1); 0 gives exact Gibbs
        (every term is summed).  The paper uses 0.01 to 0.25.
    batch_size : int, default=500
        Number of factor terms added per test.
    first_batch_size : int, optional
        Size of the first mini-batch (>= 2); default ``batch_size``.
    block_size : int, default=64
        Factor terms per sampling unit. The test draws blocks of ``block_size``
        consecutive incidences of the variable (without replacement) and runs on
        their sums, so each examined term costs what the exact update's streaming
        sum costs; ``batch_size`` and ``first_batch_size`` are rounded up to
        whole blocks (at least 2 in the first batch). ``block_size=1`` draws single
        terms (random gathers; several times slower per term). At most
        :data:`MAX_BLOCK_SIZE` (1,048,576). See :ref:`algo-gibbs-approx`.
    scan : {"systematic", "random"}, default="systematic"
        Systematic scan updates x_0, ..., x_{D-1} in order each sweep; random scan
        makes D updates of uniformly drawn variables.  One state is stored per sweep.
    random_state : None, int, numpy.random.SeedSequence or numpy.random.Generator
        Seed: ``SeedSequence(random_state).spawn(n_chains)`` gives one PCG64 stream
        per chain, so results do not depend on ``n_jobs``.

    Examples
    --------
    >>> from bayes_subsample.mrf import BinaryMRF, GibbsSampler
    >>> mrf = BinaryMRF.random(n_vars=20, random_state=0)
    >>> res = GibbsSampler(epsilon=0.05, batch_size=50, random_state=0).sample(mrf, 10)
    >>> res.states.shape
    (1, 10, 20)
    >>> bool(0.0 < res.fraction_examined.mean() <= 1.0)
    True
    """

    def __init__(self, epsilon=0.0, batch_size=500, first_batch_size=None, block_size=64,
                 scan="systematic", random_state=None, first_batch=DEPRECATED):
        store_params(self, locals())

    # ------------------------------------------------------------------ validation
    def _validated(self):
        eps = self.epsilon
        if isinstance(eps, bool) or not isinstance(eps, Real) or not (0.0 <= eps < 1.0):
            raise ValueError(f"epsilon must be a number in [0, 1), got {eps!r}")
        batch = _as_int(self.batch_size, "batch_size", 1)
        first = renamed(self, "first_batch", "first_batch_size")
        first = batch if first is None else _as_int(first, "first_batch_size", 1)
        if eps > 0 and first < 2:
            raise ValueError("first_batch_size must be >= 2 when epsilon > 0 (the t-test needs "
                             f"two terms to estimate a variance), got {first}")
        if self.scan not in ("systematic", "random"):
            raise ValueError(f"scan must be 'systematic' or 'random', got {self.scan!r}")
        block = _as_int(self.block_size, "block_size", 1)
        if block > MAX_BLOCK_SIZE:
            raise ValueError(f"block_size must be <= {MAX_BLOCK_SIZE:,} (a block is that many "
                             f"consecutive factor terms of one variable), got {block:,}")
        seed_sequence(self.random_state)
        # the test's units are blocks: batches in whole blocks, two in the first
        first = max(2 if eps > 0 else 1, -(-first // block))
        batch = -(-batch // block)
        return float(eps), batch, first, self.scan == "random", block

    @staticmethod
    def _check_model(model):
        if not isinstance(model, BinaryMRF):
            raise TypeError(f"model must be a BinaryMRF, got {type(model).__name__}")

    # ------------------------------------------------------------------ sampling
    def sample(self, model, n_sweeps, x0=None, n_chains=1, n_jobs=None, progress=False,
               record_conditionals=False):
        """Run ``n_chains`` independent Gibbs chains for ``n_sweeps`` sweeps each.

        Parameters
        ----------
        model : BinaryMRF
        n_sweeps : int
            Number of sweeps (each stores one state).
        x0 : array-like of 0/1, shape (D,) or (n_chains, D), optional
            Initial states; default uniform random states drawn from each chain's
            generator.
        n_chains : int, default=1
        n_jobs : int, optional
            Chains run in parallel threads (joblib, ``require="sharedmem"``; the kernels
            release the GIL).  Results do not depend on ``n_jobs``.
        progress : bool, default=False
            Show a tqdm progress bar over sweeps (if tqdm is installed).
        record_conditionals : bool, default=False
            Also record, per update, the exact conditional and the decision (costs
            an extra full pass over the factors per update).

        Returns
        -------
        GibbsResult

        Notes
        -----
        Ctrl-C (and, when called from the main thread, SIGTERM or SIGHUP with
        their default handler) stops every chain at the end of its current
        sweep, within about 0.1 s plus one sweep: the sweeps made are
        returned, with ``interrupted=True`` and ``chain_lengths``, and a
        ``RuntimeWarning`` says so. An interrupt before the first sweep
        propagates.
        """
        self._check_model(model)
        eps, batch, first, random_scan, block = self._validated()
        n_sweeps = _as_int(n_sweeps, "n_sweeps", 1)
        n_chains = _as_int(n_chains, "n_chains", 1)
        D = model.n_vars
        if x0 is not None:
            x0 = _check_states(x0, D, name="x0")
            if x0.shape[0] == 1:
                x0 = np.repeat(x0, n_chains, axis=0)
            elif x0.shape[0] != n_chains:
                raise ValueError(f"x0 must have shape ({D},) or ({n_chains}, {D}), "
                                 f"got {x0.shape}")
        gens = chain_generators(self.random_state, n_chains)
        # each chain's initial state is the first draw of its own stream
        x = (np.stack([g.integers(0, 2, size=D, dtype=np.uint8) for g in gens])
             if x0 is None else x0.copy())
        states = np.empty((n_chains, n_sweeps, D), dtype=np.uint8)
        frac = np.empty((n_chains, n_sweeps))
        times = np.empty((n_chains, n_sweeps))
        n_up = n_sweeps * D if record_conditionals else 0
        cond = np.empty((n_chains, n_up))
        dec = np.empty((n_chains, n_up), dtype=np.uint8)
        var = np.empty((n_chains, n_up), dtype=np.int32)
        done = np.zeros(n_chains, dtype=np.int64)
        stop = threading.Event()

        bar = None
        if progress:
            try:
                from tqdm.auto import tqdm
                bar = tqdm(total=n_chains * n_sweeps, unit="sweep")
            except ImportError:  # pragma: no cover - optional dependency
                bar = None

        def run_chain(c):
            # calls of at most _CHUNK_SECONDS each: a stop is seen between them
            gen = gens[c]
            perm = _gibbs_fast.block_permutation(model.factor_ptr, block)
            while done[c] < n_sweeps and not stop.is_set():
                s0 = int(done[c])
                u0 = s0 * D if record_conditionals else 0
                k = _gibbs_fast.gibbs_run(
                    model.incidence_log_ratio, model.incidence_other, model.factor_ptr,
                    x[c], perm, gen, n_sweeps - s0, eps, first, batch, random_scan,
                    states[c, s0:], frac[c, s0:], times[c, s0:], bool(record_conditionals),
                    cond[c, u0:], dec[c, u0:], var[c, u0:], block, _CHUNK_SECONDS)
                done[c] = s0 + k
                if bar is not None:
                    bar.update(k)

        def run_all():
            if n_chains == 1 or effective_n_jobs(n_jobs) == 1:
                for c in range(n_chains):
                    if stop.is_set():
                        break
                    run_chain(c)
            else:
                # threads whatever joblib backend is active: the chains write
                # into this process's arrays
                Parallel(n_jobs=n_jobs, require="sharedmem")(
                    delayed(run_chain)(c) for c in range(n_chains))

        try:
            interrupt = run_stoppable(run_all, stop, name="bayes_subsample-gibbs")
        finally:
            if bar is not None:
                bar.close()
        recorded = (cond, dec, var) if record_conditionals else (None, None, None)
        if interrupt is None:
            return GibbsResult(states, frac, times, *recorded)
        return _interrupted_result(states, frac, times, recorded, done, x, interrupt)

    def decide_repeated(self, model, state, i, n_repeats):
        """Make the sampler's decision for variable ``i`` at a fixed state many times.

        Each repetition draws a fresh ``u`` and fresh mini-batches, exactly as one
        update inside :meth:`sample` would (with ``epsilon = 0`` the exact update).

        Parameters
        ----------
        model : BinaryMRF
        state : array-like of 0/1, shape (D,)
        i : int
            Variable to decide.
        n_repeats : int

        Returns
        -------
        n_ones : int
            How many times x_i was set to 1; ``n_ones / n_repeats`` estimates the
            probability the sampler assigns 1 (compare :meth:`BinaryMRF.conditional_prob`).
        fraction_examined : float
            Mean fraction of the N_i factor terms examined per decision.
        """
        self._check_model(model)
        eps, batch, first, _, block = self._validated()
        X = _check_states(state, model.n_vars, name="state")
        if X.shape[0] != 1:
            raise ValueError("state must be a single state of shape (D,)")
        i = _as_int(i, "i", 0)
        if i >= model.n_vars:
            raise ValueError(f"i must be < n_vars = {model.n_vars}, got {i}")
        n_repeats = _as_int(n_repeats, "n_repeats", 1)
        gen = chain_generators(self.random_state, 1)[0]
        perm = _gibbs_fast.block_permutation(model.factor_ptr, block)
        n_ones, n_ex = _gibbs_fast.decide_repeated(
            model.incidence_log_ratio, model.incidence_other, model.factor_ptr, X[0], i,
            perm, gen, n_repeats, eps, first, batch, block)
        N_i = model.factor_ptr[i + 1] - model.factor_ptr[i]
        frac = n_ex / (n_repeats * N_i) if N_i else 1.0
        return int(n_ones), float(frac)


def _interrupted_result(states, frac, times, recorded, done, x, interrupt):
    """The :class:`GibbsResult` of a run stopped by ``interrupt`` after
    ``done[c]`` sweeps of chain c: the arrays cut to the longest chain, and
    marked empty past each chain's length; ``x`` holds the chains' states.
    Before any sweep, the interrupt propagates (nothing to return)."""
    how = stop_description(interrupt)
    if not done.any():
        raise KeyboardInterrupt(f"Gibbs sampling was {how} before any sweep was made")
    n, D = int(done.max()), states.shape[2]
    states, frac, times = states[:, :n].copy(), frac[:, :n].copy(), times[:, :n].copy()
    cond, dec, var = (None if a is None else a[:, :n * D].copy() for a in recorded)
    for c, k in enumerate(done):
        states[c, k:] = 255
        frac[c, k:] = times[c, k:] = np.nan
        if cond is not None:
            cond[c, k * D:], dec[c, k * D:], var[c, k * D:] = np.nan, 255, -1
    warnings.warn(
        f"Gibbs sampling {how}: kept " + ", ".join(str(int(k)) for k in done)
        + f" sweeps in the {len(done)} chains; continue from result.final_state (x0=)",
        RuntimeWarning, stacklevel=3)
    return GibbsResult(states, frac, times, cond, dec, var, interrupted=True,
                       chain_lengths=done.copy(), _final=x.copy())


# ---------------------------------------------------------------------- error measures
def random_subsets(n_vars, n_subsets=1600, subset_size=5, random_state=None):
    """Random subsets of variables (each drawn uniformly without replacement, sorted).

    Parameters
    ----------
    n_vars : int
    n_subsets : int, default=1600
    subset_size : int, default=5
    random_state : None, int, SeedSequence or Generator

    Returns
    -------
    ndarray of int64, shape (n_subsets, subset_size)
    """
    n_vars = _as_int(n_vars, "n_vars", 1)
    n_subsets = _as_int(n_subsets, "n_subsets", 1)
    subset_size = _as_int(subset_size, "subset_size", 1)
    if subset_size > n_vars or subset_size > 20:
        raise ValueError(f"subset_size must be <= min(n_vars, 20), got {subset_size}")
    rng = random_state if isinstance(random_state, np.random.Generator) else \
        np.random.default_rng(random_state)
    keys = rng.random((n_subsets, n_vars))
    return np.sort(np.argsort(keys, axis=1)[:, :subset_size], axis=1).astype(np.int64)


def state_codes(samples, variables=None):
    """Binary code of (a subset of) each state, first variable most significant.

    Parameters
    ----------
    samples : array-like of 0/1, shape (n, D)
    variables : array-like of int, shape (k,), optional (default all, k = D <= 62)

    Returns
    -------
    ndarray of int64, shape (n,)
        Index into :meth:`BinaryMRF.enumerate_joint` when ``variables`` is None.
    """
    X = np.asarray(samples)
    if X.ndim != 2:
        raise ValueError("samples must be 2-d (n, D)")
    if variables is not None:
        X = X[:, np.asarray(variables)]
    k = X.shape[1]
    if k > 62:
        raise ValueError("at most 62 variables per code")
    w = (np.int64(1) << (k - 1 - np.arange(k, dtype=np.int64)))
    return X.astype(np.int64) @ w


def _subset_codes(X, subsets):
    k = subsets.shape[1]
    w = (1 << (k - 1 - np.arange(k))).astype(np.int32)
    # (n, M) codes; built variable by variable to keep memory at n * M
    codes = np.zeros((X.shape[0], subsets.shape[0]), dtype=np.int32)
    for q in range(k):
        codes += X[:, subsets[:, q]].astype(np.int32) * w[q]
    return codes


def _validate_samples_subsets(samples, subsets):
    X = np.asarray(samples)
    if X.ndim == 3:
        X = X.reshape(-1, X.shape[-1])
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError("samples must be a non-empty array of shape (n, D) or "
                         "(n_chains, n, D)")
    S = np.asarray(subsets)
    if S.ndim != 2 or not np.issubdtype(S.dtype, np.integer):
        raise ValueError("subsets must be an integer array of shape (n_subsets, k)")
    if S.size and (S.min() < 0 or S.max() >= X.shape[1]):
        raise ValueError("subsets reference variables outside the samples")
    if S.shape[1] > 20:
        raise ValueError("subsets of more than 20 variables are not supported")
    return X, S.astype(np.int64)


def subset_marginals(samples, subsets, chunk_size=4096):
    """Empirical joint distribution of each subset of variables.

    Parameters
    ----------
    samples : array-like of 0/1, shape (n, D) or (n_chains, n, D)
        Samples (chains are pooled).
    subsets : array-like of int, shape (M, k)
    chunk_size : int, default=4096
        Samples processed at a time (bounds memory at chunk_size * M codes).

    Returns
    -------
    ndarray of float64, shape (M, 2**k)
        Row m: the frequencies of the 2**k joint values of subset m, cell index
        = binary code of the values (first variable of the subset most significant).
    """
    X, S = _validate_samples_subsets(samples, subsets)
    M, k = S.shape
    counts = np.zeros(M * (1 << k), dtype=np.int64)
    offs = (np.arange(M) << k).astype(np.int64)
    for a in range(0, X.shape[0], chunk_size):
        codes = _subset_codes(X[a:a + chunk_size], S)
        counts += np.bincount((codes + offs).ravel(), minlength=counts.shape[0])
    return counts.reshape(M, 1 << k) / X.shape[0]


def subset_l1_error(samples, reference, subsets):
    """Average L1 distance between the subset marginals of ``samples`` and ``reference``.

    ``Error = (1/M) sum_m || P_hat(X_{s_m}) - P(X_{s_m}) ||_1`` (eq. 12 of
    Korattikara et al.).

    Parameters
    ----------
    samples : array-like of 0/1, shape (n, D) or (n_chains, n, D)
    reference : array-like, shape (M, 2**k)
        Reference subset marginals (e.g. ``subset_marginals`` of a long exact run,
        or exact marginals from :meth:`BinaryMRF.enumerate_joint`).
    subsets : array-like of int, shape (M, k)

    Returns
    -------
    float
    """
    P = subset_marginals(samples, subsets)
    ref = np.asarray(reference, dtype=np.float64)
    if ref.shape != P.shape:
        raise ValueError(f"reference must have shape {P.shape}, got {ref.shape}")
    return float(np.abs(P - ref).sum(axis=1).mean())


def l1_error_trace(samples, reference, subsets, checkpoints):
    """Average subset L1 error of the first n samples of a chain, for several n.

    Parameters
    ----------
    samples : array-like of 0/1, shape (n, D)
        One chain, in sampling order.
    reference : array-like, shape (M, 2**k)
    subsets : array-like of int, shape (M, k)
    checkpoints : array-like of int
        Increasing sample counts in [1, n].

    Returns
    -------
    ndarray of float64, shape (len(checkpoints),)
    """
    X, S = _validate_samples_subsets(samples, subsets)
    if np.asarray(samples).ndim != 2:
        raise ValueError("samples must be a single chain of shape (n, D)")
    cps = np.asarray(checkpoints, dtype=np.int64)
    if cps.ndim != 1 or cps.size == 0 or np.any(np.diff(cps) <= 0) or cps[0] < 1 \
            or cps[-1] > X.shape[0]:
        raise ValueError("checkpoints must be increasing integers in [1, n_samples]")
    M, k = S.shape
    ref = np.asarray(reference, dtype=np.float64)
    if ref.shape != (M, 1 << k):
        raise ValueError(f"reference must have shape {(M, 1 << k)}, got {ref.shape}")
    counts = np.zeros(M * (1 << k), dtype=np.int64)
    offs = (np.arange(M) << k).astype(np.int64)
    out = np.empty(cps.shape[0])
    prev = 0
    for j, n in enumerate(cps):
        for a in range(prev, n, 4096):
            codes = _subset_codes(X[a:min(n, a + 4096)], S)
            counts += np.bincount((codes + offs).ravel(), minlength=counts.shape[0])
        prev = n
        out[j] = np.abs(counts.reshape(M, 1 << k) / n - ref).sum(axis=1).mean()
    return out


def calibration_curve(exact_conditionals, decisions, n_bins=20, min_count=1):
    """Observed frequency of ``x_i = 1`` against the exact conditional (Figure 7).

    Parameters
    ----------
    exact_conditionals : array-like of float, any shape
        Exact P(x_i = 1 | rest) before each update (``GibbsResult.exact_conditionals``).
    decisions : array-like of 0/1, same shape
        Values assigned by the sampler (``GibbsResult.decisions``).
    n_bins : int, default=20
        Equal-width bins on [0, 1].
    min_count : int, default=1
        Bins with fewer updates are dropped.

    Returns
    -------
    mean_exact, observed, counts : ndarrays, one entry per kept bin
        Mean exact conditional in the bin, observed frequency of 1, number of updates.
    """
    p = np.asarray(exact_conditionals, dtype=np.float64).ravel()
    d = np.asarray(decisions, dtype=np.float64).ravel()
    if p.shape != d.shape:
        raise ValueError("exact_conditionals and decisions must have the same size")
    n_bins = _as_int(n_bins, "n_bins", 1)
    b = np.minimum((p * n_bins).astype(np.int64), n_bins - 1)
    cnt = np.bincount(b, minlength=n_bins)
    sp = np.bincount(b, weights=p, minlength=n_bins)
    sd = np.bincount(b, weights=d, minlength=n_bins)
    keep = cnt >= max(1, min_count)
    return sp[keep] / cnt[keep], sd[keep] / cnt[keep], cnt[keep]
