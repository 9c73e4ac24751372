"""Output sinks of the loaders: row blocks collected in memory, or streamed
straight into a ``.npy`` file (a cache entry being built)."""
import numpy as np

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
            fh, self.fh = self.fh, None
            try:
                fh.close()
            except OSError:  # its buffer cannot be flushed (a full disk): nothing to keep
                pass
