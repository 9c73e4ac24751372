"""Content hashes of arrays and files: every byte, read in chunks.

Used to tell that data are the same as before: a run continued with
``warm_start`` (or ``sample(resume=...)``) must see the data it was sampled
on, and a dataset cache entry must have been built from the source file as
it is now. Hashing a sample of the data would miss edits outside it, so
every byte is hashed. BLAKE2b (``hashlib``, which releases the GIL on large
buffers) hashes chunks of :data:`CHUNK_BYTES` in a few threads; the result is
the hash of the chunks' digests in order, so it does not depend on the
number of threads. Nothing of the data's size is allocated: C-contiguous
arrays (and memory maps) are hashed in place, others one row block at a time.
"""
from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from ._threads import available_cores

__all__ = ["array_digest", "file_digest", "CHUNK_BYTES"]

#: bytes hashed per chunk (a thread's unit of work; also a file's read size)
CHUNK_BYTES = 1 << 23


def _blake(data=b""):
    return hashlib.blake2b(data, digest_size=16)


def _chunk_jobs(a, dtype=None):
    """Callables returning the consecutive chunks of whole rows of ``a`` (C
    order, as bytes; cast to ``dtype`` if given): views of a C-contiguous
    array, copies of one row block otherwise."""
    if a.ndim == 0:
        a = a.reshape(1)
    dtype = np.dtype(dtype or a.dtype)
    row_bytes = max(1, dtype.itemsize * int(np.prod(a.shape[1:])))
    rows = max(1, CHUNK_BYTES // row_bytes)

    def job(i):
        block = np.ascontiguousarray(a[i:i + rows], dtype=dtype)
        return block.reshape(-1).view(np.uint8)

    return [lambda i=i: job(i) for i in range(0, a.shape[0], rows)]


def array_digest(*arrays, as_dtype=None):
    """A short hex hash of ``arrays``: their dtypes, shapes and every value, in
    C order (the same values in C or Fortran order hash alike). ``as_dtype``
    hashes the values as cast to that dtype (so int32 and int64 indices of a
    sparse matrix hash alike)."""
    h = _blake()
    jobs = []
    for a in arrays:
        a = np.asarray(a)
        h.update(f"{np.dtype(as_dtype or a.dtype).str}{a.shape}".encode())
        jobs += _chunk_jobs(a, as_dtype)
    if len(jobs) <= 1:
        for job in jobs:
            h.update(_blake(job()).digest())
        return h.hexdigest()
    with ThreadPoolExecutor(min(len(jobs), available_cores())) as pool:
        for d in pool.map(lambda job: _blake(job()).digest(), jobs):
            h.update(d)
    return h.hexdigest()


def file_digest(path, new=_blake):
    """``(size, hex digest)`` of the file ``path``, read once in chunks of
    :data:`CHUNK_BYTES`; ``new`` makes the hash object (BLAKE2b by default,
    e.g. ``hashlib.sha256`` for a format that records sha256)."""
    h = new()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK_BYTES):
            h.update(chunk)
            size += len(chunk)
    return size, h.hexdigest()
