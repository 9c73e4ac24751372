"""Reading the data for a command: a named dataset or a user's file."""
import gzip
import os
import stat
import zipfile
import zlib
from pathlib import Path

import numpy as np

from ._report import CLIError

#: named datasets accepted in place of a file path
DATASETS = {
    "higgs-sample": "7,000 + 500 held-out real HIGGS rows shipped with the package (28 features)",
    "covtype-sample": "20,000 real Covertype rows shipped with the package (54 features, "
                      "class 2 vs rest)",
    "covtype": "UCI Covertype, 581,012 rows (needs covtype.data.gz in the data home)",
    "higgs": "UCI HIGGS (needs HIGGS.csv.gz in the data home; --n-rows to read part)",
    "mnist7v9": "MNIST 7 vs 9, 12,214 + 2,037 held-out images, PCA to --pca components "
                "(needs the MNIST files in the data home)",
    "kddcup99": "KDD Cup 1999 10%, 494,021 rows, attack vs normal (needs "
                "kddcup.data_10_percent.gz in the data home)",
}

MODELS = ("logistic", "linear", "poisson")

#: what reading a damaged or unreadable file raises besides ValueError
_UNREADABLE = (OSError, EOFError, zlib.error, zipfile.BadZipFile)


def _unreadable(what, exc):
    """The one-line error for ``what`` (a file or dataset) that ``exc`` stopped reading."""
    detail = " ".join(str(exc).split())
    if isinstance(exc, (gzip.BadGzipFile, EOFError, zlib.error)):
        return CLIError(f"cannot read {what}: its gzip data is damaged or truncated ({detail})")
    if isinstance(exc, zipfile.BadZipFile):
        return CLIError(f"cannot read {what}: its .npz (zip) data is damaged ({detail})")
    if isinstance(exc, OSError) and exc.strerror:
        return CLIError(f"cannot read {what}: {exc.strerror}")
    return CLIError(f"cannot read {what}: {detail or type(exc).__name__}")


class _Data:
    def __init__(self, X, y, names, description, X_test=None, y_test=None):
        self.X, self.y, self.names, self.description = X, y, list(names), description
        self.X_test, self.y_test = X_test, y_test


def _standardize(X, X_test=None):
    """Centre and scale the columns with the rows of X (constant columns are
    only centred); the same transformation is applied to X_test."""
    X = np.array(X, dtype=np.float64 if X.dtype != np.float32 else np.float32, order="C")
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    scale[scale <= 1e-12] = 1.0
    X -= mean
    X /= scale
    if X_test is not None:
        X_test = (np.asarray(X_test, dtype=X.dtype) - mean) / scale
    return X, X_test, mean, scale


def _first_rows(b, n, std, cols):
    """The first ``n`` rows (None: all) of a shipped sample's Bunch ``b``, read
    without standardisation: (X, y, mean, scale). With ``std`` the columns
    ``cols`` of those rows are standardised as the sample's loader does it with
    ``standardize=True`` (mean and scale None without ``std``)."""
    from ..datasets._base import standardize_inplace

    X = np.array(b.data[:n])  # a copy, standardised in place
    mean, scale = standardize_inplace(X, cols) if std else (None, None)
    return X, b.target[:n], mean, scale


def _named_dataset(name, args):
    from .. import datasets as ds
    from ..datasets._covtype import COVTYPE_N_QUANTITATIVE

    std = args.standardize
    dtype = np.dtype(args.dtype)
    home = args.data_home
    n = args.n_rows
    if name == "higgs-sample":
        b = ds.load_higgs_sample("train", dtype=dtype)
        t = ds.load_higgs_sample("test", dtype=dtype)
        X, y, mean, scale = _first_rows(b, n, std, range(len(b.feature_names)))
        Xt = t.data if mean is None else ((t.data - mean) / scale).astype(dtype)
        return _Data(X, y, b.feature_names, DATASETS[name], Xt, t.target)
    if name == "covtype-sample":
        b = ds.load_covtype_sample(dtype=dtype)
        # the quantitative columns; the indicators stay 0/1
        X, y, _, _ = _first_rows(b, n, std, range(COVTYPE_N_QUANTITATIVE))
        return _Data(X, y, b.feature_names, DATASETS[name])
    full = {"covtype": ds.load_covtype, "higgs": ds.load_higgs, "kddcup99": ds.load_kddcup99}
    if name in full:
        b = full[name](data_home=home, dtype=dtype, standardize=std, n_rows=n, cache=True)
        return _Data(b.data, b.target, b.feature_names, DATASETS[name])
    if name == "mnist7v9":
        # the principal components are those of all the training images
        b = ds.load_mnist_7vs9(pca_components=args.pca or None, data_home=home, dtype=dtype)
        X, y, Xt = b.X_train[:n], b.y_train[:n], b.X_test
        if std:
            X, Xt, _, _ = _standardize(X, Xt)
        return _Data(X, y, b.feature_names, DATASETS[name], Xt, b.y_test)
    raise AssertionError(name)  # pragma: no cover


def _input_status(spec, path):
    """``os.stat`` of the input file ``path`` (None if there is none); a
    CLIError if it cannot be a data file: a symlink loop or another path the
    system refuses, a directory, a FIFO, a device or a socket (reading a FIFO
    would wait for a writer; a device may never end)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    except OSError as exc:  # ELOOP (a symlink loop), EACCES, ENAMETOOLONG, ENOTDIR, ...
        raise CLIError(f"cannot read {spec}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode):
        raise CLIError(f"{spec} is a directory, not a data file")
    if not stat.S_ISREG(st.st_mode):
        kind = ("a named pipe (FIFO)" if stat.S_ISFIFO(st.st_mode) else
                "a socket" if stat.S_ISSOCK(st.st_mode) else "a device")
        raise CLIError(f"{spec} is {kind}, not a regular file: give a data file")
    return st


def data_files(spec):
    """The files that the data argument ``spec`` names: ``[path]``, or ``[]``
    for a named dataset. A path that cannot be a data file (a symlink loop, a
    directory, a FIFO or a device) raises a CLIError."""
    path = Path(spec).expanduser()
    st = _input_status(spec, path)
    return [] if spec.lower() in DATASETS and st is None else [path]


def load_data(args):
    """The data named by ``args.data``: a named dataset or a file."""
    spec = args.data
    files = data_files(spec)
    if not files:
        if getattr(args, "target", None) is not None:
            raise CLIError(f"--target applies to CSV files, not to the named dataset {spec!r}")
        if getattr(args, "header", "auto") != "auto":
            raise CLIError(f"--header applies to CSV files, not to the named dataset {spec!r}")
        try:
            data = _named_dataset(spec.lower(), args)
        except FileNotFoundError as exc:
            msg = " ".join(str(exc).split())
            raise CLIError(f"{msg} (--data-home sets the data home)") from exc
        except _UNREADABLE as exc:
            from ..datasets import get_cache_dir, get_data_home
            cache = get_cache_dir()
            name = getattr(exc, "filename", None)
            if name is not None and cache in (Path(os.fsdecode(name)), *Path(
                    os.fsdecode(name)).parents):
                # the cache folder, not the data files, is at fault
                raise _unreadable(f"the cache folder {cache} (set $BAYES_SUBSAMPLE_CACHE to "
                                  "another folder)", exc) from exc
            raise _unreadable(f"the {spec} files in {get_data_home(args.data_home)}",
                              exc) from exc
    else:
        path, = files
        if _input_status(spec, path) is None:
            names = ", ".join(DATASETS)
            if path.suffix or os.sep in spec:
                raise CLIError(f"no such file: {spec}")
            raise CLIError(f"{spec!r} is neither a file nor a named dataset ({names})")
        from ..datasets._files import load_file_for_cli  # scikit-learn: not for --help

        try:
            header = {"auto": "auto", "yes": True, "no": False}[getattr(args, "header", "auto")]
            f = load_file_for_cli(path, args.target, args.format, target_option="--target",
                           header=header, header_option="--header")
        except ValueError as exc:
            raise CLIError(str(exc)) from exc
        except _UNREADABLE as exc:
            raise _unreadable(spec, exc) from exc
        X, y, Xt, yt = f.data, f.target, f.data_test, f.target_test
        if args.n_rows is not None:
            X, y = X[:args.n_rows], y[:args.n_rows]
        if args.standardize:
            X, Xt, _, _ = _standardize(X, Xt)
        X = np.ascontiguousarray(X, dtype=np.dtype(args.dtype))
        if Xt is not None:
            Xt = np.ascontiguousarray(Xt, dtype=np.dtype(args.dtype))
        data = _Data(X, y, f.feature_names, f.DESCR, Xt, yt)
    if data.X.shape[0] < 2:
        raise CLIError(f"{spec} has {data.X.shape[0]} rows: need at least 2")
    return data


def _check_model_target(model, y, spec):
    y = np.asarray(y, dtype=np.float64)
    if model == "logistic":
        from sklearn.utils.multiclass import type_of_target
        kind = type_of_target(y)
        n_classes = np.unique(y).size
        if kind not in ("binary", "multiclass") or n_classes < 2:
            raise CLIError(f"--model logistic needs class labels (two classes, or more for "
                           f"multinomial regression); the target of {spec} is {kind} with "
                           f"{n_classes} distinct values (use --model linear or poisson, or "
                           "another --target)")
    elif model == "poisson" and (np.any(y < 0) or np.any(y != np.round(y))):
        raise CLIError(f"--model poisson needs non-negative integer counts; the target of "
                       f"{spec} has other values")
