"""Design matrices that live with Dask (``models.DaskGLM``).

* The model's full passes (Dask reductions of the compiled kernel over the
  chunks) against the in-memory GLM of the same data: every family, float32
  and float64, with and without intercept, uneven and column-split chunks;
  NaN in a chunk is a ValueError.
* Rows fetched by index, and HMC-ECS's core reading rows through a stream of
  indices drawn ahead from a model that holds only those rows, scaled to the
  whole population: the same potential and gradient as the core over all rows.
* Sampling: HMC-ECS on the Dask model agrees with the in-memory fit (posterior
  means within 0.1 sd + 4 MCSE, sds within 10%), also when the row stream is
  refilled every few iterations; the other samplers refuse the model.
* The estimators take Dask ``X`` and ``y``; on a real ``distributed``
  ``LocalCluster`` (2 worker processes) with data drawn on the workers, the fit
  agrees with the in-memory one and moves only a few percent of the rows to
  this process.

Tolerances: the chunk sums are added in chunk order, the in-memory pass in
4096-row chunks, so sums agree to rounding (1e-12 relative). Posteriors are
compared as in test_sparse: both runs are Monte Carlo, so the mean criterion
adds 4 combined MCSEs to 0.1 sd.
"""
import os
import time
import warnings

import numpy as np
import pytest

da = pytest.importorskip("dask.array")

from sklearn.exceptions import ConvergenceWarning  # noqa: E402

from bayes_subsample import (BayesianLinearRegression, BayesianLogisticRegression,  # noqa: E402
                             BayesianPoissonRegression, diagnostics, sample)
from bayes_subsample.datasets import make_logistic_data, make_logistic_data_dask  # noqa: E402
from bayes_subsample.models import GLM  # noqa: E402
from bayes_subsample.models._dask import DaskGLM, is_dask_array  # noqa: E402
from bayes_subsample.samplers import HMCECS  # noqa: E402
from bayes_subsample.samplers._hmc_ecs_fast import ECSCore  # noqa: E402


def _data(family, n=6000, d=4, dtype=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(dtype)
    eta = X.astype(np.float64) @ np.linspace(0.6, -0.4, d) + 0.2
    if family == "logistic":
        y = (rng.random(n) < 1 / (1 + np.exp(-eta))).astype(float)
    elif family == "poisson":
        y = rng.poisson(np.exp(0.3 * eta)).astype(float)
    else:
        y = eta + rng.normal(size=n)
    return X, y


def _quiet(fn, *args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return fn(*args, **kw)


@pytest.mark.parametrize("family", ["logistic", "poisson", "gaussian"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("intercept", [True, False])
def test_full_pass_matches_in_memory_glm(family, dtype, intercept, hessian_atol):
    X, y = _data(family, dtype=dtype)
    # uneven row chunks, and columns split in two (merged by the model)
    Xd = da.from_array(X, chunks=((1000, 2500, 7, 2493), (2, 2)))
    dm = DaskGLM(Xd, da.from_array(y, chunks=1700), family, fit_intercept=intercept,
                 noise_scale=1.3)
    m = GLM(X, y, family, fit_intercept=intercept, noise_scale=1.3)
    theta = np.random.default_rng(1).normal(size=m.n_params) * 0.2
    for hessian in (False, True):
        a = dm.full_pass(theta, hessian=hessian)
        b = m.full_pass(theta, hessian=hessian)
        assert a[0] == pytest.approx(b[0], rel=1e-12)
        np.testing.assert_allclose(a[1], b[1], rtol=1e-11, atol=1e-9)
        if hessian:   # float32 rows: blocks of different rows (the chunks differ)
            bound = (1e-11 * np.abs(b[2]) + 1e-9
                     + hessian_atol(b[2], m.compiled.rows.hessian_rtol, 2))
            assert np.all(np.abs(a[2] - b[2]) <= bound)
    assert dm.n_full_passes == 2
    assert dm.n_data == m.n_data and dm.n_params == m.n_params
    np.testing.assert_array_equal(dm.prior.scale, m.prior.scale)


def test_bad_input():
    X, y = _data("logistic")
    Xn = X.copy()
    Xn[4321, 2] = np.nan
    dm = DaskGLM(da.from_array(Xn, chunks=1000), y, "logistic")
    with pytest.raises(ValueError, match="NaN or infinity"):
        dm.full_pass(np.zeros(dm.n_params))
    with pytest.raises(ValueError, match="y in"):
        DaskGLM(da.from_array(X, chunks=1000), y + 2, "logistic")
    with pytest.raises(ValueError, match="shape"):
        DaskGLM(da.from_array(X, chunks=1000), y[:-1], "logistic")
    with pytest.raises(TypeError, match="dask.array"):
        DaskGLM(X, y, "logistic")
    with pytest.raises(TypeError, match="float32 or float64"):
        DaskGLM(da.from_array(X.astype("U8"), chunks=1000), y, "logistic")
    unknown = da.from_array(X, chunks=1000)[da.from_array(y, chunks=1000) > 0]
    with pytest.raises(ValueError, match="compute_chunk_sizes"):
        DaskGLM(unknown, y[y > 0], "logistic")
    dm = DaskGLM(da.from_array(X, chunks=1000), y, "logistic")
    with pytest.raises(TypeError, match="no compiled object"):
        dm.compiled
    assert is_dask_array(dm.X) and not is_dask_array(X)


def test_fetch_rows_and_per_datum_terms():
    X, y = _data("logistic", dtype=np.float32)
    dm = DaskGLM(da.from_array(X, chunks=1000), y, "logistic")
    m = GLM(X, y, "logistic")
    idx = np.array([5, 3999, 5, 0, 5999, 3999])
    local, pos = dm.fetch_rows(idx)
    assert dm.rows_fetched == 4 and local.n_data == 4
    np.testing.assert_array_equal(local.X[pos], X[idx])
    np.testing.assert_array_equal(local.y[pos], y[idx])
    theta = np.full(m.n_params, 0.1)
    ts = np.full(m.n_params, 0.05)
    np.testing.assert_allclose(dm.loglik_terms(theta, idx), m.loglik_terms(theta, idx))
    np.testing.assert_allclose(dm.grad_terms(theta, idx), m.grad_terms(theta, idx))
    np.testing.assert_allclose(dm.cv_residual_terms(theta, ts, idx, 2),
                               m.cv_residual_terms(theta, ts, idx, 2), rtol=1e-12, atol=1e-15)
    # the same rows again: served from the last fetch
    dm.cv_residual_terms(theta, ts, idx, 1)
    assert dm.rows_fetched == 8       # loglik_terms fetched once, the rest reused it
    sub = dm.subset(idx)
    assert sub.n_data == 4 and sub.prior is dm.prior


def _core(compiled, model, theta_star, order=2):
    core = ECSCore(compiled, order, model.prior.precision, "perturbed")
    ll, g, h = model.full_pass(theta_star, hessian=True)
    core.set_reference(theta_star, ll, g, h)
    return core


def test_core_on_fetched_rows_equals_core_on_all_rows():
    """The potential of HMC-ECS's core reading a subsample from a model that
    holds only those rows (scaled to the population with set_population) is the
    potential of the core over all rows with the same subsample."""
    X, y = _data("logistic", n=5000)
    m = GLM(X, y, "logistic")
    theta_star = np.full(m.n_params, 0.05)
    rng = np.random.default_rng(3)
    idx = rng.integers(0, 5000, size=200)
    local_rows, pos = np.unique(idx, return_inverse=True)
    local = GLM(X[local_rows], y[local_rows], "logistic")
    full_core = _core(m.compiled, m, theta_star)
    full_core.set_rows(idx, 20)
    loc_core = _core(local.compiled, m, theta_star)
    loc_core.set_population(5000.0)
    loc_core.set_rows(pos, 20)
    for theta in (theta_star, theta_star + 0.03, theta_star - 0.07):
        U_loc, g_loc = loc_core.value_and_grad(theta)
        U_full, g_full = full_core.value_and_grad(theta)
        assert U_loc == pytest.approx(U_full, rel=1e-13)
        np.testing.assert_allclose(g_loc, g_full, rtol=1e-12)
    with pytest.raises(ValueError, match="population"):
        loc_core.set_population(10.0)


def test_core_takes_block_rows_from_the_stream():
    X, y = _data("logistic", n=3000)
    m = GLM(X, y, "logistic")
    theta_star = np.zeros(m.n_params)
    core = _core(m.compiled, m, theta_star)
    core.set_rows(np.arange(100), 10)
    stream = np.arange(2000, 2000 + 10 * 30)
    core.set_index_stream(stream)
    core.set_position(theta_star)
    gen = np.random.default_rng(0)
    seen = set(range(100))
    for k in range(30):
        core.u_step(gen)
        assert core.stream_left == stream.shape[0] - 10 * (k + 1)
        seen |= set(stream[10 * k:10 * (k + 1)].tolist())
        assert set(core.indices.tolist()) <= seen
    assert (np.asarray(core.indices) >= 2000).any()     # some block was replaced
    with pytest.raises(RuntimeError, match="exhausted"):
        core.u_step(gen)
    other = GLM(X[:50], y[:50], "logistic")
    core.set_source(other.compiled, np.arange(50))
    assert core.stream_left == 50
    core.u_step(gen)
    with pytest.raises(IndexError, match="stream"):
        core.set_index_stream([3000])
    poisson = GLM(X, np.ones(3000), "poisson")
    with pytest.raises(TypeError, match="same kind"):
        core.set_source(poisson.compiled, np.arange(10))


def _agree(tr, ref, mean_tol=0.1, sd_rtol=0.05):
    """Means within ``mean_tol`` sd + 4 combined MCSE; sds within ``sd_rtol`` + 4
    combined relative standard errors of an sd, ``1 / sqrt(2 ESS)`` per run."""
    a, b = tr.pooled_draws(), ref.pooled_draws()
    sd = b.std(axis=0)
    mcse = np.hypot(diagnostics.mcse_mean(tr.draws), diagnostics.mcse_mean(ref.draws))
    err = np.abs(a.mean(axis=0) - b.mean(axis=0))
    assert np.all(err <= mean_tol * sd + 4 * mcse), (err / sd, mcse / sd)
    rel_se = np.sqrt(0.5 / diagnostics.ess_bulk(tr.draws) + 0.5 / diagnostics.ess_bulk(ref.draws))
    ratio = a.std(axis=0) / sd
    assert np.all(np.abs(ratio - 1) <= sd_rtol + 4 * rel_se), (ratio, rel_se)


@pytest.mark.parametrize("family", ["logistic", "poisson", "gaussian"])
def test_hmc_ecs_on_dask_agrees_with_in_memory(family):
    X, y = _data(family, n=40_000, d=3)
    dm = DaskGLM(da.from_array(X, chunks=7000), y, family)
    m = GLM(X, y, family)
    args = dict(n_samples=600, n_warmup=300, n_chains=2, random_state=0)
    tr = _quiet(sample, dm, "hmc_ecs", **args)
    ref = _quiet(sample, m, "hmc_ecs", **args)
    assert not tr.tuning[0].get("full_data", False)
    _agree(tr, ref)
    # the chains' rows: m initial + m / G per iteration, fetched once per chain
    fetched = sum(t["rows_fetched"] for t in tr.tuning)
    assert 0 < fetched <= 2 * (tr.tuning[0]["m"] + 1000 * tr.tuning[0]["block_size"])
    assert tr.data_passes["chains"] == 0 and tr.data_passes["prepare"] >= 1


def test_row_stream_refills(monkeypatch):
    """Fetching the rows of only 7 block updates at a time (a fetch every 7
    iterations) gives the same law."""
    from bayes_subsample.samplers._ecs_fetching import FetchingHMCECSKernel
    monkeypatch.setattr(FetchingHMCECSKernel, "fetch_iterations", 7)
    X, y = _data("logistic", n=30_000, d=3)
    dm = DaskGLM(da.from_array(X, chunks=5000), y, "logistic")
    args = dict(n_samples=400, n_warmup=200, n_chains=2, random_state=1)
    tr = _quiet(sample, dm, "hmc_ecs", **args)
    ref = _quiet(sample, GLM(X, y, "logistic"), "hmc_ecs", **args)
    _agree(tr, ref)
    bs = tr.tuning[0]["block_size"]
    assert tr.tuning[0]["rows_fetched"] > 600 // 7 * 7 * bs * 0.5
    # resumed: the stream is refilled as needed
    more = _quiet(sample, dm, resume=tr, n_samples=50)
    assert more.draws.shape[1] == 450


@pytest.mark.parametrize("sampler", ["mh", "hmc", "austerity", "confidence", "sgld",
                                     "hmc_ecs_signed"])
def test_other_samplers_refuse_a_dask_model(sampler):
    X, y = _data("logistic", n=3000)
    dm = DaskGLM(da.from_array(X, chunks=1000), y, "logistic")
    with pytest.raises(ValueError, match="Dask"):
        sample(dm, sampler, n_samples=5, n_warmup=5, n_chains=1)


def test_hmc_ecs_refuses_full_data_fallback_on_dask():
    X, y = _data("logistic", n=150)
    dm = DaskGLM(da.from_array(X, chunks=50), y, "logistic")
    with pytest.raises(ValueError, match="into memory"):
        sample(dm, HMCECS(), n_samples=5, n_warmup=5, n_chains=1)


def test_estimators_take_dask_arrays():
    X, y = _data("logistic", n=30_000, d=3)
    Xd, yd = da.from_array(X, chunks=6000), da.from_array(y, chunks=6000)
    kw = dict(n_samples=300, n_warmup=300, n_chains=2, random_state=0)
    est = _quiet(BayesianLogisticRegression(**kw).fit, Xd, yd)
    ref = _quiet(BayesianLogisticRegression(**kw).fit, X, y)
    assert est.n_features_in_ == 3
    np.testing.assert_array_equal(est.classes_, ref.classes_)
    _agree(est.trace_, ref.trace_)
    # predictions on Dask arrays: Dask arrays, chunk by chunk, equal to in memory
    for method in ("predict", "predict_proba", "predict_log_proba", "decision_function"):
        lazy = getattr(est, method)(Xd)
        assert is_dask_array(lazy)
        np.testing.assert_array_equal(lazy.compute(), getattr(est, method)(X))
    assert est.score(Xd, y) == est.score(X, y)
    with pytest.raises(ValueError, match="features"):
        est.predict(Xd[:, :2])
    # linear regression: the plug-in noise scale from one Dask pass, as in memory
    Xg, yg = _data("gaussian", n=30_000, d=3)
    lin = _quiet(BayesianLinearRegression(noise_scale="plugin", **kw).fit,
                 da.from_array(Xg, chunks=6000), yg)
    lin_ref = _quiet(BayesianLinearRegression(noise_scale="plugin", **kw).fit, Xg, yg)
    assert lin.noise_scale_ == pytest.approx(lin_ref.noise_scale_, rel=1e-9)
    mean, std = lin.predict(da.from_array(Xg, chunks=7000), return_std=True)
    ref_mean, ref_std = lin.predict(Xg, return_std=True)
    np.testing.assert_array_equal(mean.compute(), ref_mean)
    np.testing.assert_array_equal(std.compute(), ref_std)
    with pytest.raises(TypeError, match="in memory"):
        lin.sample_y(da.from_array(Xg, chunks=7000))
    Xp, yp = _data("poisson", n=30_000, d=3)
    pois = _quiet(BayesianPoissonRegression(**kw).fit, da.from_array(Xp, chunks=6000), yp)
    assert np.all(np.isfinite(pois.coef_))
    # multiclass needs X in memory
    y3 = np.arange(30_000) % 3
    with pytest.raises(ValueError, match="memory"):
        BayesianLogisticRegression(**kw).fit(Xd, y3)


def test_make_logistic_data_dask_draws_the_same_rows():
    X, y = make_logistic_data(150_000, dtype=np.float32, random_state=7)
    Xd, yd = make_logistic_data_dask(150_000, chunk_rows=65536, dtype=np.float32,
                                     random_state=7)
    assert Xd.chunks[0] == (65536, 65536, 18928)
    np.testing.assert_array_equal(Xd.compute(), X)
    np.testing.assert_array_equal(yd.compute(), y)
    with pytest.raises(ValueError, match="multiple of 65536"):
        make_logistic_data_dask(1000, chunk_rows=1000, random_state=0)
    with pytest.raises(ValueError, match="random_state"):
        make_logistic_data_dask(1000, random_state=None)


@pytest.fixture(scope="module")
def cluster():
    """A real ``distributed.LocalCluster``: two worker processes of one thread
    each (tests connect a ``Client`` to it for their duration)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster:
        yield cluster


def test_local_cluster_fit_agrees_and_moves_few_rows(cluster):
    """A real ``distributed.LocalCluster`` with two worker processes: the data
    are drawn on the workers, the passes run there, and this process receives
    y and the rows HMC-ECS asks for (a few percent of them)."""
    import distributed
    n = 400_000
    with distributed.Client(cluster):
        Xd, yd = make_logistic_data_dask(n, 6, chunk_rows=2 * 65536, random_state=3)
        Xd, yd = Xd.persist(), yd.persist()
        kw = dict(n_samples=1500, n_warmup=300, n_chains=2, random_state=0)
        est = _quiet(BayesianLogisticRegression(**kw).fit, Xd, yd)
        model = est.trace_.run_state     # dropped after the fit: count rows from tuning
        assert model is None
        fetched = sum(t["rows_fetched"] for t in est.trace_.tuning)
        assert fetched < 0.05 * n
        # predictions run on the workers (the estimator travels to them)
        proba = est.predict_proba(Xd[:5000]).compute()
    X, y = make_logistic_data(n, 6, random_state=3)
    np.testing.assert_array_equal(proba, est.predict_proba(X[:5000]))
    ref = _quiet(BayesianLogisticRegression(**kw).fit, X, y)
    _agree(est.trace_, ref.trace_)


def test_open_npy_dask_reads_the_file_lazily(tmp_path, hessian_atol):
    from bayes_subsample.datasets import open_npy_dask
    X, y = _data("logistic", n=5000, dtype=np.float32)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    Xd, yd = open_npy_dask(tmp_path / "X.npy", 1234), open_npy_dask(tmp_path / "y.npy", 1234)
    assert Xd.chunks == ((1234,) * 4 + (64,), (4,)) and Xd.dtype == np.float32
    np.testing.assert_array_equal(Xd.compute(), X)
    np.testing.assert_array_equal(yd.compute(), y)
    a = DaskGLM(Xd, yd, "logistic").full_pass(np.zeros(5), hessian=True)
    m = GLM(X, y, "logistic")
    b = m.full_pass(np.zeros(5), hessian=True)
    bound = 1e-12 * np.abs(b[2]) + hessian_atol(b[2], m.compiled.rows.hessian_rtol, 2)
    assert np.all(np.abs(a[2] - b[2]) <= bound)
    np.save(tmp_path / "F.npy", np.asfortranarray(X))
    with pytest.raises(ValueError, match="C-ordered"):
        open_npy_dask(tmp_path / "F.npy")


def test_same_draws_for_any_n_jobs_and_warm_start():
    """Each chain draws its subsample rows from its own stream: the draws do not
    depend on n_jobs; a warm_start fit on the same Dask data continues the run
    (its fingerprint hashes every chunk where it lives)."""
    X, y = _data("logistic", n=30_000, d=3)
    Xd = da.from_array(X, chunks=6000)
    dm = DaskGLM(Xd, y, "logistic")
    a = _quiet(sample, dm, "hmc_ecs", n_samples=50, n_warmup=50, n_chains=2, n_jobs=1,
               random_state=5)
    b = _quiet(sample, dm, "hmc_ecs", n_samples=50, n_warmup=50, n_chains=2, n_jobs=2,
               random_state=5)
    np.testing.assert_array_equal(a.draws, b.draws)
    est = BayesianLogisticRegression(n_samples=40, n_warmup=40, n_chains=2, warm_start=True,
                                     random_state=0)
    _quiet(est.fit, Xd, y)
    _quiet(est.fit, Xd, y)
    assert est.posterior_draws_.shape == (2, 80, 4)
    with pytest.raises(ValueError, match="differs"):
        _quiet(est.fit, da.from_array(X * 2, chunks=6000), y)


# ---- chains on the cluster (joblib's Dask backend) ---------------------------------------
def _worker_pids(client):
    return client.run(os.getpid)          # {worker address: pid}


def _assert_same_run(a, b, replayed=False):
    """Bit-for-bit the same draws, statistics and tuning (but where chains ran);
    the same data passes unless ``a`` replayed chains (the replay's passes are
    counted)."""
    np.testing.assert_array_equal(a.draws, b.draws)
    np.testing.assert_array_equal(a.warmup_draws, b.warmup_draws)
    assert a.stats.keys() == b.stats.keys()
    for k in a.stats:
        np.testing.assert_array_equal(a.stats[k], b.stats[k])
    np.testing.assert_array_equal(a.chain_lengths, b.chain_lengths)
    np.testing.assert_array_equal(a.n_evals_setup, b.n_evals_setup)
    if replayed:
        assert a.data_passes["chains"] > b.data_passes["chains"]
    else:
        assert a.data_passes == b.data_passes
    for ta, tb in zip(a.tuning, b.tuning):
        ta, tb = ({k: v for k, v in t.items() if k != "worker"} for t in (ta, tb))
        assert ta.keys() == tb.keys()
        for k in ta:
            np.testing.assert_array_equal(ta[k], tb[k])


def _ran_on_workers(trace, client):
    """Every chain ran on a worker process (its address recorded in its tuning),
    none in this process. Which worker takes which chain is the scheduler's
    choice: both can land on one worker (the fresh-clone CI saw it with a
    DaskGLM, whose persisted chunks pull tasks to their worker)."""
    pids = _worker_pids(client)
    where = [t.get("worker") for t in trace.tuning]
    assert all(w in pids for w in where), where
    assert all(pids[w] != os.getpid() for w in where)


@pytest.mark.parametrize("sampler", ["hmc_ecs", "nuts", "sgld"])
def test_chains_on_the_cluster_equal_chains_in_threads(cluster, sampler):
    import distributed
    from joblib import parallel_config
    X, y = _data("logistic", n=4000, d=3)
    model = GLM(X, y, "logistic")
    kw = dict(n_samples=150, n_warmup=150, n_chains=2, n_jobs=2, random_state=4)
    ref = _quiet(sample, model, sampler, **kw)
    assert not any("worker" in t for t in ref.tuning)
    with distributed.Client(cluster) as client, parallel_config(backend="dask"):
        tr = _quiet(sample, model, sampler, **kw)
        _ran_on_workers(tr, client)
    _assert_same_run(tr, ref)
    assert not tr.interrupted and tr.resumable


def test_cluster_run_resumes_on_the_cluster_and_here(cluster):
    """The chains' kernels stay on the workers: resuming replays each chain from
    its seed to its last draw (on the cluster or in threads here), and the
    result equals one run of the total length."""
    import distributed
    from joblib import parallel_backend
    X, y = _data("logistic", n=4000, d=3)
    model = GLM(X, y, "logistic")
    kw = dict(n_warmup=100, n_chains=2, n_jobs=2, random_state=6)
    with distributed.Client(cluster) as client, parallel_backend("dask"):
        first = _quiet(sample, model, "hmc", n_samples=60, **kw)
        more = _quiet(sample, model, resume=first, n_samples=40, n_jobs=2, progress=True)
        _ran_on_workers(more, client)
    _assert_same_run(more, _quiet(sample, model, "hmc", n_samples=100, **kw), replayed=True)
    here = _quiet(sample, model, resume=more, n_samples=30, n_jobs=2)
    assert not any("worker" in t for t in here.tuning)
    full = _quiet(sample, model, "hmc", n_samples=130, **kw)
    _assert_same_run(here, full, replayed=True)
    # chains run here continue on the cluster (replayed there: kernels do not travel)
    local = _quiet(sample, model, "hmc", n_samples=100, **kw)
    with distributed.Client(cluster) as client, parallel_backend("dask"):
        there = _quiet(sample, model, resume=local, n_samples=30, n_jobs=2)
        _ran_on_workers(there, client)
    _assert_same_run(there, full, replayed=True)
    # the replay is checked against the records
    with distributed.Client(cluster), parallel_backend("dask"):
        tampered = _quiet(sample, model, "hmc", n_samples=10, **kw)
    tampered.draws[1, -1] += 1.0
    with pytest.raises(RuntimeError, match="chain 1: replaying"):
        _quiet(sample, model, resume=tampered, n_samples=5)


def test_dask_model_chains_fetch_their_rows_on_the_workers(cluster):
    """A DaskGLM's chains fetch their subsample rows from the cluster inside
    their tasks (the rows move worker to worker, none through this process)."""
    import distributed
    from joblib import parallel_config
    X, y = _data("logistic", n=20_000, d=3)
    kw = dict(n_samples=100, n_warmup=100, n_chains=2, n_jobs=2, random_state=2)
    with distributed.Client(cluster) as client:
        Xd = da.from_array(X, chunks=5000).persist()
        ref = _quiet(sample, DaskGLM(Xd, y, "logistic"), "hmc_ecs", **kw)
        model = DaskGLM(Xd, y, "logistic")
        with parallel_config(backend="dask"):
            tr = _quiet(sample, model, "hmc_ecs", **kw)
        _ran_on_workers(tr, client)
    _assert_same_run(tr, ref)
    # rows of the chains were fetched by the workers' copies of the model
    chain_rows = sum(t["rows_fetched"] for t in tr.tuning)
    assert chain_rows > 0
    assert model.rows_fetched == ref.data_passes["rows_fetched"] - chain_rows


def test_estimator_fits_on_the_cluster(cluster):
    import distributed
    from joblib import parallel_config
    X, y = _data("logistic", n=3000, d=3)
    kw = dict(n_samples=100, n_warmup=100, n_chains=2, random_state=0)
    ref = _quiet(BayesianLogisticRegression(n_jobs=2, **kw).fit, X, y)
    with distributed.Client(cluster) as client, parallel_config(backend="dask"):
        est = _quiet(BayesianLogisticRegression(n_jobs=2, **kw).fit, X, y)
        _ran_on_workers(est.trace_, client)
        np.testing.assert_array_equal(est.coef_, ref.coef_)
        np.testing.assert_array_equal(est.predict_proba(X), ref.predict_proba(X))
        # n_jobs=None: one chain at a time, in this process
        one = _quiet(BayesianLogisticRegression(**kw).fit, X, y)
        assert not any("worker" in t for t in one.trace_.tuning)
        np.testing.assert_array_equal(one.coef_, ref.coef_)
        # warm_start continues the cluster run (the chains replayed on the workers)
        warm = BayesianLogisticRegression(n_jobs=-1, warm_start=True, **kw)
        _quiet(warm.fit, X, y)
        _quiet(warm.fit, X, y)
    assert warm.posterior_draws_.shape == (2, 200, 4)
    full = _quiet(BayesianLogisticRegression(n_jobs=2, **{**kw, "n_samples": 200}).fit, X, y)
    np.testing.assert_array_equal(warm.posterior_draws_, full.posterior_draws_)


def test_interrupt_keeps_the_draws_of_the_cluster_chains(cluster, sigint_handler):
    """Ctrl-C in this process: the chains stop at an iteration boundary on the
    workers and return their draws, which equal the same chains run here."""
    import _thread
    import threading

    import distributed
    from joblib import parallel_config
    X, y = _data("logistic", n=4000, d=3)
    model = GLM(X, y, "logistic")
    kw = dict(n_warmup=50, n_chains=2, n_jobs=2, random_state=8)
    with distributed.Client(cluster), parallel_config(backend="dask"):
        _quiet(sample, model, "nuts", n_samples=10, **kw)     # workers warmed up
        timer = threading.Timer(1.5, _thread.interrupt_main)
        timer.start()
        t0 = time.perf_counter()
        try:
            # ~1 ms per iteration: minutes unless interrupted
            with pytest.warns(RuntimeWarning, match="interrupted"):
                tr = _quiet(sample, model, "nuts", n_samples=100_000, **kw)
        finally:
            timer.cancel()
    assert time.perf_counter() - t0 < 20
    assert tr.interrupted and np.all(tr.chain_lengths > 0)
    assert np.all(tr.chain_lengths < 100_000)
    assert all("worker" in t for t in tr.tuning)
    n = int(tr.chain_lengths.min())
    ref = _quiet(sample, model, "nuts", n_samples=n, **kw)
    np.testing.assert_array_equal(tr.draws[:, :n], ref.draws)
    assert tr.resumable


def test_unpicklable_model_is_refused_on_the_cluster(cluster):
    import threading

    import distributed
    from joblib import parallel_config
    X, y = _data("logistic", n=500, d=2)
    model = GLM(X, y, "logistic")
    model.lock = threading.Lock()
    with distributed.Client(cluster), parallel_config(backend="dask"):
        with pytest.raises(TypeError, match="pickling them failed.*lock"):
            sample(model, "mh", n_samples=5, n_warmup=5, n_chains=2, n_jobs=2)
        # in threads (n_jobs=1) it samples
        assert sample(model, "mh", n_samples=5, n_warmup=5, n_chains=2, n_jobs=1,
                      check_convergence=False).draws.shape == (2, 5, 3)
