"""The sampling driver: ``sample``, ``Trace``, ``resolve_sampler``, ``seed_sequence``.

Reproducibility (same seed -> identical draws for any ``n_jobs``), argument
checks, cost accounting, convergence warnings, KeyboardInterrupt handling
(simulated by a model that raises after a number of log-density calls),
progress bars and the ArviZ export. Statistical accuracy is in
``test_exact_posterior.py``.
"""
import signal
import threading
import time
import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from bayes_subsample import Trace, sample
from bayes_subsample import diagnostics as diag
from bayes_subsample._driver import resolve_sampler, seed_sequence
from bayes_subsample.models import (FunctionModel, GaussianRegressionModel,
                                    LogisticRegressionModel)
from bayes_subsample.samplers import HMC, MH, SAMPLERS, AusterityMH, BaseSampler, ConfidenceMH

FAST = {"n_samples": 60, "n_warmup": 40, "n_chains": 2}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(100, 2))
    y = X @ np.array([1.0, -1.0]) + 0.5 + rng.normal(size=100)
    return X, y


@pytest.fixture
def model(data):
    return GaussianRegressionModel(*data)


def quiet_sample(*args, **kwargs):
    kwargs.setdefault("check_convergence", False)
    return sample(*args, **kwargs)


# ---- resolve_sampler / seed_sequence ----------------------------------------------------
def test_resolve_sampler_names_and_objects():
    assert {"mh", "hmc"} <= set(SAMPLERS)
    for name in SAMPLERS:
        assert isinstance(resolve_sampler(name), BaseSampler), name
    assert type(resolve_sampler("mh")) is MH and type(resolve_sampler("hmc")) is HMC
    user = HMC(step_size=0.1, trajectory_length=0.7)
    s = resolve_sampler(user)
    assert s is not user and s.get_params() == user.get_params()
    s.set_params(step_size=0.3)
    assert user.step_size == 0.1


def test_resolve_sampler_errors():
    with pytest.raises(ValueError, match="unknown sampler 'gibbs'.*'hmc'.*'mh'"):
        resolve_sampler("gibbs")
    with pytest.raises(TypeError, match="sampler must be a registered name"):
        resolve_sampler(42)
    with pytest.raises(TypeError, match="sampler must be"):
        resolve_sampler(HMC)                       # the class, not an instance


def test_seed_sequence_inputs():
    a = seed_sequence(5).generate_state(4)
    np.testing.assert_array_equal(a, np.random.SeedSequence(5).generate_state(4))
    np.testing.assert_array_equal(a, seed_sequence(np.int64(5)).generate_state(4))
    ss = np.random.SeedSequence(3)
    assert seed_sequence(ss) is ss
    # generators and RandomStates are consumed deterministically
    g1 = seed_sequence(np.random.default_rng(1)).generate_state(2)
    g2 = seed_sequence(np.random.default_rng(1)).generate_state(2)
    np.testing.assert_array_equal(g1, g2)
    r1 = seed_sequence(np.random.RandomState(1)).generate_state(2)
    np.testing.assert_array_equal(r1, seed_sequence(np.random.RandomState(1)).generate_state(2))
    assert isinstance(seed_sequence(None), np.random.SeedSequence)
    with pytest.raises(ValueError, match="non-negative"):
        seed_sequence(-1)
    for bad in (1.5, "0", True):
        with pytest.raises(TypeError, match="random_state must be"):
            seed_sequence(bad)


# ---- argument checks -------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, match", [
    ({"n_samples": 0}, "n_samples must be an integer >= 1"),
    ({"n_samples": 10.0}, "n_samples must be an integer >= 1"),
    ({"n_warmup": -1}, "n_warmup must be an integer >= 0"),
    ({"n_chains": 0}, "n_chains must be an integer >= 1"),
    ({"n_chains": True}, "n_chains must be an integer >= 1"),
    ({"n_jobs": 0}, "n_jobs must be None or a non-zero integer"),
    ({"init": np.zeros(2)}, r"init must have shape \(3,\) or \(2, 3\)"),
    ({"init": np.full(3, np.nan)}, "init contains NaN"),
])
def test_sample_argument_errors(model, kwargs, match):
    args = dict(FAST, random_state=0)
    args.update(kwargs)
    with pytest.raises(ValueError, match=match):
        sample(model, "mh", **args)


@pytest.mark.parametrize("sampler, match", [
    (HMC(target_accept=1.5), "target_accept"),
    (HMC(trajectory_length=-1.0), "trajectory_length"),
    (MH(step_size=0.0), "step_size"),
])
def test_invalid_sampler_hyperparameters(model, sampler, match):
    with pytest.raises(ValueError, match=match):
        sample(model, sampler, **FAST)


# ---- reproducibility ---------------------------------------------------------------------
@pytest.mark.parametrize("sampler", ["mh", "hmc"])
def test_same_seed_same_draws_any_n_jobs(model, sampler):
    runs = [quiet_sample(model, sampler, random_state=11, n_jobs=n_jobs, **FAST)
            for n_jobs in (None, 1, 2, -1)]
    for other in runs[1:]:
        np.testing.assert_array_equal(runs[0].draws, other.draws)
        np.testing.assert_array_equal(runs[0].warmup_draws, other.warmup_draws)
        for k in ("accept_prob", "accepted", "n_evals"):
            np.testing.assert_array_equal(runs[0].stats[k], other.stats[k])
    different = quiet_sample(model, sampler, random_state=12, **FAST)
    assert not np.array_equal(runs[0].draws, different.draws)
    # chains differ from each other (one stream per chain)
    assert not np.array_equal(runs[0].draws[0], runs[0].draws[1])


def test_seed_sequence_and_int_seed_agree(model):
    a = quiet_sample(model, "mh", random_state=3, **FAST)
    b = quiet_sample(model, "mh", random_state=np.random.SeedSequence(3), **FAST)
    np.testing.assert_array_equal(a.draws, b.draws)


def test_sampler_object_not_mutated(model):
    hmc = HMC(trajectory_length=1.0)
    before = hmc.get_params()
    trace = quiet_sample(model, hmc, random_state=0, **FAST)
    assert hmc.get_params() == before
    assert trace.sampler is not hmc and isinstance(trace.sampler, HMC)


def test_init_is_used(model):
    init = np.array([[5.0, 5.0, 5.0], [-5.0, -5.0, -5.0]])
    trace = quiet_sample(model, MH(adapt=False), init=init, n_warmup=0, n_samples=5,
                         n_chains=2, random_state=0)
    # five random-walk steps from +-5 stay far from each other and on their sides
    assert np.all(trace.draws[0] > 2) and np.all(trace.draws[1] < -2)
    trace = quiet_sample(model, "mh", init=np.ones(3), n_warmup=0, n_samples=3, n_chains=2,
                         random_state=0)
    assert trace.draws.shape == (2, 3, 3)


# ---- Trace contents and cost accounting -------------------------------------------------
def test_trace_shapes_and_stats(model):
    trace = quiet_sample(model, "hmc", random_state=0, param_names=["a", "b", "c"], **FAST)
    assert isinstance(trace, Trace)
    assert (trace.n_chains, trace.n_samples) == (2, 60)
    assert trace.draws.shape == (2, 60, 3) and trace.warmup_draws.shape == (2, 40, 3)
    assert np.isfinite(trace.draws).all() and np.isfinite(trace.warmup_draws).all()
    for k in ("accept_prob", "accepted", "diverging", "energy_error", "n_evals",
              "step_size", "n_leapfrog"):
        assert trace.stats[k].shape == (2, 60), k
        assert trace.warmup_stats[k].shape == (2, 40), k
    assert trace.stats["accepted"].dtype == bool
    assert np.all((trace.stats["accept_prob"] >= 0) & (trace.stats["accept_prob"] <= 1))
    assert trace.signs is None
    np.testing.assert_allclose(trace.weights(), np.full(120, 1 / 120))
    np.testing.assert_allclose(trace.posterior_mean(), trace.draws.reshape(-1, 3).mean(axis=0))
    assert len(trace.tuning) == 2 and {"step_size", "n_leapfrog", "mass_matrix"} <= set(
        trace.tuning[0])
    assert trace.sampler.name == "hmc" and trace.n_data == 100
    assert not trace.interrupted
    assert trace.wall_time["total"] >= trace.wall_time["prepare"] >= 0
    assert trace.wall_time["warmup"].shape == (2,) and np.all(trace.wall_time["sampling"] > 0)
    assert "hmc" in repr(trace)
    table = trace.summary()
    assert table is not None and "a" in str(table)


def test_cost_accounting(model):
    """Full-data MH costs n per step; HMC n per leapfrog step (gradient)."""
    n = model.n_data
    mh = quiet_sample(model, "mh", random_state=0, **FAST)
    # n_steps = d transitions per retained iteration by default
    n = n * model.n_params
    assert np.all(mh.stats["n_evals"] == n) and np.all(mh.warmup_stats["n_evals"] == n)
    n = model.n_data
    hmc = quiet_sample(model, "hmc", random_state=0, **FAST)
    np.testing.assert_array_equal(hmc.stats["n_evals"], hmc.stats["n_leapfrog"] * n)
    assert hmc.n_evals_prepare > 0 and hmc.n_evals_prepare % n == 0
    assert np.all(hmc.n_evals_setup >= n)            # at least the initial evaluation
    expected = (hmc.stats["n_evals"].sum(1) + hmc.warmup_stats["n_evals"].sum(1)
                + hmc.n_evals_setup + hmc.n_evals_prepare / 2)
    np.testing.assert_allclose(hmc.n_evals_per_chain(), expected)


def test_diagnostics_keys(model):
    trace = quiet_sample(model, "hmc", random_state=0, **FAST)
    d = trace.diagnostics()
    per_param = ("r_hat", "ess_bulk", "ess_tail", "mcse_mean", "inefficiency_factor",
                 "ess_per_second")
    per_chain = ("acceptance_rate", "mean_accept_prob", "n_divergences", "n_evals",
                 "n_evals_per_iteration", "data_fraction_per_iteration", "wall_time",
                 "sampling_time")
    for k in per_param:
        assert np.shape(d[k]) == (3,), k
    for k in per_chain:
        assert np.shape(d[k]) == (2,), k
    np.testing.assert_allclose(d["data_fraction_per_iteration"],
                               d["n_evals_per_iteration"] / model.n_data)
    np.testing.assert_allclose(d["r_hat"], diag.rhat(trace.draws))
    np.testing.assert_allclose(d["ess_bulk"], diag.ess_bulk(trace.draws))
    # fewer than 4 retained draws: no per-parameter diagnostics, no crash
    short = quiet_sample(model, "mh", random_state=0, n_samples=3, n_warmup=5, n_chains=2)
    assert "r_hat" not in short.diagnostics()


# ---- convergence warnings -----------------------------------------------------------------
def test_convergence_warning_for_bad_run(model):
    init = np.array([[8.0, 8.0, 8.0], [-8.0, -8.0, -8.0]])
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        sample(model, MH(adapt=False, step_size=0.05), init=init, n_warmup=0, n_samples=50,
               n_chains=2, random_state=0)
    msgs = [str(w.message) for w in rec if issubclass(w.category, ConvergenceWarning)]
    assert any("R-hat" in m for m in msgs) and any("bulk ESS" in m for m in msgs)
    # and the check can be turned off
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        trace = sample(model, MH(adapt=False, step_size=0.05), init=init, n_warmup=0,
                       n_samples=50, n_chains=2, random_state=0, check_convergence=False)
    assert len(trace.check_convergence(warn=False)) >= 2


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_no_convergence_warning_for_good_run(model, seed):
    """A well-tuned run: over 30 seeds max R-hat stayed below 1.003 and ESS
    above 3900 (threshold 1.01 and 400)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        trace = sample(model, HMC(trajectory_length=1.6), n_samples=1000, n_warmup=300,
                       n_chains=4, random_state=seed)
    assert trace.check_convergence(warn=False) == []


def test_divergence_warning(model):
    """A fixed step size far too large for the posterior diverges; the message
    says so."""
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        trace = sample(model, HMC(step_size=20.0, n_leapfrog=10, adapt_mass=False),
                       n_samples=20, n_warmup=0, n_chains=2, random_state=0)
    msgs = [str(w.message) for w in rec if issubclass(w.category, ConvergenceWarning)]
    assert any("divergent transitions" in m for m in msgs)
    assert trace.stats["diverging"].any()
    assert not trace.stats["accepted"][trace.stats["diverging"]].any()


@pytest.mark.parametrize("case", ["subsampled", "fixed_step", "full_data"])
def test_divergence_message_names_the_cause(case):
    """HMC-ECS's divergences on a subsampled chain at its adapted step are read
    as the subsample's estimate running away (a smaller step does not remove
    them); at a step the user fixed, or on its full-data fallback, as a step
    too large. The message gives their share of the transitions."""
    from bayes_subsample.datasets import make_logistic_data
    from bayes_subsample.samplers import HMCECS
    X, y = make_logistic_data(20_000, n_features=3, random_state=1)
    sampler = HMCECS(step_size=0.1) if case == "fixed_step" else HMCECS()
    trace = quiet_sample(LogisticRegressionModel(X, y), sampler, n_samples=50, n_warmup=50,
                         n_chains=2, random_state=0)
    assert not trace.tuning[0].get("full_data", False)
    if case == "full_data":
        for t in trace.tuning:
            t["full_data"] = True
    trace.stats["diverging"][0, :3] = True
    msgs = [m for m in trace.check_convergence(warn=False) if "divergent" in m]
    assert len(msgs) == 1 and msgs[0].startswith("3 divergent transitions after warmup (3% of 100)")
    assert ("subsample's estimate" in msgs[0]) is (case == "subsampled")
    assert ("step size is too large" in msgs[0]) is (case != "subsampled")
    trace.stats["diverging"][...] = False
    trace.stats["diverging"][1, 7] = True
    msgs = [m for m in trace.check_convergence(warn=False) if "divergent" in m]
    assert msgs[0].startswith("1 divergent transition after warmup (1% of 100)")


# ---- KeyboardInterrupt ---------------------------------------------------------------------
class InterruptingModel(GaussianRegressionModel):
    """Raises KeyboardInterrupt at the (k+1)-th log-density call of the chains
    (the MAP search of ``prepare`` uses ``full_pass`` and is not counted)."""

    def __init__(self, X, y, k):
        super().__init__(X, y)
        self.k = k
        self.calls = 0
        self._lock = threading.Lock()

    def _tick(self):
        with self._lock:
            self.calls += 1
            if self.calls > self.k:
                raise KeyboardInterrupt

    def log_posterior(self, theta):
        self._tick()
        return super().log_posterior(theta)

    def log_posterior_and_grad(self, theta):
        self._tick()
        return super().log_posterior_and_grad(theta)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_keyboard_interrupt_keeps_every_draw(data, n_jobs):
    """Each chain keeps every draw it made (chain 0 complete, chain 1
    part-way), not the shortest chain's count; nothing warns about NaN."""
    X, y = data
    args = {"n_samples": 100, "n_warmup": 50, "n_chains": 2, "random_state": 1}
    full = quiet_sample(GaussianRegressionModel(X, y), MH(n_steps=1), **args)
    # MH: one call at init, one per step. Sequentially, chain 0 uses 151 calls and
    # chain 1 is stopped after its warmup and 40 retained draws.
    k = 151 + 1 + 50 + 40
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        trace = sample(InterruptingModel(X, y, k), MH(n_steps=1), n_jobs=n_jobs, **args)
        d = trace.diagnostics()
        trace.summary()
        mean = trace.posterior_mean()
    msgs = [str(w.message) for w in rec]
    assert len(msgs) == 1 and "sampling interrupted: kept" in msgs[0], msgs
    assert trace.interrupted and trace.resumable
    assert "interrupted=True" in repr(trace)
    L = trace.chain_lengths
    assert trace.n_chains == 2 and 0 < L.min() and L.sum() < 200
    if n_jobs == 1:
        assert L.tolist() == [100, 40] and "kept 100, 40 draws" in msgs[0]
    for c in range(2):
        # what was kept is exactly the start of the uninterrupted run
        np.testing.assert_array_equal(trace.draws[c, :L[c]], full.draws[c, :L[c]])
        assert np.isnan(trace.draws[c, L[c]:]).all()
    pooled = trace.pooled_draws()
    assert pooled.shape == (L.sum(), 3) and np.isfinite(pooled).all()
    np.testing.assert_allclose(mean, pooled.mean(axis=0))
    np.testing.assert_array_equal(d["chain_lengths"], L)
    for c in range(2):
        assert d["acceptance_rate"][c] == pytest.approx(
            trace.stats["accepted"][c, :L[c]].mean())
    assert d["ess_bulk"].shape == (3,) and np.isfinite(d["r_hat"]).all()


def test_keyboard_interrupt_before_any_draw(data):
    """Interrupted during the first chain's warmup: nothing retained, but the
    warmup draws are there and nothing crashes."""
    X, y = data
    with pytest.warns(RuntimeWarning, match="kept 0, 0 draws"):
        trace = sample(InterruptingModel(X, y, 20), MH(n_steps=1), n_samples=100, n_warmup=50,
                       n_chains=2, random_state=1)
    assert trace.interrupted and trace.chain_lengths.tolist() == [0, 0]
    assert trace.warmup_lengths.tolist() == [19, 0]
    assert np.isfinite(trace.warmup_draws[0, :19]).all()
    assert np.isnan(trace.posterior_mean()).all()
    assert trace.pooled_draws().shape == (0, 3)


class SlowInterruptingModel(GaussianRegressionModel):
    """Presses Ctrl-C (a real SIGINT to the main thread) at its ``k``-th
    log-density call, and is slow enough that the chains are still running
    when it arrives."""

    def __init__(self, X, y, k):
        super().__init__(X, y)
        self.k = k
        self.calls = 0

    def log_posterior(self, theta):
        self.calls += 1
        if self.calls == self.k:
            signal.pthread_kill(threading.main_thread().ident, signal.SIGINT)
        time.sleep(2e-4)
        return super().log_posterior(theta)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_ctrl_c_then_resume_equals_uninterrupted_run(data, n_jobs, sigint_handler):
    """A real Ctrl-C stops the chains at an iteration boundary; resuming
    completes the run, and the result equals the uninterrupted run draw for
    draw (warmup included)."""
    X, y = data
    args = {"n_samples": 150, "n_warmup": 50, "n_chains": 2, "random_state": 3}
    full = quiet_sample(GaussianRegressionModel(X, y), MH(n_steps=1), **args)
    model = SlowInterruptingModel(X, y, 120)
    with pytest.warns(RuntimeWarning, match="sampling interrupted"):
        part = sample(model, MH(n_steps=1), n_jobs=n_jobs, **args)
    assert part.interrupted and part.chain_lengths.sum() < 300
    model.k = -1
    done = quiet_sample(model, resume=part, n_samples=None, n_jobs=n_jobs)
    assert not done.interrupted and done.chain_lengths.tolist() == [150, 150]
    assert not part.resumable   # its chains moved on into `done`
    np.testing.assert_array_equal(done.draws, full.draws)
    np.testing.assert_array_equal(done.warmup_draws, full.warmup_draws)
    for name in full.stats:
        np.testing.assert_array_equal(done.stats[name], full.stats[name])


@pytest.mark.parametrize("name", ["mh", "hmc", "nuts", "hmc_ecs", "hmc_ecs_signed", "sgld",
                                  "sghmc", "ewsg", "austerity", "confidence"])
def test_resume_equals_one_longer_run(name):
    """``sample(resume=trace, n_samples=k)`` continues every chain (state,
    adapted tuning, random stream): draw for draw the run of the total length."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(400, 2))
    y = (X @ np.array([1.0, -0.5]) + rng.logistic(size=400) > 0).astype(float)
    args = {"n_warmup": 30, "n_chains": 2, "random_state": 5, "check_convergence": False}
    model = LogisticRegressionModel(X, y)
    full = sample(model, name, n_samples=50, **args)
    first = sample(model, name, n_samples=20, **args)
    # a new model object on the same data passes the fingerprint check
    more = sample(LogisticRegressionModel(X.copy(), y.copy()), resume=first, n_samples=30,
                  check_convergence=False)
    assert more.chain_lengths.tolist() == [50, 50]
    np.testing.assert_array_equal(more.draws, full.draws)
    np.testing.assert_array_equal(more.warmup_draws, full.warmup_draws)
    for k in full.stats:
        np.testing.assert_array_equal(more.stats[k], full.stats[k], err_msg=k)
    np.testing.assert_array_equal(more.diagnostics()["n_evals"], full.diagnostics()["n_evals"])
    assert more.wall_time["elapsed"] > first.wall_time["elapsed"]


def test_resume_errors(data):
    X, y = data
    model = GaussianRegressionModel(X, y)
    trace = quiet_sample(model, MH(), n_samples=20, n_warmup=10, n_chains=2, random_state=0)
    with pytest.raises(ValueError, match="differs in: y"):
        sample(GaussianRegressionModel(X, y + 1), resume=trace)
    with pytest.raises(ValueError, match="differs in: phi"):
        sample(GaussianRegressionModel(X, y, noise_scale=2.0), resume=trace)
    with pytest.raises(ValueError, match="same sampler"):
        sample(model, "hmc", resume=trace)
    with pytest.raises(ValueError, match="same sampler"):
        sample(model, MH(n_steps=5), resume=trace)
    with pytest.raises(TypeError, match="resume must be a Trace"):
        sample(model, resume="trace")
    import pickle
    with pytest.raises(ValueError, match="cannot be resumed"):
        sample(model, resume=pickle.loads(pickle.dumps(trace)))
    more = quiet_sample(model, MH(), resume=trace, n_samples=5)
    assert more.chain_lengths.tolist() == [25, 25]
    with pytest.raises(ValueError, match="cannot be resumed"):
        sample(model, resume=trace)      # its chains moved on


# ---- user models, progress bar, ArviZ ---------------------------------------------------------
def test_function_model_through_both_samplers():
    """A user model (normal mean with known sd 2, flat-ish prior): posterior mean
    ~ sample mean, sd ~ 2/sqrt(n)."""
    x = np.random.default_rng(5).normal(1.0, 2.0, size=400)

    def loglik(theta, idx):
        return -0.5 * ((x[idx] - theta[0]) / 2.0) ** 2

    def grad(theta, idx):
        return ((x[idx] - theta[0]) / 4.0)[:, None]

    m = FunctionModel(loglik, grad, n_data=400, n_params=1, prior_scale=100.0)
    post_mean, post_sd = x.mean(), 2.0 / np.sqrt(400)
    for sampler in ("mh", "hmc"):
        trace = quiet_sample(m, sampler, n_samples=1000, n_warmup=300, n_chains=2,
                             random_state=0)
        se = float(diag.mcse_mean(trace.draws[..., 0]))
        assert abs(trace.draws.mean() - post_mean) < 4 * se
        assert abs(trace.draws.std() / post_sd - 1) < 0.15


def test_progress_bar(model, capsys):
    pytest.importorskip("tqdm")
    trace = quiet_sample(model, "mh", progress=True, random_state=0, **FAST)
    err = capsys.readouterr().err
    assert "sampling" in err and "it" in err
    # the bar does not change the draws
    np.testing.assert_array_equal(trace.draws,
                                  quiet_sample(model, "mh", random_state=0, **FAST).draws)


def test_to_inference_data(model):
    az = pytest.importorskip("arviz")
    trace = quiet_sample(model, "hmc", random_state=0, param_names=["b0", "b1", "icpt"], **FAST)
    idata = trace.to_inference_data()
    assert isinstance(idata, az.InferenceData)
    assert set(idata.posterior.data_vars) == {"b0", "b1", "icpt"}
    assert idata.posterior["b0"].shape == (2, 60)
    np.testing.assert_array_equal(idata.posterior["icpt"].values, trace.draws[:, :, 2])
    assert "acceptance_rate" in idata.sample_stats and "diverging" in idata.sample_stats
    # arviz's ESS agrees with ours
    np.testing.assert_allclose(float(az.ess(idata, var_names=["b0"])["b0"]),
                               diag.ess_bulk(trace.draws[:, :, 0]), rtol=1e-6)
    default_names = quiet_sample(model, "mh", random_state=0, **FAST).to_inference_data()
    assert "theta_0" in default_names.posterior.data_vars


@pytest.mark.parametrize("make", [
    lambda k: MH(n_steps=k),
    lambda k: AusterityMH(epsilon=0.05, batch_size=50, n_steps=k),
    lambda k: ConfidenceMH(delta=0.05, n_steps=k),
], ids=["mh", "austerity", "confidence"])
def test_n_steps_thins_the_same_chain(make, logistic_data):
    """n_steps = k makes the k-transition chain of n_steps = 1 (adaptation
    included), keeping every k-th state; counts add up, ``accepted`` says whether
    the retained draw moved, the acceptance probability is averaged."""
    X, y = logistic_data(600, 2, seed=2)
    model = LogisticRegressionModel(X, y)
    k, kw = 3, dict(n_chains=2, random_state=5, check_convergence=False)
    thin = sample(model, make(k), n_samples=40, n_warmup=20, **kw)
    one = sample(model, make(1), n_samples=40 * k, n_warmup=20 * k, **kw)
    np.testing.assert_array_equal(thin.draws, one.draws[:, k - 1::k])
    np.testing.assert_array_equal(thin.warmup_draws, one.warmup_draws[:, k - 1::k])

    def per_draw(name):
        return one.stats[name].reshape(2, 40, k)

    np.testing.assert_array_equal(thin.stats["n_evals"], per_draw("n_evals").sum(-1))
    np.testing.assert_array_equal(thin.stats["accepted"], per_draw("accepted").any(-1))
    np.testing.assert_allclose(thin.stats["accept_prob"], per_draw("accept_prob").mean(-1))
    if "data_fraction" in one.stats:
        np.testing.assert_allclose(thin.stats["data_fraction"],
                                   per_draw("data_fraction").mean(-1))
        np.testing.assert_array_equal(thin.stats["n_batches"], per_draw("n_batches").sum(-1))
    assert thin.tuning[0]["n_steps"] == k


def test_mh_family_makes_d_transitions_per_draw_by_default(logistic_data):
    X, y = logistic_data(300, 4, seed=1)
    model = LogisticRegressionModel(X, y)
    for s in (MH(), AusterityMH(), ConfidenceMH()):
        kernel = s.build(model, s.prepare(model, np.random.default_rng(0)), 10)
        assert kernel.n_steps == model.n_params == 5
    s = AusterityMH(proposal="sgld")
    assert s.build(model, s.prepare(model, np.random.default_rng(0)), 10).n_steps == 1


def test_n_jobs_none_follows_a_joblib_context():
    """scikit-learn's convention: n_jobs=None is 1 unless a joblib.parallel_config
    context sets it; the draws do not change."""
    from joblib import parallel_config

    from bayes_subsample._driver import _n_parallel
    assert _n_parallel(None, 4, None) == 1
    with parallel_config(n_jobs=2):
        assert _n_parallel(None, 4, None) == 2
        assert _n_parallel(1, 4, None) == 1
    assert _n_parallel(-1, 4, None) >= 1
