"""UCI HIGGS: :func:`load_higgs` (the full file and its common subsets, layout
detected from the content) and the shipped :func:`load_higgs_sample`."""

import io
from pathlib import Path

import numpy as np
from sklearn.utils import Bunch

from ._base import (_check_dtype, _check_n_rows, _damaged, _doc_not_found, _expand_path, _Expect,
                    _feature_stats, _find_file, _iter_parsed, _load_table, _open_binary,
                    _PACKAGE_DATA, _read, _SHIPPED_FIX, _Source, standardize_inplace,
                    _with_intercept)

_SOURCE = _Source(
    name="higgs",
    subdir="higgs",
    files=("HIGGS.csv.gz", "HIGGS.csv"),
    url="https://archive.ics.uci.edu/ml/machine-learning-databases/00280/HIGGS.csv.gz",
    page="https://archive.ics.uci.edu/dataset/280/higgs",
)

# What the known HIGGS files hold, by file name (with or without .gz): data
# rows (header excluded) and the sha256 of the decompressed text. No checksum
# of the full UCI file is on record, so it is checked by its row count only.
# The subsets' sha256 were computed from the copies in the shared data folder
# (see its README for their origin; the .gz files' own sha256 are in its
# SHA256SUMS); the lightgbm files are the ones shipped in bayes_subsample/data.
_SUBSET_FIX = (
    "Delete it and copy it again from its source (LightGBM's examples/binary_classification, "
    "H2O's test data or SAS Viya's examples), or use the full UCI file."
)
_HIGGS_KNOWN = {
    "HIGGS.csv": _SOURCE.expect("the complete UCI HIGGS.csv", 11_000_000, None),
    "lightgbm_binary.train": _Expect(
        "LightGBM's binary.train", 7_000,
        "41c42dc14f86960256bf872fc8ae6286c688b44f43b4057b29428787fc1e0444", _SUBSET_FIX,
    ),
    "lightgbm_binary.test": _Expect(
        "LightGBM's binary.test", 500,
        "d99ebec91acd99638f00c727c251c947a1d17ddfcbea27bfef6b0dc5e5fb1db3", _SUBSET_FIX,
    ),
    "h2o_higgs_train_10k.csv": _Expect(
        "H2O's higgs_train_10k.csv", 10_000,
        "166051994b95041dd67059f0ee87cf99f08d5f1d97af8ad0a9f7617d2b355711", _SUBSET_FIX,
    ),
    "h2o_higgs_test_5k.csv": _Expect(
        "H2O's higgs_test_5k.csv", 5_000,
        "ab729cb2a366684b490d7a7b465dfa6fd9b27da23a65afdac68268c998a64fd4", _SUBSET_FIX,
    ),
    "sas_viya_higgs.csv": _Expect(
        "SAS Viya's higgs.csv", 10_984,
        "21f8b95e4aaed9e631a76d69c724bb0ca94456bc1ac01e18fd81b968dd3c9724", _SUBSET_FIX,
    ),
}
for _split in ("train", "test"):  # the same files, shipped with the package
    _HIGGS_KNOWN[f"higgs_lightgbm_binary.{_split}"] = _HIGGS_KNOWN[
        f"lightgbm_binary.{_split}"
    ]._replace(what=f"the shipped higgs_lightgbm_binary.{_split}.gz", fix=_SHIPPED_FIX)
del _split


def _higgs_expect(path):
    """What is known of the HIGGS file ``path``, by its name (see ``_HIGGS_KNOWN``)."""
    return _HIGGS_KNOWN.get(Path(path).name.removesuffix(".gz"), _Expect())


HIGGS_FEATURE_NAMES = [
    "lepton_pT",
    "lepton_eta",
    "lepton_phi",
    "missing_energy_magnitude",
    "missing_energy_phi",
]
for _j in range(1, 5):
    HIGGS_FEATURE_NAMES += [f"jet_{_j}_pt", f"jet_{_j}_eta", f"jet_{_j}_phi", f"jet_{_j}_btag"]
HIGGS_FEATURE_NAMES += ["m_jj", "m_jjj", "m_lv", "m_jlv", "m_bb", "m_wbb", "m_wwbb"]
del _j

# header names recognised as the label column of a HIGGS file (case-insensitive)
HIGGS_LABEL_NAMES = (
    "label",
    "target",
    "class",
    "response",
    "y",
    "signal",
    "is_signal",
    "class_label",
)

_HIGGS_DESCR = """\
UCI HIGGS (Baldi, Sadowski, Whiteson 2014; CC BY 4.0)
Monte Carlo collision events: label 1 = signal (Higgs boson process), 0 =
background; 21 low-level kinematic features and 7 high-level invariant masses
(28 in all). The full set has 11,000,000 rows; about 53% are signal.
Source: {source}  (layout: {layout})
"""


def _sniff_higgs_layout(path, label_column="auto", n_cols=29, expect=_Expect()):
    """Work out delimiter, header and label column of a HIGGS-like text file.

    Rules (documented in :func:`load_higgs`): the delimiter is a tab if the
    first line has one, else a comma, else whitespace; the first line is a
    header if any of its fields is not a number; the label column is the
    header field named one of ``HIGGS_LABEL_NAMES`` (case-insensitive),
    else the first column if its values in the first lines are all 0/1,
    else the last column if those are.
    """
    with _open_binary(path) as fh:
        head = _read(fh, 1 << 16, path, expect)
    full = len(head) < 1 << 16
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    if not head.strip():
        raise _damaged(path, "it is empty", expect)
    raw_lines = head.replace(b"\r", b"").split(b"\n")
    if not full:
        raw_lines = raw_lines[:-1]  # last line may be cut
    first_line = next(i for i, ln in enumerate(raw_lines) if ln.strip())
    lines = [ln for ln in raw_lines if ln.strip()]
    first = lines[0].decode("latin1")
    delimiter = "\t" if "\t" in first else ("," if "," in first else None)

    def split(line):
        return [f.strip().strip("\"'") for f in line.split(delimiter)]

    fields = split(first)
    try:
        [float(f) for f in fields]
        header = None
    except ValueError:
        header = fields
    data_lines = lines[1:] if header is not None else lines
    if not data_lines:
        raise _damaged(path, "it holds no data rows", expect)
    ncols = len(split(data_lines[0].decode("latin1")))
    if ncols != n_cols:
        raise _damaged(
            path,
            f"a HIGGS file has {n_cols} columns (label + 28 features), "
            f"found {ncols} (delimiter {delimiter!r})",
            expect,
        )
    if header is not None and len(header) != ncols:
        raise _damaged(
            path, f"header has {len(header)} names but rows have {ncols} fields", expect
        )

    if isinstance(label_column, str) and label_column not in ("auto", "first", "last"):
        if header is None:
            raise ValueError(
                f"label_column={label_column!r} names a column but {path} has no header"
            )
        low = [h.lower() for h in header]
        if label_column.lower() not in low:
            raise ValueError(f"{path}: no column named {label_column!r}; header is {header}")
        label = low.index(label_column.lower())
    elif label_column == "first":
        label = 0
    elif label_column == "last":
        label = ncols - 1
    elif label_column == "auto":
        label = None
        if header is not None:
            hits = [j for j, h in enumerate(header) if h.lower() in HIGGS_LABEL_NAMES]
            if len(hits) > 1:
                raise ValueError(
                    f"{path}: several possible label columns in header {header}; pass label_column="
                )
            if hits:
                label = hits[0]
        if label is None:
            try:
                sample = np.loadtxt(
                    io.BytesIO(b"\n".join(data_lines[:200])), delimiter=delimiter, ndmin=2
                )
            except ValueError as exc:
                raise _damaged(
                    path, f"could not parse it as numeric delimited text ({exc})", expect
                ) from exc
            is01 = [np.isin(sample[:, j], (0.0, 1.0)).all() for j in (0, ncols - 1)]
            if is01[0]:
                label = 0
            elif is01[1]:
                label = ncols - 1
            else:
                raise ValueError(
                    f"{path}: cannot tell which column is the label (neither the first "
                    "nor the last holds only 0/1); pass label_column="
                )
    elif isinstance(label_column, (int, np.integer)) and not isinstance(label_column, bool):
        label = int(label_column)
        if not -ncols <= label < ncols:
            raise ValueError(f"label_column={label_column} out of range for {ncols} columns")
        label %= ncols
    else:
        raise ValueError(
            "label_column must be 'auto', 'first', 'last', a column index or a header name, "
            f"got {label_column!r}"
        )
    return {
        "delimiter": delimiter,
        "header": header,
        "label_column": label,
        "n_columns": ncols,
        "skip_lines": 0 if header is None else first_line + 1,
    }


def _load_higgs_file(
    path, what, dtype, n_rows=None, standardize=False, add_intercept=False, label_column="auto",
    cache=False, cache_dir=None, return_X_y=False
):
    dtype = _check_dtype(dtype)
    n_rows = _check_n_rows(n_rows)
    expect = _higgs_expect(path)
    layout = _sniff_higgs_layout(path, label_column, expect=expect)
    lab = layout["label_column"]
    feat = [j for j in range(layout["n_columns"]) if j != lab]

    def parsed(digest):
        return _iter_parsed(path, delimiter=layout["delimiter"], dtype=dtype, n_rows=n_rows,
                            skip_lines=layout["skip_lines"], ncols=layout["n_columns"],
                            expect=expect, digest=digest)

    def split(arr):
        y = arr[:, lab]
        if not np.isin(y, (0.0, 1.0)).all():
            bad = np.unique(y[~np.isin(y, (0.0, 1.0))])[:5]
            problem = f"label column {lab} must hold 0/1, found {bad}"
            if label_column != "auto":  # the caller's choice of column may be what is wrong
                raise ValueError(f"{path}: {problem} (label_column={label_column!r})")
            raise _damaged(path, problem, expect)
        if lab == 0:
            return arr[:, 1:], y
        if lab == arr.shape[1] - 1:
            return arr[:, :-1], y
        return arr[:, feat], y

    X, y, meta = _load_table(
        what, path, parsed, split, n_features=28, target_dtype=np.float64, dtype=dtype,
        standardize=standardize, add_intercept=add_intercept, n_rows=n_rows, cache=cache,
        cache_dir=cache_dir, standardize_cols=range(28), options={"label_column": lab},
        expect=expect,
    )
    if return_X_y:
        return X, y
    lay = {
        "delimiter": layout["delimiter"],
        "has_header": layout["header"] is not None,
        "label_column": lab,
    }
    return Bunch(
        data=X,
        target=y,
        feature_names=HIGGS_FEATURE_NAMES + (["intercept"] if add_intercept else []),
        target_names=["background", "signal"],
        **_feature_stats(meta),
        header=layout["header"],
        layout=lay,
        filename=str(path),
        DESCR=_HIGGS_DESCR.format(source=path, layout=lay),
    )


@_doc_not_found
def load_higgs(
    path=None,
    *,
    data_home=None,
    dtype=np.float64,
    n_rows=None,
    standardize=False,
    add_intercept=False,
    label_column="auto",
    cache=False,
    cache_dir=None,
    return_X_y=False,
):
    """Load UCI HIGGS from the full ``HIGGS.csv[.gz]`` or any of its common subsets.

    Layouts read (plain or gzip, detected by content, not by name):

    * UCI ``HIGGS.csv.gz``: comma-separated, no header, label first;
    * LightGBM's ``binary.train`` / ``binary.test``: tab-separated, no
      header, label first;
    * H2O's ``higgs_train_10k.csv`` / ``higgs_test_5k.csv``: comma-separated,
      label first (these copies carry no header line; one with a header is
      read too);
    * SAS Viya's ``higgs.csv``: comma-separated, header, label LAST.

    Detection: the delimiter is a tab if the first line contains one, else a
    comma, else whitespace. The first line is a header if any of its fields
    is not a number. With ``label_column="auto"`` the label is the header
    field named one of ``label``, ``target``, ``class``, ``response``, ``y``,
    ``signal``, ``is_signal``, ``class_label`` (case-insensitive); without
    such a name, the first column if its first 200 values are all 0/1, else
    the last column if its are; otherwise an error asks for
    ``label_column``. Every row must have 29 fields and every label must be
    0 or 1, else :class:`DataFileError`. Features keep the UCI order
    (:data:`HIGGS_FEATURE_NAMES`); jet 1's b-tag is column 8.

    Checks: a file named ``HIGGS.csv[.gz]`` must be the complete UCI file,
    11,000,000 data rows (no checksum of it is on record), and the subsets
    above, under the names they have in the shared data folder
    (``lightgbm_binary.train.gz``, ``lightgbm_binary.test.gz``,
    ``h2o_higgs_train_10k.csv.gz``, ``h2o_higgs_test_5k.csv.gz``,
    ``sas_viya_higgs.csv.gz``, compressed or not) must have their known row
    counts and sha256: a file cut short, even at a line boundary, raises
    :class:`DataFileError` instead of loading fewer rows. With ``n_rows``
    such a file must give that many rows (or all it has). Other files are
    checked only for what can be seen: complete gzip data and parseable
    rows.

    Parameters
    ----------
    path : str or path-like, default=None
        File to read. A name that is not an existing path is looked up in the
        data home like the default. If None, ``HIGGS.csv.gz`` (or
        ``HIGGS.csv``) is looked for at ``<data_home>/higgs/`` and
        ``<data_home>/``. There is no silent fallback to the shipped sample:
        use :func:`load_higgs_sample` for that.
    data_home : str or path-like, default=None
        See :func:`get_data_home`.
    dtype : {np.float64, np.float32}, default=np.float64
        Dtype of the feature matrix; values are parsed straight into it, so
        float32 halves the memory of full HIGGS (1.2 GB instead of 2.5 GB).
    n_rows : int, default=None
        Read only the first ``n_rows`` data rows.
    standardize : bool, default=False
        Centre and scale the 28 features to mean 0 and standard deviation 1
        over the rows loaded (in place, in blocks, no full-size temporaries);
        the statistics are returned as ``feature_mean``/``feature_scale``.
    add_intercept : bool, default=False
        Append a last column of ones.
    label_column : 'auto', 'first', 'last', int or str, default='auto'
        Which column holds the label; a str other than the keywords is a
        header name.
    cache : bool, default=False
        Parse once into ``.npy`` files in :func:`get_cache_dir`, streaming
        block by block (full HIGGS then needs about 100 MB of RAM besides
        the output while parsing, which takes a few minutes, once), and
        return read-only memory maps.
        Recommended for the full file.
    cache_dir : str or path-like, default=None
        See :func:`get_cache_dir`.
    return_X_y : bool, default=False
        Return ``(data, target)`` instead of a Bunch.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        ``data`` (n, 28[+1]), ``target`` float64 0/1 (1 = signal),
        ``feature_names``, ``target_names``, ``feature_mean``,
        ``feature_scale``, ``header`` (names in the file, or None), ``layout``
        (what was detected), ``filename``, ``DESCR``.
    (data, target) : tuple if ``return_X_y`` is True.

    {raises_not_found}
    DataFileError
        If the file cannot be decompressed or parsed, does not have the HIGGS
        layout, or is a known file with other rows or content than it has;
        the message says what is wrong and what to do.
    ValueError
        If ``label_column`` is not a valid choice for the file.

    Examples
    --------
    >>> from bayes_subsample.datasets import load_higgs
    >>> X, y = load_higgs(n_rows=1000, return_X_y=True)  # doctest: +SKIP
    >>> X.shape                                           # doctest: +SKIP
    (1000, 28)
    """
    if path is None:
        path = _find_file(
            _SOURCE,
            data_home,
            hint="For a small real sample that needs no "
            "download use bayes_subsample.datasets.load_higgs_sample().",
        )
    else:
        p = _expand_path(path)
        path = p if p.is_file() else _find_file(_SOURCE, data_home, files=(p.name,))
    return _load_higgs_file(
        path, "higgs", dtype, n_rows, standardize, add_intercept, label_column, cache, cache_dir,
        return_X_y
    )


_HIGGS_SAMPLE_FILES = {
    "train": "higgs_lightgbm_binary.train.gz",
    "test": "higgs_lightgbm_binary.test.gz",
}


def load_higgs_sample(
    split="train", *, dtype=np.float64, standardize=False, add_intercept=False, return_X_y=False
):
    """Load the 7,500 real HIGGS rows shipped with the package.

    These are UCI HIGGS rows 1-7000 (``split="train"``) and 7001-7500
    (``split="test"``), features rounded to 3 decimals, exactly as LightGBM
    ships them in ``examples/binary_classification`` (MIT licence; the data
    are UCI HIGGS, CC BY 4.0). Needs no download. The files' rows and sha256
    are checked on every load (:class:`DataFileError` if one is damaged).

    Parameters
    ----------
    split : {'train', 'test', 'all'}, default='train'
        Which rows; ``'all'`` stacks train then test (7,500 rows).
    dtype, standardize, add_intercept, return_X_y
        As in :func:`load_higgs`. With ``standardize`` the statistics come
        from the rows returned; to standardise test rows with training
        statistics use the returned ``feature_mean``/``feature_scale``.

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch` or tuple
        As in :func:`load_higgs`.

    Examples
    --------
    >>> from bayes_subsample.datasets import load_higgs_sample
    >>> X, y = load_higgs_sample(return_X_y=True)
    >>> X.shape
    (7000, 28)
    >>> round(float(y.mean()), 2)
    0.53
    """
    if split not in ("train", "test", "all"):
        raise ValueError(f"split must be 'train', 'test' or 'all', got {split!r}")
    parts = [
        _load_higgs_file(_PACKAGE_DATA / _HIGGS_SAMPLE_FILES[s], "higgs_sample", dtype,
                         label_column="first")
        for s in (("train", "test") if split == "all" else (split,))
    ]
    b = parts[0]
    if len(parts) > 1:
        b.data = np.concatenate([p.data for p in parts])
        b.target = np.concatenate([p.target for p in parts])
        b.filename = [p.filename for p in parts]
    if standardize:
        b.feature_mean, b.feature_scale = standardize_inplace(b.data, range(28))
    if add_intercept:
        b.data = _with_intercept(b.data, b.data.dtype)
        b.feature_names = b.feature_names + ["intercept"]
        if standardize:
            b.feature_mean = np.r_[b.feature_mean, 0.0]
            b.feature_scale = np.r_[b.feature_scale, 1.0]
    b.DESCR = (
        f"HIGGS sample shipped with bayes_subsample (split={split!r}): UCI HIGGS rows "
        "1-7000 (train) and 7001-7500 (test) as in LightGBM's examples.\n" + b.DESCR
    )
    if return_X_y:
        return b.data, b.target
    return b

