"""Small dense linear algebra used by tuning code (mass matrices, Laplace)."""
from __future__ import annotations

import numpy as np
from scipy import linalg

__all__ = ["inv_lower"]


def inv_lower(L):
    """Inverse of a lower-triangular matrix by LAPACK ``trtri`` (microseconds
    for the small matrices here, where ``solve_triangular`` against the
    identity costs a fraction of a millisecond)."""
    inv, info = linalg.lapack.dtrtri(np.asarray(L, dtype=np.float64), lower=1)
    if info != 0:
        raise linalg.LinAlgError(f"singular triangular matrix (trtri info={info})")
    return np.tril(inv)
