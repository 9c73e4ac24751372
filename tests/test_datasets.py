"""Tests for bayes_subsample.datasets.

Tests that read the real files in the shared data folder find it through the
environment variable BAYES_SUBSAMPLE_DATA and are skipped when it is unset.
"""

import gzip
import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from bayes_subsample import datasets as ds
from bayes_subsample.datasets import _base, _mnist

# --------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------

_ENV_HOME = os.environ.get("BAYES_SUBSAMPLE_DATA")


def _real_file(*parts):
    """Path of a file in the shared data folder, or skip the test with a reason."""
    if not _ENV_HOME:
        pytest.skip("BAYES_SUBSAMPLE_DATA is not set; it should point at the shared data folder")
    p = Path(_ENV_HOME).joinpath(*parts)
    if not p.is_file():
        pytest.skip(f"{p} not found (BAYES_SUBSAMPLE_DATA={_ENV_HOME})")
    return p


@pytest.fixture(params=["pandas", "numpy"])
def float_parser(request, monkeypatch):
    """Run a test with pandas' parser (if installed) and with np.loadtxt."""
    if request.param == "pandas":
        pytest.importorskip("pandas")
    monkeypatch.setattr(_base, "_USE_PANDAS", request.param == "pandas")
    return request.param


@pytest.fixture
def empty_home(tmp_path, monkeypatch):
    """A data home without files, with the environment variable pointing elsewhere."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("BAYES_SUBSAMPLE_DATA", str(tmp_path / "env_home_not_used"))
    return home


BTAG_JET1 = np.array([0.0, 1.0865, 2.1731])
HIGGS_SAMPLE_TRAIN = _base._PACKAGE_DATA / "higgs_lightgbm_binary.train.gz"


def _sample_matrix(n=300):
    """label-first rows of the shipped HIGGS sample as an array (label, 28 features)."""
    raw = gzip.decompress(HIGGS_SAMPLE_TRAIN.read_bytes())
    return np.loadtxt(raw.decode().splitlines()[:n], delimiter="\t")


def _write(path, text, compress):
    data = text.encode()
    if compress:
        with gzip.open(path, "wb") as f:
            f.write(data)
    else:
        path.write_bytes(data)
    return path


# --------------------------------------------------------------------------
# data home and helpful errors
# --------------------------------------------------------------------------


def test_get_data_home_argument_env_default(monkeypatch, tmp_path):
    assert ds.get_data_home(tmp_path) == tmp_path
    monkeypatch.setenv("BAYES_SUBSAMPLE_DATA", str(tmp_path / "x"))
    assert ds.get_data_home() == tmp_path / "x"
    monkeypatch.delenv("BAYES_SUBSAMPLE_DATA")
    assert ds.get_data_home() == Path(os.path.expanduser("~/bayes_subsample_data"))


@pytest.mark.parametrize(
    "loader, file, url_part",
    [
        (ds.load_covtype, "covtype.data.gz", "covtype/covtype.data.gz"),
        (ds.load_higgs, "HIGGS.csv.gz", "00280/HIGGS.csv.gz"),
        (ds.load_kddcup99, "kddcup.data_10_percent.gz", "kddcup.data_10_percent.gz"),
        (ds.load_mnist_7vs9, "mnist_7vs9_derived.npz", "mnist"),
    ],
)
def test_missing_file_error_says_where_and_from_where(loader, file, url_part, empty_home):
    with pytest.raises(FileNotFoundError) as exc:
        loader(data_home=empty_home)
    msg = str(exc.value)
    subdir = {
        "mnist_7vs9_derived.npz": "mnist",
        "HIGGS.csv.gz": "higgs",
        "covtype.data.gz": "covtype",
    }.get(file, "kddcup99")
    assert str(empty_home / subdir / file) in msg  # where to put it
    assert str(empty_home / file) in msg  # the other place looked at
    assert "https://" in msg or "http://" in msg
    assert url_part in msg
    assert "BAYES_SUBSAMPLE_DATA" in msg


def test_missing_higgs_points_to_shipped_sample(empty_home):
    with pytest.raises(FileNotFoundError, match="load_higgs_sample"):
        ds.load_higgs(data_home=empty_home)


def test_env_var_is_used_as_data_home(tmp_path, monkeypatch):
    (tmp_path / "higgs").mkdir()
    target = tmp_path / "higgs" / "HIGGS.csv.gz"
    target.write_bytes(HIGGS_SAMPLE_TRAIN.read_bytes())  # tab layout is fine too
    monkeypatch.setenv("BAYES_SUBSAMPLE_DATA", str(tmp_path))
    b = ds.load_higgs(n_rows=50)
    assert b.filename == str(target)
    assert b.data.shape == (50, 28)


def test_flat_layout_is_found(tmp_path):
    (tmp_path / "covtype.data.gz").write_bytes(
        (_base._PACKAGE_DATA / "covtype_sample_20k.data.gz").read_bytes()
    )
    X, _y = ds.load_covtype(data_home=tmp_path, n_rows=10, return_X_y=True)
    assert X.shape == (10, 54)


# --------------------------------------------------------------------------
# shipped samples
# --------------------------------------------------------------------------


def test_shipped_files_are_small():
    files = sorted(_base._PACKAGE_DATA.glob("*.gz"))
    assert {f.name for f in files} == {
        "higgs_lightgbm_binary.train.gz",
        "higgs_lightgbm_binary.test.gz",
        "covtype_sample_20k.data.gz",
    }
    assert sum(f.stat().st_size for f in files) < 2_000_000


@pytest.mark.parametrize("split, n", [("train", 7000), ("test", 500), ("all", 7500)])
def test_higgs_sample_sizes(split, n):
    X, y = ds.load_higgs_sample(split=split, return_X_y=True)
    assert X.shape == (n, 28) and y.shape == (n,)
    assert X.dtype == np.float64 and y.dtype == np.float64
    assert X.flags.c_contiguous
    assert set(np.unique(y)) == {0.0, 1.0}


def test_higgs_sample_facts():
    b = ds.load_higgs_sample(split="all")
    assert abs(b.target.mean() - 0.53) < 0.01
    assert b.feature_names[8] == "jet_1_btag"
    # three b-tag values, printed to 3 decimals in this file
    np.testing.assert_allclose(np.unique(b.data[:, 8]), BTAG_JET1, atol=6e-4)
    # first row of UCI HIGGS
    np.testing.assert_allclose(b.data[0, :3], [0.869, -0.635, 0.226])
    assert b.target[0] == 1.0
    assert b.layout == {"delimiter": "\t", "has_header": False, "label_column": 0}


def test_higgs_sample_options():
    b = ds.load_higgs_sample(dtype=np.float32, standardize=True, add_intercept=True)
    assert b.data.dtype == np.float32 and b.data.shape == (7000, 29)
    assert b.feature_names[-1] == "intercept"
    np.testing.assert_array_equal(b.data[:, -1], 1.0)
    np.testing.assert_allclose(b.data[:, :28].mean(0), 0, atol=1e-4)
    np.testing.assert_allclose(b.data[:, :28].std(0), 1, atol=1e-4)
    raw = ds.load_higgs_sample()
    # statistics of the float32 values, accumulated in float64
    np.testing.assert_allclose(b.feature_mean[:28], raw.data.mean(0), rtol=1e-5, atol=1e-8)
    np.testing.assert_allclose(b.feature_scale[:28], raw.data.std(0), rtol=1e-5)
    with pytest.raises(ValueError, match="split"):
        ds.load_higgs_sample(split="validation")


def test_covtype_sample():
    b = ds.load_covtype_sample()
    assert b.data.shape == (20000, 54) and b.target.shape == (20000,)
    assert b.target.sum() == 9672
    y7 = ds.load_covtype_sample(binary=False).target
    assert y7.dtype == np.int64
    np.testing.assert_array_equal(
        np.bincount(y7, minlength=8)[1:], [7404, 9672, 1190, 107, 312, 612, 703]
    )
    np.testing.assert_array_equal(b.target, (y7 == 2).astype(float))
    # indicator columns: 4 wilderness areas and 40 soil types, exactly one of each
    np.testing.assert_array_equal(b.data[:, 10:14].sum(1), 1)
    np.testing.assert_array_equal(b.data[:, 14:54].sum(1), 1)


def test_covtype_standardize_only_quantitative_columns():
    raw = ds.load_covtype_sample(return_X_y=True)[0]
    b = ds.load_covtype_sample(standardize=True, add_intercept=True, dtype=np.float32)
    X = b.data
    assert X.dtype == np.float32 and X.shape == (20000, 55)
    np.testing.assert_allclose(X[:, :10].mean(0), 0, atol=1e-4)
    np.testing.assert_allclose(X[:, :10].std(0), 1, atol=1e-4)
    np.testing.assert_array_equal(X[:, 10:54], raw[:, 10:54])
    np.testing.assert_array_equal(X[:, 54], 1)
    np.testing.assert_allclose(b.feature_mean[:10], raw[:, :10].mean(0))


@pytest.mark.parametrize("bad", [np.int32, np.float16, "complex128"])
def test_bad_dtype(bad):
    with pytest.raises(ValueError, match="dtype"):
        ds.load_higgs_sample(dtype=bad)
    with pytest.raises(ValueError, match="dtype"):
        ds.make_logistic_data(10, dtype=bad)


# --------------------------------------------------------------------------
# HIGGS layouts (written here from the shipped sample)
# --------------------------------------------------------------------------

_NAMES = ds.HIGGS_FEATURE_NAMES


def _fmt(rows):
    return [[f"{v:.6g}" for v in r] for r in rows]


@pytest.mark.parametrize("compress", [False, True])
@pytest.mark.parametrize(
    "layout",
    [
        "uci",
        "uci_header",
        "tab",
        "label_last_header",
        "label_middle_header",
        "crlf_no_trailing_newline",
        "bom_header",
    ],
)
def test_higgs_layouts_parse_identically(tmp_path, layout, compress, float_parser):
    M = _sample_matrix(300)
    y, X = M[:, 0], M[:, 1:]
    rows = _fmt(M)
    if layout == "uci":
        text = "\n".join(",".join(r) for r in rows) + "\n"
    elif layout == "uci_header":
        text = "\n".join([",".join(["label"] + _NAMES)] + [",".join(r) for r in rows]) + "\n"
    elif layout == "tab":
        text = "\n".join("\t".join(r) for r in rows) + "\n"
    elif layout == "label_last_header":
        text = (
            "\n".join([",".join(_NAMES + ["Label"])] + [",".join(r[1:] + r[:1]) for r in rows])
            + "\n"
        )
    elif layout == "label_middle_header":
        names = _NAMES[:5] + ['"response"'] + _NAMES[5:]
        text = "\n".join([",".join(names)] + [",".join(r[1:6] + r[:1] + r[6:]) for r in rows])
    elif layout == "crlf_no_trailing_newline":
        text = "\r\n".join(",".join(r) for r in rows)
    elif layout == "bom_header":
        text = (
            "\ufeff"
            + "\n".join([",".join(_NAMES + ["target"])] + [",".join(r[1:] + r[:1]) for r in rows])
            + "\n"
        )
    path = _write(tmp_path / ("f.csv.gz" if compress else "f.csv"), text, compress)
    b = ds.load_higgs(path)
    assert b.data.shape == (300, 28)
    np.testing.assert_allclose(b.data, X, rtol=1e-5)
    np.testing.assert_array_equal(b.target, y)


def test_higgs_label_column_argument(tmp_path):
    M = _sample_matrix(50)
    path = _write(tmp_path / "f.csv", "\n".join(",".join(r) for r in _fmt(M)), False)
    a = ds.load_higgs(path, label_column="first")
    b = ds.load_higgs(path, label_column=0)
    np.testing.assert_array_equal(a.data, b.data)
    # asking for a column that is not 0/1 is refused
    with pytest.raises(ValueError, match="0/1"):
        ds.load_higgs(path, label_column="last")
    with pytest.raises(ValueError, match="no header"):
        ds.load_higgs(path, label_column="label")
    with pytest.raises(ValueError, match="out of range"):
        ds.load_higgs(path, label_column=29)
    with pytest.raises(ValueError, match="label_column must be"):
        ds.load_higgs(path, label_column=1.5)


def test_float_parsers_agree(monkeypatch):
    pytest.importorskip("pandas")
    monkeypatch.setattr(_base, "_USE_PANDAS", True)
    a = ds.load_higgs_sample(split="all", dtype=np.float32)
    monkeypatch.setattr(_base, "_USE_PANDAS", False)
    b = ds.load_higgs_sample(split="all", dtype=np.float32)
    np.testing.assert_array_equal(a.data, b.data)
    np.testing.assert_array_equal(a.target, b.target)


def test_higgs_bad_files(tmp_path, float_parser):
    M = _sample_matrix(20)
    few = _write(tmp_path / "few.csv", "\n".join(",".join(r[:10]) for r in _fmt(M)), False)
    with pytest.raises(ValueError, match="29 columns"):
        ds.load_higgs(few)
    nolabel = _write(
        tmp_path / "nolabel.csv", "\n".join(",".join(r[1:] + r[1:2]) for r in _fmt(M)), False
    )
    with pytest.raises(ValueError, match="label_column"):
        ds.load_higgs(nolabel)
    text = "\n".join(",".join(r) for r in _fmt(M)) + "\n2," + ",".join(["0.5"] * 28) + "\n"
    badlab = _write(tmp_path / "badlab.csv", text, False)
    with pytest.raises(ValueError, match="0/1"):
        ds.load_higgs(badlab)
    rows = [",".join(r) for r in _fmt(M)]
    short = _write(tmp_path / "short.csv", "\n".join(rows[:5] + [rows[5][:40]] + rows[6:]), False)
    with pytest.raises(ValueError, match="short.csv"):
        ds.load_higgs(short)
    text = "\n".join(rows[:5] + [rows[5].replace(",", ",abc,", 1)[:-5]] + rows[6:])
    word = _write(tmp_path / "word.csv", text, False)
    with pytest.raises(ValueError, match="word.csv"):
        ds.load_higgs(word)
    empty = _write(tmp_path / "empty.csv", "", False)
    with pytest.raises(ValueError, match="empty"):
        ds.load_higgs(empty)
    with pytest.raises(FileNotFoundError):
        ds.load_higgs(tmp_path / "nope.csv", data_home=tmp_path)


def test_higgs_n_rows_and_float32():
    X, y = ds.load_higgs(HIGGS_SAMPLE_TRAIN, n_rows=123, dtype=np.float32, return_X_y=True)
    assert X.shape == (123, 28) and X.dtype == np.float32 and y.dtype == np.float64
    X64, _ = ds.load_higgs(HIGGS_SAMPLE_TRAIN, n_rows=123, return_X_y=True)
    np.testing.assert_array_equal(X, X64.astype(np.float32))
    with pytest.raises(ValueError, match="n_rows"):
        ds.load_higgs(HIGGS_SAMPLE_TRAIN, n_rows=0)
    with pytest.raises(TypeError, match="n_rows"):
        ds.load_higgs(HIGGS_SAMPLE_TRAIN, n_rows=2.5)


def test_small_blocks_give_same_result(monkeypatch, tmp_path):
    ref = ds.load_higgs(HIGGS_SAMPLE_TRAIN)
    monkeypatch.setattr(_base, "_BLOCK_BYTES", 4096)  # about 25 blocks
    for cache in (False, True):
        b = ds.load_higgs(HIGGS_SAMPLE_TRAIN, cache=cache, cache_dir=tmp_path)
        np.testing.assert_array_equal(b.data, ref.data)
        np.testing.assert_array_equal(b.target, ref.target)
    b = ds.load_higgs(HIGGS_SAMPLE_TRAIN, n_rows=1001)
    np.testing.assert_array_equal(b.data, ref.data[:1001])


# --------------------------------------------------------------------------
# damaged and incomplete files
# --------------------------------------------------------------------------

COVTYPE_SAMPLE = _base._PACKAGE_DATA / "covtype_sample_20k.data.gz"


def _lines(path):
    """The lines of a gzipped text file, each with its newline."""
    return gzip.decompress(path.read_bytes()).splitlines(keepends=True)


def _gz(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(data, mtime=0))
    return path


def _truncated(path, src, keep=0.5):
    """``path``: the first ``keep`` of the compressed bytes of ``src``."""
    raw = src.read_bytes()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(raw[: int(len(raw) * keep)])
    return path


def _corrupted(path, src):
    """``path``: ``src`` with one byte of its deflate data flipped."""
    raw = bytearray(src.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(bytes(raw))
    return path


def test_data_file_error_is_a_documented_value_error():
    assert issubclass(ds.DataFileError, ValueError)
    assert "DataFileError" in ds.__all__


@pytest.mark.parametrize("compress", [True, False])
def test_covtype_cut_at_line_boundary_raises(tmp_path, compress):
    lines = _lines(COVTYPE_SAMPLE)[:12345]
    name = "covtype.data.gz" if compress else "covtype.data"
    path = tmp_path / "covtype" / name
    if compress:
        _gz(path, b"".join(lines))
    else:
        path.parent.mkdir()
        path.write_bytes(b"".join(lines))
    with pytest.raises(ds.DataFileError) as exc:
        ds.load_covtype(data_home=tmp_path)
    msg = str(exc.value)
    assert str(path) in msg
    assert "12,345 data rows" in msg and "581,012" in msg
    assert "download it again" in msg and "covtype.data.gz" in msg.split("from ")[-1]
    # a cut after the rows asked for is not seen; one before them is
    X, _ = ds.load_covtype(data_home=tmp_path, n_rows=1000, return_X_y=True)
    assert X.shape == (1000, 54)
    with pytest.raises(ds.DataFileError, match=r"12,345 data rows \(asked for the first 20,000\)"):
        ds.load_covtype(data_home=tmp_path, n_rows=20000)


@pytest.mark.parametrize("content", [b"", None])
def test_empty_covtype_raises(tmp_path, content):
    path = tmp_path / "covtype.data.gz"
    if content is None:
        path.write_bytes(b"")  # not even a gzip header
    else:
        _gz(path, content)
    with pytest.raises(ds.DataFileError, match=r"covtype\.data\.gz: it holds no data rows"):
        ds.load_covtype(data_home=tmp_path)


@pytest.mark.parametrize("damage, what", [(_truncated, "truncated"), (_corrupted, "corrupt")])
@pytest.mark.parametrize("cache", [False, True])
def test_damaged_gzip_names_the_file(tmp_path, damage, what, cache):
    cov = damage(tmp_path / "covtype" / "covtype.data.gz", COVTYPE_SAMPLE)
    with pytest.raises(ds.DataFileError) as exc:
        ds.load_covtype(data_home=tmp_path, cache=cache, cache_dir=tmp_path / "cache")
    msg = str(exc.value)
    assert msg.startswith(f"{cov}: ") and what in msg and "Delete it" in msg
    # nothing half-built is left in the cache
    assert not (tmp_path / "cache").exists() or not any((tmp_path / "cache").iterdir())
    # any HIGGS file, known by its name or not
    for name in ("mine.csv.gz", "HIGGS.csv.gz"):
        h = damage(tmp_path / name, HIGGS_SAMPLE_TRAIN)
        with pytest.raises(ds.DataFileError, match=f"^{h}: .*{what}"):
            ds.load_higgs(h)


def test_short_truncated_gzip_fails_while_sniffing(tmp_path):
    h = _truncated(tmp_path / "mine.csv.gz", HIGGS_SAMPLE_TRAIN, keep=0.01)
    with pytest.raises(ds.DataFileError, match=f"^{h}: it is truncated"):
        ds.load_higgs(h)


def test_shipped_samples_are_checked(tmp_path, monkeypatch):
    from bayes_subsample.datasets import _covtype, _higgs

    monkeypatch.setattr(_covtype, "_PACKAGE_DATA", tmp_path)
    monkeypatch.setattr(_higgs, "_PACKAGE_DATA", tmp_path)
    lines = _lines(COVTYPE_SAMPLE)
    _gz(tmp_path / COVTYPE_SAMPLE.name, b"".join(lines[:12345]))
    with pytest.raises(ds.DataFileError, match="12,345 data rows, but the shipped 20,000-row "
                                               "sample has 20,000.*reinstall"):
        ds.load_covtype_sample()
    # same row count, one value changed: the checksum tells
    lines[7] = lines[7].replace(b",", b"9,", 1)
    _gz(tmp_path / COVTYPE_SAMPLE.name, b"".join(lines))
    with pytest.raises(ds.DataFileError, match="its content has sha256 .*, but the shipped"):
        ds.load_covtype_sample()
    _gz(tmp_path / COVTYPE_SAMPLE.name, b"".join(_lines(COVTYPE_SAMPLE)))  # re-compressed: fine
    assert ds.load_covtype_sample().data.shape == (20000, 54)
    hl = _lines(HIGGS_SAMPLE_TRAIN)
    _gz(tmp_path / HIGGS_SAMPLE_TRAIN.name, b"".join(hl[:6000]))
    with pytest.raises(ds.DataFileError, match="6,000 data rows, but the shipped"):
        ds.load_higgs_sample()


def test_higgs_cut_at_line_boundary_raises(tmp_path):
    lines = _lines(HIGGS_SAMPLE_TRAIN)
    # the full UCI file by its name: 11,000,000 rows
    full = _gz(tmp_path / "higgs" / "HIGGS.csv.gz", b"".join(lines[:300]))
    with pytest.raises(ds.DataFileError, match=r"300 data rows, but the complete UCI HIGGS.csv "
                                               r"has 11,000,000.*00280/HIGGS.csv.gz"):
        ds.load_higgs(data_home=tmp_path)
    with pytest.raises(ds.DataFileError, match="300 data rows"):
        ds.load_higgs(full, n_rows=1000)
    assert ds.load_higgs(data_home=tmp_path, n_rows=300).data.shape == (300, 28)
    # a known subset by its name in the shared data folder
    sub = _gz(tmp_path / "lightgbm_binary.train.gz", b"".join(lines[:6000]))
    with pytest.raises(ds.DataFileError, match=f"^{sub}: it has 6,000 data rows, but "
                                               "LightGBM's binary.train has 7,000"):
        ds.load_higgs(sub)
    # a file of unknown size cut at a line boundary cannot be told from a short one
    other = _gz(tmp_path / "mine.csv.gz", b"".join(lines[:6000]))
    assert ds.load_higgs(other).data.shape == (6000, 28)


def test_higgs_known_subset_checksum(tmp_path):
    lines = _lines(HIGGS_SAMPLE_TRAIN)[:500]  # 500 rows, as many as binary.test
    path = _gz(tmp_path / "lightgbm_binary.test.gz", b"".join(lines))
    with pytest.raises(ds.DataFileError, match="its content has sha256 [0-9a-f]{64}, but "
                                               "LightGBM's binary.test has d99ebec9"):
        ds.load_higgs(path)
    # the real one passes, gunzipped too
    plain = tmp_path / "lightgbm_binary.train"
    plain.write_bytes(gzip.decompress(HIGGS_SAMPLE_TRAIN.read_bytes()))
    assert ds.load_higgs(plain).data.shape == (7000, 28)



# the first line of kddcup.data_10_percent
KDD_LINE = (b"0,tcp,http,SF,181,5450,0,0,0,0,0,1,0,0,0,0,0,0,0,0,0,0,8,8,0.00,0.00,0.00,0.00,"
            b"1.00,0.00,0.00,9,9,1.00,0.00,0.11,0.00,0.00,0.00,0.00,0.00,normal.\n")


def test_kddcup99_cut_or_damaged_raises(tmp_path, monkeypatch):
    from bayes_subsample.datasets import _kddcup99

    path = _gz(tmp_path / "kddcup99" / "kddcup.data_10_percent.gz", KDD_LINE * 1000)
    with pytest.raises(ds.DataFileError, match=f"^{path}: it has 1,000 data rows, but the "
                                               "complete KDD Cup 99 10% file has 494,021"):
        ds.load_kddcup99(data_home=tmp_path)
    assert ds.load_kddcup99(data_home=tmp_path, n_rows=500).data.shape[0] == 500
    _truncated(path, tmp_path / "kddcup99" / "kddcup.data_10_percent.gz", keep=0.3)
    with pytest.raises(ds.DataFileError, match=f"^{path}: it is truncated.*download it again"):
        ds.load_kddcup99(data_home=tmp_path, cache=True, cache_dir=tmp_path / "cache")
    _gz(path, b"")
    with pytest.raises(ds.DataFileError, match="it holds no data rows"):
        ds.load_kddcup99(data_home=tmp_path)
    # the checksum is compared when the row count matches (here: a smaller "known" count)
    _gz(path, KDD_LINE * 1000)
    monkeypatch.setattr(_kddcup99, "_EXPECT", _kddcup99._EXPECT._replace(n_rows=1000))
    with pytest.raises(ds.DataFileError, match="its content has sha256 [0-9a-f]{64}, but the "
                                               "complete KDD Cup 99 10% file has f8c8267e"):
        ds.load_kddcup99(data_home=tmp_path)


def _write_idx(path, arr):
    """``arr`` (uint8) as a gzipped IDX file."""
    head = bytes([0, 0, 8, arr.ndim]) + np.array(arr.shape, dtype=">u4").tobytes()
    return _gz(path, head + np.ascontiguousarray(arr, dtype=np.uint8).tobytes())


def _fake_idx_home(home, n_train=100, n_test=20):
    rng = np.random.default_rng(0)
    for part, n in (("train", n_train), ("t10k", n_test)):
        _write_idx(home / "mnist" / f"{part}-images-idx3-ubyte.gz",
                   rng.integers(0, 256, (n, 28, 28), dtype=np.uint8))
        _write_idx(home / "mnist" / f"{part}-labels-idx1-ubyte.gz",
                   rng.integers(0, 10, n, dtype=np.uint8))


def test_mnist_idx_files_are_checked(tmp_path):
    _fake_idx_home(tmp_path)
    images = tmp_path / "mnist" / "train-images-idx3-ubyte.gz"
    raw = gzip.decompress(images.read_bytes())
    with pytest.raises(ds.DataFileError, match=f"^{images}: it has 100 data rows, but the MNIST "
                                               "training-image file has 60,000"):
        ds.load_mnist_7vs9(data_home=tmp_path)
    _gz(images, raw[:-10])  # cut inside its data
    with pytest.raises(ds.DataFileError, match=r"its header says shape \(100, 28, 28\) but it "
                                               r"holds 78,390 bytes"):
        ds.load_mnist_7vs9(data_home=tmp_path)
    _gz(images, raw)
    _truncated(images, images, keep=0.5)
    with pytest.raises(ds.DataFileError, match=f"^{images}: it is truncated.*download it again"):
        ds.load_mnist_7vs9(data_home=tmp_path)


def test_mnist_npz_is_checked(tmp_path):
    home = tmp_path / "home"
    npz = home / "mnist" / "mnist_7vs9_derived.npz"
    npz.parent.mkdir(parents=True)
    shapes = {"X_train": (12214, 784), "y_train": (12214,), "X_test": (2037, 784),
              "y_test": (2037,)}
    arrays = {k: np.zeros(s, dtype=np.uint8) for k, s in shapes.items()}
    # fewer rows than the subset has: was loaded as it was
    np.savez(npz, **dict(arrays, X_train=arrays["X_train"][:100], y_train=arrays["y_train"][:100]))
    with pytest.raises(ds.DataFileError, match=r"array 'X_train' has shape \(100, 784\), not "
                                               r"\(12214, 784\).*Delete it"):
        ds.load_mnist_7vs9(data_home=home)
    np.savez(npz, **arrays)  # right shapes, wrong pixels
    with pytest.raises(ds.DataFileError, match="its arrays have sha256"):
        ds.load_mnist_7vs9(data_home=home)
    np.savez(npz, X_train=arrays["X_train"])
    with pytest.raises(ds.DataFileError,
                       match=r"it lacks arrays \['y_train', 'X_test', 'y_test'\]"):
        ds.load_mnist_7vs9(data_home=home)
    np.savez(npz, **arrays)
    for damage in (_truncated, _corrupted):
        damage(npz, npz)
        with pytest.raises(ds.DataFileError, match=f"^{npz}: it cannot be read as .npz"):
            ds.load_mnist_7vs9(data_home=home)
        np.savez(npz, **arrays)


def test_real_mnist_npz_checksum_survives_resaving(tmp_path):
    from bayes_subsample.datasets import _mnist

    src = _real_file("mnist", "mnist_7vs9_derived.npz")
    with np.load(src) as z:
        arrays = {k: z[k] for k in z.files}
    assert _mnist._arrays_sha256(arrays) == _mnist._NPZ_SHA256
    (tmp_path / "mnist").mkdir()
    np.savez_compressed(tmp_path / "mnist" / "mnist_7vs9_derived.npz", **arrays)
    b = ds.load_mnist_7vs9(data_home=tmp_path)
    np.testing.assert_array_equal(b.y_test, arrays["y_test"])


# --------------------------------------------------------------------------
# cache
# --------------------------------------------------------------------------


def test_cache_memmap_roundtrip(tmp_path):
    src = tmp_path / "h.gz"
    src.write_bytes(HIGGS_SAMPLE_TRAIN.read_bytes())
    cache = tmp_path / "cache"
    ref = ds.load_higgs(src, standardize=True, dtype=np.float32)
    first = ds.load_higgs(src, standardize=True, dtype=np.float32, cache=True, cache_dir=cache)
    assert isinstance(first.data, np.memmap) and not first.data.flags.writeable
    entries = [p for p in cache.iterdir() if not p.name.startswith(".")]
    assert len(entries) == 1 and (entries[0] / "data.npy").is_file()
    second = ds.load_higgs(src, standardize=True, dtype=np.float32, cache=True, cache_dir=cache)
    for b in (first, second):
        assert b.data.dtype == np.float32 and b.data.shape == (7000, 28)
        np.testing.assert_array_equal(b.data, ref.data)
        np.testing.assert_array_equal(b.target, ref.target)
        np.testing.assert_allclose(b.feature_mean, ref.feature_mean)
    # other options -> another entry; a changed source file -> another entry
    ds.load_higgs(src, n_rows=10, cache=True, cache_dir=cache)
    os.utime(src, ns=(1, 1))
    ds.load_higgs(src, n_rows=10, cache=True, cache_dir=cache)
    assert len([p for p in cache.iterdir() if not p.name.startswith(".")]) == 3
    assert ds.clear_cache(cache) == 3
    assert ds.clear_cache(cache) == 0


def _cached_higgs(tmp_path):
    """A HIGGS source file in tmp_path, loaded once through the cache; (src, cache, entry)."""
    src = tmp_path / "h.gz"
    src.write_bytes(HIGGS_SAMPLE_TRAIN.read_bytes())
    cache = tmp_path / "cache"
    ds.load_higgs(src, cache=True, cache_dir=cache)
    (entry,) = [p for p in cache.iterdir() if not p.name.startswith(".")]
    return src, cache, entry


def test_cache_entry_records_size_and_sha256(tmp_path):
    import hashlib
    import json

    _src, _cache, entry = _cached_higgs(tmp_path)
    meta = json.loads((entry / "meta.json").read_text())
    assert set(meta["_arrays"]) == {"data", "target"}
    for key, rec in meta["_arrays"].items():
        raw = (entry / f"{key}.npy").read_bytes()
        assert rec == {"size": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}


def _truncate_npy(entry):
    p = entry / "data.npy"
    p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])


def _garble_npy(entry):  # same size, other bytes
    p = entry / "data.npy"
    raw = bytearray(p.read_bytes())
    raw[1000:1064] = b"\x7f" * 64
    p.write_bytes(bytes(raw))


def _garble_header(entry):
    p = entry / "target.npy"
    p.write_bytes(b"garbage!" + p.read_bytes()[8:])


@pytest.mark.parametrize("damage", [
    _truncate_npy,
    _garble_npy,
    _garble_header,
    lambda e: (e / "target.npy").unlink(),
    lambda e: (e / "meta.json").unlink(),
    lambda e: (e / "meta.json").write_text('{"_arrays": '),
    lambda e: (e / "meta.json").write_text('{"_arrays": ["data", "target"]}'),  # version 1
], ids=["truncated", "garbage_payload", "garbage_header", "missing_npy", "missing_meta",
        "garbage_meta", "meta_without_checksums"])
def test_damaged_cache_entry_is_rebuilt_with_warning(tmp_path, damage):
    src, cache, entry = _cached_higgs(tmp_path)
    ref = ds.load_higgs(src)
    damage(entry)
    with pytest.warns(RuntimeWarning, match=f"cache entry {entry} is damaged: .*rebuilding it "
                                            f"from {src}"):
        b = ds.load_higgs(src, cache=True, cache_dir=cache)
    np.testing.assert_array_equal(b.data, ref.data)
    np.testing.assert_array_equal(b.target, ref.target)
    del b
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # rebuilt: no warning any more
        b = ds.load_higgs(src, cache=True, cache_dir=cache)
    np.testing.assert_array_equal(b.data, ref.data)
    assert [p.name for p in cache.iterdir()] == [entry.name]


def test_interrupted_cache_write_leaves_no_entry(tmp_path, monkeypatch):
    src = tmp_path / "h.gz"
    src.write_bytes(HIGGS_SAMPLE_TRAIN.read_bytes())
    cache = tmp_path / "cache"

    def killed(*args, **kwargs):  # the process dies just before the rename ...
        raise KeyboardInterrupt

    monkeypatch.setattr(_base.os, "replace", killed)
    monkeypatch.setattr(_base.shutil, "rmtree", lambda *a, **k: None)  # ... and cleans nothing
    with pytest.raises(KeyboardInterrupt):
        ds.load_higgs(src, cache=True, cache_dir=cache)
    monkeypatch.undo()
    (left,) = cache.iterdir()
    assert left.name.startswith(".") and ".tmp-" in left.name  # only a temporary folder
    assert (left / "meta.json").is_file()  # complete inside, yet never taken for an entry
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        b = ds.load_higgs(src, cache=True, cache_dir=cache)
    assert isinstance(b.data, np.memmap) and b.data.shape == (7000, 28)
    del b
    assert ds.clear_cache(cache) == 2 and not any(cache.iterdir())


def test_clear_cache_removes_broken_and_partial_entries(tmp_path):
    _src, cache, entry = _cached_higgs(tmp_path)
    broken = cache / "covtype-0123456789abcdef"  # no meta.json: was left alone
    broken.mkdir()
    (broken / "data.npy").write_bytes(b"partial")
    empty = cache / "kddcup99-fedcba9876543210"
    empty.mkdir()
    tmp = cache / f".higgs-0123456789abcdef.tmp-{'a' * 32}"
    tmp.mkdir()
    (tmp / "data.npy").write_bytes(b"partial")
    mine = [cache / "my_notes.txt", cache / "my-folder", cache / ".hidden"]
    mine[0].write_text("keep me")
    mine[1].mkdir()
    mine[2].mkdir()
    assert ds.clear_cache(cache) == 4
    assert not any(p.exists() for p in (entry, broken, empty, tmp))
    assert all(p.exists() for p in mine)


def test_cache_dir_env(monkeypatch, tmp_path):
    monkeypatch.setenv("BAYES_SUBSAMPLE_CACHE", str(tmp_path / "c"))
    assert ds.get_cache_dir() == tmp_path / "c"
    monkeypatch.delenv("BAYES_SUBSAMPLE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert ds.get_cache_dir() == tmp_path / "xdg" / "bayes_subsample"


def test_npy_sink_header_roundtrip(tmp_path):
    s = _base._Sink(np.float32, (3,), path=tmp_path / "a.npy")
    s.append(np.arange(6).reshape(2, 3))
    s.append(np.arange(6, 15).reshape(3, 3))
    out = s.finish()
    del out
    a = np.load(tmp_path / "a.npy")
    np.testing.assert_array_equal(a, np.arange(15, dtype=np.float32).reshape(5, 3))


# --------------------------------------------------------------------------
# real HIGGS subsets
# --------------------------------------------------------------------------

_HIGGS_REAL = {
    "lightgbm_binary.train.gz": (7000, {"delimiter": "\t", "has_header": False, "label_column": 0}),
    "lightgbm_binary.test.gz": (500, {"delimiter": "\t", "has_header": False, "label_column": 0}),
    "h2o_higgs_test_5k.csv.gz": (5000, {"delimiter": ",", "has_header": False, "label_column": 0}),
    "h2o_higgs_train_10k.csv.gz": (
        10000,
        {"delimiter": ",", "has_header": False, "label_column": 0},
    ),
    "sas_viya_higgs.csv.gz": (10984, {"delimiter": ",", "has_header": True, "label_column": 28}),
}


@pytest.mark.parametrize("name", sorted(_HIGGS_REAL))
def test_real_higgs_layouts(name):
    path = _real_file("higgs", name)
    n, layout = _HIGGS_REAL[name]
    b = ds.load_higgs(path)
    assert b.data.shape == (n, 28)
    assert b.layout == layout
    assert set(np.unique(b.target)) == {0.0, 1.0}
    assert abs(b.target.mean() - 0.53) < 0.025
    # jet 1 b-tag: three values; the 10k H2O file keeps 3 significant digits
    vals = np.unique(b.data[:, 8])
    assert vals.size == 3
    np.testing.assert_allclose(vals, BTAG_JET1, atol=6e-3)
    # the other b-tags are three-valued too, other columns are continuous
    for j in (12, 16, 20):
        assert np.unique(b.data[:, j]).size == 3
    assert np.unique(b.data[:, 0]).size > 100
    # lepton pT and the masses are positive
    assert (b.data[:, [0, 3, 5, 21, 22, 23, 24, 25, 26, 27]] > 0).all()


def test_real_higgs_subsets_agree():
    """LightGBM train and H2O train 10k both start with UCI rows 1-7000."""
    a = ds.load_higgs(_real_file("higgs", "lightgbm_binary.train.gz"))
    b = ds.load_higgs(_real_file("higgs", "h2o_higgs_train_10k.csv.gz"), n_rows=7000)
    np.testing.assert_array_equal(a.target, b.target)
    np.testing.assert_allclose(a.data, b.data, rtol=6e-3, atol=2e-3)
    # found by name in the data home as well
    c = ds.load_higgs("lightgbm_binary.test.gz", data_home=_ENV_HOME)
    assert c.data.shape == (500, 28)


def test_shipped_higgs_sample_is_the_lightgbm_file():
    real = _real_file("higgs", "lightgbm_binary.train.gz")
    assert real.read_bytes() == HIGGS_SAMPLE_TRAIN.read_bytes()


# --------------------------------------------------------------------------
# real Covertype, KDD Cup 99, MNIST
# --------------------------------------------------------------------------

COVTYPE_COUNTS = [211840, 283301, 35754, 2747, 9493, 17367, 20510]


def test_real_covtype_class_counts():
    _real_file("covtype", "covtype.data.gz")
    b = ds.load_covtype(binary=False, data_home=_ENV_HOME, dtype=np.float32)
    assert b.data.shape == (581012, 54) and b.data.dtype == np.float32
    np.testing.assert_array_equal(np.bincount(b.target, minlength=8)[1:], COVTYPE_COUNTS)
    X, y = ds.load_covtype(data_home=_ENV_HOME, n_rows=1000, return_X_y=True)
    assert X.shape == (1000, 54) and X.dtype == np.float64
    np.testing.assert_array_equal(X, b.data[:1000])
    np.testing.assert_array_equal(y, (b.target[:1000] == 2).astype(float))
    np.testing.assert_array_equal(X[0, :3], [2596, 51, 3])


@pytest.mark.slow
def test_real_covtype_binary_full():
    _real_file("covtype", "covtype.data.gz")
    X, y = ds.load_covtype(data_home=_ENV_HOME, return_X_y=True)
    assert X.shape == (581012, 54) and X.dtype == np.float64
    assert y.sum() == 283301  # LIBSVM covtype.binary positives


def test_real_covtype_sample_is_subset():
    path = _real_file("covtype", "covtype.data.gz")
    full = set(gzip.decompress(path.read_bytes()).split(b"\n"))
    sample_path = _base._PACKAGE_DATA / "covtype_sample_20k.data.gz"
    sample = gzip.decompress(sample_path.read_bytes()).split(b"\n")
    assert sample[-1] == b"" and len(sample) == 20001
    assert all(line in full for line in sample[:-1])


def test_real_kddcup99_head():
    _real_file("kddcup99", "kddcup.data_10_percent.gz")
    b = ds.load_kddcup99(data_home=_ENV_HOME, n_rows=20000, standardize=True)
    assert b.data.shape[0] == 20000 and b.target.shape == (20000,)
    names = b.feature_names
    assert names[0] == "duration" and names[1].startswith("protocol_type=")
    X = b.data
    onehot = [j for j, n in enumerate(names) if "=" in n]
    numeric = [j for j, n in enumerate(names) if "=" not in n]
    assert len(numeric) == 38
    for col in ("protocol_type", "service", "flag"):
        cols = [j for j, n in enumerate(names) if n.startswith(col + "=")]
        np.testing.assert_array_equal(X[:, cols].sum(1), 1)
    assert set(np.unique(X[:, onehot])) <= {0.0, 1.0}
    sd = X[:, numeric].std(0)
    assert np.all((np.abs(sd - 1) < 1e-6) | (sd == 0))
    np.testing.assert_array_equal(b.target, (b.attack_type != "normal").astype(float))
    assert b.attack_type[0] == "normal"


@pytest.mark.slow
def test_real_kddcup99_full():
    _real_file("kddcup99", "kddcup.data_10_percent.gz")
    b = ds.load_kddcup99(data_home=_ENV_HOME, dtype=np.float32)
    assert b.data.shape == (494021, 118) and b.data.dtype == np.float32
    assert b.target.sum() == 494021 - 97278
    assert len(b.categories["service"]) == 66 and len(b.categories["flag"]) == 11
    assert (b.attack_type == "smurf").sum() == 280790


def test_real_mnist_7vs9():
    _real_file("mnist", "mnist_7vs9_derived.npz")
    b = ds.load_mnist_7vs9(data_home=_ENV_HOME, dtype=np.float32)
    assert b.X_train.shape == (12214, 784) and b.X_test.shape == (2037, 784)
    assert b.X_train.dtype == np.float32
    assert b.X_train.min() == 0 and b.X_train.max() == 1
    assert set(np.unique(b.y_train)) == {0.0, 1.0}
    assert b.y_train.sum() == 5949 and b.y_test.sum() == 1009  # nines


def test_real_mnist_pca_fitted_on_train():
    _real_file("mnist", "mnist_7vs9_derived.npz")
    Xtr, _ytr, Xte, _yte = ds.load_mnist_7vs9(
        pca_components=20, data_home=_ENV_HOME, dtype=np.float32, return_X_y=True
    )
    assert Xtr.dtype == np.float32 and Xte.dtype == np.float32
    assert Xtr.shape == (12214, 20) and Xte.shape == (2037, 20)
    np.testing.assert_allclose(Xtr.mean(0), 0, atol=1e-4)  # centred with train means
    assert np.abs(Xte.mean(0)).max() > 1e-3  # test is not re-centred
    assert np.all(np.diff(Xtr.var(0, dtype=np.float64)) <= 1e-6)  # decreasing variance
    with pytest.raises(ValueError, match="pca_components"):
        ds.load_mnist_7vs9(pca_components=0, data_home=_ENV_HOME)


def test_real_mnist_idx_fallback_matches_npz(tmp_path):
    npz = _real_file("mnist", "mnist_7vs9_derived.npz")
    (tmp_path / "mnist").mkdir()
    for stem in _mnist._MNIST_IDX.values():
        src = _real_file("mnist", stem + ".gz")
        (tmp_path / "mnist" / (stem + ".gz")).symlink_to(src)
    a = ds.load_mnist_7vs9(data_home=tmp_path)
    b = ds.load_mnist_7vs9(data_home=npz.parent.parent)
    assert a.filename != b.filename
    for k in ("X_train", "y_train", "X_test", "y_test"):
        np.testing.assert_array_equal(a[k], b[k])


# --------------------------------------------------------------------------
# synthetic data
# --------------------------------------------------------------------------


def test_make_logistic_data_deterministic_and_seed_sensitive():
    X1, y1 = ds.make_logistic_data(3000, random_state=3)
    X2, y2 = ds.make_logistic_data(3000, random_state=3)
    X3, _ = ds.make_logistic_data(3000, random_state=4)
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(y1, y2)
    assert not np.array_equal(X1, X3)
    Xs, _ = ds.make_logistic_data(3000, random_state=np.random.SeedSequence(3))
    np.testing.assert_array_equal(X1, Xs)
    Xg, _ = ds.make_logistic_data(10, random_state=np.random.default_rng(0))
    assert Xg.shape == (10, 28)


def test_make_logistic_data_chunk_independent():
    n = 66000  # crosses a 65,536-row seeding block
    ref_X, ref_y = ds.make_logistic_data(n, 5, random_state=11, chunk_size=65536)
    for chunk in (7, 1000, 10**6):
        X, y = ds.make_logistic_data(n, 5, random_state=11, chunk_size=chunk)
        np.testing.assert_array_equal(X, ref_X)
        np.testing.assert_array_equal(y, ref_y)
    # seeding blocks get different streams
    assert not np.array_equal(ref_X[:100], ref_X[65536 : 65536 + 100])
    # rows depend only on their index: a shorter draw is a prefix
    X, y = ds.make_logistic_data(1234, 5, random_state=11)
    np.testing.assert_array_equal(X, ref_X[:1234])
    np.testing.assert_array_equal(y, ref_y[:1234])


def test_make_logistic_data_float32_matches_float64():
    X64, _ = ds.make_logistic_data(2000, random_state=5)
    X32, y32 = ds.make_logistic_data(2000, random_state=5, dtype=np.float32)
    assert X32.dtype == np.float32 and y32.dtype == np.float64
    np.testing.assert_array_equal(X32, X64.astype(np.float32))


def test_make_logistic_data_is_higgs_like():
    from sklearn.metrics import roc_auc_score

    X, y, coef, b = ds.make_logistic_data(100_000, random_state=0, return_coef=True)
    assert X.shape == (100_000, 28) and coef.shape == (28,)
    assert abs(y.mean() - 0.53) < 0.006
    np.testing.assert_allclose(X.mean(0), 0, atol=0.02)
    np.testing.assert_allclose(X.std(0), 1, atol=0.03)
    kurt = ((X - X.mean(0)) ** 4).mean(0) / X.var(0) ** 2
    assert np.all(kurt > 4)  # heavier tails than a normal (3)
    c = np.corrcoef(X[:, :3].T)
    np.testing.assert_allclose([c[0, 1], c[0, 2]], [0.5, 0.25], atol=0.02)
    auc = roc_auc_score(y, X @ coef + b)
    assert 0.72 < auc < 0.82
    # the logistic MLE recovers the truth
    from sklearn.linear_model import LogisticRegression

    lr = LogisticRegression(C=1e6, max_iter=1000).fit(X[:30000], y[:30000])
    np.testing.assert_allclose(lr.coef_.ravel(), coef, atol=0.08)
    assert abs(lr.intercept_[0] - b) < 0.08


def test_make_logistic_data_custom_coef_and_errors():
    _, y, _, b = ds.make_logistic_data(
        20000, 3, coef=[0, 0, 0], intercept=2.0, random_state=1, return_coef=True
    )
    assert b == 2.0
    assert abs(y.mean() - 1 / (1 + np.exp(-2.0))) < 0.01
    X, y, _coef, b = ds.make_logistic_data(
        50000, 3, coef=[1.0, 0, -1.0], random_state=1, return_coef=True
    )
    assert abs(y.mean() - 0.53) < 0.01  # intercept balanced for the given coef
    with pytest.raises(ValueError, match="coef"):
        ds.make_logistic_data(10, 3, coef=[1.0, 2.0])
    with pytest.raises(ValueError, match="n_samples"):
        ds.make_logistic_data(-1)
    with pytest.raises(ValueError, match="chunk_size"):
        ds.make_logistic_data(10, chunk_size=0)
    with pytest.raises(TypeError, match="random_state"):
        ds.make_logistic_data(10, random_state="seed")
    X, y = ds.make_logistic_data(0, random_state=0)
    assert X.shape == (0, 28) and y.shape == (0,)


def test_make_gaussian_regression():
    X, y, coef = ds.make_gaussian_regression(5000, 4, noise_scale=0.5, random_state=2)
    assert X.shape == (5000, 4) and y.shape == (5000,) and coef.shape == (4,)
    X2, y2, _coef2 = ds.make_gaussian_regression(5000, 4, noise_scale=0.5, random_state=2)
    np.testing.assert_array_equal(X, X2)
    np.testing.assert_array_equal(y, y2)
    beta, *_ = np.linalg.lstsq(X, y, rcond=None)
    np.testing.assert_allclose(beta, coef, atol=0.05)
    resid = y - X @ beta
    assert abs(resid.std() - 0.5) < 0.02
    Xf, yf, c = ds.make_gaussian_regression(
        100, 2, coef=[1.0, -1.0], intercept=3.0, dtype=np.float32, random_state=0
    )
    assert Xf.dtype == np.float32 and yf.dtype == np.float64
    np.testing.assert_array_equal(c, [1.0, -1.0])
    assert abs((yf - Xf.astype(float) @ c).mean() - 3.0) < 0.3
    with pytest.raises(ValueError, match="noise_scale"):
        ds.make_gaussian_regression(10, 2, noise_scale=0)
    with pytest.raises(ValueError, match="coef"):
        ds.make_gaussian_regression(10, 2, coef=[1.0])


# --------------------------------------------------------------------------
# a user's own files: load_file
# --------------------------------------------------------------------------


@pytest.fixture
def xy():
    rng = np.random.default_rng(0)
    return np.round(rng.normal(size=(20, 3)), 4), (rng.random(20) > 0.5).astype(float)


def _write_csv(path, X, y, sep=",", header="a,b,c,label"):
    lines = [header.replace(",", sep)] if header else []
    lines += [sep.join(f"{v:.4f}" for v in row) + f"{sep}{t:g}" for row, t in zip(X, y)]
    text = "\n".join(lines) + "\n"
    if path.suffix == ".gz":
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def test_load_file_csv_header_and_target(tmp_path, xy):
    X, y = xy
    path = _write_csv(tmp_path / "d.csv", X, y)
    d = ds.load_file(path)
    np.testing.assert_array_equal(d.data, X)
    np.testing.assert_array_equal(d.target, y)
    assert d.feature_names == ["a", "b", "c"] and d.format == "csv"
    assert d.data.flags.c_contiguous and d.data_test is None and d.target_test is None
    assert d.DESCR == "d.csv: 20 rows, target column 'label'" and d.filename == str(path)
    for target in ("b", 1, "1", -3):
        d = ds.load_file(path, target=target)
        np.testing.assert_array_equal(d.target, X[:, 1])
        np.testing.assert_array_equal(d.data, np.column_stack([X[:, 0], X[:, 2], y]))
        assert d.feature_names == ["a", "c", "label"]


@pytest.mark.parametrize("name, sep", [("d.tsv", "\t"), ("d.txt", " "), ("d.dat", ";"),
                                       ("d.csv.gz", ",")])
def test_load_file_csv_delimiters_no_header_gzip(tmp_path, xy, name, sep):
    X, y = xy
    d = ds.load_file(_write_csv(tmp_path / name, X, y, sep=sep, header=None))
    np.testing.assert_array_equal(d.data, X)
    np.testing.assert_array_equal(d.target, y)
    assert d.feature_names == ["x0", "x1", "x2"]


def test_load_file_npz_layouts(tmp_path, xy):
    X, y = xy
    np.savez(tmp_path / "a.npz", X=X, y=y)
    np.savez(tmp_path / "b.npz", data=X, target=y, feature_names=np.array(["p", "q", "r"]))
    np.savez(tmp_path / "c.npz", X_train=X, y_train=y, X_test=X[:4], y_test=y[:4])
    a, b, c = (ds.load_file(tmp_path / f"{k}.npz") for k in "abc")
    for d in (a, b, c):
        np.testing.assert_array_equal(d.data, X)
        np.testing.assert_array_equal(d.target, y)
        assert d.format == "npz"
    assert a.feature_names == ["x0", "x1", "x2"] and b.feature_names == ["p", "q", "r"]
    assert a.data_test is None
    np.testing.assert_array_equal(c.data_test, X[:4])
    np.testing.assert_array_equal(c.target_test, y[:4])


def test_load_file_libsvm_by_extension_and_sniffed(tmp_path, xy):
    from sklearn.datasets import dump_svmlight_file

    X, y = xy
    dump_svmlight_file(X, y, str(tmp_path / "d.svm"))
    dump_svmlight_file(X, y, str(tmp_path / "no_extension"))
    for name in ("d.svm", "no_extension"):
        d = ds.load_file(tmp_path / name)
        assert d.format == "libsvm" and d.feature_names == ["x0", "x1", "x2"]
        np.testing.assert_allclose(d.data, X)
        np.testing.assert_array_equal(d.target, y)
    _write_csv(tmp_path / "csv_no_extension", X, y)
    assert ds.load_file(tmp_path / "csv_no_extension").format == "csv"
    assert ds.load_file(tmp_path / "csv_no_extension", format="auto").format == "csv"


def test_load_file_errors(tmp_path, xy):
    X, y = xy
    path = _write_csv(tmp_path / "d.csv", X, y)
    with pytest.raises(ValueError, match=r"^target 'nope' is not a column .*\(columns: a, b, c"):
        ds.load_file(path, target="nope")
    with pytest.raises(ValueError, match="^target 4 is out of range: .* has 4 columns"):
        ds.load_file(path, target=4)
    with pytest.raises(ValueError, match="format must be one of"):
        ds.load_file(path, format="parquet")
    with pytest.raises(ValueError, match="could not read .* as LIBSVM"):
        ds.load_file(path, format="libsvm")
    np.savez(tmp_path / "a.npz", X=X, y=y)
    with pytest.raises(ValueError, match="target applies to CSV files; a.npz is read as npz"):
        ds.load_file(tmp_path / "a.npz", target="y")
    np.savez(tmp_path / "b.npz", X=X, y=y[:5])
    with pytest.raises(ValueError, match="X has 20 rows but y has 5"):
        ds.load_file(tmp_path / "b.npz")
    np.savez(tmp_path / "c.npz", features=X)
    with pytest.raises(ValueError, match=r"must hold arrays 'X' and 'y'.*it has \['features'\]"):
        ds.load_file(tmp_path / "c.npz")
    for text, match in [("", "is empty"), ("a\n1\n2\n", "single column"),
                        ("a,b\nx,1\ny,0\n", "column 'a' .* is not numeric"),
                        ("a,b\n1,\n2,0\n", "missing or non-numeric value in data row 1")]:
        (tmp_path / "e.csv").write_text(text)
        with pytest.raises(ValueError, match=match):
            ds.load_file(tmp_path / "e.csv")


def test_load_file_damaged_files_raise_data_file_error(tmp_path, xy):
    from sklearn.datasets import dump_svmlight_file

    X, y = xy
    X, y = np.tile(X, (200, 1)), np.tile(y, 200)  # big enough to cut inside the data
    csv = _write_csv(tmp_path / "d.csv.gz", X, y)
    dump_svmlight_file(X, y, str(tmp_path / "d.svm"))
    svm = _gz(tmp_path / "d.svm.gz", (tmp_path / "d.svm").read_bytes())
    for path in (csv, svm):
        _truncated(path, path, keep=0.5)
        with pytest.raises(ds.DataFileError, match=f"^{path}: it is truncated .*fetch it again"):
            ds.load_file(path)
    # cut so early that the format sniffing fails already
    early = _truncated(tmp_path / "no_extension", _write_csv(tmp_path / "e.csv.gz", X, y), 0.05)
    with pytest.raises(ds.DataFileError, match="it is truncated"):
        ds.load_file(early)
    np.savez(tmp_path / "a.npz", X=X, y=y)
    npz = _corrupted(tmp_path / "a.npz", tmp_path / "a.npz")
    with pytest.raises(ds.DataFileError, match=f"^{npz}: could not read it as .npz"):
        ds.load_file(npz)
    (tmp_path / "h.csv").write_text("a,b,label\n")
    with pytest.raises(ds.DataFileError, match="holds no data rows"):
        ds.load_file(tmp_path / "h.csv")


def test_load_file_gzip_told_by_content(tmp_path, xy):
    from sklearn.datasets import dump_svmlight_file

    X, y = xy
    csv = tmp_path / "d.csv"
    _write_csv(tmp_path / "d.csv.gz", X, y).rename(csv)  # gzipped, named .csv
    np.testing.assert_array_equal(ds.load_file(csv).data, X)
    dump_svmlight_file(X, y, str(tmp_path / "plain.svm"))
    _gz(tmp_path / "d.svm", (tmp_path / "plain.svm").read_bytes())
    np.testing.assert_allclose(ds.load_file(tmp_path / "d.svm").data, X)
