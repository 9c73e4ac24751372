"""What every loader shares: the data home, file lookup, block-wise reading
and parsing of delimited text, output sinks, standardisation and the parse
cache (see the :mod:`bayes_subsample.datasets` docstring for the behaviour)."""

import errno
import gzip
import hashlib
import io
import json
import os
import re
import shutil
import uuid
import warnings
import zlib
from pathlib import Path
from typing import NamedTuple

import numpy as np

from .._hashing import file_digest
from ._sink import _Sink

DATA_HOME_ENV = "BAYES_SUBSAMPLE_DATA"
CACHE_DIR_ENV = "BAYES_SUBSAMPLE_CACHE"
DEFAULT_DATA_HOME = "~/bayes_subsample_data"

# the files shipped with the package, in bayes_subsample/data/
_PACKAGE_DATA = Path(__file__).resolve().parent.parent / "data"
_BLOCK_BYTES = 32 * 1024 * 1024  # text parsed per block when streaming a file
#: 2: meta.json holds each array's size and sha256; 3: and the source file's BLAKE2b
_CACHE_VERSION = 3

# --------------------------------------------------------------------------
# damaged files
# --------------------------------------------------------------------------


class DataFileError(ValueError):
    """A data file is damaged, incomplete or not in the format its loader reads.

    Raised by the loaders of :mod:`bayes_subsample.datasets` when a file
    cannot be decompressed (truncated or corrupt gzip data) or parsed, holds
    no data rows, or differs from what is known of it: a complete original
    file with another number of rows than it has (Covertype 581,012; HIGGS
    11,000,000; KDD Cup 99 10% 494,021; MNIST 60,000 + 10,000) or, where the
    file is fixed, another sha256. The message names the file, says what is
    wrong and what to do (usually: delete the file and download it again).

    A subclass of :class:`ValueError`, so ``except ValueError`` catches it
    as before.

    Examples
    --------
    >>> import gzip, os, tempfile
    >>> from bayes_subsample.datasets import DataFileError, load_covtype
    >>> home = tempfile.mkdtemp()
    >>> with gzip.open(os.path.join(home, "covtype.data.gz"), "wb") as f:
    ...     _ = f.write(b"2596,51,3,258,0,510,221,232,148,6279" + b",0" * 44 + b",5\\n")
    >>> try:
    ...     load_covtype(data_home=home)
    ... except DataFileError as exc:
    ...     print(str(exc).split(": ", 1)[1][:64])
    it has 1 data row, but the complete UCI covtype.data has 581,012
    """


class _Expect(NamedTuple):
    """What a loader knows of the file it reads: for the checks and the messages.

    ``n_rows`` (data rows, header excluded) and ``sha256`` (of the
    decompressed bytes, so a re-compressed or gunzipped copy passes) are
    None where unknown; ``fix`` says what to do about a damaged file.
    """

    what: str = "the file"  # how messages name the complete file
    n_rows: int = None
    sha256: str = None
    fix: str = (
        "If it was downloaded or copied, the transfer was probably cut short or damaged: "
        "delete it and fetch it again."
    )


def _redownload(src):
    """The advice for a damaged file of source ``src`` (a :class:`_Source`)."""
    return f"Delete it and download it again from {src.url} (dataset page: {src.page})."


_SHIPPED_FIX = (
    "This file ships with bayes_subsample, so the installation is damaged: reinstall it "
    "(pip install --force-reinstall bayes_subsample)."
)


def _damaged(path, problem, expect=_Expect()):
    """A :class:`DataFileError` saying what is wrong with ``path`` and what to do."""
    return DataFileError(f"{path}: {problem}. {expect.fix}")


def _read(fh, n, path, expect=_Expect()):
    """``fh.read(n)``, with decompression errors turned into a :class:`DataFileError`."""
    try:
        return fh.read(n)
    except EOFError as exc:  # gzip: the stream ends before its end-of-stream marker
        raise _damaged(path, f"it is truncated ({exc})", expect) from exc
    except (gzip.BadGzipFile, zlib.error) as exc:  # bad CRC, length or deflate data
        raise _damaged(path, f"its gzip data are corrupt ({exc})", expect) from exc


def _check_read(path, expect, n_read, n_rows=None, digest=None):
    """Raise a :class:`DataFileError` if a read of ``path`` is not what ``expect`` says.

    ``n_read`` data rows were read with the limit ``n_rows`` (None: the whole
    file, whose decompressed bytes ``digest`` then hashed, if given). Any
    read must find a data row; a known file must give ``min(n_rows,
    expect.n_rows)`` rows, and read whole, have the known sha256.
    """
    if n_read == 0:
        raise _damaged(path, "it holds no data rows", expect)
    if expect.n_rows is not None:
        want = expect.n_rows if n_rows is None else min(n_rows, expect.n_rows)
        if n_read != want:
            asked = "" if n_rows is None else f" (asked for the first {n_rows:,})"
            raise _damaged(
                path,
                f"it has {n_read:,} data row{'s' if n_read != 1 else ''}{asked}, but "
                f"{expect.what} has {expect.n_rows:,}",
                expect,
            )
    if n_rows is None and digest is not None and expect.sha256 is not None:
        if digest.hexdigest() != expect.sha256:
            raise _damaged(
                path,
                f"its content has sha256 {digest.hexdigest()}, but {expect.what} has "
                f"{expect.sha256}",
                expect,
            )


def _digest_for(expect, n_rows=None):
    """A sha256 object to hash a whole read of a file with a known checksum, else None."""
    return hashlib.sha256() if n_rows is None and expect.sha256 is not None else None


# --------------------------------------------------------------------------
# locating files
# --------------------------------------------------------------------------


class _Source(NamedTuple):
    """Where the files of one dataset are looked for and where to download them."""

    name: str  # dataset name used in messages
    subdir: str  # sub-folder of the data home
    files: tuple  # accepted file names, in order of preference
    url: str  # download address
    page: str  # dataset page

    def expect(self, what, n_rows, sha256):
        """What one of its downloads holds (:class:`_Expect`): when it is damaged,
        download it again."""
        return _Expect(what, n_rows, sha256, _redownload(self))


# the start of the Raises section of the loaders that look for their file in the
# data home ({raises_not_found} in their docstrings)
_RAISES_NOT_FOUND = """Raises
    ------
    FileNotFoundError
        If the file cannot be found; the message says where to put it and
        where to download it."""


def _doc_not_found(loader):
    """Put the shared start of the Raises section into ``loader``'s docstring."""
    loader.__doc__ = loader.__doc__.replace("{raises_not_found}", _RAISES_NOT_FOUND)
    return loader


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
    return _expand_path(data_home)


def _expand_path(path):
    """``path`` (str or path-like) as a :class:`~pathlib.Path`, with ``~`` expanded."""
    return Path(os.path.expanduser(os.fspath(path)))


def _candidates(src, data_home, files=None):
    """The paths where the files of source ``src`` (a :class:`_Source`) are looked for."""
    home = get_data_home(data_home)
    files = src.files if files is None else files
    out = []
    for name in files:
        out += [home / src.subdir / name, home / name]
    return home, out


def _find_file(src, data_home, files=None, hint=None):
    """First existing candidate path, else a FileNotFoundError saying what to do."""
    home, cands = _candidates(src, data_home, files)
    for p in cands:
        if p.is_file():
            return p
    files = src.files if files is None else files
    tried = "\n".join(f"  {p}" for p in cands)
    msg = (
        f"Could not find the {src.name} data file {files[0]!r}. Looked for:\n{tried}\n"
        f"Put {files[0]!r} at {home / src.subdir / files[0]} (or directly in {home}). "
        f"Download it from {src.url} (dataset page: {src.page}). "
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


def _iter_blocks(path, skip_lines=0, block_bytes=None, expect=_Expect(), digest=None):
    """Yield byte blocks of whole lines (CR removed), skipping the first lines.

    A decompression error raises a :class:`DataFileError`; ``digest`` (a
    hashlib object), if given, is fed the decompressed bytes.
    """
    block_bytes = _BLOCK_BYTES if block_bytes is None else block_bytes
    with _open_binary(path) as fh:
        rest = b""
        first = True
        while True:
            buf = _read(fh, block_bytes, path, expect)
            if not buf:
                break
            if digest is not None:
                digest.update(buf)
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
    path, *, delimiter, dtype, n_rows=None, skip_lines=0, usecols=None, ncols=None,
    block_bytes=None, expect=_Expect(), digest=None
):
    """Parse a delimited numeric text file block by block.

    Integers go through ``np.loadtxt`` (C since NumPy 1.23, about 60 million
    values per second); floats through pandas' C parser when available
    (about 10 million per second) else ``np.loadtxt`` (about 3-6 million).
    Decompression and parse errors raise a :class:`DataFileError`.
    """
    remaining = n_rows
    for block in _iter_blocks(path, skip_lines=skip_lines, block_bytes=block_bytes,
                              expect=expect, digest=digest):
        if remaining is not None and remaining <= 0:
            return
        try:
            arr = _parse_block(
                block, delimiter=delimiter, dtype=dtype, usecols=usecols, max_rows=remaining
            )
        except ValueError as exc:
            raise _damaged(
                path, f"could not parse it as numeric delimited text ({exc})", expect
            ) from exc
        if ncols is not None and arr.shape[0] and arr.shape[1] != ncols:
            raise _damaged(
                path, f"expected {ncols} columns per line, found {arr.shape[1]}", expect
            )
        if remaining is not None:
            remaining -= arr.shape[0]
        if arr.shape[0]:
            yield arr


def standardize_inplace(X, cols, chunk_rows=1 << 16):
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


def _standardize_meta(X, cols):
    """Standardise columns ``cols`` of X in place; the statistics as cache metadata."""
    mean, scale = standardize_inplace(X, cols)
    return {"feature_mean": mean.tolist(), "feature_scale": scale.tolist()}


def _feature_stats(meta):
    """The ``feature_mean`` and ``feature_scale`` of a loader's Bunch: arrays from
    the metadata of :func:`_standardize_meta`, or None without standardisation."""
    keys = ("feature_mean", "feature_scale")
    return {k: np.asarray(meta[k]) if k in meta else None for k in keys}


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
    return _expand_path(cache_dir)


# an entry is a folder <dataset>-<16 hex digits>; it is built in a folder
# .<entry>.tmp-<32 hex digits> beside it and renamed when complete
_CACHE_ENTRY = re.compile(r"^[a-z0-9_]+-[0-9a-f]{16}$")
_CACHE_TMP = re.compile(r"^\.[a-z0-9_]+-[0-9a-f]{16}\.tmp-[0-9a-f]{32}$")
_CACHE_ARRAY = re.compile(r"^[a-z_]+$")  # array names, so <name>.npy stays inside the entry


def clear_cache(cache_dir=None):
    """Delete the arrays cached by the loaders; return how many entries were removed.

    Every folder the loaders create in the cache is removed: entries
    (``<dataset>-<hash>``), complete or not, damaged or not, with or without
    their ``meta.json``, and the temporary folders of interrupted builds
    (``.<dataset>-<hash>.tmp-<id>``). Nothing else in the folder is touched.
    Do not run it while a loader is writing to the same cache.

    Parameters
    ----------
    cache_dir : str or path-like, default=None
        See :func:`get_cache_dir`.

    Returns
    -------
    n_removed : int
        Entries and temporary folders removed.

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
        if (_CACHE_ENTRY.match(p.name) or _CACHE_TMP.match(p.name)) and _remove_entry(p):
            n += 1
    return n


def _remove_entry(path):
    """Delete a cache entry (or whatever stands at its name); True if it is gone."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path, ignore_errors=True)
    return not os.path.lexists(path)


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


class _BrokenEntry(Exception):
    """A cache entry failed its checks; the message says which."""


def _file_digest(path):
    """``(size, sha256)`` of the file ``path``, read once in chunks (the cache
    format records sha256 for its own array files)."""
    return file_digest(path, hashlib.sha256)


def _open_entry(entry):
    """Memory-map the arrays of the cache entry ``entry``, after checking them.

    ``meta.json`` must be readable, of this cache version, and give for
    each ``.npy`` file the size and sha256 it had when written; the files
    must have them. Returns ``(arrays, meta)``; raises :class:`_BrokenEntry`
    saying what is wrong.
    """
    try:
        meta = json.loads((entry / "meta.json").read_text())
    except FileNotFoundError:
        raise _BrokenEntry("its meta.json is missing") from None
    except (OSError, ValueError) as exc:  # ValueError: not JSON, or not text
        raise _BrokenEntry(f"its meta.json cannot be read ({exc})") from None
    if not isinstance(meta, dict) or meta.pop("_version", None) != _CACHE_VERSION:
        raise _BrokenEntry("its meta.json is not of this cache version")
    files = meta.pop("_arrays", None)
    if not isinstance(files, dict) or not files:
        raise _BrokenEntry("its meta.json lists no arrays")
    arrays = {}
    for key, rec in files.items():
        if not _CACHE_ARRAY.match(str(key)):
            raise _BrokenEntry(f"its meta.json names an array {key!r}")
        p = entry / f"{key}.npy"
        try:
            want_size, want_sha = int(rec["size"]), str(rec["sha256"])
        except (TypeError, KeyError, ValueError):
            raise _BrokenEntry(f"its meta.json lacks the size or sha256 of {p.name}") from None
        if not p.is_file():
            raise _BrokenEntry(f"{p.name} is missing")
        size = p.stat().st_size
        if size != want_size:
            raise _BrokenEntry(f"{p.name} has {size:,} bytes, not the {want_size:,} written")
        if _file_digest(p)[1] != want_sha:
            raise _BrokenEntry(f"{p.name} does not have the sha256 it was written with")
        try:
            arrays[key] = np.load(p, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise _BrokenEntry(f"{p.name} cannot be read ({exc})") from None
    return arrays, meta


def _write_entry(entry, build, source_digest):
    """Build arrays into a new cache entry ``entry``, atomically.

    Everything is written into a temporary folder beside ``entry``: the
    ``.npy`` files, then ``meta.json`` with each file's size and sha256 and
    the BLAKE2b ``source_digest`` of the source file. Only then is the folder
    renamed to ``entry`` (``os.replace``, atomic), so an interrupted build
    leaves no folder that passes for an entry. The temporary folder is
    removed whatever stops the build (an error, an interrupt, a full disk,
    where closing a file fails too). If another process renamed its own
    build to ``entry`` first, that one is kept.
    """
    entry.parent.mkdir(parents=True, exist_ok=True)
    tmp = entry.parent / f".{entry.name}.tmp-{uuid.uuid4().hex}"
    tmp.mkdir()
    sinks = []

    def make_sink(key, dtype, tail=()):
        s = _Sink(dtype, tail, path=tmp / f"{key}.npy")
        sinks.append(s)
        return s

    done = False
    try:
        arrays, meta = build(make_sink)
        for key, a in arrays.items():
            if isinstance(a, np.memmap):
                a.flush()
            elif isinstance(a, np.ndarray):
                np.save(tmp / f"{key}.npy", a, allow_pickle=False)
        del arrays
        files = {}
        for f in sorted(tmp.glob("*.npy")):
            size, sha = _file_digest(f)
            files[f.stem] = {"size": size, "sha256": sha}
        meta = dict(meta, _version=_CACHE_VERSION, _arrays=files, _source=source_digest)
        (tmp / "meta.json").write_text(json.dumps(meta, default=_json_default))
        try:
            os.replace(tmp, entry)
            done = True
        except OSError:  # another process has just put its entry there
            pass
    finally:
        if not done:
            for s in sinks:
                s.abort()
            shutil.rmtree(tmp, ignore_errors=True)


#: what writing a cache entry raises when the cache folder cannot take it: a
#: full disk or quota, a read-only file system, no permission, a path that is
#: not a folder
_CACHE_UNWRITABLE = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
                     errno.ENOTDIR, errno.EEXIST, errno.ELOOP, errno.ENAMETOOLONG)


def _load_or_build(name, source, options, build, cache, cache_dir):
    """Run ``build(make_sink) -> (arrays: dict, meta: dict)``, through the cache if asked.

    Without the cache the arrays are plain ndarrays. With it, they are
    read-only memory maps of ``.npy`` files written on the first call
    (:func:`_write_entry`).

    Every open of an entry checks each file's size and the sha256 of all its
    bytes against ``meta.json`` (:func:`_open_entry`); a damaged, partial or
    unreadable entry is deleted, with a :class:`RuntimeWarning`, and rebuilt
    from ``source``. The entry also records the BLAKE2b of the source file's
    bytes, compared with the file's at every open: an entry built from other
    contents (a file replaced by one of the same size and modification time)
    is rebuilt. A cache folder that cannot take the entry (full, read-only,
    not writable) gives a :class:`RuntimeWarning` naming it, and the arrays
    are built in memory instead; no temporary folder is left behind. Hashing
    the whole file, not a sample of it, was chosen because damage anywhere (a
    disk error, a file cut short and padded, bytes overwritten) must be seen,
    and it keeps what the memory map is for: the hash streams the file in 8 MB
    chunks, so it allocates nothing
    of the array's size, and the pages it reads stay in the operating
    system's page cache, which the memory maps of all processes share. What
    it costs is one sequential read per open, about a second per GB here
    (full HIGGS in float32 is 1.3 GB), against minutes to parse the text.
    """
    def in_memory():
        return build(lambda key, dtype, tail=(): _Sink(dtype, tail))

    if not cache:
        return in_memory()
    from .._trace import user_stacklevel

    entry = _cache_entry(name, source, options, cache_dir)
    # the source's content, not only its size and modification time (in the
    # entry's name): a file replaced by one of the same size and mtime is seen
    source_digest = _source_digest(source)
    if os.path.lexists(entry):
        try:
            arrays, meta = _open_entry(entry)
            if meta.pop("_source", None) == source_digest:
                return arrays, meta
            del arrays
            stale = True
        except _BrokenEntry as exc:
            warnings.warn(
                f"The cache entry {entry} is damaged: {exc}. Deleting it and rebuilding it "
                f"from {source}.",
                RuntimeWarning,
                stacklevel=user_stacklevel(),
            )
            stale = False
        if not _remove_entry(entry) and stale:
            warnings.warn(f"The cache entry {entry} was built from an older {source} and "
                          "cannot be deleted; reading the file without the cache.",
                          RuntimeWarning, stacklevel=user_stacklevel())
            return in_memory()
    try:
        _write_entry(entry, build, source_digest)
    except OSError as exc:
        if exc.errno not in _CACHE_UNWRITABLE:
            raise
        warnings.warn(
            f"The cache folder {entry.parent} cannot take a cache entry "
            f"({exc.strerror or exc}); reading {source} without the cache (cache=False). "
            "Free space there, or set another cache folder (cache_dir=, "
            f"${CACHE_DIR_ENV}).",
            RuntimeWarning,
            stacklevel=user_stacklevel(),
        )
        return in_memory()
    try:
        arrays, meta = _open_entry(entry)
    except _BrokenEntry as exc:  # pragma: no cover - only if the disk fails us
        raise DataFileError(
            f"{entry}: the cache entry just written fails its check: {exc}. Delete it "
            "(bayes_subsample.datasets.clear_cache) and check the disk."
        ) from None
    meta.pop("_source", None)
    return arrays, meta


def _source_digest(source):
    """The BLAKE2b of the source file's bytes (read once, in chunks)."""
    return file_digest(source)[1]


def _json_default(o):
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, np.generic):
        return o.item()
    return str(o)


def _cache_options(dtype, standardize, add_intercept, n_rows, **extra):
    """The settings every loader's cache key holds, plus the loader's own ``extra``."""
    return {
        "dtype": dtype.name,
        "standardize": bool(standardize),
        "add_intercept": bool(add_intercept),
        "n_rows": n_rows,
        **extra,
    }


def _load_table(
    what, path, parsed, split, *, n_features, target_dtype, dtype, standardize, add_intercept,
    n_rows, cache, cache_dir, standardize_cols, options=None, expect=_Expect()
):
    """Stream a numeric text file into ``data`` and ``target`` arrays, through the cache if asked.

    ``parsed(digest)`` yields the file's row blocks (:func:`_iter_parsed`,
    feeding ``digest`` the decompressed bytes) and ``split(block)`` returns a
    block's features and targets. The features get a last column of ones
    with ``add_intercept``, and columns ``standardize_cols`` are standardised
    with ``standardize``. ``options`` are the loader's own settings for the
    cache key, besides the common ones. The rows read (and, for a whole read,
    the checksum) are checked against ``expect`` before anything is cached.
    Returns ``(X, y, meta)``.
    """
    options = _cache_options(dtype, standardize, add_intercept, n_rows, **(options or {}))

    def build(make_sink):
        xs = make_sink("data", dtype, (n_features + bool(add_intercept),))
        ys = make_sink("target", target_dtype)
        digest = _digest_for(expect, n_rows)
        for block in parsed(digest):
            X_block, y_block = split(block)
            xs.append(_with_intercept(X_block, dtype) if add_intercept else X_block)
            ys.append(y_block)
        _check_read(path, expect, xs.n, n_rows, digest)
        X, y = xs.finish(), ys.finish()
        meta = _standardize_meta(X, standardize_cols) if standardize else {}
        return {"data": X, "target": y}, meta

    arrays, meta = _load_or_build(what, path, options, build, cache, cache_dir)
    return arrays["data"], arrays["target"], meta


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

