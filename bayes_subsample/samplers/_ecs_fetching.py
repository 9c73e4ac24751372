"""HMC-ECS on a model whose rows live elsewhere (``DaskGLM``): the perturbed
kernel fed by a stream of rows drawn ahead and fetched in batches."""
from __future__ import annotations

import numpy as np

from ._ecs_updates import ECSState
from ._hmc_ecs_fast import ECSCore
from .hmc_ecs import HMCECSKernel

__all__ = ["FetchingHMCECSKernel"]


class FetchingHMCECSKernel(HMCECSKernel):
    """HMC-ECS (perturbed) on a model whose rows live elsewhere (``DaskGLM``).

    The subsample's rows are drawn uniformly and independently of the chain, so
    a chain draws them ahead -- its first ``m`` rows and the ``m / G`` rows of
    each of the next ``fetch_iterations`` block updates -- from its own
    generator, fetches the distinct ones in one gather into an in-memory GLM,
    and feeds the block updates from that stream (``ECSCore.set_index_stream``);
    when the stream runs out (a long or resumed run) the next batch is fetched.
    The draws have the law of the in-memory sampler's; they are not the same
    draws (the rows come from another stream). theta* is not recentred: each
    recentring would be a pass over the cluster's data, and the preparation's
    Newton refinement already puts theta* near the mode.
    """

    #: block updates served by one fetch
    fetch_iterations = 1000

    def __init__(self, model, sampler, prepared, n_warmup):
        super().__init__(model, sampler, prepared, n_warmup)
        self.recentre = False
        self._rows_rng = None
        #: rows this chain brought into this process
        self.rows_fetched = 0

    def _fetch(self, n_initial):
        """Draw ``n_initial`` rows and those of ``fetch_iterations`` block updates,
        fetch them; returns the local GLM and the local positions in draw order."""
        k = n_initial + self.fetch_iterations * self.block_size
        idx = self._rows_rng.integers(0, self.n, size=k)
        local, pos = self.model.fetch_rows(idx)
        self.rows_fetched += local.n_data
        return local, pos

    def init(self, rng, theta0):
        self._rows_rng = np.random.Generator(np.random.PCG64(rng.integers(2**63)))
        local, pos = self._fetch(self.m)
        pot = ECSCore(local.compiled, self.order, self.model.prior.precision, "perturbed")
        pot.set_population(float(self.n))
        cv = self.cv
        pot.set_reference(*cv.reference())
        pot.set_rows(pos[:self.m], self.block_size)
        pot.set_index_stream(pos[self.m:])
        U = pot.set_position(theta0)
        self.n_evals_setup += pot.m
        if not np.isfinite(U):
            raise self.model.overflow_error(
                f"on the subsample at a chain's initial point (max |theta| = "
                f"{np.max(np.abs(theta0)):.3g})", theta0)
        return ECSState(pot.position, U, pot, None)

    def step(self, rng, state):
        pot = state.potential
        if pot.stream_left < self.block_size:
            local, pos = self._fetch(0)
            pot.set_source(local.compiled, pos)
        return super().step(rng, state)

    def tuning(self):
        return {**super().tuning(), "rows_fetched": self.rows_fetched}
