"""A user's own data files: :func:`load_file` reads CSV/TSV, ``.npz`` and
LIBSVM/svmlight files into a dense feature matrix and a target."""

import gzip
import io
import os
import zipfile
import zlib
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch

from ._base import DataFileError, _damaged, _open_binary, _read

_FORMATS = ("csv", "npz", "libsvm")

# (X, y) array names accepted in an .npz file, in order of preference
_NPZ_KEYS = (("X", "y"), ("X_train", "y_train"), ("data", "target"))

# a LIBSVM file is densified; refuse beyond this many cells (1.6 GB of float64)
_MAX_DENSE_CELLS = 2e8


def load_file(path, target=None, format=None, header="auto"):
    """Read features and target from a CSV/TSV, ``.npz`` or LIBSVM file.

    The reader the command line (``bayes-subsample fit FILE``) uses, for a
    user's own data. Files may be gzipped (detected by content).

    * CSV/TSV (``.csv``, ``.tsv``, ``.txt``, ``.data``, ``.dat``): the
      delimiter is a tab if the first line has one, else a comma, else a
      semicolon, else whitespace; the first line is a header if any of its
      fields is not a number, or if its fields are the column numbers ``0, 1,
      ..., d-1`` or ``1, 2, ..., d`` (``header`` overrides this rule). Every
      column must be numeric. At most :data:`MAX_CSV_COLUMNS` (100,000)
      columns and lines of at most :data:`MAX_CSV_LINE_BYTES` (8 MiB),
      checked before and while parsing. Needs pandas for whitespace-delimited
      files and for the fastest parsing.
    * ``.npz``: arrays ``X`` and ``y``, or ``X_train`` and ``y_train`` (then
      also ``X_test`` and ``y_test`` if present), or ``data`` and ``target``;
      optional ``feature_names``.
    * LIBSVM/svmlight (``.svm``, ``.libsvm``, ``.svmlight``): read with
      :func:`sklearn.datasets.load_svmlight_file` and densified.

    Without a known extension the format is sniffed: LIBSVM if the first line
    has a ``:`` (``label index:value ...``), else CSV.

    Parameters
    ----------
    path : str or path-like
        The file.
    target : str or int, default=None
        CSV only: name (from the header) or index (negative counts from the
        end) of the target column. None for the last column.
    format : {'csv', 'npz', 'libsvm', 'auto'}, default=None
        File format; None or ``'auto'`` to tell from the extension, else
        from the content.
    header : {'auto', True, False}, default='auto'
        CSV only: whether the first line holds the column names (``'auto'``:
        the rule above).

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``data`` (n, d) float64 features (C-contiguous), ``target`` (n,),
        ``feature_names`` (from the CSV header or the ``.npz``, else
        ``x0``, ``x1``, ...), ``data_test`` and ``target_test`` (an ``.npz``
        file's ``X_test``/``y_test``, else None), ``format``, ``filename``
        and ``DESCR`` (one line: file name, rows, target column).

    Raises
    ------
    DataFileError
        A :class:`ValueError`: if the file cannot be decompressed or read in
        the format (a truncated gzip file included), is empty, has a
        non-numeric or missing value, no feature column, or as many targets
        as rows; the message names the file and says what to do.
    ValueError
        If ``target`` names no column or does not apply to the format.

    Examples
    --------
    >>> import os, tempfile
    >>> from bayes_subsample.datasets import load_file
    >>> path = os.path.join(tempfile.mkdtemp(), "small.csv")
    >>> with open(path, "w") as fh:
    ...     _ = fh.write("a,b,label\\n1.0,2.0,0\\n3.0,4.0,1\\n")
    >>> d = load_file(path, target="label")
    >>> d.data.shape, d.feature_names, d.target.tolist()
    ((2, 2), ['a', 'b'], [0.0, 1.0])
    """
    return load_file_for_cli(path, target, format, header=header)


def load_file_for_cli(path, target=None, format=None, *, target_option="target", header="auto",
               header_option="header"):
    """:func:`load_file`; ``target_option`` and ``header_option`` are how
    messages name ``target`` and ``header`` (the command line says
    ``--target`` and ``--header``)."""
    path = Path(os.path.expanduser(os.fspath(path)))
    fmt = _file_format(path, format)
    if fmt != "csv" and target is not None:
        raise ValueError(f"{target_option} applies to CSV files; {path.name} is read as {fmt}")
    if fmt != "csv" and header != "auto":
        raise ValueError(f"{header_option} applies to CSV files; {path.name} is read as {fmt}")
    X_test = y_test = None
    if fmt == "csv":
        X, y, names, descr = _read_csv(path, target, target_option, header)
    elif fmt == "npz":
        X, y, names, descr, X_test, y_test = _read_npz(path)
    else:
        X, y, names, descr = _read_libsvm(path)
    if X.shape[0] != y.shape[0]:
        raise _damaged(path, f"X has {X.shape[0]} rows but y has {y.shape[0]}")
    return Bunch(data=X, target=y, feature_names=names, data_test=X_test, target_test=y_test,
                 format=fmt, filename=str(path), DESCR=descr)


def _file_format(path, fmt):
    if fmt not in (None, "auto"):
        if fmt not in _FORMATS:
            raise ValueError(f"format must be one of {_FORMATS} or 'auto', got {fmt!r}")
        return fmt
    name = path.name.lower().removesuffix(".gz")
    if name.endswith(".npz"):
        return "npz"
    if name.endswith((".csv", ".tsv", ".txt", ".data", ".dat")):
        return "csv"
    if name.endswith((".svm", ".libsvm", ".svmlight")):
        return "libsvm"
    # sniff: a LIBSVM line looks like "label idx:value idx:value"
    with _open_binary(path) as fh:
        raw = _read(fh, 4096, path)
    line = raw.decode("utf-8", "replace").splitlines()[0] if raw else ""
    return "libsvm" if ":" in line else "csv"


def _read_error(path, fmt, exc):
    """The :class:`DataFileError` for ``exc``, raised while reading ``path`` as ``fmt``."""
    if isinstance(exc, DataFileError):
        return exc
    if isinstance(exc, EOFError):
        return _damaged(path, f"it is truncated ({exc})")
    if isinstance(exc, (gzip.BadGzipFile, zlib.error)):
        return _damaged(path, f"its gzip data are corrupt ({exc})")
    return _damaged(path, f"could not read it as {fmt} ({exc})")


def _is_numeric(field):
    try:
        float(field)
    except ValueError:
        return False
    return True


def _target_index(target, columns, path, target_option):
    """Index of the target column: a header name, an index, or None for the last."""
    if target is None:
        return len(columns) - 1
    if target in columns:
        return columns.index(target)
    try:
        j = int(target)
    except ValueError:
        shown = ", ".join(columns[:12]) + (", ..." if len(columns) > 12 else "")
        raise ValueError(
            f"{target_option} {target!r} is not a column of {path} (columns: {shown})"
        ) from None
    if not -len(columns) <= j < len(columns):
        raise ValueError(
            f"{target_option} {j} is out of range: {path} has {len(columns)} columns"
        )
    return j % len(columns)


#: the most columns a CSV file may have (its first line is counted before any
#: parsing: a one-line file of millions of fields is refused at once)
MAX_CSV_COLUMNS = 100_000

#: the longest line (bytes) a CSV file may have, checked on every line as the
#: file streams to the parser (100,000 fields of up to 80 characters)
MAX_CSV_LINE_BYTES = 8 << 20


class _LineLimited(io.RawIOBase):
    """A binary stream that raises a :class:`DataFileError` as soon as a line
    longer than :data:`MAX_CSV_LINE_BYTES` goes through it (the parser then
    never holds more than that much of one line)."""

    def __init__(self, raw, path):
        self._raw, self._path = raw, path
        self._line = 0          # bytes of the current line so far
        self._lineno = 1

    def readable(self):
        return True

    def readinto(self, b):
        chunk = self._raw.read(len(b))
        n = len(chunk)
        b[:n] = chunk
        ends = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 10)
        if ends.size:
            longest = max(self._line + int(ends[0]), int(np.diff(ends).max(initial=0)) - 1)
            self._lineno += ends.size
            self._line = n - int(ends[-1]) - 1
        else:
            longest = self._line = self._line + n
        if longest > MAX_CSV_LINE_BYTES:
            raise DataFileError(
                f"{self._path}: a line near line {self._lineno:,} is longer than "
                f"{MAX_CSV_LINE_BYTES:,} bytes: not a table of numbers this reader takes "
                f"(at most {MAX_CSV_COLUMNS:,} columns)")
        return n

    def close(self):
        self._raw.close()
        super().close()


def _first_line(path):
    """The first line of ``path`` (decoded; at most :data:`MAX_CSV_LINE_BYTES`)."""
    try:
        with _open_binary(path) as fh:
            raw = fh.readline(MAX_CSV_LINE_BYTES + 1)
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise _read_error(path, "CSV", exc) from exc
    if len(raw) > MAX_CSV_LINE_BYTES:
        raise DataFileError(
            f"{path}: its first line is longer than {MAX_CSV_LINE_BYTES:,} bytes: not a table "
            f"of numbers this reader takes (at most {MAX_CSV_COLUMNS:,} columns)")
    return raw.decode("utf-8-sig", errors="replace")


def _is_header(fields, header):
    """Whether the first line's ``fields`` are a header: ``header`` True or
    False, or for ``"auto"`` if a field is not a number, or if the fields are
    the column numbers ``0, 1, ..., d-1`` or ``1, 2, ..., d`` (the header
    pandas writes for unnamed columns)."""
    if header in (True, False):
        return header
    if header != "auto":
        raise ValueError(f"header must be 'auto', True or False, got {header!r}")
    if not all(_is_numeric(f) for f in fields if f):
        return True
    d = len(fields)
    return fields in ([str(j) for j in range(d)], [str(j) for j in range(1, d + 1)])


def _read_csv(path, target, target_option="target", header="auto"):
    first = _first_line(path)
    if not first.strip():
        raise _damaged(path, "it is empty")
    sep = "\t" if "\t" in first else ("," if "," in first else (";" if ";" in first else None))
    n_fields = first.count(sep) + 1 if sep else len(first.split())
    if n_fields > MAX_CSV_COLUMNS:
        raise DataFileError(f"{path} has {n_fields:,} columns on its first line: more than the "
                            f"{MAX_CSV_COLUMNS:,} this reader takes")
    fields = [f.strip().strip('"') for f in (first.split(sep) if sep else first.split())]
    header = _is_header(fields, header)
    try:
        import pandas as pd
    except ImportError:  # pragma: no cover - pandas is optional
        pd = None
    if pd is not None:
        try:
            # decompressed as the first line was (gzip told by content), every
            # line's length checked as it streams to the parser
            with io.BufferedReader(_LineLimited(_open_binary(path), path)) as fh:
                frame = pd.read_csv(fh, sep=sep if sep else r"\s+",
                                    header=0 if header else None,
                                    engine="c" if sep else "python", encoding="utf-8-sig",
                                    encoding_errors="replace")
        except Exception as exc:  # pandas raises many types for malformed files
            raise _read_error(path, "CSV", exc) from exc
        columns = [str(c) for c in frame.columns]
    else:  # pragma: no cover
        frame = None
        try:
            with _open_binary(path) as fh:
                arr = np.genfromtxt(fh, delimiter=sep, skip_header=int(header), dtype=np.float64)
        except Exception as exc:
            raise _read_error(path, "CSV", exc) from exc
        arr = np.atleast_2d(arr)
        columns = fields if header else [str(j) for j in range(arr.shape[1])]
    j = _target_index(target, columns, path, target_option)
    if len(columns) < 2:
        raise DataFileError(f"{path} has a single column: nothing to use as features")
    if frame is not None:
        if len(frame) == 0:
            raise _damaged(path, "it holds no data rows")
        bad = [c for c in frame.columns if frame[c].dtype.kind not in "biuf"]
        if bad:
            raise DataFileError(f"column {str(bad[0])!r} of {path} is not numeric; encode it "
                                "as numbers first")
        arr = frame.to_numpy(dtype=np.float64)
    if arr.size == 0:
        raise _damaged(path, "it holds no data rows")
    if np.isnan(arr).any():
        row = int(np.flatnonzero(np.isnan(arr).any(axis=1))[0])
        raise _damaged(path, f"it has a missing or non-numeric value in data row {row + 1} "
                       "(a line cut short?)")
    y = arr[:, j]
    X = np.ascontiguousarray(np.delete(arr, j, axis=1))
    names = [c for i, c in enumerate(columns) if i != j] if header else _default_names(X)
    return X, y, names, f"{path.name}: {X.shape[0]:,} rows, target column {columns[j]!r}"


def _default_names(X):
    return [f"x{i}" for i in range(X.shape[1])]


#: how an .npz (zip) archive starts: a local file header, or an empty archive
_ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")


def _read_npz(path):
    with open(path, "rb") as fh:
        magic = fh.read(6)
    if magic[:4] not in _ZIP_MAGIC:
        # np.load would read other bytes as a pickle and advise allow_pickle
        kind = ("a .npy file (one array)" if magic == b"\x93NUMPY" else
                "gzip-compressed" if magic[:2] == b"\x1f\x8b" else "no zip header")
        raise DataFileError(f"{path} is not an .npz archive ({kind}); save the arrays with "
                            "numpy.savez (or give --format / format= for another format)")
    try:
        z = np.load(path, allow_pickle=False)
    except Exception as exc:
        raise _read_error(path, ".npz", exc) from exc
    try:
        return _npz_arrays(path, z)
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:  # e.g. a bad CRC-32
        raise _read_error(path, ".npz", exc) from exc


def _npz_array(path, z, key, ndim):
    """Array ``key`` of the archive ``z``: real numbers (bool, integers or
    floats), finite, of ``ndim`` dimensions (a column ``(n, 1)`` counts as 1-D)."""
    try:
        a = np.asarray(z[key])
    except ValueError as exc:  # an object array: would need pickle
        raise DataFileError(f"{path}: array {key!r} holds Python objects; save numbers "
                            f"(a float or integer array)") from exc
    if a.dtype.kind not in "biuf":
        what = {"c": "complex numbers", "U": "text", "S": "bytes", "O": "Python objects"}.get(
            a.dtype.kind, f"dtype {a.dtype}")
        raise DataFileError(f"{path}: array {key!r} holds {what} (dtype {a.dtype}); the "
                            "models take real numbers")
    if ndim == 1 and a.ndim == 2 and a.shape[1] == 1:
        a = a[:, 0]
    if a.ndim != ndim:
        raise DataFileError(f"{path}: array {key!r} must be {ndim}-D, got shape {a.shape}")
    if a.dtype.kind == "f" and not np.isfinite(a).all():
        raise DataFileError(f"{path}: array {key!r} contains NaN or infinity")
    return a


def _npz_arrays(path, z):
    with z:
        keys = set(z.files)
        for kx, ky in _NPZ_KEYS:
            if kx in keys and ky in keys:
                X, y = _npz_array(path, z, kx, 2), _npz_array(path, z, ky, 1)
                X_test = y_test = None
                if kx == "X_train" and "X_test" in keys and "y_test" in keys:
                    X_test, y_test = (_npz_array(path, z, "X_test", 2),
                                      _npz_array(path, z, "y_test", 1))
                    if X_test.shape[1] != X.shape[1]:
                        raise DataFileError(f"{path}: X_test has {X_test.shape[1]} columns, "
                                            f"X_train {X.shape[1]}")
                    if X_test.shape[0] != y_test.shape[0]:
                        raise DataFileError(f"{path}: X_test has {X_test.shape[0]} rows but "
                                            f"y_test has {y_test.shape[0]}")
                if X.shape[0] != y.shape[0]:
                    raise DataFileError(f"{path}: {kx} has {X.shape[0]} rows but {ky} has "
                                        f"{y.shape[0]}")
                names = _npz_names(path, z, keys, X)
                return X, y, names, f"{path.name}: {X.shape[0]:,} rows", X_test, y_test
    raise DataFileError(f"{path} must hold arrays 'X' and 'y' (or 'X_train'/'y_train', or "
                        f"'data'/'target'); it has {sorted(keys)}")


def _npz_names(path, z, keys, X):
    """The archive's ``feature_names`` (one per column of X), else x0, x1, ..."""
    if "feature_names" not in keys:
        return _default_names(X)
    try:
        names = [str(n) for n in np.asarray(z["feature_names"]).reshape(-1)]
    except ValueError as exc:  # an object array
        raise DataFileError(f"{path}: array 'feature_names' holds Python objects; save "
                            "them as a string array") from exc
    if len(names) != X.shape[1]:
        raise DataFileError(f"{path}: 'feature_names' has {len(names)} names for "
                            f"{X.shape[1]} columns")
    return names


def _read_libsvm(path):
    from sklearn.datasets import load_svmlight_file

    try:
        with _open_binary(path) as fh:  # gzip told by content, not by the name
            X, y = load_svmlight_file(fh)
    except Exception as exc:
        raise _read_error(path, "LIBSVM/svmlight", exc) from exc
    if X.shape[0] * X.shape[1] > _MAX_DENSE_CELLS:
        raise ValueError(f"{path} is {X.shape[0]:,} x {X.shape[1]:,}: too large to densify "
                         "(the estimators take dense X)")
    X = np.ascontiguousarray(X.toarray())
    return X, y, _default_names(X), f"{path.name}: {X.shape[0]:,} rows"
