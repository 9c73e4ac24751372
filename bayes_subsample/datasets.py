"""Real-data loaders and synthetic data generators.

Loaders
-------
The loaders read the datasets in the formats their original distributions
ship, so the same code works on the copies in a shared data folder and on a
user's own download:

============================  ==================================================
:func:`load_covtype`          UCI Covertype ``covtype.data[.gz]``
:func:`load_higgs`            UCI HIGGS ``HIGGS.csv[.gz]`` and its common subsets
:func:`load_kddcup99`         KDD Cup 1999 ``kddcup.data_10_percent[.gz]``
:func:`load_mnist_7vs9`       MNIST digits 7 vs 9 (``mnist_7vs9_derived.npz`` or
                              the original IDX files)
:func:`load_higgs_sample`     7,500 real HIGGS rows shipped with the package
:func:`load_covtype_sample`   20,000 real Covertype rows shipped with the package
============================  ==================================================

Where files are looked for
--------------------------
The *data home* is the ``data_home`` argument, else the environment variable
``BAYES_SUBSAMPLE_DATA``, else ``~/bayes_subsample_data`` (see
:func:`get_data_home`). A file ``<file>`` of dataset ``<subdir>`` (``covtype``,
``higgs``, ``kddcup99``, ``mnist``) is looked for at ``<home>/<subdir>/<file>``
and then at ``<home>/<file>``, compressed (``.gz``) and plain. A missing file
raises :class:`FileNotFoundError` naming the paths tried and where to download
the file. Nothing is downloaded automatically.

Caching and memory mapping
--------------------------
Parsing text is the slow part (full HIGGS is 11 million rows, about 8 GB of
text). Integers are parsed with ``np.loadtxt``; floats with pandas' C parser
when pandas is installed (about three times faster, same values), else with
``np.loadtxt``. With ``cache=True`` the parsed arrays are written once as
``.npy`` files in a cache directory (:func:`get_cache_dir`) and every later
call opens them with ``np.load(..., mmap_mode="r")``: loading is then
instantaneous, the arrays are read-only memory maps, and parallel chains or
joblib workers that open the same file share one copy through the operating
system's page cache. While the cache is being built the rows are streamed to
disk block by block (32 MB of text at a time), so even full HIGGS needs only
about 100 MB of memory to parse. The cache key covers the source file's path,
size and modification time and every option that changes the result;
:func:`clear_cache` deletes the cache.

Targets
-------
Binary targets are float64 arrays of 0.0 / 1.0 (the layout the package's GLM
kernels take directly); multi-class targets are int64. Feature matrices are
C-contiguous float32 or float64 (``dtype``).

Synthetic data
--------------
:func:`make_logistic_data` draws HIGGS-shaped logistic-regression data of any
size in chunks into one preallocated array; :func:`make_gaussian_regression`
draws linear-Gaussian data for tests against exact conjugate posteriors.
Neither adds an intercept column: the package's estimators have
``fit_intercept`` and treat the intercept as a virtual column of ones.
"""

import functools
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import uuid
from pathlib import Path

import numpy as np

from ._seeding import seed_sequence
from sklearn.utils import Bunch

__all__ = [
    "clear_cache",
    "get_cache_dir",
    "get_data_home",
    "load_covtype",
    "load_covtype_sample",
    "load_higgs",
    "load_higgs_sample",
    "load_kddcup99",
    "load_mnist_7vs9",
    "make_gaussian_regression",
    "make_logistic_data",
]

DATA_HOME_ENV = "BAYES_SUBSAMPLE_DATA"
CACHE_DIR_ENV = "BAYES_SUBSAMPLE_CACHE"
DEFAULT_DATA_HOME = "~/bayes_subsample_data"

_PACKAGE_DATA = Path(__file__).resolve().parent / "data"
_BLOCK_BYTES = 32 * 1024 * 1024  # text parsed per block when streaming a file
_CACHE_VERSION = 1

# --------------------------------------------------------------------------
# dataset metadata
# --------------------------------------------------------------------------

_SOURCES = {
    "covtype": {
        "subdir": "covtype",
        "files": ("covtype.data.gz", "covtype.data"),
        "url": "https://archive.ics.uci.edu/ml/machine-learning-databases/covtype/covtype.data.gz",
        "page": "https://archive.ics.uci.edu/dataset/31/covertype",
    },
    "higgs": {
        "subdir": "higgs",
        "files": ("HIGGS.csv.gz", "HIGGS.csv"),
        "url": "https://archive.ics.uci.edu/ml/machine-learning-databases/00280/HIGGS.csv.gz",
        "page": "https://archive.ics.uci.edu/dataset/280/higgs",
    },
    "kddcup99": {
        "subdir": "kddcup99",
        "files": ("kddcup.data_10_percent.gz", "kddcup.data_10_percent"),
        "url": "https://archive.ics.uci.edu/ml/machine-learning-databases/kddcup99-mld/"
        "kddcup.data_10_percent.gz",
        "page": "https://archive.ics.uci.edu/dataset/130/kdd+cup+1999+data",
    },
    "mnist": {
        "subdir": "mnist",
        "files": ("mnist_7vs9_derived.npz",),
        "url": "https://ossci-datasets.s3.amazonaws.com/mnist/ (mirror of the original "
        "http://yann.lecun.com/exdb/mnist/)",
        "page": "http://yann.lecun.com/exdb/mnist/",
    },
}

COVTYPE_FEATURE_NAMES = (
    [
        "Elevation",
        "Aspect",
        "Slope",
        "Horizontal_Distance_To_Hydrology",
        "Vertical_Distance_To_Hydrology",
        "Horizontal_Distance_To_Roadways",
        "Hillshade_9am",
        "Hillshade_Noon",
        "Hillshade_3pm",
        "Horizontal_Distance_To_Fire_Points",
    ]
    + [f"Wilderness_Area_{i}" for i in range(4)]
    + [f"Soil_Type_{i}" for i in range(40)]
)
COVTYPE_CLASS_NAMES = [
    "Spruce/Fir",
    "Lodgepole Pine",
    "Ponderosa Pine",
    "Cottonwood/Willow",
    "Aspen",
    "Douglas-fir",
    "Krummholz",
]
_COVTYPE_N_QUANTITATIVE = 10

HIGGS_FEATURE_NAMES = [
    "lepton_pT",
    "lepton_eta",
    "lepton_phi",
    "missing_energy_magnitude",
    "missing_energy_phi",
]
for _j in range(1, 5):
    HIGGS_FEATURE_NAMES += [f"jet_{_j}_pt", f"jet_{_j}_eta", f"jet_{_j}_phi", f"jet_{_j}_btag"]
HIGGS_FEATURE_NAMES += ["m_jj", "m_jjj", "m_lv", "m_jlv", "m_bb", "m_wbb", "m_wwbb"]
del _j

# header names recognised as the label column of a HIGGS file (case-insensitive)
HIGGS_LABEL_NAMES = (
    "label",
    "target",
    "class",
    "response",
    "y",
    "signal",
    "is_signal",
    "class_label",
)

KDDCUP99_COLUMN_NAMES = [
    "duration", "protocol_type", "service", "flag", "src_bytes", "dst_bytes", "land",
    "wrong_fragment", "urgent", "hot", "num_failed_logins", "logged_in", "num_compromised",
    "root_shell", "su_attempted", "num_root", "num_file_creations", "num_shells",
    "num_access_files", "num_outbound_cmds", "is_host_login", "is_guest_login", "count",
    "srv_count", "serror_rate", "srv_serror_rate", "rerror_rate", "srv_rerror_rate",
    "same_srv_rate", "diff_srv_rate", "srv_diff_host_rate", "dst_host_count",
    "dst_host_srv_count", "dst_host_same_srv_rate", "dst_host_diff_srv_rate",
    "dst_host_same_src_port_rate", "dst_host_srv_diff_host_rate", "dst_host_serror_rate",
    "dst_host_srv_serror_rate", "dst_host_rerror_rate", "dst_host_srv_rerror_rate",
]  # fmt: skip
_KDD_SYMBOLIC = (1, 2, 3)
_KDD_RATE = tuple(range(24, 31)) + tuple(range(33, 41))  # columns written as 0.00 .. 1.00
_KDD_INTEGER = tuple(j for j in range(41) if j not in _KDD_SYMBOLIC and j not in _KDD_RATE)

# --------------------------------------------------------------------------
# locating files
# --------------------------------------------------------------------------


def get_data_home(data_home=None):
    """Return the folder the loaders look for data files in.

    Parameters
    ----------
    data_home : str or path-like, default=None
        Folder to use. If None, the environment variable
        ``BAYES_SUBSAMPLE_DATA`` is used, else ``~/bayes_subsample_data``.
        The folder is not created.

    Returns
    -------
    data_home : pathlib.Path
        The folder, with ``~`` expanded.

    Examples
    --------
    >>> from bayes_subsample.datasets import get_data_home
    >>> str(get_data_home("/tmp/my_data"))
    '/tmp/my_data'
    """
    if data_home is None:
        data_home = os.environ.get(DATA_HOME_ENV) or DEFAULT_DATA_HOME
    return Path(os.path.expanduser(os.fspath(data_home)))


def _candidates(dataset, data_home, files=None):
    src = _SOURCES[dataset]
    home = get_data_home(data_home)
    files = src["files"] if files is None else files
    out = []
    for name in files:
        out += [home / src["subdir"] / name, home / name]
    return home, out


def _find_file(dataset, data_home, files=None, hint=None):
    """First existing candidate path, else a FileNotFoundError saying what to do."""
    home, cands = _candidates(dataset, data_home, files)
    for p in cands:
        if p.is_file():
            return p
    src = _SOURCES[dataset]
    files = src["files"] if files is None else files
    tried = "\n".join(f"  {p}" for p in cands)
    msg = (
        f"Could not find the {dataset} data file {files[0]!r}. Looked for:\n{tried}\n"
        f"Put {files[0]!r} at {home / src['subdir'] / files[0]} (or directly in {home}). "
        f"Download it from {src['url']} (dataset page: {src['page']}). "
        f"The data home is the `data_home` argument, else the environment variable "
        f"{DATA_HOME_ENV}, else {DEFAULT_DATA_HOME}."
    )
    if hint:
        msg += " " + hint
    raise FileNotFoundError(msg)


def _open_binary(path):
    """Open a file for binary reading, transparently gunzipping (by magic bytes)."""
    path = Path(path)
    with open(path, "rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rb")
    return open(path, "rb")


# --------------------------------------------------------------------------
# fast text parsing
# --------------------------------------------------------------------------


def _iter_blocks(path, skip_lines=0, block_bytes=None):
    """Yield byte blocks of whole lines (CR removed), skipping the first lines."""
    block_bytes = _BLOCK_BYTES if block_bytes is None else block_bytes
    with _open_binary(path) as fh:
        rest = b""
        first = True
        while True:
            buf = fh.read(block_bytes)
            if not buf:
                break
            if first and buf.startswith(b"\xef\xbb\xbf"):  # UTF-8 byte-order mark
                buf = buf[3:]
            first = False
            buf = rest + buf
            cut = buf.rfind(b"\n")
            if cut < 0:
                rest = buf
                continue
            block, rest = buf[: cut + 1], buf[cut + 1 :]
            while skip_lines and block:
                nl = block.find(b"\n")
                block = block[nl + 1 :]
                skip_lines -= 1
            if block:
                yield block.replace(b"\r", b"")
        if rest.strip():
            while skip_lines and rest:
                nl = rest.find(b"\n")
                rest = b"" if nl < 0 else rest[nl + 1 :]
                skip_lines -= 1
            if rest.strip():
                yield rest.replace(b"\r", b"")


# Float parsing is the slow part of reading text. pandas' C parser (used when
# pandas is installed) reads floats about 3x faster than np.loadtxt and gives
# the same values; set to False to always use np.loadtxt.
_USE_PANDAS = True


def _pandas_or_none():
    if not _USE_PANDAS:
        return None
    try:
        import pandas
    except ImportError:  # pragma: no cover - pandas is optional
        return None
    return pandas


def _parse_block(block, *, delimiter, dtype, usecols=None, max_rows=None):
    """Parse one block of numeric delimited text into a 2-D array."""
    pd = _pandas_or_none() if np.dtype(dtype).kind == "f" else None
    if pd is None:
        return np.loadtxt(
            io.BytesIO(block),
            delimiter=delimiter,
            dtype=dtype,
            ndmin=2,
            usecols=usecols,
            max_rows=max_rows,
        )
    try:
        frame = pd.read_csv(
            io.BytesIO(block),
            sep=r"\s+" if delimiter is None else delimiter,
            header=None,
            dtype=dtype,
            usecols=usecols,
            nrows=max_rows,
            engine="c",
        )
    except pd.errors.EmptyDataError:
        return np.empty((0, 0 if usecols is None else len(usecols)), dtype=dtype)
    arr = frame.to_numpy(dtype=dtype)
    if np.isnan(arr).any():  # pandas fills short rows with NaN
        row = int(np.nonzero(np.isnan(arr).any(axis=1))[0][0])
        raise ValueError(f"missing or non-numeric value in data row {row} of this block")
    return arr


def _iter_parsed(
    path, *, delimiter, dtype, n_rows=None, skip_lines=0, usecols=None, ncols=None, block_bytes=None
):
    """Parse a delimited numeric text file block by block.

    Integers go through ``np.loadtxt`` (C since NumPy 1.23, about 60 million
    values per second); floats through pandas' C parser when available
    (about 10 million per second) else ``np.loadtxt`` (about 3-6 million).
    """
    remaining = n_rows
    for block in _iter_blocks(path, skip_lines=skip_lines, block_bytes=block_bytes):
        if remaining is not None and remaining <= 0:
            return
        try:
            arr = _parse_block(
                block, delimiter=delimiter, dtype=dtype, usecols=usecols, max_rows=remaining
            )
        except ValueError as exc:
            raise ValueError(f"Could not parse {path} as numeric delimited text: {exc}") from exc
        if ncols is not None and arr.shape[0] and arr.shape[1] != ncols:
            raise ValueError(f"{path}: expected {ncols} columns per line, found {arr.shape[1]}")
        if remaining is not None:
            remaining -= arr.shape[0]
        if arr.shape[0]:
            yield arr


# --------------------------------------------------------------------------
# output sinks: in memory, or streamed to a .npy file for the cache
# --------------------------------------------------------------------------

_NPY_HEADER_BYTES = 128  # fixed .npy header size so the row count can be patched in


def _npy_header(dtype, shape):
    d = {
        "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
        "fortran_order": False,
        "shape": tuple(shape),
    }
    text = repr(d).encode("latin1")
    pad = _NPY_HEADER_BYTES - 10 - len(text) - 1
    if pad < 0:  # pragma: no cover - shapes never get that long
        raise ValueError("npy header too long")
    text += b" " * pad + b"\n"
    return b"\x93NUMPY\x01\x00" + np.uint16(len(text)).tobytes() + text


class _Sink:
    """Collect row blocks of one array, in memory or straight into a ``.npy`` file.

    ``finish`` returns an ndarray (memory) or a writable ``np.memmap`` (file),
    so post-processing such as standardisation can run in place either way.
    """

    def __init__(self, dtype, tail_shape=(), path=None):
        self.dtype = np.dtype(dtype)
        self.tail = tuple(tail_shape)
        self.path = path
        self.n = 0
        self.blocks = []
        self.fh = None
        if path is not None:
            self.fh = open(path, "wb")  # noqa: SIM115 - closed in finish() / abort()
            self.fh.write(_npy_header(self.dtype, (0,) + self.tail))

    def append(self, a):
        a = np.ascontiguousarray(a, dtype=self.dtype)
        if a.shape[1:] != self.tail:
            raise ValueError(f"block shape {a.shape} does not match {self.tail}")
        self.n += a.shape[0]
        if self.fh is None:
            self.blocks.append(a)
        else:
            self.fh.write(a.tobytes())

    def finish(self):
        if self.fh is None:
            if len(self.blocks) == 1:
                return self.blocks.pop()
            if not self.blocks:
                return np.empty((0,) + self.tail, dtype=self.dtype)
            out = np.concatenate(self.blocks)
            self.blocks = []
            return out
        self.fh.seek(0)
        self.fh.write(_npy_header(self.dtype, (self.n,) + self.tail))
        self.fh.close()
        self.fh = None
        if self.n == 0:
            return np.empty((0,) + self.tail, dtype=self.dtype)
        return np.load(self.path, mmap_mode="r+")

    def abort(self):
        if self.fh is not None:
            self.fh.close()
            self.fh = None


def _standardize_inplace(X, cols, chunk_rows=1 << 16):
    """Centre and scale columns ``cols`` of X in place; return (mean, scale).

    Statistics are accumulated in float64 block by block (no full-size
    temporaries); constant columns get scale 1.
    """
    cols = np.asarray(cols, dtype=np.intp)
    n = X.shape[0]
    mean = np.zeros(X.shape[1])
    scale = np.ones(X.shape[1])
    if n == 0 or cols.size == 0:
        return mean, scale
    s = np.zeros(cols.size)
    for i in range(0, n, chunk_rows):
        s += X[i : i + chunk_rows, cols].sum(axis=0, dtype=np.float64)
    m = s / n
    ss = np.zeros(cols.size)
    for i in range(0, n, chunk_rows):
        ss += ((X[i : i + chunk_rows, cols].astype(np.float64) - m) ** 2).sum(axis=0)
    sd = np.sqrt(ss / n)
    sd[sd == 0] = 1.0
    mean[cols] = m
    scale[cols] = sd
    for i in range(0, n, chunk_rows):
        blk = X[i : i + chunk_rows, cols].astype(np.float64)
        X[i : i + chunk_rows, cols] = (blk - m) / sd
    return mean, scale


# --------------------------------------------------------------------------
# cache
# --------------------------------------------------------------------------


def get_cache_dir(cache_dir=None):
    """Return the folder where ``cache=True`` stores parsed arrays.

    Parameters
    ----------
    cache_dir : str or path-like, default=None
        Folder to use. If None: the environment variable
        ``BAYES_SUBSAMPLE_CACHE``, else ``$XDG_CACHE_HOME/bayes_subsample``,
        else ``~/.cache/bayes_subsample``. It is kept apart from the data home
        because data folders are often read-only.

    Returns
    -------
    cache_dir : pathlib.Path

    Examples
    --------
    >>> from bayes_subsample.datasets import get_cache_dir
    >>> str(get_cache_dir("/tmp/bs_cache"))
    '/tmp/bs_cache'
    """
    if cache_dir is None:
        cache_dir = os.environ.get(CACHE_DIR_ENV)
    if cache_dir is None:
        xdg = os.environ.get("XDG_CACHE_HOME") or os.path.join("~", ".cache")
        cache_dir = os.path.join(xdg, "bayes_subsample")
    return Path(os.path.expanduser(os.fspath(cache_dir)))


_CACHE_ENTRY = re.compile(r"^[a-z0-9_]+-[0-9a-f]{16}$")


def clear_cache(cache_dir=None):
    """Delete the arrays cached by the loaders; return how many entries were removed.

    Only entries this module created (``<dataset>-<hash>`` folders) are removed.

    Parameters
    ----------
    cache_dir : str or path-like, default=None
        See :func:`get_cache_dir`.

    Returns
    -------
    n_removed : int

    Examples
    --------
    >>> from bayes_subsample.datasets import clear_cache
    >>> clear_cache("/tmp/bs_cache_that_does_not_exist")
    0
    """
    root = get_cache_dir(cache_dir)
    if not root.is_dir():
        return 0
    n = 0
    for p in root.iterdir():
        if p.is_dir() and _CACHE_ENTRY.match(p.name) and (p / "meta.json").is_file():
            shutil.rmtree(p, ignore_errors=True)
            n += 1
    return n


def _cache_entry(name, source, options, cache_dir):
    st = Path(source).stat()
    key = json.dumps(
        {
            "v": _CACHE_VERSION,
            "name": name,
            "source": str(Path(source).resolve()),
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "options": options,
        },
        sort_keys=True,
        default=str,
    )
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return get_cache_dir(cache_dir) / f"{name}-{digest}"


def _load_or_build(name, source, options, build, cache, cache_dir):
    """Run ``build(make_sink) -> (arrays: dict, meta: dict)``, through the cache if asked.

    Without the cache the arrays are plain ndarrays. With it, they are
    read-only memory maps of ``.npy`` files written on the first call.
    """
    if not cache:
        arrays, meta = build(lambda key, dtype, tail=(): _Sink(dtype, tail))
        return arrays, meta
    entry = _cache_entry(name, source, options, cache_dir)
    if not (entry / "meta.json").is_file():
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = entry.parent / f".{entry.name}.tmp-{uuid.uuid4().hex}"
        tmp.mkdir()
        sinks = []

        def make_sink(key, dtype, tail=()):
            s = _Sink(dtype, tail, path=tmp / f"{key}.npy")
            sinks.append(s)
            return s

        try:
            arrays, meta = build(make_sink)
            for key, a in arrays.items():
                if isinstance(a, np.memmap):
                    a.flush()
                elif isinstance(a, np.ndarray):
                    np.save(tmp / f"{key}.npy", a, allow_pickle=False)
            del arrays
            meta = dict(meta, _arrays=sorted(p.stem for p in tmp.glob("*.npy")))
            (tmp / "meta.json").write_text(json.dumps(meta, default=_json_default))
            try:
                os.replace(tmp, entry)
            except OSError:  # another process won the race
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            for s in sinks:
                s.abort()
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    meta = json.loads((entry / "meta.json").read_text())
    arrays = {}
    for key in meta.pop("_arrays"):
        arrays[key] = np.load(entry / f"{key}.npy", mmap_mode="r", allow_pickle=False)
    return arrays, meta


def _json_default(o):
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    return str(o)


# --------------------------------------------------------------------------
# argument checks
# --------------------------------------------------------------------------


def _check_dtype(dtype):
    dt = np.dtype(dtype)
    if dt not in (np.dtype(np.float32), np.dtype(np.float64)):
        raise ValueError(f"dtype must be np.float32 or np.float64, got {dtype!r}")
    return dt


def _check_n_rows(n_rows):
    if n_rows is None:
        return None
    if isinstance(n_rows, (bool, np.bool_)) or not isinstance(n_rows, (int, np.integer)):
        raise TypeError(f"n_rows must be a positive int or None, got {n_rows!r}")
    if n_rows < 1:
        raise ValueError(f"n_rows must be a positive int or None, got {n_rows}")
    return int(n_rows)


def _with_intercept(X_block, dtype):
    out = np.empty((X_block.shape[0], X_block.shape[1] + 1), dtype=dtype)
    out[:, :-1] = X_block
    out[:, -1] = 1
    return out


# --------------------------------------------------------------------------
# Covertype
# --------------------------------------------------------------------------

_COVTYPE_DESCR = """\
UCI Covertype (Blackard, Colorado State University; CC BY 4.0)
581,012 forest cells of 30 x 30 m, 54 cartographic features (10 quantitative,
4 wilderness-area and 40 soil-type indicators) and the cover type 1-7.
Binary task (binary=True): y = 1 for class 2, Lodgepole Pine (283,301
positives), as LIBSVM's covtype.binary. Source: {source}
"""


def load_covtype(
    binary=True,
    *,
    data_home=None,
    dtype=np.float64,
    standardize=False,
    add_intercept=False,
    n_rows=None,
    cache=False,
    cache_dir=None,
    return_X_y=False,
):
    """Load UCI Covertype from ``covtype.data`` or ``covtype.data.gz``.

    The file is the UCI original: 581,012 comma-separated lines of 54 integer
    features and the class (1-7) last, no header. It is looked for at
    ``<data_home>/covtype/covtype.data.gz`` and ``<data_home>/covtype.data.gz``
    (and the uncompressed names); see :func:`get_data_home`. The whole file
    parses in about one second.

    Parameters
    ----------
    binary : bool, default=True
        If True, ``target`` is float64 with 1.0 for class 2 (Lodgepole Pine)
        and 0.0 otherwise. If False, ``target`` is the int64 class 1-7.
    data_home : str or path-like, default=None
        Folder holding the data; see :func:`get_data_home`.
    dtype : {np.float64, np.float32}, default=np.float64
        Dtype of the feature matrix.
    standardize : bool, default=False
        Centre and scale the 10 quantitative columns to mean 0 and standard
        deviation 1 over the rows loaded. The 44 indicator columns are left
        as 0/1 (scaling rare soil types would create huge values). The
        statistics are returned as ``feature_mean`` and ``feature_scale``.
    add_intercept : bool, default=False
        Append a last column of ones (named ``"intercept"``). The package's
        estimators do not need it (they have ``fit_intercept``).
    n_rows : int, default=None
        Read only the first ``n_rows`` lines.
    cache : bool, default=False
        Parse once into ``.npy`` files in :func:`get_cache_dir` and return
        read-only memory maps (see the module docstring).
    cache_dir : str or path-like, default=None
        Cache folder; see :func:`get_cache_dir`.
    return_X_y : bool, default=False
        Return ``(data, target)`` instead of a Bunch.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``data`` (n, 54[+1]), ``target`` (n,), ``feature_names``,
        ``target_names``, ``feature_mean`` and ``feature_scale`` (None unless
        ``standardize``), ``filename``, ``DESCR``.
    (data, target) : tuple if ``return_X_y`` is True.

    Raises
    ------
    FileNotFoundError
        If the file is in none of the places looked at; the message says
        where to put it and where to download it.

    See Also
    --------
    load_covtype_sample : 20,000 rows shipped with the package.

    Examples
    --------
    >>> from bayes_subsample.datasets import load_covtype
    >>> X, y = load_covtype(return_X_y=True, n_rows=1000)  # doctest: +SKIP
    >>> X.shape                                              # doctest: +SKIP
    (1000, 54)
    """
    path = _find_file("covtype", data_home)
    return _load_covtype_file(
        path,
        binary=binary,
        dtype=dtype,
        standardize=standardize,
        add_intercept=add_intercept,
        n_rows=n_rows,
        cache=cache,
        cache_dir=cache_dir,
        return_X_y=return_X_y,
        what="covtype",
    )


def load_covtype_sample(
    binary=True, *, dtype=np.float64, standardize=False, add_intercept=False, return_X_y=False
):
    """Load the 20,000 real Covertype rows shipped with the package.

    The rows are a fixed uniformly random subset (sampled without
    replacement, kept in file order) of UCI ``covtype.data``, stored in the
    original format; ``bayes_subsample/data/README.md`` has the recipe and
    licence (CC BY 4.0). Needs no download.

    Parameters
    ----------
    binary, dtype, standardize, add_intercept, return_X_y
        As in :func:`load_covtype`.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch` or tuple
        As in :func:`load_covtype`, with 20,000 rows.

    Examples
    --------
    >>> from bayes_subsample.datasets import load_covtype_sample
    >>> X, y = load_covtype_sample(return_X_y=True)
    >>> X.shape
    (20000, 54)
    >>> sorted(set(y.tolist()))
    [0.0, 1.0]
    """
    path = _PACKAGE_DATA / "covtype_sample_20k.data.gz"
    return _load_covtype_file(
        path,
        binary=binary,
        dtype=dtype,
        standardize=standardize,
        add_intercept=add_intercept,
        n_rows=None,
        cache=False,
        cache_dir=None,
        return_X_y=return_X_y,
        what="covtype_sample",
    )


def _load_covtype_file(
    path, *, binary, dtype, standardize, add_intercept, n_rows, cache, cache_dir, return_X_y, what
):
    dtype = _check_dtype(dtype)
    n_rows = _check_n_rows(n_rows)
    nf = 54 + bool(add_intercept)
    options = {
        "binary": bool(binary),
        "dtype": dtype.name,
        "standardize": bool(standardize),
        "add_intercept": bool(add_intercept),
        "n_rows": n_rows,
    }

    def build(make_sink):
        xs = make_sink("data", dtype, (nf,))
        ys = make_sink("target", np.float64 if binary else np.int64)
        for arr in _iter_parsed(path, delimiter=",", dtype=np.int32, n_rows=n_rows, ncols=55):
            cls = arr[:, 54]
            if cls.min() < 1 or cls.max() > 7:
                raise ValueError(
                    f"{path}: cover type must be in 1..7, found {cls.min()}..{cls.max()}"
                )
            xs.append(_with_intercept(arr[:, :54], dtype) if add_intercept else arr[:, :54])
            ys.append(cls == 2 if binary else cls)
        X, y = xs.finish(), ys.finish()
        meta = {}
        if standardize:
            mean, scale = _standardize_inplace(X, range(_COVTYPE_N_QUANTITATIVE))
            meta = {"feature_mean": mean.tolist(), "feature_scale": scale.tolist()}
        return {"data": X, "target": y}, meta

    arrays, meta = _load_or_build(what, path, options, build, cache, cache_dir)
    X, y = arrays["data"], arrays["target"]
    if return_X_y:
        return X, y
    names = COVTYPE_FEATURE_NAMES + (["intercept"] if add_intercept else [])
    return Bunch(
        data=X,
        target=y,
        feature_names=names,
        target_names=(
            ["not Lodgepole Pine", "Lodgepole Pine"] if binary else list(COVTYPE_CLASS_NAMES)
        ),
        feature_mean=np.asarray(meta["feature_mean"]) if "feature_mean" in meta else None,
        feature_scale=np.asarray(meta["feature_scale"]) if "feature_scale" in meta else None,
        filename=str(path),
        DESCR=_COVTYPE_DESCR.format(source=path),
    )


# --------------------------------------------------------------------------
# HIGGS
# --------------------------------------------------------------------------

_HIGGS_DESCR = """\
UCI HIGGS (Baldi, Sadowski, Whiteson 2014; CC BY 4.0)
Monte Carlo collision events: label 1 = signal (Higgs boson process), 0 =
background; 21 low-level kinematic features and 7 high-level invariant masses
(28 in all). The full set has 11,000,000 rows; about 53% are signal.
Source: {source}  (layout: {layout})
"""


def _sniff_higgs_layout(path, label_column="auto", n_cols=29):
    """Work out delimiter, header and label column of a HIGGS-like text file.

    Rules (documented in :func:`load_higgs`): the delimiter is a tab if the
    first line has one, else a comma, else whitespace; the first line is a
    header if any of its fields is not a number; the label column is the
    header field named one of ``HIGGS_LABEL_NAMES`` (case-insensitive),
    else the first column if its values in the first lines are all 0/1,
    else the last column if those are.
    """
    with _open_binary(path) as fh:
        head = fh.read(1 << 16)
    full = len(head) < 1 << 16
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    if not head.strip():
        raise ValueError(f"{path} is empty")
    raw_lines = head.replace(b"\r", b"").split(b"\n")
    if not full:
        raw_lines = raw_lines[:-1]  # last line may be cut
    first_line = next(i for i, ln in enumerate(raw_lines) if ln.strip())
    lines = [ln for ln in raw_lines if ln.strip()]
    first = lines[0].decode("latin1")
    delimiter = "\t" if "\t" in first else ("," if "," in first else None)

    def split(line):
        return [f.strip().strip("\"'") for f in line.split(delimiter)]

    fields = split(first)
    try:
        [float(f) for f in fields]
        header = None
    except ValueError:
        header = fields
    data_lines = lines[1:] if header is not None else lines
    if not data_lines:
        raise ValueError(f"{path} has no data rows")
    ncols = len(split(data_lines[0].decode("latin1")))
    if ncols != n_cols:
        raise ValueError(
            f"{path}: a HIGGS file has {n_cols} columns (label + 28 features), "
            f"found {ncols} (delimiter {delimiter!r})"
        )
    if header is not None and len(header) != ncols:
        raise ValueError(f"{path}: header has {len(header)} names but rows have {ncols} fields")

    if isinstance(label_column, str) and label_column not in ("auto", "first", "last"):
        if header is None:
            raise ValueError(
                f"label_column={label_column!r} names a column but {path} has no header"
            )
        low = [h.lower() for h in header]
        if label_column.lower() not in low:
            raise ValueError(f"{path}: no column named {label_column!r}; header is {header}")
        label = low.index(label_column.lower())
    elif label_column == "first":
        label = 0
    elif label_column == "last":
        label = ncols - 1
    elif label_column == "auto":
        label = None
        if header is not None:
            hits = [j for j, h in enumerate(header) if h.lower() in HIGGS_LABEL_NAMES]
            if len(hits) > 1:
                raise ValueError(
                    f"{path}: several possible label columns in header {header}; pass label_column="
                )
            if hits:
                label = hits[0]
        if label is None:
            try:
                sample = np.loadtxt(
                    io.BytesIO(b"\n".join(data_lines[:200])), delimiter=delimiter, ndmin=2
                )
            except ValueError as exc:
                raise ValueError(
                    f"Could not parse {path} as numeric delimited text: {exc}"
                ) from exc
            is01 = [np.isin(sample[:, j], (0.0, 1.0)).all() for j in (0, ncols - 1)]
            if is01[0]:
                label = 0
            elif is01[1]:
                label = ncols - 1
            else:
                raise ValueError(
                    f"{path}: cannot tell which column is the label (neither the first "
                    "nor the last holds only 0/1); pass label_column="
                )
    elif isinstance(label_column, (int, np.integer)) and not isinstance(label_column, bool):
        label = int(label_column)
        if not -ncols <= label < ncols:
            raise ValueError(f"label_column={label_column} out of range for {ncols} columns")
        label %= ncols
    else:
        raise ValueError(
            "label_column must be 'auto', 'first', 'last', a column index or a header name, "
            f"got {label_column!r}"
        )
    return {
        "delimiter": delimiter,
        "header": header,
        "label_column": label,
        "n_columns": ncols,
        "skip_lines": 0 if header is None else first_line + 1,
    }


def _load_higgs_file(
    path,
    *,
    dtype,
    n_rows,
    standardize,
    add_intercept,
    label_column,
    cache,
    cache_dir,
    return_X_y,
    what,
):
    dtype = _check_dtype(dtype)
    n_rows = _check_n_rows(n_rows)
    layout = _sniff_higgs_layout(path, label_column)
    lab = layout["label_column"]
    feat = [j for j in range(layout["n_columns"]) if j != lab]
    nf = 28 + bool(add_intercept)
    options = {
        "dtype": dtype.name,
        "standardize": bool(standardize),
        "add_intercept": bool(add_intercept),
        "n_rows": n_rows,
        "label_column": lab,
    }

    def build(make_sink):
        xs = make_sink("data", dtype, (nf,))
        ys = make_sink("target", np.float64)
        skip = layout["skip_lines"]
        for arr in _iter_parsed(
            path,
            delimiter=layout["delimiter"],
            dtype=dtype,
            n_rows=n_rows,
            skip_lines=skip,
            ncols=layout["n_columns"],
        ):
            y = arr[:, lab]
            if not np.isin(y, (0.0, 1.0)).all():
                bad = np.unique(y[~np.isin(y, (0.0, 1.0))])[:5]
                raise ValueError(f"{path}: label column {lab} must hold 0/1, found {bad}")
            if lab == 0:
                Xb = arr[:, 1:]
            elif lab == arr.shape[1] - 1:
                Xb = arr[:, :-1]
            else:
                Xb = arr[:, feat]
            xs.append(_with_intercept(Xb, dtype) if add_intercept else Xb)
            ys.append(y)
        X, y = xs.finish(), ys.finish()
        meta = {}
        if standardize:
            mean, scale = _standardize_inplace(X, range(28))
            meta = {"feature_mean": mean.tolist(), "feature_scale": scale.tolist()}
        return {"data": X, "target": y}, meta

    arrays, meta = _load_or_build(what, path, options, build, cache, cache_dir)
    X, y = arrays["data"], arrays["target"]
    if return_X_y:
        return X, y
    lay = {
        "delimiter": layout["delimiter"],
        "has_header": layout["header"] is not None,
        "label_column": lab,
    }
    return Bunch(
        data=X,
        target=y,
        feature_names=HIGGS_FEATURE_NAMES + (["intercept"] if add_intercept else []),
        target_names=["background", "signal"],
        feature_mean=np.asarray(meta["feature_mean"]) if "feature_mean" in meta else None,
        feature_scale=np.asarray(meta["feature_scale"]) if "feature_scale" in meta else None,
        header=layout["header"],
        layout=lay,
        filename=str(path),
        DESCR=_HIGGS_DESCR.format(source=path, layout=lay),
    )


def load_higgs(
    path=None,
    *,
    data_home=None,
    dtype=np.float64,
    n_rows=None,
    standardize=False,
    add_intercept=False,
    label_column="auto",
    cache=False,
    cache_dir=None,
    return_X_y=False,
):
    """Load UCI HIGGS from the full ``HIGGS.csv[.gz]`` or any of its common subsets.

    Layouts read (plain or gzip, detected by content, not by name):

    * UCI ``HIGGS.csv.gz``: comma-separated, no header, label first;
    * LightGBM's ``binary.train`` / ``binary.test``: tab-separated, no
      header, label first;
    * H2O's ``higgs_train_10k.csv`` / ``higgs_test_5k.csv``: comma-separated,
      label first (these copies carry no header line; one with a header is
      read too);
    * SAS Viya's ``higgs.csv``: comma-separated, header, label LAST.

    Detection: the delimiter is a tab if the first line contains one, else a
    comma, else whitespace. The first line is a header if any of its fields
    is not a number. With ``label_column="auto"`` the label is the header
    field named one of ``label``, ``target``, ``class``, ``response``, ``y``,
    ``signal``, ``is_signal``, ``class_label`` (case-insensitive); without
    such a name, the first column if its first 200 values are all 0/1, else
    the last column if its are; otherwise an error asks for
    ``label_column``. Every row must have 29 fields and every label must be
    0 or 1, else ValueError. Features keep the UCI order
    (:data:`HIGGS_FEATURE_NAMES`); jet 1's b-tag is column 8.

    Parameters
    ----------
    path : str or path-like, default=None
        File to read. A name that is not an existing path is looked up in the
        data home like the default. If None, ``HIGGS.csv.gz`` (or
        ``HIGGS.csv``) is looked for at ``<data_home>/higgs/`` and
        ``<data_home>/``. There is no silent fallback to the shipped sample:
        use :func:`load_higgs_sample` for that.
    data_home : str or path-like, default=None
        See :func:`get_data_home`.
    dtype : {np.float64, np.float32}, default=np.float64
        Dtype of the feature matrix; values are parsed straight into it, so
        float32 halves the memory of full HIGGS (1.2 GB instead of 2.5 GB).
    n_rows : int, default=None
        Read only the first ``n_rows`` data rows.
    standardize : bool, default=False
        Centre and scale the 28 features to mean 0 and standard deviation 1
        over the rows loaded (in place, in blocks, no full-size temporaries);
        the statistics are returned as ``feature_mean``/``feature_scale``.
    add_intercept : bool, default=False
        Append a last column of ones.
    label_column : 'auto', 'first', 'last', int or str, default='auto'
        Which column holds the label; a str other than the keywords is a
        header name.
    cache : bool, default=False
        Parse once into ``.npy`` files in :func:`get_cache_dir`, streaming
        block by block (full HIGGS then needs about 100 MB of RAM besides
        the output while parsing, which takes a few minutes, once), and
        return read-only memory maps.
        Recommended for the full file.
    cache_dir : str or path-like, default=None
        See :func:`get_cache_dir`.
    return_X_y : bool, default=False
        Return ``(data, target)`` instead of a Bunch.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``data`` (n, 28[+1]), ``target`` float64 0/1 (1 = signal),
        ``feature_names``, ``target_names``, ``feature_mean``,
        ``feature_scale``, ``header`` (names in the file, or None), ``layout``
        (what was detected), ``filename``, ``DESCR``.
    (data, target) : tuple if ``return_X_y`` is True.

    Raises
    ------
    FileNotFoundError
        If the file cannot be found; the message says where to put it and
        where to download it.
    ValueError
        If the file does not have the HIGGS layout.

    Examples
    --------
    >>> from bayes_subsample.datasets import load_higgs
    >>> X, y = load_higgs(n_rows=1000, return_X_y=True)  # doctest: +SKIP
    >>> X.shape                                           # doctest: +SKIP
    (1000, 28)
    """
    if path is None:
        path = _find_file(
            "higgs",
            data_home,
            hint="For a small real sample that needs no "
            "download use bayes_subsample.datasets.load_higgs_sample().",
        )
    else:
        p = Path(os.path.expanduser(os.fspath(path)))
        path = p if p.is_file() else _find_file("higgs", data_home, files=(p.name,))
    return _load_higgs_file(
        path,
        dtype=dtype,
        n_rows=n_rows,
        standardize=standardize,
        add_intercept=add_intercept,
        label_column=label_column,
        cache=cache,
        cache_dir=cache_dir,
        return_X_y=return_X_y,
        what="higgs",
    )


_HIGGS_SAMPLE_FILES = {
    "train": "higgs_lightgbm_binary.train.gz",
    "test": "higgs_lightgbm_binary.test.gz",
}


def load_higgs_sample(
    split="train", *, dtype=np.float64, standardize=False, add_intercept=False, return_X_y=False
):
    """Load the 7,500 real HIGGS rows shipped with the package.

    These are UCI HIGGS rows 1-7000 (``split="train"``) and 7001-7500
    (``split="test"``), features rounded to 3 decimals, exactly as LightGBM
    ships them in ``examples/binary_classification`` (MIT licence; the data
    are UCI HIGGS, CC BY 4.0). Needs no download.

    Parameters
    ----------
    split : {'train', 'test', 'all'}, default='train'
        Which rows; ``'all'`` stacks train then test (7,500 rows).
    dtype, standardize, add_intercept, return_X_y
        As in :func:`load_higgs`. With ``standardize`` the statistics come
        from the rows returned; to standardise test rows with training
        statistics use the returned ``feature_mean``/``feature_scale``.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch` or tuple
        As in :func:`load_higgs`.

    Examples
    --------
    >>> from bayes_subsample.datasets import load_higgs_sample
    >>> X, y = load_higgs_sample(return_X_y=True)
    >>> X.shape
    (7000, 28)
    >>> round(float(y.mean()), 2)
    0.53
    """
    if split not in ("train", "test", "all"):
        raise ValueError(f"split must be 'train', 'test' or 'all', got {split!r}")
    kw = {
        "dtype": dtype,
        "n_rows": None,
        "standardize": False,
        "add_intercept": False,
        "label_column": "first",
        "cache": False,
        "cache_dir": None,
        "return_X_y": False,
        "what": "higgs_sample",
    }
    parts = [
        _load_higgs_file(_PACKAGE_DATA / _HIGGS_SAMPLE_FILES[s], **kw)
        for s in (("train", "test") if split == "all" else (split,))
    ]
    b = parts[0]
    if len(parts) > 1:
        b.data = np.concatenate([p.data for p in parts])
        b.target = np.concatenate([p.target for p in parts])
        b.filename = [p.filename for p in parts]
    if standardize:
        b.feature_mean, b.feature_scale = _standardize_inplace(b.data, range(28))
    if add_intercept:
        b.data = _with_intercept(b.data, b.data.dtype)
        b.feature_names = b.feature_names + ["intercept"]
        if standardize:
            b.feature_mean = np.r_[b.feature_mean, 0.0]
            b.feature_scale = np.r_[b.feature_scale, 1.0]
    b.DESCR = (
        f"HIGGS sample shipped with bayes_subsample (split={split!r}): UCI HIGGS rows "
        "1-7000 (train) and 7001-7500 (test) as in LightGBM's examples.\n" + b.DESCR
    )
    if return_X_y:
        return b.data, b.target
    return b


# --------------------------------------------------------------------------
# KDD Cup 1999
# --------------------------------------------------------------------------

_KDD_DESCR = """\
KDD Cup 1999, 10% subset (UCI; CC BY 4.0)
494,021 network connections, 41 features (3 symbolic: protocol_type, service,
flag, one-hot encoded here in place), label 'normal.' or one of 22 attack
types. target = 1.0 for an attack, 0.0 for normal (about 80% attacks).
Source: {source}
"""


def load_kddcup99(
    *,
    data_home=None,
    dtype=np.float64,
    standardize=False,
    add_intercept=False,
    n_rows=None,
    cache=False,
    cache_dir=None,
    return_X_y=False,
):
    """Load KDD Cup 1999 (10% subset) from ``kddcup.data_10_percent[.gz]``.

    The file is the UCI original: comma-separated, 41 features and the label
    (``normal.`` or an attack name such as ``smurf.``) last, no header. It is
    looked for at ``<data_home>/kddcup99/`` and ``<data_home>/``.

    Encoding: the symbolic columns 1, 2, 3 (``protocol_type``, ``service``,
    ``flag``) are one-hot encoded in place, one column per value seen in the
    rows read, in sorted order, named like ``"service=http"`` (118 columns
    for the whole 10% file: 38 numeric + 3 + 66 + 11). ``target`` is 1.0 for
    an attack and 0.0 for ``normal.``; ``attack_type`` holds the label text
    without the final dot.

    Parameters
    ----------
    data_home : str or path-like, default=None
        See :func:`get_data_home`.
    dtype : {np.float64, np.float32}, default=np.float64
        Dtype of the feature matrix.
    standardize : bool, default=False
        Centre and scale the 38 numeric columns (mean 0, sd 1 over the rows
        read; constant columns such as ``num_outbound_cmds`` become 0). The
        one-hot columns are left as 0/1. Byte counts are very skewed; consider
        ``np.log1p`` on them first if that matters.
    add_intercept : bool, default=False
        Append a last column of ones.
    n_rows : int, default=None
        Read only the first ``n_rows`` lines (the one-hot columns then cover
        only the values seen in them).
    cache, cache_dir : see :func:`load_covtype`.
    return_X_y : bool, default=False
        Return ``(data, target)`` instead of a Bunch.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``data``, ``target``, ``attack_type``, ``feature_names``,
        ``categories`` (dict column -> values), ``feature_mean``,
        ``feature_scale``, ``filename``, ``DESCR``.
    (data, target) : tuple if ``return_X_y`` is True.

    Examples
    --------
    >>> from bayes_subsample.datasets import load_kddcup99
    >>> X, y = load_kddcup99(n_rows=1000, return_X_y=True)  # doctest: +SKIP
    """
    path = _find_file("kddcup99", data_home)
    dtype = _check_dtype(dtype)
    n_rows = _check_n_rows(n_rows)
    options = {
        "dtype": dtype.name,
        "standardize": bool(standardize),
        "add_intercept": bool(add_intercept),
        "n_rows": n_rows,
    }

    def build(make_sink):
        ints, rates, syms = [], [], []
        for block in _iter_blocks(path):
            remaining = None if n_rows is None else n_rows - sum(len(s) for s in syms)
            if remaining is not None and remaining <= 0:
                break
            kw = {"delimiter": ",", "ndmin": 2, "max_rows": remaining}
            try:
                ints.append(
                    np.loadtxt(io.BytesIO(block), dtype=np.int64, usecols=_KDD_INTEGER, **kw)
                )
                rates.append(
                    np.loadtxt(io.BytesIO(block), dtype=np.float64, usecols=_KDD_RATE, **kw)
                )
                syms.append(np.loadtxt(io.BytesIO(block), dtype=str, usecols=(1, 2, 3, 41), **kw))
            except ValueError as exc:
                raise ValueError(f"Could not parse {path} as KDD Cup 99 data: {exc}") from exc
        ints = np.concatenate(ints)
        rates = np.concatenate(rates)
        syms = np.concatenate(syms)
        n = syms.shape[0]
        categories, codes = {}, {}
        for k, j in enumerate(_KDD_SYMBOLIC):
            cats, inv = np.unique(syms[:, k], return_inverse=True)
            categories[KDDCUP99_COLUMN_NAMES[j]] = cats.tolist()
            codes[j] = inv.ravel()
        names, numeric_cols = [], []
        for j, name in enumerate(KDDCUP99_COLUMN_NAMES):
            if j in _KDD_SYMBOLIC:
                names += [f"{name}={c}" for c in categories[name]]
            else:
                numeric_cols.append(len(names))
                names.append(name)
        X = np.zeros((n, len(names) + bool(add_intercept)), dtype=dtype)
        col = 0
        for j, name in enumerate(KDDCUP99_COLUMN_NAMES):
            if j in _KDD_SYMBOLIC:
                X[np.arange(n), col + codes[j]] = 1
                col += len(categories[name])
            else:
                X[:, col] = (
                    ints[:, _KDD_INTEGER.index(j)]
                    if j in _KDD_INTEGER
                    else rates[:, _KDD_RATE.index(j)]
                )
                col += 1
        if add_intercept:
            X[:, -1] = 1
            names.append("intercept")
        labels = np.char.rstrip(syms[:, 3], ".")
        y = (labels != "normal").astype(np.float64)
        meta = {"feature_names": names, "categories": categories}
        if standardize:
            mean, scale = _standardize_inplace(X, numeric_cols)
            meta.update(feature_mean=mean.tolist(), feature_scale=scale.tolist())
        return {"data": X, "target": y, "attack_type": labels}, meta

    arrays, meta = _load_or_build("kddcup99", path, options, build, cache, cache_dir)
    if return_X_y:
        return arrays["data"], arrays["target"]
    return Bunch(
        data=arrays["data"],
        target=arrays["target"],
        attack_type=arrays["attack_type"],
        feature_names=meta["feature_names"],
        target_names=["normal", "attack"],
        categories=meta["categories"],
        feature_mean=np.asarray(meta["feature_mean"]) if "feature_mean" in meta else None,
        feature_scale=np.asarray(meta["feature_scale"]) if "feature_scale" in meta else None,
        filename=str(path),
        DESCR=_KDD_DESCR.format(source=path),
    )


# --------------------------------------------------------------------------
# MNIST 7 vs 9
# --------------------------------------------------------------------------

_MNIST_IDX = {
    "X_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "X_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}


def _read_idx(path):
    """Read an IDX file (the original MNIST format), gzipped or not."""
    with _open_binary(path) as fh:
        raw = fh.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(f"{path} is not an unsigned-byte IDX file")
    ndim = raw[3]
    shape = tuple(int(v) for v in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise ValueError(f"{path}: header says shape {shape} but holds {data.size} bytes")
    return data.reshape(shape)


def _mnist_7vs9_arrays(data_home):
    home, cands = _candidates("mnist", data_home)
    for p in cands:
        if p.is_file():
            with np.load(p) as z:
                missing = {"X_train", "y_train", "X_test", "y_test"} - set(z.files)
                if missing:
                    raise ValueError(f"{p} lacks arrays {sorted(missing)}")
                return {k: z[k] for k in ("X_train", "y_train", "X_test", "y_test")}, p
    # fall back to the original IDX files
    idx = {}
    for key, stem in _MNIST_IDX.items():
        try:
            idx[key] = _find_file("mnist", data_home, files=(stem + ".gz", stem))
        except FileNotFoundError:
            break
    if len(idx) == 4:
        out = {}
        for part in ("train", "test"):
            images = _read_idx(idx[f"X_{part}"])
            labels = _read_idx(idx[f"y_{part}"])
            keep = (labels == 7) | (labels == 9)
            out[f"X_{part}"] = images[keep].reshape(int(keep.sum()), -1)
            out[f"y_{part}"] = (labels[keep] == 9).astype(np.uint8)
        return out, idx["X_train"]
    _find_file(
        "mnist",
        data_home,
        hint="Alternatively put the four original MNIST IDX files (train-images-idx3-ubyte.gz, "
        "train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, t10k-labels-idx1-ubyte.gz) "
        f"in {home / 'mnist'}; the 7-vs-9 subset is then derived from them.",
    )


def load_mnist_7vs9(
    pca_components=None, *, data_home=None, dtype=np.float64, whiten=False, return_X_y=False
):
    """Load MNIST digits 7 (y=0) versus 9 (y=1), optionally reduced by PCA.

    Reads ``mnist_7vs9_derived.npz`` (arrays ``X_train``, ``y_train``,
    ``X_test``, ``y_test``; 12,214 training and 2,037 test images of 784
    uint8 pixels) from ``<data_home>/mnist/`` or ``<data_home>/``. If it is
    absent, the same arrays are derived from the four original MNIST IDX
    files (``train-images-idx3-ubyte.gz`` etc.) in those folders: all 7s and
    9s in file order, y = 1 for a 9.

    Pixels are scaled to [0, 1]. With ``pca_components``, a
    :class:`sklearn.decomposition.PCA` is fitted on the training images only
    and applied to both parts.

    Parameters
    ----------
    pca_components : int, default=None
        Number of principal components to keep, or None for the 784 pixels.
    data_home : str or path-like, default=None
        See :func:`get_data_home`.
    dtype : {np.float64, np.float32}, default=np.float64
        Dtype of the returned features.
    whiten : bool, default=False
        Passed to PCA (unit-variance components).
    return_X_y : bool, default=False
        Return ``(X_train, y_train, X_test, y_test)`` instead of a Bunch.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``X_train``, ``y_train``, ``X_test``, ``y_test`` (targets float64 0/1),
        ``feature_names``, ``target_names`` (``['7', '9']``), ``pca`` (the
        fitted PCA or None), ``filename``, ``DESCR``.
    (X_train, y_train, X_test, y_test) : tuple if ``return_X_y`` is True.

    Examples
    --------
    >>> from bayes_subsample.datasets import load_mnist_7vs9
    >>> d = load_mnist_7vs9(pca_components=50)  # doctest: +SKIP
    >>> d.X_train.shape, d.X_test.shape          # doctest: +SKIP
    ((12214, 50), (2037, 50))
    """
    dtype = _check_dtype(dtype)
    if pca_components is not None and (
        isinstance(pca_components, bool)
        or not isinstance(pca_components, (int, np.integer))
        or not 1 <= pca_components <= 784
    ):
        raise ValueError(
            f"pca_components must be an int in [1, 784] or None, got {pca_components!r}"
        )
    arrays, path = _mnist_7vs9_arrays(data_home)
    X_train = arrays["X_train"].astype(dtype) / dtype.type(255)
    X_test = arrays["X_test"].astype(dtype) / dtype.type(255)
    y_train = arrays["y_train"].astype(np.float64)
    y_test = arrays["y_test"].astype(np.float64)
    pca = None
    names = [f"pixel_{r}_{c}" for r in range(28) for c in range(28)]
    if pca_components is not None:
        from sklearn.decomposition import PCA

        pca = PCA(n_components=int(pca_components), whiten=whiten, svd_solver="covariance_eigh")
        X_train = np.ascontiguousarray(pca.fit_transform(X_train), dtype=dtype)
        X_test = np.ascontiguousarray(pca.transform(X_test), dtype=dtype)
        names = [f"pc_{i}" for i in range(int(pca_components))]
    if return_X_y:
        return X_train, y_train, X_test, y_test
    return Bunch(
        X_train=X_train,
        y_train=y_train,
        X_test=X_test,
        y_test=y_test,
        feature_names=names,
        target_names=["7", "9"],
        pca=pca,
        filename=str(path),
        DESCR=(
            "MNIST digits 7 (y=0) vs 9 (y=1), LeCun, Cortes, Burges (CC BY-SA 3.0). "
            f"Pixels scaled to [0, 1]; PCA components: {pca_components}. Source: {path}"
        ),
    )


# --------------------------------------------------------------------------
# synthetic data
# --------------------------------------------------------------------------

_SEED_BLOCK_ROWS = 1 << 16  # rows per independently seeded block (fixed: part of the output)
_LOGISTIC_RHO = 0.5  # AR(1) correlation between neighbouring features
_LOGISTIC_DF = 6.0  # degrees of freedom of the multivariate-t features
_LOGISTIC_SIGNAL_SD = 1.3  # sd of x @ coef for the default coef
_LOGISTIC_POSITIVE_RATE = 0.53


def _block_generators(root, k, n_streams):
    """Generators of seeding block k: SeedSequence child k of root, then its n children."""
    child = np.random.SeedSequence(
        root.entropy, spawn_key=tuple(root.spawn_key) + (k,), pool_size=root.pool_size
    )
    return [np.random.Generator(np.random.PCG64(s)) for s in child.spawn(n_streams)]


def _check_n(n, name, minimum=1):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {n!r}")
    return int(n)


def _logistic_default_coef(n_features):
    j = np.arange(n_features)
    base = np.where(j % 2 == 0, 1.0, -0.6) / np.sqrt(1.0 + j / 4.0)
    base[j % 5 == 4] = 0.0  # some irrelevant features, as in real data
    if not base.any():
        base[0] = 1.0
    return base * (_LOGISTIC_SIGNAL_SD / np.sqrt(_ar1_quadratic_form(base)))


def _ar1_quadratic_form(c, rho=_LOGISTIC_RHO):
    d = c.size
    idx = np.arange(d)
    cov = rho ** np.abs(idx[:, None] - idx[None, :])
    return float(c @ cov @ c)


@functools.lru_cache(maxsize=64)
def _balance_intercept(signal_sd, rate=_LOGISTIC_POSITIVE_RATE, df=_LOGISTIC_DF):
    """Intercept b with E[sigmoid(b + signal_sd * T)] = rate, T unit-variance Student t."""
    from scipy import integrate, optimize, special, stats

    if signal_sd == 0:
        return float(special.logit(rate))
    t = stats.t(df, scale=np.sqrt((df - 2.0) / df))

    def excess(b):
        val = integrate.quad(
            lambda s: special.expit(b + signal_sd * s) * t.pdf(s), -np.inf, np.inf
        )[0]
        return val - rate

    return float(optimize.brentq(excess, -20, 20, xtol=1e-12))


def make_logistic_data(
    n_samples,
    n_features=28,
    *,
    coef=None,
    intercept=None,
    dtype=np.float64,
    chunk_size=65536,
    random_state=None,
    return_coef=False,
):
    """Draw HIGGS-shaped data from a logistic-regression model, in chunks.

    Features (no intercept column) follow a multivariate Student t with 6
    degrees of freedom scaled to unit variance (heavy-ish tails, like HIGGS
    kinematics after standardisation) and AR(1) correlation 0.5 between
    neighbouring columns: x_0 = z_0, x_j = 0.5 x_{j-1} + sqrt(0.75) z_j,
    all multiplied by sqrt(4 / w) with w ~ chi2(6) per row. Labels are
    y ~ Bernoulli(sigmoid(intercept + x @ coef)).

    The default ``coef`` is deterministic (alternating signs, decaying,
    every fifth zero) and scaled so that x @ coef has sd 1.3, which gives a
    ROC AUC of about 0.77 under the true model; the default ``intercept``
    makes the expected fraction of positives 0.53, as in HIGGS.

    The output is allocated once and filled in chunks of ``chunk_size``
    rows, so 10 million x 28 float32 (1.1 GB) needs only a few MB on top.
    It is identical for any ``chunk_size``: rows are seeded in fixed blocks
    of 65,536, block k using child k of ``SeedSequence(random_state)`` with
    separate streams for normals, chi-squares and uniforms.

    Parameters
    ----------
    n_samples : int
        Number of rows.
    n_features : int, default=28
        Number of features (28 as in HIGGS).
    coef : array-like of shape (n_features,), default=None
        True coefficients; None for the default above.
    intercept : float, default=None
        True intercept; None to make 53% positives in expectation.
    dtype : {np.float64, np.float32}, default=np.float64
        Dtype of X (y is float64 0/1).
    chunk_size : int, default=65536
        Rows generated at a time (memory only; does not change the output).
    random_state : int, SeedSequence, Generator, RandomState or None
        Seed. None draws fresh entropy.
    return_coef : bool, default=False
        Also return the true ``coef`` and ``intercept``.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,), float64 0/1
    coef : ndarray of shape (n_features,), only if ``return_coef``
    intercept : float, only if ``return_coef``

    Examples
    --------
    >>> from bayes_subsample.datasets import make_logistic_data
    >>> X, y = make_logistic_data(1000, random_state=0)
    >>> X.shape, y.shape
    ((1000, 28), (1000,))
    >>> X, y, coef, b = make_logistic_data(10, 3, random_state=0, return_coef=True)
    >>> coef.shape
    (3,)
    """
    from scipy.special import expit

    n = _check_n(n_samples, "n_samples", 0)
    d = _check_n(n_features, "n_features")
    chunk = _check_n(chunk_size, "chunk_size")
    dtype = _check_dtype(dtype)
    if coef is None:
        coef = _logistic_default_coef(d)
    else:
        coef = np.asarray(coef, dtype=np.float64).copy()
        if coef.shape != (d,):
            raise ValueError(f"coef must have shape ({d},), got {coef.shape}")
        if not np.isfinite(coef).all():
            raise ValueError("coef must be finite")
    if intercept is None:
        intercept = _balance_intercept(float(np.sqrt(_ar1_quadratic_form(coef))))
    intercept = float(intercept)
    if not np.isfinite(intercept):
        raise ValueError("intercept must be finite")
    root = seed_sequence(random_state)
    rho, df = _LOGISTIC_RHO, _LOGISTIC_DF
    innov = np.sqrt(1.0 - rho * rho)

    X = np.empty((n, d), dtype=dtype)
    y = np.empty(n, dtype=np.float64)
    gens, gens_block = None, -1
    start = 0
    while start < n:
        # a segment never crosses a user chunk or a seeding block boundary
        block = start // _SEED_BLOCK_ROWS
        stop = min(n, start + chunk, (block + 1) * _SEED_BLOCK_ROWS)
        if block != gens_block:
            gens, gens_block = _block_generators(root, block, 3), block
        m = stop - start
        z = gens[0].standard_normal((m, d))
        radius = np.sqrt((df - 2.0) / gens[1].chisquare(df, size=m))
        u = gens[2].random(m)
        # AR(1) recursion column by column (element-wise, so bit-identical for any m)
        for j in range(1, d):
            z[:, j] = rho * z[:, j - 1] + innov * z[:, j]
        z *= radius[:, None]
        Xs = X[start:stop]
        Xs[...] = z
        eta = np.full(m, intercept)
        for j in range(d):
            eta += Xs[:, j].astype(np.float64) * coef[j]
        y[start:stop] = u < expit(eta)
        start = stop
    if return_coef:
        return X, y, coef, intercept
    return X, y


def make_gaussian_regression(
    n_samples,
    n_features,
    noise_scale=1.0,
    *,
    coef=None,
    intercept=0.0,
    dtype=np.float64,
    random_state=None,
):
    """Draw data from a linear-Gaussian model, for tests against exact posteriors.

    ``X`` has independent standard-normal entries (no intercept column),
    ``coef`` defaults to standard-normal draws, and
    ``y = intercept + X @ coef + noise_scale * eps`` with standard-normal
    ``eps``. With a Gaussian prior the posterior of ``coef`` is Gaussian in
    closed form, which the samplers' statistical tests compare against.

    Parameters
    ----------
    n_samples : int
        Number of rows.
    n_features : int
        Number of features.
    noise_scale : float, default=1.0
        Standard deviation of the noise (> 0).
    coef : array-like of shape (n_features,), default=None
        True coefficients; None draws them from N(0, 1).
    intercept : float, default=0.0
        True intercept.
    dtype : {np.float64, np.float32}, default=np.float64
        Dtype of X; y is computed from the stored X in float64 and returned
        as float64.
    random_state : int, SeedSequence, Generator, RandomState or None
        Seed.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
    y : ndarray of shape (n_samples,), float64
    coef : ndarray of shape (n_features,), float64

    Examples
    --------
    >>> from bayes_subsample.datasets import make_gaussian_regression
    >>> X, y, coef = make_gaussian_regression(100, 3, noise_scale=0.5, random_state=0)
    >>> X.shape, y.shape, coef.shape
    ((100, 3), (100,), (3,))
    """
    n = _check_n(n_samples, "n_samples", 0)
    d = _check_n(n_features, "n_features")
    dtype = _check_dtype(dtype)
    noise_scale = float(noise_scale)
    if not (np.isfinite(noise_scale) and noise_scale > 0):
        raise ValueError(f"noise_scale must be a positive finite number, got {noise_scale}")
    rng = np.random.Generator(np.random.PCG64(seed_sequence(random_state)))
    if coef is None:
        coef = rng.standard_normal(d)
    else:
        coef = np.asarray(coef, dtype=np.float64).copy()
        if coef.shape != (d,):
            raise ValueError(f"coef must have shape ({d},), got {coef.shape}")
    X = rng.standard_normal((n, d)).astype(dtype, copy=False)
    y = float(intercept) + X.astype(np.float64, copy=False) @ coef
    y += noise_scale * rng.standard_normal(n)
    return X, y, coef
