"""Inputs that must be refused before any work, data that must be seen to have
changed, and interrupts that must not lose a run: each case gives a one-line
error naming the input at fault, or a correct result. Real files, FIFOs,
symlink loops, read-only folders and signals; no mocks."""
import signal
import warnings

import numpy as np
import pytest

from bayes_subsample import sample
from bayes_subsample.linear_model import BayesianLogisticRegression
from bayes_subsample.models import LogisticRegressionModel


def _quiet(f, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return f(*args, **kwargs)


@pytest.fixture
def logit_data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(6000, 3))
    y = (X @ np.array([1.0, -1.0, 0.5]) + rng.logistic(size=6000) > 0).astype(float)
    return X, y


# ---- warm_start and resume see edited data ------------------------------------------------
def _warm_estimator(n_samples=20):
    return BayesianLogisticRegression(sampler="mh", n_samples=n_samples, n_warmup=20,
                                      n_chains=2, warm_start=True, random_state=0)


@pytest.mark.parametrize("edit", ["X in place", "y in place", "X copy, one value"])
def test_warm_start_refuses_edited_data(logit_data, edit):
    """A continuation compares a hash of all of X and y made at the first fit
    with one of the data it is given: an edit anywhere is refused, and the
    previous fit stays continuable."""
    X, y = logit_data
    X, y = X.copy(), y.copy()
    est = _warm_estimator()
    _quiet(est.fit, X, y)
    if edit == "X in place":
        X[:, 0] *= 3
    elif edit == "y in place":
        y[4321] = 1 - y[4321]
    else:
        X = X.copy()
        X[4321, 2] += 1e-9          # a row between those a sample of 4096 rows reads
    with pytest.raises(ValueError, match=r"the data changed since the run was sampled"):
        _quiet(est.fit, X, y)
    assert est.trace_.resumable and est.posterior_draws_.shape == (2, 20, 4)


def test_resume_of_the_same_model_object_edited_in_place(logit_data):
    X, y = (a.copy() for a in logit_data)
    model = LogisticRegressionModel(X, y)
    trace = _quiet(sample, model, "mh", n_samples=10, n_warmup=10, n_chains=1, random_state=0)
    X[-1, -1] = 7.0
    with pytest.raises(ValueError, match=r"differs in: X"):
        sample(model, resume=trace)


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt


def test_interrupt_early_in_a_continuation_keeps_the_run(logit_data):
    """A KeyboardInterrupt (a real signal, at several moments early in a
    warm_start continuation: while the data are hashed, the recorders made,
    the chains started) never leaves the estimator unable to continue: the
    next fits complete the run, and it equals the uninterrupted one. (The
    continuation takes about 0.05 s: every delay falls early in it.)"""
    X, y = logit_data
    ref = _warm_estimator(500)
    _quiet(ref.fit, X, y)
    _quiet(ref.fit, X, y)
    for delay in (1e-4, 1e-3, 3e-3, 1e-2):
        est = _warm_estimator(500)
        _quiet(est.fit, X, y)
        old = signal.signal(signal.SIGALRM, _raise_interrupt)
        try:
            signal.setitimer(signal.ITIMER_REAL, delay)
            try:
                _quiet(est.fit, X, y)
            except KeyboardInterrupt:
                pass
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
        finally:
            signal.signal(signal.SIGALRM, old)
        assert est.trace_.resumable, delay
        while est.trace_.interrupted or est.trace_.n_samples < 1000:
            _quiet(est.fit, X, y)
        np.testing.assert_array_equal(est.posterior_draws_[:, :1000], ref.posterior_draws_)


# ---- limits checked before work -------------------------------------------------------------
def _cli_error(argv, capsys):
    """Run the command line; its exit status must be 2 with one line on stderr,
    which is returned."""
    from bayes_subsample.cli import main

    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err, err
    return err


def test_a_one_line_csv_of_millions_of_columns_fails_fast(tmp_path):
    """A 16 MB line of 8 million fields is refused from its first line, before
    any parsing (it grew to GBs in the parser)."""
    import time

    from bayes_subsample.datasets import DataFileError, load_file

    path = tmp_path / "wide.csv"
    path.write_bytes(b"1," * 8_000_000 + b"1\n")
    t0 = time.perf_counter()
    with pytest.raises(DataFileError, match=r"wide.csv: its first line is longer than"):
        load_file(path)
    path.write_bytes(b"1," * 3_000_000 + b"1\n")       # 6 MB: short enough, too many columns
    with pytest.raises(DataFileError, match=r"has 3,000,001 columns on its first line"):
        load_file(path)
    assert time.perf_counter() - t0 < 5


def test_a_long_line_later_in_a_csv_is_refused_while_streaming(tmp_path):
    from bayes_subsample.datasets import DataFileError, load_file

    path = tmp_path / "long.csv"
    path.write_bytes(b"a,b\n1,0\n2,1\n" + b"7" * (9 << 20) + b",1\n3,0\n")
    with pytest.raises(DataFileError, match=r"a line near line 4 is longer than 8,388,608 bytes"):
        load_file(path)


@pytest.mark.parametrize("first", ["0,1,2", "1,2,3"])
def test_a_header_of_column_numbers_is_a_header(tmp_path, first):
    """A header of the column numbers (as pandas writes unnamed columns) is not
    read as a data row (it would add a row, and a class "2" or "3")."""
    from bayes_subsample.datasets import load_file

    path = tmp_path / "h.csv"
    path.write_text(first + "\n0.5,1.5,0\n1.5,0.5,1\n2.5,2.5,1\n")
    d = load_file(path)
    assert d.data.shape == (3, 2) and d.target.tolist() == [0, 1, 1]
    assert d.feature_names == first.split(",")[:2]
    # header=False reads it as data; header=True takes a numeric first row as names
    assert load_file(path, header=False).data.shape == (4, 2)
    path.write_text("5,6,1\n0.5,1.5,0\n")
    assert load_file(path).data.shape == (2, 2)
    assert load_file(path, header=True).feature_names == ["5", "6"]


def test_cli_header_option(tmp_path, capsys):
    path = tmp_path / "d.npz"
    np.savez(path, X=np.ones((4, 2)), y=np.array([0, 1, 0, 1]))
    err = _cli_error(["fit", str(path), "--header", "no"], capsys)
    assert err.endswith("--header applies to CSV files; d.npz is read as npz")


def test_cli_refuses_fifos_devices_and_symlink_loops(tmp_path, capsys):
    """Reading a FIFO would wait for a writer forever, a device may never end,
    a symlink loop raised a RuntimeError traceback: each is one line naming it."""
    import os

    fifo = tmp_path / "pipe.csv"
    os.mkfifo(fifo)
    assert _cli_error(["fit", str(fifo)], capsys).endswith(
        f"{fifo} is a named pipe (FIFO), not a regular file: give a data file")
    assert _cli_error(["fit", os.devnull, "--format", "csv"], capsys).endswith(
        f"{os.devnull} is a device, not a regular file: give a data file")
    loop = tmp_path / "loop.csv"
    os.symlink(tmp_path / "other.csv", loop)
    os.symlink(loop, tmp_path / "other.csv")
    for arg in (loop, loop / "x.csv"):
        err = _cli_error(["fit", str(arg)], capsys)
        assert f"cannot read {arg}: Too many levels of symbolic links" in err


def test_sg_batch_larger_than_the_data_is_refused_before_work():
    from bayes_subsample.samplers import EWSG, SGHMC, SGLD

    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 2))
    model = LogisticRegressionModel(X, (X[:, 0] > 0).astype(float))
    for cls in (SGLD, SGHMC, EWSG):
        with pytest.raises(ValueError, match=rf"{cls.__name__}: batch_size=1000000000 is "
                           r"larger than the data \(n=50\); use batch_size <= 50"):
            sample(model, cls(batch_size=10**9), n_samples=5, n_warmup=5, n_chains=1)


@pytest.mark.parametrize("sampler, param", [("mh", "n_steps"), ("sgld", "n_steps"),
                                            ("hmc", "n_leapfrog"), ("hmc", "max_leapfrog"),
                                            ("hmc_ecs", "max_leapfrog")])
def test_huge_step_counts_are_refused(sampler, param):
    from bayes_subsample.samplers import resolve_sampler

    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 2))
    model = LogisticRegressionModel(X, (X[:, 0] > 0).astype(float))
    obj = resolve_sampler(sampler).set_params(**{param: 10**12})
    with pytest.raises(ValueError, match=rf"'{param}' parameter .* range \[1, 100000\]"):
        sample(model, obj, n_samples=5, n_warmup=5, n_chains=1)


def test_huge_gibbs_block_size_is_refused():
    from bayes_subsample.mrf import BinaryMRF, GibbsSampler

    mrf = BinaryMRF.random(n_vars=10, random_state=0)
    with pytest.raises(ValueError, match=r"block_size must be <= 1,048,576"):
        GibbsSampler(epsilon=0.05, block_size=2**62).sample(mrf, 2)


# ---- tracebacks and misleading messages -----------------------------------------------------
@pytest.mark.parametrize("content, kind", [
    (b"1,2,3\n4,5,6\n", "no zip header"),
    (b"\x93NUMPY\x01\x00rest", "a .npy file"),
    (b"\x1f\x8b\x08\x00rest", "gzip-compressed"),
])
def test_a_file_that_is_not_an_npz_archive_says_so(tmp_path, content, kind):
    """Not NumPy's advice to load it with allow_pickle / pickle.load."""
    from bayes_subsample.datasets import DataFileError, load_file

    path = tmp_path / "data.npz"
    path.write_bytes(content)
    with pytest.raises(DataFileError, match=rf"data.npz is not an .npz archive \({kind}") as e:
        load_file(path)
    assert "pickle" not in str(e.value)


def test_cli_csv_given_format_npz(tmp_path, capsys):
    path = tmp_path / "d.csv"
    path.write_text("a,b\n1,0\n2,1\n")
    err = _cli_error(["fit", str(path), "--format", "npz"], capsys)
    assert "d.csv is not an .npz archive" in err and "pickle" not in err


@pytest.mark.parametrize("X, message", [
    (np.ones((4, 2)) * (1 + 2j), r"array 'X' holds complex numbers \(dtype complex128\)"),
    (np.array([["1", "2"]] * 4), r"array 'X' holds text"),
    (np.array([[1, None]] * 4, dtype=object), r"array 'X' holds Python objects"),
    (np.full((4, 2), np.nan), r"array 'X' contains NaN or infinity"),
    (np.ones(4), r"array 'X' must be 2-D, got shape \(4,\)"),
])
def test_npz_arrays_of_the_wrong_kind_are_refused(tmp_path, X, message):
    """A complex X lost its imaginary part, text was parsed, objects gave
    NumPy's pickle advice: each is refused, naming the file and the array."""
    from bayes_subsample.datasets import DataFileError, load_file

    path = tmp_path / "d.npz"
    np.savez(path, X=X, y=np.array([0, 1, 0, 1]))
    with pytest.raises(DataFileError, match=message):
        load_file(path)


def test_npz_y_of_several_columns_is_refused(tmp_path):
    from bayes_subsample.datasets import DataFileError, load_file

    path = tmp_path / "d.npz"
    np.savez(path, X=np.ones((4, 2)), y=np.ones((4, 3)))
    with pytest.raises(DataFileError, match=r"array 'y' must be 1-D, got shape \(4, 3\)"):
        load_file(path)
    np.savez(path, X=np.ones((4, 2)), y=np.array([[0], [1], [0], [1]]))   # a column is 1-D
    assert load_file(path).target.shape == (4,)


def _user_logistic(X, y, nan_where=None, nan_in="grad"):
    """A logistic FunctionModel whose ``nan_in`` function returns NaN where
    ``nan_where(theta)`` is true."""
    from bayes_subsample.models import FunctionModel

    def loglik(theta, idx):
        eta = X[idx] @ theta
        out = y[idx] * eta - np.logaddexp(0, eta)
        return out * np.nan if nan_in == "loglik" and nan_where(theta) else out

    def grad(theta, idx):
        eta = X[idx] @ theta
        g = (y[idx] - 1 / (1 + np.exp(-eta)))[:, None] * X[idx]
        return g * np.nan if nan_in == "grad" and nan_where(theta) else g

    return FunctionModel(loglik, grad, len(y), X.shape[1])


@pytest.mark.parametrize("sampler", ["hmc", "nuts"])
def test_a_nan_user_gradient_is_named_with_its_theta(logit_data, sampler):
    """Not SciPy's "array must not contain infs or NaNs", nor advice on the
    data's scale: which function returned NaN, for how many data, where."""
    X, y = logit_data
    model = _user_logistic(X[:200], y[:200], nan_where=lambda t: True)
    with pytest.raises(ValueError, match=r"\(theta = \[0\., 0\., 0\.\]\): the model's grad "
                       r"returned NaN for 200 of 200 data"):
        sample(model, sampler, n_samples=10, n_warmup=10, n_chains=1)


@pytest.mark.parametrize("sampler", ["mh", "austerity", "confidence"])
def test_a_user_loglik_nan_over_a_region_is_warned_about(logit_data, sampler):
    """MH-type samplers reject a NaN proposal as one of zero density (as HMC
    counts it divergent), and the chains stall at the region's border: a
    warning counts the NaN calls and names the first theta."""
    X, y = logit_data
    model = _user_logistic(X[:300], y[:300], nan_where=lambda t: t[0] > 1.05, nan_in="loglik")
    model._range_bound = lambda a, b: 300 * 8 * float(np.abs(np.subtract(b, a)).sum())
    with pytest.warns(RuntimeWarning, match=r"the model's loglik returned NaN in [\d,]+ calls "
                      r"while the chains ran \(first at theta = \[ ?1\.\d+"):
        _quiet_convergence(sample, model, sampler, n_samples=60, n_warmup=60, n_chains=2,
                           random_state=1, init=np.array([0.9, -0.9, 0.4]))


def _quiet_convergence(f, *args, **kwargs):
    from sklearn.exceptions import ConvergenceWarning, EfficiencyWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", EfficiencyWarning)
        return f(*args, **kwargs)


def test_mh_refuses_a_chain_start_where_the_user_loglik_is_nan(logit_data):
    X, y = logit_data
    model = _user_logistic(X[:200], y[:200], nan_where=lambda t: t[0] > 2, nan_in="loglik")
    with pytest.raises(ValueError, match=r"at a chain's initial point .*\(theta = \[3\., 0\., "
                       r"0\.\]\): the model's loglik returned NaN for 200 of 200 data"):
        _quiet(sample, model, "mh", n_samples=10, n_warmup=10, n_chains=1,
               init=np.array([3.0, 0.0, 0.0]))


# ---- quietly wrong -----------------------------------------------------------------------
def test_param_names_of_the_wrong_length_are_refused(logit_data):
    """Three names for four parameters were accepted, and the ArviZ export
    then held three parameters only."""
    X, y = logit_data
    model = LogisticRegressionModel(X[:100], y[:100])
    for names in (["a", "b", "c"], ["a", "b", "c", "d", "e"]):
        with pytest.raises(ValueError, match=rf"param_names has {len(names)} names, but the "
                           r"model has 4 parameters"):
            sample(model, "mh", n_samples=5, n_warmup=5, n_chains=1, param_names=names)
    with pytest.raises(ValueError, match=r"param_names has repeated names"):
        sample(model, "mh", n_samples=5, n_warmup=5, n_chains=1, param_names=["a"] * 4)


def test_mrf_float32_tables_beyond_its_range_are_refused():
    """1e39 became inf in float32 and was accepted (every conditional of its
    variables then NaN)."""
    from bayes_subsample.mrf import BinaryMRF

    index = [[0, 1], [1, 2]]
    tables = [[0.0, 1e39, 0.0, 0.0], [0.0, 0.0, 0.0, 1.0]]
    with pytest.raises(ValueError, match=r"pair_log_potentials overflow float32 \(factor 0"):
        BinaryMRF(3, pair_index=index, pair_log_potentials=tables, dtype=np.float32)
    m = BinaryMRF(3, pair_index=index, pair_log_potentials=tables, dtype=np.float64)
    assert np.isfinite(m.incidence_log_ratio).all()
    with pytest.raises(ValueError, match=r"log-potential differences \(log-ratios\) overflow"):
        BinaryMRF(3, pair_index=[[0, 1]], pair_log_potentials=[[1.7e308, -1.7e308, 0.0, 0.0]])


# ---- the dataset cache ----------------------------------------------------------------------
def _higgs_csv(tmp_path, n_lines=400):
    """The first lines of the shipped HIGGS sample as a plain (uncompressed) file."""
    import gzip

    from bayes_subsample.datasets import _base

    src = _base._PACKAGE_DATA / "higgs_lightgbm_binary.train.gz"
    with gzip.open(src, "rb") as fh:
        lines = fh.read().splitlines(keepends=True)[:n_lines]
    path = tmp_path / "h.csv"
    path.write_bytes(b"".join(lines))
    return path


def test_cache_sees_a_source_changed_with_the_same_size_and_mtime(tmp_path):
    """The entry records a hash of the source's bytes: a file replaced by other
    contents of the same size and modification time is parsed again."""
    import os

    from bayes_subsample.datasets import load_higgs

    src = _higgs_csv(tmp_path)
    cache = tmp_path / "cache"
    first = load_higgs(src, cache=True, cache_dir=cache)
    y0 = float(first.target[0])
    st = os.stat(src)
    raw = bytearray(src.read_bytes())
    raw[0:1] = b"0" if raw[0:1] == b"1" else b"1"      # the first label, same length
    src.write_bytes(bytes(raw))
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(src).st_size == st.st_size and os.stat(src).st_mtime_ns == st.st_mtime_ns
    again = load_higgs(src, cache=True, cache_dir=cache)
    assert float(again.target[0]) == 1.0 - y0
    np.testing.assert_array_equal(again.data, load_higgs(src).data)
    assert len([p for p in cache.iterdir()]) == 1        # the stale entry was replaced


def _mounted_tmpfs(path, options):
    """Mount a tmpfs at ``path`` (root only); False if this machine does not allow it."""
    import os
    import subprocess

    if os.geteuid() != 0:
        return False
    path.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
                       capture_output=True)
    return r.returncode == 0


def _umount(path):
    import subprocess

    subprocess.run(["umount", str(path)], check=True)


def _load_through_unwritable_cache(src, cache):
    from bayes_subsample.datasets import load_higgs

    with pytest.warns(RuntimeWarning, match=rf"The cache folder {cache}\S* cannot take a cache "
                      r"entry \(.+\); reading .*h.csv without the cache"):
        b = load_higgs(src, cache=True, cache_dir=cache / "entries")
    ref = load_higgs(src)
    np.testing.assert_array_equal(b.data, ref.data)
    np.testing.assert_array_equal(b.target, ref.target)


def test_cache_on_a_full_disk_falls_back_and_leaves_nothing(tmp_path):
    """A real full file system (a 64 kB tmpfs; the entry needs 90 kB): the
    arrays are parsed in memory with a warning naming the cache folder, and no
    temporary folder is left behind."""
    src = _higgs_csv(tmp_path)
    cache = tmp_path / "full"
    if not _mounted_tmpfs(cache, "size=64k"):
        pytest.skip("needs root and a tmpfs mount to make a full file system")
    try:
        _load_through_unwritable_cache(src, cache)
        assert [p.name for p in (cache / "entries").iterdir()] == []
    finally:
        _umount(cache)


def test_cache_on_a_read_only_folder_falls_back(tmp_path):
    """A read-only cache folder: chmod for a normal user; a read-only tmpfs for
    root (whom file modes do not stop)."""
    import os

    src = _higgs_csv(tmp_path)
    cache = tmp_path / "ro"
    if os.geteuid() == 0:
        if not _mounted_tmpfs(cache, "ro,size=64k"):
            pytest.skip("root ignores file modes, and a read-only tmpfs cannot be mounted")
        try:
            _load_through_unwritable_cache(src, cache)
        finally:
            _umount(cache)
        return
    cache.mkdir()
    cache.chmod(0o555)
    try:
        _load_through_unwritable_cache(src, cache)
    finally:
        cache.chmod(0o755)


def test_hmc_ecs_perturbed_refuses_the_signed_variants_batch_size(logit_data):
    """batch_size was silently ignored by the perturbed variant (any value,
    even beyond the data, was accepted)."""
    from bayes_subsample.samplers import HMCECS

    X, y = logit_data
    model = LogisticRegressionModel(X[:500], y[:500])
    with pytest.raises(ValueError, match="batch_size=10000000 is the signed variant's"):
        sample(model, HMCECS(batch_size=10_000_000), n_samples=10, n_warmup=10, n_chains=1)
