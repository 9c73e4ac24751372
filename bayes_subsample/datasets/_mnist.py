"""MNIST digits 7 versus 9: :func:`load_mnist_7vs9`."""

import numpy as np
from sklearn.utils import Bunch

from ._base import _candidates, _check_dtype, _find_file, _open_binary, _Source

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
    home, cands = _candidates(_SOURCE, data_home)
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

