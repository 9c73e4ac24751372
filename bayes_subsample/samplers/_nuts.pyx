# cython: language_level=3
"""The no-U-turn sampler's transition (doc/algorithms/full_data.rst), on any
``Potential`` and ``Metric`` of ``_hamiltonian``: the full-data potential and
the subsampled potential of HMC-ECS alike.

Multinomial NUTS as in Stan (Betancourt 2017, "A conceptual introduction to
Hamiltonian Monte Carlo", appendix A): the trajectory doubles in a random
direction until the generalised no-U-turn criterion (``p_sharp = M^-1 p``)
fails around the merged trajectory or across its two halves, or its depth
reaches ``max_depth``; the draw is chosen among the trajectory's points with
probabilities proportional to ``exp(-H)``: progressively (biased towards the
new half) at the top level, uniformly within subtrees. A leaf whose energy
exceeds the initial one by more than 1000 is divergent and ends the doubling
(the subtree holding it is not used). The acceptance statistic is the mean
over all leaves of ``min(1, exp(H0 - H))``, the quantity dual averaging
targets.

A potential that keeps work tied to its position (``Potential.stateful``:
HMC-ECS's residual banks) is evaluated once more at the chosen point when it
is not the starting point; the evaluation is counted.
"""
import numpy as np
from libc.math cimport exp, log, isfinite, INFINITY
from libc.stdlib cimport malloc, free
from bayes_subsample._rng cimport bitgen_t, get_bitgen, rng_uniform
from bayes_subsample.samplers._hamiltonian cimport Potential, Metric

DEF MAX_DELTA_H = 1000.0
DEF TREE_VECTORS = 8


cdef inline double _logaddexp(double a, double b) noexcept nogil:
    if a == -INFINITY:
        return b
    if b == -INFINITY:
        return a
    if a > b:
        return a + log(1.0 + exp(b - a))
    return b + log(1.0 + exp(a - b))


cdef inline double _dot(const double* a, const double* b, Py_ssize_t p) noexcept nogil:
    cdef double s = 0.0
    cdef Py_ssize_t j
    for j in range(p):
        s += a[j] * b[j]
    return s


cdef inline bint _no_uturn(const double* sharp_a, const double* sharp_b, const double* rho,
                           Py_ssize_t p) noexcept nogil:
    return _dot(sharp_a, rho, p) > 0 and _dot(sharp_b, rho, p) > 0


cdef inline void _copy(double* dst, const double* src, Py_ssize_t p) noexcept nogil:
    cdef Py_ssize_t j
    for j in range(p):
        dst[j] = src[j]


cdef struct Tree:
    # the chosen point (theta, grad U, momentum, U)
    double* theta
    double* grad
    double* mom
    double U
    double log_w           # log of the sum of exp(H0 - H) over the leaves
    double* rho            # sum of the leaves' momenta
    # momenta and M^-1 p at the two ends, in the order of building ("beg" nearest
    # the starting point)
    double* p_beg
    double* p_end
    double* sharp_beg
    double* sharp_end


cdef inline void _take_point(Tree* dst, const Tree* src, Py_ssize_t p) noexcept nogil:
    _copy(dst.theta, src.theta, p)
    _copy(dst.grad, src.grad, p)
    _copy(dst.mom, src.mom, p)
    dst.U = src.U


cdef inline void _one_point(Tree* t, const double* theta, const double* grad,
                            const double* mom, double U, const double* sharp, double log_w,
                            Py_ssize_t p) noexcept nogil:
    """``t`` = the trajectory of the single point ``(theta, mom)`` (``sharp = M^-1
    mom``): that point as its draw, its momentum sum and both of its ends."""
    _copy(t.theta, theta, p)
    _copy(t.grad, grad, p)
    _copy(t.mom, mom, p)
    t.U = U
    t.log_w = log_w
    _copy(t.rho, mom, p)
    _copy(t.p_beg, mom, p)
    _copy(t.p_end, mom, p)
    _copy(t.sharp_beg, sharp, p)
    _copy(t.sharp_end, sharp, p)


cdef class NUTSCore:
    """Workspace of NUTS transitions of dimension ``dim`` with trajectories of
    at most ``2**max_depth`` leapfrog steps."""

    cdef Py_ssize_t p
    cdef readonly int max_depth
    cdef double* mem
    cdef Tree* trees         # [0] the trajectory, [1] the new half, 2d and 2d+1 for depth d
    cdef double* e_theta     # the moving edge
    cdef double* e_p
    cdef double* e_grad
    cdef double e_U
    cdef double* vel
    cdef double* z
    cdef double* ext         # scratch of the extra U-turn checks
    cdef double* far_theta   # the trajectory's two edges (theta, p, grad, U): the far
    cdef double* far_p       # one, and the one the last half grew from
    cdef double* far_grad
    cdef double far_U
    cdef double* near_theta
    cdef double* near_p
    cdef double* near_grad
    cdef double near_U
    cdef double H0, sum_metro
    cdef int n_leapfrog
    cdef bint divergent
    cdef bitgen_t* bg
    cdef Potential pot
    cdef Metric metric

    def __cinit__(self, Py_ssize_t dim, int max_depth=10):
        if dim < 1 or max_depth < 1:
            raise ValueError("dim and max_depth must be >= 1")
        cdef Py_ssize_t n_trees = 2 * (max_depth + 1), k, p = dim
        cdef double* m
        self.p = dim
        self.max_depth = max_depth
        self.mem = <double*> malloc((TREE_VECTORS * n_trees + 12) * p * sizeof(double))
        self.trees = <Tree*> malloc(n_trees * sizeof(Tree))
        if self.mem == NULL or self.trees == NULL:
            raise MemoryError()
        m = self.mem
        for k in range(n_trees):
            self.trees[k].theta, self.trees[k].grad, self.trees[k].mom = m, m + p, m + 2 * p
            self.trees[k].rho, self.trees[k].p_beg, self.trees[k].p_end = \
                m + 3 * p, m + 4 * p, m + 5 * p
            self.trees[k].sharp_beg, self.trees[k].sharp_end = m + 6 * p, m + 7 * p
            m += TREE_VECTORS * p
        self.e_theta, self.e_p, self.e_grad = m, m + p, m + 2 * p
        self.vel, self.z, self.ext = m + 3 * p, m + 4 * p, m + 5 * p
        self.far_theta, self.far_p, self.far_grad = m + 6 * p, m + 7 * p, m + 8 * p
        self.near_theta, self.near_p, self.near_grad = m + 9 * p, m + 10 * p, m + 11 * p

    def __dealloc__(self):
        free(self.mem)
        free(self.trees)

    cdef bint _leaf(self, double eps, Tree* t) noexcept nogil:
        """One leapfrog step of the edge (moved in place), as a tree of one leaf."""
        cdef Py_ssize_t j, p = self.p
        cdef double H
        for j in range(p):
            self.e_p[j] -= 0.5 * eps * self.e_grad[j]
        self.metric.kinetic(self.e_p, self.vel)
        for j in range(p):
            self.e_theta[j] += eps * self.vel[j]
        self.e_U = self.pot.evaluate(self.e_theta, self.e_grad)
        for j in range(p):
            self.e_p[j] -= 0.5 * eps * self.e_grad[j]
        H = self.e_U + self.metric.kinetic(self.e_p, self.vel)
        self.n_leapfrog += 1
        if not isfinite(H):
            H = INFINITY
        if H - self.H0 > MAX_DELTA_H:
            self.divergent = True
        self.sum_metro += 1.0 if H <= self.H0 else exp(self.H0 - H)
        _one_point(t, self.e_theta, self.e_grad, self.e_p, self.e_U, self.vel, self.H0 - H, p)
        return not self.divergent

    cdef bint _tree(self, int depth, double eps, Tree* out) noexcept nogil:
        """A subtree of ``2**depth`` leaves from the edge into ``out``; False when it
        holds a divergence or a U-turn (then it must not be used)."""
        cdef Py_ssize_t j, p = self.p
        cdef Tree* a
        cdef Tree* b
        if depth == 0:
            return self._leaf(eps, out)
        a = &self.trees[2 * depth]
        b = &self.trees[2 * depth + 1]
        if not self._tree(depth - 1, eps, a) or not self._tree(depth - 1, eps, b):
            return False
        # uniform multinomial choice between the halves
        out.log_w = _logaddexp(a.log_w, b.log_w)
        if b.log_w > out.log_w or rng_uniform(self.bg) < exp(b.log_w - out.log_w):
            _take_point(out, b, p)
        else:
            _take_point(out, a, p)
        for j in range(p):
            out.rho[j] = a.rho[j] + b.rho[j]
        _copy(out.p_beg, a.p_beg, p)
        _copy(out.sharp_beg, a.sharp_beg, p)
        _copy(out.p_end, b.p_end, p)
        _copy(out.sharp_end, b.sharp_end, p)
        # no U-turn around the merged tree, nor across its halves
        if not _no_uturn(a.sharp_beg, b.sharp_end, out.rho, p):
            return False
        for j in range(p):
            self.ext[j] = a.rho[j] + b.p_beg[j]
        if not _no_uturn(a.sharp_beg, b.sharp_beg, self.ext, p):
            return False
        for j in range(p):
            self.ext[j] = b.rho[j] + a.p_end[j]
        return _no_uturn(a.sharp_end, b.sharp_end, self.ext, p)

    cdef bint _extend(self, Tree* traj, Tree* new) noexcept nogil:
        """Merge the new half into the trajectory (``traj``: its end on the side the
        half grew is ``p_end``; the other ``p_beg``) and check the criterion
        around the merged trajectory and across the old one and the new half."""
        cdef Py_ssize_t j, p = self.p
        cdef bint ok
        for j in range(p):
            self.ext[j] = traj.rho[j] + new.p_beg[j]
        ok = _no_uturn(traj.sharp_beg, new.sharp_beg, self.ext, p)
        for j in range(p):
            self.ext[j] = new.rho[j] + traj.p_end[j]
        ok = ok and _no_uturn(traj.sharp_end, new.sharp_end, self.ext, p)
        for j in range(p):
            traj.rho[j] += new.rho[j]
        _copy(traj.p_end, new.p_end, p)
        _copy(traj.sharp_end, new.sharp_end, p)
        return ok and _no_uturn(traj.sharp_beg, traj.sharp_end, traj.rho, p)

    cdef void _swap_ends(self, Tree* traj) noexcept nogil:
        """Exchange the trajectory's two ends (and the stored edges)."""
        cdef double* tmp
        cdef double u
        tmp = traj.p_beg; traj.p_beg = traj.p_end; traj.p_end = tmp
        tmp = traj.sharp_beg; traj.sharp_beg = traj.sharp_end; traj.sharp_end = tmp
        tmp = self.far_theta; self.far_theta = self.near_theta; self.near_theta = tmp
        tmp = self.far_p; self.far_p = self.near_p; self.near_p = tmp
        tmp = self.far_grad; self.far_grad = self.near_grad; self.near_grad = tmp
        u = self.far_U; self.far_U = self.near_U; self.near_U = u

    cdef int transition(self, bitgen_t* bg, double eps, double* accept_stat,
                        double* energy_error, int* depth_out, bint* divergent) noexcept nogil:
        """One NUTS transition from the position of ``self.pot`` (set with the GIL
        before), which moves to the draw. Returns the evaluations of the potential."""
        cdef Py_ssize_t p = self.p
        cdef int depth = 0, n_eval
        cdef bint forward, last_forward = True, moved = False
        cdef Tree* traj = &self.trees[0]
        cdef Tree* new = &self.trees[1]
        cdef Tree* sample = &self.trees[2 * self.max_depth + 1]   # never a subtree half
        self.bg = bg
        self.n_leapfrog = 0
        self.sum_metro = 0.0
        self.divergent = False
        self.pot.begin()
        self.metric.sample_momentum(bg, self.z, self.near_p)
        self.H0 = self.pot.U + self.metric.kinetic(self.near_p, self.vel)
        # the trajectory: the starting point, its near (forward) and far ends equal
        _copy(self.near_theta, &self.pot.theta[0], p)
        _copy(self.near_grad, &self.pot.grad[0], p)
        self.near_U = self.pot.U
        _copy(self.far_theta, self.near_theta, p)
        _copy(self.far_p, self.near_p, p)
        _copy(self.far_grad, self.near_grad, p)
        self.far_U = self.near_U
        _one_point(traj, self.near_theta, self.near_grad, self.near_p, self.near_U, self.vel,
                   0.0, p)
        _take_point(sample, traj, p)
        while depth < self.max_depth:
            forward = rng_uniform(bg) > 0.5
            if forward != last_forward:
                self._swap_ends(traj)
                last_forward = forward
            # grow a new half from the trajectory's end on that side
            _copy(self.e_theta, self.near_theta, p)
            _copy(self.e_p, self.near_p, p)
            _copy(self.e_grad, self.near_grad, p)
            self.e_U = self.near_U
            if not self._tree(depth, eps if forward else -eps, new):
                break
            _copy(self.near_theta, self.e_theta, p)
            _copy(self.near_p, self.e_p, p)
            _copy(self.near_grad, self.e_grad, p)
            self.near_U = self.e_U
            depth += 1
            # progressive sampling, biased towards the new half
            if new.log_w > traj.log_w or rng_uniform(bg) < exp(new.log_w - traj.log_w):
                _take_point(sample, new, p)
                moved = True
            traj.log_w = _logaddexp(traj.log_w, new.log_w)
            if not self._extend(traj, new):
                break
        n_eval = self.n_leapfrog
        accept_stat[0] = self.sum_metro / self.n_leapfrog if self.n_leapfrog else 0.0
        energy_error[0] = sample.U + self.metric.kinetic(sample.mom, self.vel) - self.H0
        depth_out[0] = depth
        divergent[0] = self.divergent
        # the position moves to the draw
        self.pot.reject_last()
        if moved:
            _copy(&self.pot.theta[0], sample.theta, p)
            if self.pot.stateful:
                self.pot.begin()
                self.pot.U = self.pot.evaluate(&self.pot.theta[0], &self.pot.grad[0])
                self.pot.accept_last()
                n_eval += 1
            else:
                _copy(&self.pot.grad[0], sample.grad, p)
                self.pot.U = sample.U
        return n_eval


def nuts_step(NUTSCore core, Potential potential, Metric metric, generator,
              double step_size):
    """One NUTS transition from the potential's position (which moves to the draw).

    Returns ``(moved, accept_stat, energy_error, n_evaluations, tree_depth, divergent)``.
    """
    if metric.dim != potential.dim or core.p != potential.dim:
        raise ValueError("the metric, the workspace and the potential differ in dimension")
    cdef bitgen_t* bg = get_bitgen(generator)
    cdef double acc, dE
    cdef int depth, n_eval
    cdef bint div
    before = potential.position
    core.pot, core.metric = potential, metric
    with generator.bit_generator.lock, nogil:
        n_eval = core.transition(bg, step_size, &acc, &dE, &depth, &div)
    if potential.failed:
        potential.raise_failure()
    moved = not np.array_equal(before, potential.position)
    return moved, acc, dE, n_eval, depth, bool(div)
