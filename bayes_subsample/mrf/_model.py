"""Dense binary Markov random fields with pair and triple factors."""

from math import comb
from numbers import Integral, Real

import numpy as np

from . import _gibbs_fast

__all__ = ["BinaryMRF"]

_MAX_ENUMERATE = 16
_DEFAULT_SCALE = float(np.sqrt(0.02))


def _as_int(value, name, minimum):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    value = int(value)
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return value


def _check_states(states, n_vars, name="states"):
    """Return states as a C-contiguous (k, n_vars) uint8 array of 0/1 values."""
    arr = np.asarray(states)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.integer) or np.issubdtype(arr.dtype, np.bool_)
        or np.issubdtype(arr.dtype, np.floating)
    ):
        raise TypeError(f"{name} must be a numeric array of 0/1 values")
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] != n_vars:
        raise ValueError(
            f"{name} must have shape (n_states, {n_vars}) or ({n_vars},), got {np.shape(states)}"
        )
    if arr.size and not np.all((arr == 0) | (arr == 1)):
        raise ValueError(f"{name} must contain only 0 and 1")
    return np.ascontiguousarray(arr, dtype=np.uint8)


def _validate_block(index, tables, order, n_vars, duplicates, dtype):
    """Validate one block of factors of the given order; return (index, tables) with
    each factor's variables sorted increasingly (tables permuted to match), flat
    tables of shape (F, 2**order) and duplicate variable sets merged."""
    name = "pair" if order == 2 else "triple"
    size = 1 << order
    if index is None and tables is None:
        return np.empty((0, order), np.int64), np.empty((0, size), dtype)
    if index is None or tables is None:
        raise ValueError(f"{name}_index and {name}_log_potentials must be given together")
    index = np.asarray(index)
    if index.dtype == object or not (
        np.issubdtype(index.dtype, np.integer)
        or (np.issubdtype(index.dtype, np.floating) and index.size == 0)
    ):
        raise TypeError(f"{name}_index must be an integer array, got dtype {index.dtype}")
    if index.ndim != 2 or index.shape[1] != order:
        raise ValueError(f"{name}_index must have shape (n_{name}s, {order}), got {index.shape}")
    index = index.astype(np.int64)
    F = index.shape[0]
    tables = np.asarray(tables)
    if tables.dtype == object or not (
        np.issubdtype(tables.dtype, np.floating) or np.issubdtype(tables.dtype, np.integer)
    ):
        raise TypeError(f"{name}_log_potentials must be a real array, got dtype {tables.dtype}")
    if tables.shape == (F,) + (2,) * order:
        tables = tables.reshape(F, size)
    if tables.shape != (F, size):
        raise ValueError(
            f"{name}_log_potentials must have shape ({F}, {size}) or ({F}, "
            f"{', '.join(['2'] * order)}) to match {name}_index, got {tables.shape}"
        )
    tables = tables.astype(np.float64)
    if not np.all(np.isfinite(tables)):
        bad = int(np.argmax(~np.all(np.isfinite(tables), axis=1)))
        raise ValueError(
            f"{name}_log_potentials must be finite (factor {bad} has a non-finite entry; "
            "a zero potential is not supported)"
        )
    if F and (index.min() < 0 or index.max() >= n_vars):
        bad = int(np.argmax(np.any((index < 0) | (index >= n_vars), axis=1)))
        raise ValueError(
            f"{name}_index[{bad}] = {index[bad].tolist()} has a variable outside "
            f"[0, {n_vars})"
        )
    if F == 0:
        return index, _finite_in(tables.reshape(0, size), dtype, f"{name}_log_potentials")
    srt = np.sort(index, axis=1)
    if np.any(srt[:, 1:] == srt[:, :-1]):
        bad = int(np.argmax(np.any(srt[:, 1:] == srt[:, :-1], axis=1)))
        raise ValueError(
            f"{name}_index[{bad}] = {index[bad].tolist()} repeats a variable; "
            f"a {name} factor needs {order} distinct variables"
        )
    # Permute each table so that its axes follow the sorted variable order.
    if np.any(srt != index):
        perm_axes = np.argsort(index, axis=1, kind="stable")  # sorted pos -> given pos
        codes = np.arange(size)
        bits_sorted = (codes[:, None] >> (order - 1 - np.arange(order))[None, :]) & 1
        # given-order code of each sorted-order code, per factor
        weights = 1 << (order - 1 - perm_axes)                      # (F, order)
        given_code = bits_sorted @ weights.T                        # (size, F)
        tables = np.take_along_axis(tables, given_code.T, axis=1)
        index = srt
    # Duplicate variable sets.
    keys = index[:, 0]
    for q in range(1, order):
        keys = keys * n_vars + index[:, q]
    uniq, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    if uniq.shape[0] != F:
        if duplicates == "raise":
            counts = np.bincount(inverse)
            dup = int(np.argmax(counts > 1))
            where = np.flatnonzero(inverse == dup)
            raise ValueError(
                f"duplicate {name} factors on variables {index[where[0]].tolist()} "
                f"(entries {where.tolist()}); pass duplicates='merge' to add their "
                "log-potentials"
            )
        merged = np.zeros((uniq.shape[0], size))
        np.add.at(merged, inverse, tables)
        tables = merged
        index = index[first]
    else:
        order_ = np.argsort(keys, kind="stable")
        index, tables = index[order_], tables[order_]
    return np.ascontiguousarray(index), _finite_in(tables, dtype, f"{name}_log_potentials")


def _finite_in(values, dtype, what):
    """``values`` cast to ``dtype``, C-contiguous; a ValueError if a value is
    not finite there (float32 holds magnitudes up to 3.4e38: 1e39 would be
    inf, and every conditional of its variables NaN)."""
    with np.errstate(over="ignore"):
        out = np.ascontiguousarray(values, dtype=dtype)
    if not np.isfinite(out).all():
        bad = int(np.argmax(~np.isfinite(out.reshape(len(out), -1)).all(axis=1)))
        raise ValueError(
            f"{what} overflow {np.dtype(dtype).name} (factor {bad}: "
            f"{np.asarray(values).reshape(len(out), -1)[bad].tolist()}; "
            f"|values| up to {float(np.finfo(dtype).max):.3g}): rescale them, or use "
            "dtype=float64")
    return out


class BinaryMRF:
    r"""A binary Markov random field with pair and triple factors.

    .. math::

        P(x) \propto \exp\Big(\sum_{(a,b)} \theta_{ab}[2x_a + x_b]
        + \sum_{(a,b,c)} \theta_{abc}[4x_a + 2x_b + x_c]\Big),
        \qquad x \in \{0,1\}^D,

    where the :math:`\theta` are the log-potential tables of the factors.

    Parameters
    ----------
    n_vars : int
        Number of binary variables D (>= 1).
    pair_index : array-like of int, shape (n_pairs, 2), optional
        Variables of each pair factor.
    pair_log_potentials : array-like, shape (n_pairs, 4) or (n_pairs, 2, 2), optional
        Log-potential table of each pair factor; entry ``[2 * x_a + x_b]`` (or
        ``[x_a, x_b]``) for ``pair_index[f] = (a, b)`` in the order given.
    triple_index : array-like of int, shape (n_triples, 3), optional
        Variables of each triple factor.
    triple_log_potentials : array-like, shape (n_triples, 8) or (n_triples, 2, 2, 2), optional
        Log-potential table of each triple factor, entry ``[4 x_a + 2 x_b + x_c]``.
    duplicates : {"merge", "raise"}, default="merge"
        What to do with several factors on the same set of variables (in any order):
        ``"merge"`` adds their log-potentials (the product of the potentials, the
        same distribution); ``"raise"`` raises a ValueError.
    dtype : {numpy.float64, numpy.float32}, default=numpy.float64
        Floating type of the stored tables (the samplers accumulate in float64).

    Attributes
    ----------
    n_vars : int
        Number of variables D.
    pair_index, triple_index : ndarray of int64
        Factor variables, sorted within each factor; factors sorted
        lexicographically, duplicates merged.
    pair_log_potentials, triple_log_potentials : ndarray, shape (F, 4) / (F, 8)
        Flat log-potential tables matching the sorted variable order.
    n_factors : int
        Number of (merged) factors.
    factor_ptr : ndarray of int64, shape (D + 1,)
        The factors touching variable i are the incidences
        ``factor_ptr[i]:factor_ptr[i + 1]`` (CSR layout, pairs first).
    incidence_factor : ndarray of int64, shape (n_incidences,)
        Global factor id of each incidence (pairs ``0..n_pairs-1``, then triples).
    incidence_other : ndarray of int32, shape (n_incidences, 2)
        The other variables of the factor (a pair's single other variable twice).
    incidence_log_ratio : ndarray, shape (n_incidences, 4)
        ``l_f = log psi_f(x_i=1, .) - log psi_f(x_i=0, .)`` indexed by
        ``2 * x[other[0]] + x[other[1]]``; what the Gibbs kernels read.

    Notes
    -----
    Storage for the paper's model (D = 100, all C(100, 3) = 161,700 triples):
    the tables take 161,700 x 8 doubles (10.3 MB) and the incidence arrays
    485,100 x (4 doubles + 2 int32 + 1 int64) (23 MB); every variable touches
    4,851 factors.

    Examples
    --------
    >>> import numpy as np
    >>> from bayes_subsample.mrf import BinaryMRF
    >>> mrf = BinaryMRF(3, pair_index=[[0, 1]], pair_log_potentials=[[0.0, 0.0, 0.0, 1.0]])
    >>> round(mrf.conditional_prob([0, 1, 0], 0), 4)
    0.7311
    >>> mrf.enumerate_joint().shape
    (8,)
    """

    def __init__(self, n_vars, pair_index=None, pair_log_potentials=None,
                 triple_index=None, triple_log_potentials=None, *,
                 duplicates="merge", dtype=np.float64):
        self.n_vars = _as_int(n_vars, "n_vars", 1)
        if duplicates not in ("merge", "raise"):
            raise ValueError(f"duplicates must be 'merge' or 'raise', got {duplicates!r}")
        dtype = np.dtype(dtype)
        if dtype not in (np.dtype(np.float64), np.dtype(np.float32)):
            raise ValueError(f"dtype must be float64 or float32, got {dtype}")
        if self.n_vars >= 2**31:
            raise ValueError("n_vars must be < 2**31")
        self.duplicates = duplicates
        self.dtype = dtype
        self.pair_index, self.pair_log_potentials = _validate_block(
            pair_index, pair_log_potentials, 2, self.n_vars, duplicates, dtype)
        self.triple_index, self.triple_log_potentials = _validate_block(
            triple_index, triple_log_potentials, 3, self.n_vars, duplicates, dtype)
        self._build_incidence()

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_factors(cls, n_vars, factors, **kwargs):
        """Build a model from a list of ``(variables, log_table)`` pairs.

        Parameters
        ----------
        n_vars : int
            Number of variables.
        factors : iterable of (sequence of int, array-like)
            Each item is a factor: 2 or 3 distinct variables and its log-potential
            table of shape ``(2,) * order`` or ``(2 ** order,)``, indexed by the
            variables in the order given.
        **kwargs
            ``duplicates`` and ``dtype``, see :class:`BinaryMRF`.

        Returns
        -------
        BinaryMRF
        """
        blocks = {2: ([], []), 3: ([], [])}
        for j, item in enumerate(factors):
            try:
                variables, table = item
            except (TypeError, ValueError):
                raise TypeError(
                    f"factor {j} must be a (variables, log_table) pair") from None
            variables = tuple(np.asarray(variables).ravel().tolist())
            if len(variables) not in blocks:
                raise ValueError(
                    f"factor {j} has {len(variables)} variables; only pair and triple "
                    "factors are supported")
            table = np.asarray(table)
            if table.size != 1 << len(variables):
                raise ValueError(
                    f"factor {j} on {len(variables)} variables needs "
                    f"{1 << len(variables)} table entries, got shape {table.shape}")
            if table.shape not in ((1 << len(variables),), (2,) * len(variables)):
                raise ValueError(f"factor {j}: bad table shape {table.shape}")
            blocks[len(variables)][0].append(variables)
            blocks[len(variables)][1].append(table.reshape(-1))
        args = {}
        for order, name in ((2, "pair"), (3, "triple")):
            idx, tab = blocks[order]
            if idx:
                args[f"{name}_index"] = np.array(idx)
                args[f"{name}_log_potentials"] = np.array(tab)
        return cls(n_vars, **args, **kwargs)

    @classmethod
    def random(cls, n_vars=100, order=3, log_potential_scale=_DEFAULT_SCALE,
               random_state=None, dtype=np.float64):
        """The fully connected random MRF of Korattikara et al. (2014, §6.3).

        One factor for every set of ``order`` distinct variables, with iid
        ``N(0, log_potential_scale**2)`` log-potential entries.

        Parameters
        ----------
        n_vars : int, default=100
            Number of variables D.
        order : {2, 3} or "both", default=3
            Factor order: all pairs, all triples, or both.
        log_potential_scale : float, default=sqrt(0.02) ~= 0.1414
            Standard deviation of the log-potential entries.  The paper writes
            ``log psi ~ N(0, 0.02)``, read here as variance 0.02, hence the default
            scale ``sqrt(0.02)``; at that scale the conditionals are nearly
            deterministic and exact Gibbs mixes slowly, and ``0.02`` is the
            standard-deviation reading (see :ref:`algo-mrf-model`).
        random_state : None, int, numpy.random.SeedSequence or numpy.random.Generator
            Seed of the tables.
        dtype : {numpy.float64, numpy.float32}, default=numpy.float64

        Returns
        -------
        BinaryMRF
        """
        n_vars = _as_int(n_vars, "n_vars", 1)
        if order not in (2, 3, "both"):
            raise ValueError(f"order must be 2, 3 or 'both', got {order!r}")
        if isinstance(log_potential_scale, bool) or not isinstance(log_potential_scale, Real) \
                or not np.isfinite(log_potential_scale) or log_potential_scale < 0:
            raise ValueError(
                f"log_potential_scale must be a finite number >= 0, got {log_potential_scale!r}")
        rng = random_state if isinstance(random_state, np.random.Generator) else \
            np.random.default_rng(random_state)
        args = {}
        for o, name in ((2, "pair"), (3, "triple")):
            if order in (o, "both") and n_vars >= o:
                idx = _all_subsets(n_vars, o)
                args[f"{name}_index"] = idx
                args[f"{name}_log_potentials"] = log_potential_scale * rng.standard_normal(
                    (idx.shape[0], 1 << o))
        return cls(n_vars, **args, duplicates="raise", dtype=dtype)

    # ------------------------------------------------------------------ internals
    def _build_incidence(self):
        D = self.n_vars
        parts = []   # (variable, factor id, other0, other1, log ratio table)
        n_pairs = self.pair_index.shape[0]
        for order, index, tables, offset in (
            (2, self.pair_index, self.pair_log_potentials, 0),
            (3, self.triple_index, self.triple_log_potentials, n_pairs),
        ):
            F = index.shape[0]
            if F == 0:
                continue
            tab = tables.astype(np.float64)
            fid = np.arange(F, dtype=np.int64) + offset
            for p in range(order):
                others = [q for q in range(order) if q != p]
                w_p = 1 << (order - 1 - p)
                ratio = np.empty((F, 4))
                for j in range(4):              # j = 2 * x_o0 + x_o1
                    xo = (j >> 1, j & 1) if order == 3 else (j >> 1,)
                    base = sum(v << (order - 1 - q) for v, q in zip(xo, others))
                    ratio[:, j] = tab[:, base + w_p] - tab[:, base]
                o0 = index[:, others[0]]
                o1 = index[:, others[1]] if order == 3 else o0
                parts.append((index[:, p], fid, o0, o1, ratio))
        if parts:
            var = np.concatenate([q[0] for q in parts])
            fid = np.concatenate([q[1] for q in parts])
            o0 = np.concatenate([q[2] for q in parts])
            o1 = np.concatenate([q[3] for q in parts])
            ratio = np.concatenate([q[4] for q in parts])
            srt = np.lexsort((fid, var))
            var, fid = var[srt], fid[srt]
            other = np.stack([o0[srt], o1[srt]], axis=1).astype(np.int32)
            ratio = ratio[srt]
        else:
            var = np.empty(0, np.int64)
            fid = np.empty(0, np.int64)
            other = np.empty((0, 2), np.int32)
            ratio = np.empty((0, 4))
        self.factor_ptr = np.zeros(D + 1, dtype=np.int64)
        np.cumsum(np.bincount(var, minlength=D), out=self.factor_ptr[1:])
        self.incidence_factor = np.ascontiguousarray(fid)
        self.incidence_other = np.ascontiguousarray(other)
        # the conditionals' log-ratios (differences of two entries of a table)
        self.incidence_log_ratio = _finite_in(ratio, self.dtype,
                                              "the log-potential differences (log-ratios)")

    # ------------------------------------------------------------------ properties
    @property
    def n_factors(self):
        """Number of factors (after merging duplicates)."""
        return int(self.pair_index.shape[0] + self.triple_index.shape[0])

    @property
    def n_factors_per_var(self):
        """ndarray of int64, shape (D,): number of factors touching each variable."""
        return np.diff(self.factor_ptr)

    def __repr__(self):
        return (f"BinaryMRF(n_vars={self.n_vars}, n_pairs={self.pair_index.shape[0]}, "
                f"n_triples={self.triple_index.shape[0]}, dtype={self.dtype.name})")

    # ------------------------------------------------------------------ densities
    def log_prob_unnormalized(self, states):
        """Unnormalised log-probability: the sum of the log-potentials.

        Parameters
        ----------
        states : array-like of 0/1, shape (k, D) or (D,)

        Returns
        -------
        ndarray of float64, shape (k,)
            (A 1-d input gives a length-1 result.)
        """
        X = _check_states(states, self.n_vars)
        out = np.zeros(X.shape[0])
        for index, tables in ((self.pair_index, self.pair_log_potentials),
                              (self.triple_index, self.triple_log_potentials)):
            if index.shape[0]:
                _gibbs_fast.log_prob_factors(tables, index, X, out)
        return out

    def conditional_log_odds(self, states, variables=None):
        """Exact ``log P(x_i=1 | rest) - log P(x_i=0 | rest)`` (the sum of the l_f).

        Parameters
        ----------
        states : array-like of 0/1, shape (k, D) or (D,)
        variables : int or array-like of int, optional
            Variables i (default: all D).

        Returns
        -------
        ndarray of float64, shape (k, n_variables)
        """
        X = _check_states(states, self.n_vars)
        v = self._check_variables(variables)
        out = np.empty((X.shape[0], v.shape[0]))
        _gibbs_fast.conditional_log_odds(self.incidence_log_ratio, self.incidence_other,
                                         self.factor_ptr, X, v, out)
        return out

    def conditional_prob(self, state, i=None):
        """Exact conditional probability ``P(x_i = 1 | x_{-i})``.

        Parameters
        ----------
        state : array-like of 0/1, shape (D,)
            The state; its value at ``i`` is ignored.
        i : int or array-like of int, optional
            Variable(s); default all D variables.

        Returns
        -------
        float or ndarray of float64
            A float for an integer ``i``, else an array with one entry per variable.
        """
        X = np.asarray(state)
        if X.ndim != 1:
            raise ValueError(f"state must be 1-d of length {self.n_vars}, got shape {X.shape}")
        s = self.conditional_log_odds(X, i)[0]
        p = np.where(s >= 0, 1.0 / (1.0 + np.exp(-np.abs(s))),
                     np.exp(-np.abs(s)) / (1.0 + np.exp(-np.abs(s))))
        if i is not None and np.ndim(i) == 0:
            return float(p[0])
        return p

    def _check_variables(self, variables):
        if variables is None:
            return np.arange(self.n_vars, dtype=np.int64)
        v = np.atleast_1d(np.asarray(variables))
        if v.ndim != 1 or not (np.issubdtype(v.dtype, np.integer) or v.size == 0):
            raise TypeError("variables must be an integer or a 1-d array of integers")
        v = v.astype(np.int64)
        if v.size and (v.min() < 0 or v.max() >= self.n_vars):
            raise ValueError(f"variable index out of range [0, {self.n_vars})")
        return np.ascontiguousarray(v)

    def all_states(self):
        """All 2**D states, shape (2**D, D), row r = binary digits of r (x_0 most
        significant).  Only for D <= 16."""
        if self.n_vars > _MAX_ENUMERATE:
            raise ValueError(f"enumeration needs n_vars <= {_MAX_ENUMERATE}, got {self.n_vars}")
        codes = np.arange(1 << self.n_vars)
        shifts = self.n_vars - 1 - np.arange(self.n_vars)
        return ((codes[:, None] >> shifts[None, :]) & 1).astype(np.uint8)

    def enumerate_joint(self):
        """Exact joint distribution by enumeration (D <= 16).

        Returns
        -------
        ndarray of float64, shape (2**D,)
            ``p[r]`` is the probability of the state whose binary digits are r,
            variable 0 the most significant bit (see :meth:`all_states` and
            :func:`bayes_subsample.mrf.state_codes`).
        """
        lp = self.log_prob_unnormalized(self.all_states())
        lp -= lp.max()
        p = np.exp(lp)
        return p / p.sum()


def _all_subsets(n, k):
    """All k-subsets of range(n) in lexicographic order, shape (C(n, k), k)."""
    if k == 2:
        a, b = np.triu_indices(n, 1)
        return np.stack([a, b], axis=1).astype(np.int64)
    out = np.empty((comb(n, 3), 3), dtype=np.int64)
    pos = 0
    for a in range(n - 2):
        b, c = np.triu_indices(n - a - 1, 1)
        m = b.shape[0]
        out[pos:pos + m, 0] = a
        out[pos:pos + m, 1] = a + 1 + b
        out[pos:pos + m, 2] = a + 1 + c
        pos += m
    return out
