"""KDD Cup 1999 (10% subset): :func:`load_kddcup99`."""

import io

import numpy as np
from sklearn.utils import Bunch

from ._base import (_cache_options, _check_dtype, _check_n_rows, _check_read, _damaged, _digest_for,
                    _doc_not_found, _feature_stats, _find_file, _iter_blocks, _load_or_build,
                    _Source, _standardize_meta)

_SOURCE = _Source(
    name="kddcup99",
    subdir="kddcup99",
    files=("kddcup.data_10_percent.gz", "kddcup.data_10_percent"),
    url="https://archive.ics.uci.edu/ml/machine-learning-databases/kddcup99-mld/"
    "kddcup.data_10_percent.gz",
    page="https://archive.ics.uci.edu/dataset/130/kdd+cup+1999+data",
)

# The complete 10% file: 494,021 lines. The sha256 is of the decompressed text
# (so a gunzipped or re-compressed copy passes), computed from the shared data
# folder's kddcup.data_10_percent.gz, which is UCI's archive byte for byte: its
# own sha256 (that folder's SHA256SUMS) is the one scikit-learn's fetch_kddcup99
# expects, 8045aca0d84e70e622d1148d7df782496f6333bf6eb979a1b0837c42a9fd9561.
_EXPECT = _SOURCE.expect(
    "the complete KDD Cup 99 10% file", 494_021,
    "f8c8267ebcd9c0ed1fd7d6277fe5bfff8732e9b7db8e61b873542b2a534b6f9a",
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

_KDD_DESCR = """\
KDD Cup 1999, 10% subset (UCI; CC BY 4.0)
494,021 network connections, 41 features (3 symbolic: protocol_type, service,
flag, one-hot encoded here in place), label 'normal.' or one of 22 attack
types. target = 1.0 for an attack, 0.0 for normal (about 80% attacks).
Source: {source}
"""


@_doc_not_found
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

    {raises_not_found}
    DataFileError
        If the file cannot be decompressed or parsed, or is not the complete
        10% file: read whole, it must have 494,021 rows and UCI's sha256;
        with ``n_rows``, it must give that many rows (or all 494,021). The
        message says to delete it and download it again.

    Examples
    --------
    >>> from bayes_subsample.datasets import load_kddcup99
    >>> X, y = load_kddcup99(n_rows=1000, return_X_y=True)  # doctest: +SKIP
    """
    path = _find_file(_SOURCE, data_home)
    dtype = _check_dtype(dtype)
    n_rows = _check_n_rows(n_rows)
    options = _cache_options(dtype, standardize, add_intercept, n_rows)

    def build(make_sink):
        ints, rates, syms = [], [], []
        n_read = 0
        digest = _digest_for(_EXPECT, n_rows)
        for block in _iter_blocks(path, expect=_EXPECT, digest=digest):
            remaining = None if n_rows is None else n_rows - n_read
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
                raise _damaged(
                    path, f"could not parse it as KDD Cup 99 data ({exc})", _EXPECT
                ) from exc
            n_read += syms[-1].shape[0]
        _check_read(path, _EXPECT, n_read, n_rows, digest)
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
            meta.update(_standardize_meta(X, numeric_cols))
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
        **_feature_stats(meta),
        filename=str(path),
        DESCR=_KDD_DESCR.format(source=path),
    )

