"""The step-size tuner of the HMC-type kernels (``samplers/_adapt.py``): how
many leapfrog steps a transition takes while dual averaging adapts and after."""
import numpy as np
import pytest

from bayes_subsample.samplers._adapt import TrajectoryTuner, n_leapfrog_for


def tuner(**kw):
    kw = {"step_size": None, "trajectory_length": 2.0, "target_accept": 0.8, **kw}
    return TrajectoryTuner(**kw)


def test_steps_counted_from_the_average_while_the_iterate_probes_below_it():
    t = tuner()
    t.update(1.0)                      # accepted: the iterate jumps up (mu = log 10 eps0)
    assert t.step_size > 0.5 and t.counting_step() == t.step_size
    assert t.n_steps == n_leapfrog_for(t.step_size, 2.0, 1000)
    for _ in range(3):
        t.update(0.0)                  # rejected: the iterate falls below its average
    assert t.step_size < t.da.final_step_size
    assert t.counting_step() == t.da.final_step_size
    assert t.n_steps == n_leapfrog_for(t.da.final_step_size, 2.0, 1000)
    assert t.n_steps < n_leapfrog_for(t.step_size, 2.0, 1000)


def test_jittered_lengths_use_the_same_count():
    t = tuner(jitter=0.1)
    for a in (1.0, 0.0, 0.0, 0.0):
        t.update(a)
    eps = t.counting_step()
    assert eps > t.step_size
    rng = np.random.default_rng(0)
    steps = [t.draw_steps(rng) for _ in range(200)]
    assert min(steps) >= n_leapfrog_for(eps, 2.0 * 0.9, 1000)
    assert max(steps) <= n_leapfrog_for(eps, 2.0 * 1.1, 1000)


def test_full_length_after_finalize_and_at_a_start():
    t = tuner()
    for a in (1.0, 0.0, 0.0, 0.3, 0.9, 0.1):
        t.update(a)
    t.finalize()
    assert t.step_size == pytest.approx(t.da.final_step_size)
    assert t.n_steps == n_leapfrog_for(t.step_size, 2.0, 1000)
    # a restart (the metric changed) counts from the step size it restarts at
    t.restart()
    assert t.da.t == 0 and t.counting_step() == t.step_size


@pytest.mark.parametrize("kw", [{"step_size": 0.05}, {"n_leapfrog": 7}])
def test_given_step_size_or_steps_are_kept(kw):
    t = tuner(**kw)
    before = t.n_steps
    for a in (1.0, 0.0, 0.0):
        t.update(a)
    assert t.n_steps == before
    if "step_size" in kw:
        assert t.n_steps == n_leapfrog_for(0.05, 2.0, 1000) == 40
    else:
        assert t.n_steps == 7
