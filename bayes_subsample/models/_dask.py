"""GLM posteriors whose design matrix is a row-chunked Dask array.

The data stay where Dask keeps them (the workers of a ``distributed`` cluster,
or chunks read from disk by the local scheduler). This process holds ``y``
(8 bytes per row) and the rows a sampler asks for, never ``X``:

* every full-data pass (the MAP search, theta* and the control variates' sums,
  the metric) is a Dask reduction: each chunk builds the compiled GLM over its
  rows where it lives and returns its ``(sum l_k, sum grad l_k, sum Hessian
  l_k)``; the sums are added in chunk order, so the result does not depend on
  the scheduler or the number of workers;
* rows are fetched by index (:meth:`DaskGLM.fetch_rows`, one gather) into a
  compiled in-memory GLM over those rows alone: the 1% subset of the initial
  theta*, the pilot rows of the subsample-size rule, and the subsample rows of
  HMC-ECS, whose indices do not depend on the chain and are drawn ahead for
  many iterations at a time (see ``samplers._ecs_fetching``).

Computations run on the active ``distributed.Client`` when there is one
(``dask`` uses it by default), else on Dask's default scheduler.
"""
from __future__ import annotations

import numpy as np

from ._base import Model, _digest
from ._glm import GLM, set_glm_fields

__all__ = ["DaskGLM", "is_dask_array"]

#: families of the estimators' model classes (the Dask model is one class for all)
FAMILIES = ("logistic", "poisson", "gaussian")


def is_dask_array(X):
    """True for a ``dask.array.Array`` (without importing dask when it is not)."""
    mod = type(X).__module__ or ""
    if not mod.startswith("dask"):
        return False
    try:
        import dask.array as da
    except ImportError:    # pragma: no cover - a dask object without dask.array
        return False
    return isinstance(X, da.Array)


def _block_pass(X, y, family, fit_intercept, noise_scale, theta, loglik, gradient, hessian):
    """One chunk's fused pass (runs where the chunk lives)."""
    model = GLM(X, y, family, fit_intercept=fit_intercept,
                noise_scale=noise_scale if family == "gaussian" else 1.0)
    return model.full_pass(theta, gradient=gradient, hessian=hessian, loglik=loglik)


def _add_parts(parts):
    """Sum the chunks' ``(ll, grad, hess)`` in chunk order."""
    ll, g, h = parts[0]
    ll = float(ll)
    g = None if g is None else np.array(g, dtype=np.float64)
    h = None if h is None else np.array(h, dtype=np.float64)
    for ll_b, g_b, h_b in parts[1:]:
        ll += float(ll_b)
        if g is not None:
            g += g_b
        if h is not None:
            h += h_b
    return ll, g, h


class DaskGLM(Model):
    """Canonical GLM posterior (see :class:`~bayes_subsample.models.GLM`) with
    ``X`` a row-chunked ``dask.array.Array``.

    Parameters
    ----------
    X : dask.array.Array of shape (n_samples, n_features)
        float32 or float64 (integer and boolean chunks are converted to float64
        where they live). Chunked along rows only: column chunks are merged
        (``rechunk({1: -1})``); row chunk sizes must be known.
    y : array-like or dask.array.Array of shape (n_samples,)
        Targets; brought into this process (8 bytes per row).
    family : {"logistic", "poisson", "gaussian"}
    fit_intercept, prior_scale, intercept_prior_scale, noise_scale
        As for :class:`~bayes_subsample.models.GLM`.

    Notes
    -----
    Only HMC-ECS (perturbed variant) samples this model: it needs the data in
    full passes and in subsamples drawn independently of the chain, which
    :meth:`fetch_rows` serves in one gather per few hundred iterations. The
    other samplers read rows chosen by the chain at every step (austerity and
    the confidence sampler grow their subsample until a test decides; the SG
    samplers and exact MH/HMC read minibatches or all rows per step), so each
    step would be a round trip to the cluster: they raise a ValueError here
    and work on in-memory or memory-mapped X.
    """

    max_cv_order = 2
    analytic_hessian = True
    evaluation_overhead = 0
    #: rows live outside this process (see the samplers that serve it)
    distributed = True

    def __init__(self, X, y, family, *, fit_intercept=True, prior_scale=10.0,
                 intercept_prior_scale=10.0, noise_scale=1.0):
        import dask.array as da

        if family not in FAMILIES:
            raise ValueError(f"family must be one of {list(FAMILIES)}, got {family!r}")
        if not is_dask_array(X):
            raise TypeError(f"X must be a dask.array.Array, got {type(X).__name__}")
        if X.ndim != 2:
            raise ValueError(f"X must be 2-D (n_samples, n_features), got shape {X.shape}")
        if any(np.isnan(c) for c in X.chunks[0]):
            raise ValueError("X has row chunks of unknown size: call "
                             "X.compute_chunk_sizes() first")
        if X.shape[0] < 1 or X.shape[1] < 1:
            raise ValueError(f"X must have at least one row and one column, got {X.shape}")
        if X.dtype not in (np.float32, np.float64):
            if X.dtype.kind not in "iub":
                raise TypeError(f"X must be a float32 or float64 array, got dtype {X.dtype}")
            X = X.astype(np.float64)
        if len(X.chunks[1]) > 1:
            X = X.rechunk({1: -1})          # the compiled kernels read whole rows
        self.X = X
        if is_dask_array(y):
            y = y.compute()
        set_glm_fields(self, X.shape, y, family, fit_intercept, prior_scale,
                       intercept_prior_scale, noise_scale)
        self._y_chunks = da.from_array(self.y, chunks=(X.chunks[0],))
        #: rows brought into this process so far (by fetch_rows)
        self.rows_fetched = 0
        self._local_cache = None

    def __getstate__(self):
        state = super().__getstate__()
        state["_local_cache"] = None        # fetched rows stay where they were fetched
        return state

    # ---- full passes: Dask reductions of the compiled kernel -----------------------------
    def full_pass(self, theta, *, gradient=True, hessian=False, loglik=True):
        """``(sum l_k, sum grad l_k, sum Hessian l_k)`` over every chunk, where the
        chunks live (one task per chunk, added in chunk order). A chunk holding
        NaN or infinity raises ValueError."""
        import dask

        theta = self.check_theta(theta)
        noise = self.noise_scale if self.family == "gaussian" else 1.0
        blocks = zip(self.X.to_delayed().ravel(), self._y_chunks.to_delayed().ravel())
        parts = [dask.delayed(_block_pass, pure=True)(xb, yb, self.family, self.fit_intercept,
                                                      noise, theta, loglik, gradient, hessian)
                 for xb, yb in blocks]
        (result,) = dask.compute(dask.delayed(_add_parts)(parts))
        self.count_passes()
        return result

    # ---- rows in this process ------------------------------------------------------------
    def fetch_rows(self, idx):
        """Bring the rows ``idx`` into this process (one gather of the distinct
        rows, in index order). Returns ``(local, pos)``: an in-memory
        :class:`~bayes_subsample.models.GLM` of those rows (same family, prior and
        intercept) and the positions of ``idx`` in it (``local`` row ``pos[i]`` is
        row ``idx[i]``)."""
        idx = self.check_indices(idx)
        rows, pos = np.unique(idx, return_inverse=True)
        X = np.ascontiguousarray(self.X[rows].compute()) if rows.size else \
            np.empty((0, self.n_features), dtype=self.X.dtype)
        self.rows_fetched += int(rows.size)
        local = GLM(X, self.y[rows], self.family, fit_intercept=self.fit_intercept,
                    noise_scale=self.noise_scale or 1.0, n_threads=1)
        local.prior = self.prior
        return local, pos.astype(np.int64)

    def subset(self, idx):
        """The in-memory GLM of the rows ``idx`` (fetched), with the same prior."""
        local, _ = self.fetch_rows(np.unique(self.check_indices(idx)))
        return local

    def _local(self, idx):
        """``(local GLM, positions)`` of ``idx``, reusing the last fetch when the
        same rows are asked again (the subsample-size rule evaluates its pilot
        rows at 50 points)."""
        idx = self.check_indices(idx)
        key = _digest(idx)
        if self._local_cache is None or self._local_cache[0] != key:
            self._local_cache = (key, *self.fetch_rows(idx))
        return self._local_cache[1], self._local_cache[2]

    def loglik_terms(self, theta, idx):
        local, pos = self._local(idx)
        return local.loglik_terms(theta, pos)

    def grad_terms(self, theta, idx):
        local, pos = self._local(idx)
        return local.grad_terms(theta, pos)

    def cv_residual_terms(self, theta, theta_star, idx, order):
        local, pos = self._local(idx)
        return local.cv_residual_terms(theta, theta_star, pos, order)

    def cv_residuals_and_grads(self, theta, theta_star, idx, order):
        local, pos = self._local(idx)
        return local.cv_residuals_and_grads(theta, theta_star, pos, order)

    @property
    def compiled(self):
        raise TypeError(
            "a DaskGLM has no compiled object in this process: its rows live with Dask. "
            "HMC-ECS (perturbed) samples it, fetching the rows it needs; other samplers "
            "need X in memory (or memory-mapped).")

    def fingerprint(self):
        """Family, prior, noise, intercept, shape and dtype, a hash of ``y`` and
        of every value of ``X`` (each chunk hashed where it lives, one pass)."""
        import dask

        fp = super().fingerprint()
        blocks = self.X.to_delayed().ravel()
        digests = dask.compute(*[dask.delayed(_digest)(b) for b in blocks])
        fp.update(family=self.family, phi=repr(self.phi), fit_intercept=str(self.fit_intercept),
                  y=_digest(self.y), X=f"{np.dtype(self.X.dtype).str}{self.X.shape}",
                  terms=_digest(np.array(digests + (repr(self.X.chunks),))))
        return fp
