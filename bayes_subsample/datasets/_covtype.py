"""UCI Covertype: :func:`load_covtype` and the shipped :func:`load_covtype_sample`."""

import numpy as np
from sklearn.utils import Bunch

from ._base import (_check_dtype, _check_n_rows, _damaged, _doc_not_found, _Expect, _feature_stats,
                    _find_file, _iter_parsed, _load_table, _PACKAGE_DATA, _SHIPPED_FIX, _Source)

_SOURCE = _Source(
    name="covtype",
    subdir="covtype",
    files=("covtype.data.gz", "covtype.data"),
    url="https://archive.ics.uci.edu/ml/machine-learning-databases/covtype/covtype.data.gz",
    page="https://archive.ics.uci.edu/dataset/31/covertype",
)

# What the files hold. The sha256 are of the decompressed text, so a gunzipped
# or re-compressed copy passes. The full file's was computed from the shared
# data folder's covtype.data.gz, which decompresses to the md5 UCI publishes for
# covtype.data (71df19898bd3e11db15ae0faf4159f2c); that .gz itself has sha256
#   b22ca13b51814b12ef7fec2fc96a623903e35dab1469a4d1213fe9911d92912c
# (the folder's SHA256SUMS). The sample's was computed from
# bayes_subsample/data/covtype_sample_20k.data.gz (the .gz's sha256 is in the
# README there).
_EXPECT = _SOURCE.expect(
    "the complete UCI covtype.data", 581_012,
    "0a9371cef7c964b5475d6053cc3e0894a5aa6f65ad1ed3ecb01c45aa96217945",
)
_EXPECT_SAMPLE = _Expect(
    what="the shipped 20,000-row sample",
    n_rows=20_000,
    sha256="d45829724c0b51add5f46c821ec1dfc79702849c83b3b37f31c3b539c9463deb",
    fix=_SHIPPED_FIX,
)

COVTYPE_FEATURE_NAMES = (
    [
        "Elevation",
        "Aspect",
        "Slope",
        "Horizontal_Distance_To_Hydrology",
        "Vertical_Distance_To_Hydrology",
        "Horizontal_Distance_To_Roadways",
        "Hillshade_9am",
        "Hillshade_Noon",
        "Hillshade_3pm",
        "Horizontal_Distance_To_Fire_Points",
    ]
    + [f"Wilderness_Area_{i}" for i in range(4)]
    + [f"Soil_Type_{i}" for i in range(40)]
)
COVTYPE_CLASS_NAMES = [
    "Spruce/Fir",
    "Lodgepole Pine",
    "Ponderosa Pine",
    "Cottonwood/Willow",
    "Aspen",
    "Douglas-fir",
    "Krummholz",
]
COVTYPE_N_QUANTITATIVE = 10

_COVTYPE_DESCR = """\
UCI Covertype (Blackard, Colorado State University; CC BY 4.0)
581,012 forest cells of 30 x 30 m, 54 cartographic features (10 quantitative,
4 wilderness-area and 40 soil-type indicators) and the cover type 1-7.
Binary task (binary=True): y = 1 for class 2, Lodgepole Pine (283,301
positives), as LIBSVM's covtype.binary. Source: {source}
"""


@_doc_not_found
def load_covtype(
    binary=True,
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
    """Load UCI Covertype from ``covtype.data`` or ``covtype.data.gz``.

    The file is the UCI original: 581,012 comma-separated lines of 54 integer
    features and the class (1-7) last, no header. It is looked for at
    ``<data_home>/covtype/covtype.data.gz`` and ``<data_home>/covtype.data.gz``
    (and the uncompressed names); see :func:`get_data_home`. The whole file
    parses in about one second.

    Parameters
    ----------
    binary : bool, default=True
        If True, ``target`` is float64 with 1.0 for class 2 (Lodgepole Pine)
        and 0.0 otherwise. If False, ``target`` is the int64 class 1-7.
    data_home : str or path-like, default=None
        Folder holding the data; see :func:`get_data_home`.
    dtype : {np.float64, np.float32}, default=np.float64
        Dtype of the feature matrix.
    standardize : bool, default=False
        Centre and scale the 10 quantitative columns to mean 0 and standard
        deviation 1 over the rows loaded. The 44 indicator columns are left
        as 0/1 (scaling rare soil types would create huge values). The
        statistics are returned as ``feature_mean`` and ``feature_scale``.
    add_intercept : bool, default=False
        Append a last column of ones (named ``"intercept"``). The package's
        estimators do not need it (they have ``fit_intercept``).
    n_rows : int, default=None
        Read only the first ``n_rows`` lines.
    cache : bool, default=False
        Parse once into ``.npy`` files in :func:`get_cache_dir` and return
        read-only memory maps (see the module docstring).
    cache_dir : str or path-like, default=None
        Cache folder; see :func:`get_cache_dir`.
    return_X_y : bool, default=False
        Return ``(data, target)`` instead of a Bunch.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``data`` (n, 54[+1]), ``target`` (n,), ``feature_names``,
        ``target_names``, ``feature_mean`` and ``feature_scale`` (None unless
        ``standardize``), ``filename``, ``DESCR``.
    (data, target) : tuple if ``return_X_y`` is True.

    {raises_not_found}
    DataFileError
        If the file cannot be decompressed or parsed, or is not the complete
        UCI file: read whole, it must have 581,012 rows and the sha256 of
        UCI's ``covtype.data``; with ``n_rows``, it must give that many rows
        (or all 581,012). The message says to delete it and download it again.

    See Also
    --------
    load_covtype_sample : 20,000 rows shipped with the package.

    Examples
    --------
    >>> from bayes_subsample.datasets import load_covtype
    >>> X, y = load_covtype(return_X_y=True, n_rows=1000)  # doctest: +SKIP
    >>> X.shape                                              # doctest: +SKIP
    (1000, 54)
    """
    path = _find_file(_SOURCE, data_home)
    return _load_covtype_file(
        path, "covtype", _EXPECT, binary, dtype, standardize, add_intercept, return_X_y, n_rows,
        cache, cache_dir
    )


def load_covtype_sample(
    binary=True, *, dtype=np.float64, standardize=False, add_intercept=False, return_X_y=False
):
    """Load the 20,000 real Covertype rows shipped with the package.

    The rows are a fixed uniformly random subset (sampled without
    replacement, kept in file order) of UCI ``covtype.data``, stored in the
    original format; ``bayes_subsample/data/README.md`` has the recipe and
    licence (CC BY 4.0). Needs no download. The file's rows and sha256 are
    checked on every load (:class:`DataFileError` if it is damaged).

    Parameters
    ----------
    binary, dtype, standardize, add_intercept, return_X_y
        As in :func:`load_covtype`.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch` or tuple
        As in :func:`load_covtype`, with 20,000 rows.

    Examples
    --------
    >>> from bayes_subsample.datasets import load_covtype_sample
    >>> X, y = load_covtype_sample(return_X_y=True)
    >>> X.shape
    (20000, 54)
    >>> sorted(set(y.tolist()))
    [0.0, 1.0]
    """
    path = _PACKAGE_DATA / "covtype_sample_20k.data.gz"
    return _load_covtype_file(
        path, "covtype_sample", _EXPECT_SAMPLE, binary, dtype, standardize, add_intercept,
        return_X_y
    )


def _load_covtype_file(
    path, what, expect, binary, dtype, standardize, add_intercept, return_X_y, n_rows=None,
    cache=False, cache_dir=None
):
    dtype = _check_dtype(dtype)
    n_rows = _check_n_rows(n_rows)

    def parsed(digest):
        return _iter_parsed(path, delimiter=",", dtype=np.int32, n_rows=n_rows, ncols=55,
                            expect=expect, digest=digest)

    def split(arr):
        cls = arr[:, 54]
        if cls.min() < 1 or cls.max() > 7:
            raise _damaged(
                path, f"cover type must be in 1..7, found {cls.min()}..{cls.max()}", expect
            )
        return arr[:, :54], (cls == 2 if binary else cls)

    X, y, meta = _load_table(
        what, path, parsed, split, n_features=54, target_dtype=np.float64 if binary else np.int64,
        dtype=dtype, standardize=standardize, add_intercept=add_intercept, n_rows=n_rows,
        cache=cache, cache_dir=cache_dir, standardize_cols=range(COVTYPE_N_QUANTITATIVE),
        options={"binary": bool(binary)}, expect=expect,
    )
    if return_X_y:
        return X, y
    return Bunch(
        data=X,
        target=y,
        feature_names=COVTYPE_FEATURE_NAMES + (["intercept"] if add_intercept else []),
        target_names=(
            ["not Lodgepole Pine", "Lodgepole Pine"] if binary else list(COVTYPE_CLASS_NAMES)
        ),
        **_feature_stats(meta),
        filename=str(path),
        DESCR=_COVTYPE_DESCR.format(source=path),
    )
