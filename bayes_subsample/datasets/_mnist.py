"""MNIST digits 7 versus 9: :func:`load_mnist_7vs9`."""

import hashlib
import zipfile
import zlib

import numpy as np
from sklearn.utils import Bunch

from ._base import (DataFileError, _candidates, _check_dtype, _check_read, _damaged, _Expect,
                    _find_file, _open_binary, _read, _Source)

_SOURCE = _Source(
    name="mnist",
    subdir="mnist",
    files=("mnist_7vs9_derived.npz",),
    url="https://ossci-datasets.s3.amazonaws.com/mnist/ (mirror of the original "
    "http://yann.lecun.com/exdb/mnist/)",
    page="http://yann.lecun.com/exdb/mnist/",
)

_MNIST_IDX = {
    "X_train": "train-images-idx3-ubyte",
    "y_train": "train-labels-idx1-ubyte",
    "X_test": "t10k-images-idx3-ubyte",
    "y_test": "t10k-labels-idx1-ubyte",
}

# What the original IDX files hold: images (labels) in the header's first
# dimension and the sha256 of the decompressed file, computed from the copies
# in the shared data folder (the .gz files' own sha256 are in its SHA256SUMS).
_IDX_EXPECT = {
    "train-images-idx3-ubyte": _SOURCE.expect(
        "the MNIST training-image file", 60_000,
        "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
    ),
    "train-labels-idx1-ubyte": _SOURCE.expect(
        "the MNIST training-label file", 60_000,
        "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
    ),
    "t10k-images-idx3-ubyte": _SOURCE.expect(
        "the MNIST test-image file", 10_000,
        "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
    ),
    "t10k-labels-idx1-ubyte": _SOURCE.expect(
        "the MNIST test-label file", 10_000,
        "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
    ),
}

# mnist_7vs9_derived.npz, derived from those files in the shared data folder
# (the file's sha256 is in its SHA256SUMS). It is checked by the shapes of its
# arrays and the sha256 of their contents (see _arrays_sha256), which a copy
# re-saved with other zip metadata keeps; arrays derived from the IDX files
# give the same value.
_NPZ_SHAPES = {
    "X_train": (12_214, 784),
    "y_train": (12_214,),
    "X_test": (2_037, 784),
    "y_test": (2_037,),
}
_NPZ_SHA256 = "8fce3c5656c77792ce90e42bfd99bb91c5ed3943dce5f5c2c4cbd39832993975"
_NPZ_EXPECT = _Expect(
    what="the 7-vs-9 subset of MNIST",
    fix="Delete it (the loader then derives the same arrays from the four original MNIST "
    "IDX files if they are in the data home) or copy it again.",
)


def _arrays_sha256(arrays):
    """sha256 of the arrays ``_NPZ_SHAPES`` names: each one's name, dtype, shape and bytes."""
    h = hashlib.sha256()
    for k in _NPZ_SHAPES:
        a = np.ascontiguousarray(arrays[k])
        h.update(f"{k} {a.dtype.str} {a.shape}\n".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def _read_idx(path, expect=None):
    """Read an IDX file (the original MNIST format), gzipped or not.

    A known file (``_IDX_EXPECT``, by name) must have its number of items
    and sha256; any damage raises a :class:`DataFileError`.
    """
    if expect is None:
        expect = _IDX_EXPECT.get(path.name.removesuffix(".gz"), _Expect())
    with _open_binary(path) as fh:
        raw = _read(fh, -1, path, expect)
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise _damaged(path, "it is not an unsigned-byte IDX file", expect)
    ndim = raw[3]
    if len(raw) < 4 + 4 * ndim:
        raise _damaged(path, "its IDX header is cut short", expect)
    shape = tuple(int(v) for v in np.frombuffer(raw, dtype=">u4", count=ndim, offset=4))
    data = np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(shape)):
        raise _damaged(
            path, f"its header says shape {shape} but it holds {data.size:,} bytes", expect
        )
    _check_read(path, expect, shape[0] if shape else 0, None, hashlib.sha256(raw))
    return data.reshape(shape)


def _read_7vs9_npz(p):
    """The four arrays of ``mnist_7vs9_derived.npz``, checked (:class:`DataFileError`)."""
    try:
        with np.load(p, allow_pickle=False) as z:
            missing = [k for k in _NPZ_SHAPES if k not in z.files]
            if missing:
                raise _damaged(p, f"it lacks arrays {missing}", _NPZ_EXPECT)
            arrays = {k: z[k] for k in _NPZ_SHAPES}
    except DataFileError:
        raise
    except (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError) as exc:
        raise _damaged(p, f"it cannot be read as .npz ({exc})", _NPZ_EXPECT) from exc
    for k, shape in _NPZ_SHAPES.items():
        if arrays[k].shape != shape:
            raise _damaged(
                p, f"array {k!r} has shape {arrays[k].shape}, not {shape}", _NPZ_EXPECT
            )
    got = _arrays_sha256(arrays)
    if got != _NPZ_SHA256:
        raise _damaged(
            p, f"its arrays have sha256 {got}, but {_NPZ_EXPECT.what} has {_NPZ_SHA256}",
            _NPZ_EXPECT,
        )
    return arrays


def _mnist_7vs9_arrays(data_home):
    home, cands = _candidates(_SOURCE, data_home)
    for p in cands:
        if p.is_file():
            return _read_7vs9_npz(p), p
    # fall back to the original IDX files
    idx = {}
    for key, stem in _MNIST_IDX.items():
        try:
            idx[key] = _find_file(_SOURCE, data_home, files=(stem + ".gz", stem))
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
        _SOURCE,
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

    Raises
    ------
    FileNotFoundError
        If neither the ``.npz`` file nor the four IDX files are found.
    DataFileError
        If a file cannot be decompressed or read, or is not what it should
        be: the ``.npz`` file must hold arrays of the shapes above with the
        known sha256 of their contents; each IDX file must hold all its
        60,000 (or 10,000) items, with the known sha256.

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

