"""Files on disk as Dask arrays, without copying them into this process."""
from __future__ import annotations

import os

import numpy as np

from ._samples_generator import _check_n

__all__ = ["open_npy_dask"]


def _npy_rows(path, start, stop):
    """Rows ``[start, stop)`` of a ``.npy`` file: a view of its memory map (no copy)."""
    return np.load(path, mmap_mode="r")[start:stop]


def open_npy_dask(path, chunk_rows=1 << 20):
    """A ``.npy`` file as a Dask array chunked by rows, read where each chunk is
    computed through a memory map of the file: nothing is copied into this
    process (``dask.array.from_array`` on a memory map copies all of it), and
    on a cluster each worker reads its chunks from the path (a file system the
    workers share).

    Parameters
    ----------
    path : str or path-like
        A ``.npy`` file (1-D or 2-D, C order).
    chunk_rows : int, default=1048576
        Rows per chunk.

    Returns
    -------
    dask.array.Array

    Examples
    --------
    >>> import numpy as np, os, tempfile
    >>> from bayes_subsample.datasets import open_npy_dask
    >>> path = os.path.join(tempfile.mkdtemp(), "X.npy")
    >>> np.save(path, np.arange(12.0).reshape(6, 2))
    >>> X = open_npy_dask(path, chunk_rows=4)
    >>> X.chunks, float(X.sum().compute())
    (((4, 2), (2,)), 66.0)
    """
    import dask
    import dask.array as da

    path = os.fspath(path)
    head = np.load(path, mmap_mode="r")
    if head.ndim not in (1, 2) or not head.flags.c_contiguous:
        raise ValueError(f"{path}: expected a 1-D or 2-D C-ordered array, got shape "
                         f"{head.shape}")
    chunk_rows = _check_n(chunk_rows, "chunk_rows")
    n = head.shape[0]
    parts = []
    for start in range(0, n, chunk_rows):
        stop = min(n, start + chunk_rows)
        part = dask.delayed(_npy_rows, pure=True)(path, start, stop)
        parts.append(da.from_delayed(part, shape=(stop - start,) + head.shape[1:],
                                     dtype=head.dtype))
    return da.concatenate(parts, axis=0)
