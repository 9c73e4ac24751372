"""Real-data loaders and synthetic data generators.

Loaders
-------
The loaders read the datasets in the formats their original distributions
ship, so the same code works on the copies in a shared data folder and on a
user's own download:

============================  ==================================================
:func:`load_covtype`          UCI Covertype ``covtype.data[.gz]``
:func:`load_higgs`            UCI HIGGS ``HIGGS.csv[.gz]`` and its common subsets
:func:`load_kddcup99`         KDD Cup 1999 ``kddcup.data_10_percent[.gz]``
:func:`load_mnist_7vs9`       MNIST digits 7 vs 9 (``mnist_7vs9_derived.npz`` or
                              the original IDX files)
:func:`load_higgs_sample`     7,500 real HIGGS rows shipped with the package
:func:`load_covtype_sample`   20,000 real Covertype rows shipped with the package
============================  ==================================================

A user's own file (CSV/TSV, ``.npz``, LIBSVM/svmlight) is read by
:func:`load_file`, the reader behind ``bayes-subsample fit FILE``.

Where files are looked for
--------------------------
The *data home* is the ``data_home`` argument, else the environment variable
``BAYES_SUBSAMPLE_DATA``, else ``~/bayes_subsample_data`` (see
:func:`get_data_home`). A file ``<file>`` of dataset ``<subdir>`` (``covtype``,
``higgs``, ``kddcup99``, ``mnist``) is looked for at ``<home>/<subdir>/<file>``
and then at ``<home>/<file>``, compressed (``.gz``) and plain. A missing file
raises :class:`FileNotFoundError` naming the paths tried and where to download
the file. Nothing is downloaded automatically.

What is checked
---------------
A loader never returns part of a file without saying so. Any problem with a
data file raises :class:`DataFileError`, a subclass of :class:`ValueError`,
whose message names the file, says what is wrong and what to do (for a
download: delete it and download it again, from the address given):

* gzip data that end early (a truncated download) or are corrupt, text that
  does not parse, an empty file or one without data rows;
* the complete original files must have all their rows: ``covtype.data``
  581,012, ``HIGGS.csv`` 11,000,000, ``kddcup.data_10_percent`` 494,021,
  the MNIST IDX files 60,000 and 10,000 items. A file cut at a line
  boundary is refused instead of loading fewer rows. With ``n_rows`` a
  loader must get that many rows (or all the file has);
* read whole, a file whose content is fixed must have its sha256: that of
  the decompressed content, so a gunzipped or re-compressed copy passes.
  The values were computed from the copies in the shared data folder (the
  covtype one decompresses to the md5 UCI publishes, the KDD Cup ``.gz`` has
  the sha256 scikit-learn's fetcher expects); no checksum of full HIGGS is
  on record, so it is checked by its row count only;
* the HIGGS subsets read by :func:`load_higgs` under the names they have in
  the shared data folder (``lightgbm_binary.train.gz``,
  ``h2o_higgs_train_10k.csv.gz``, ``sas_viya_higgs.csv.gz``, ...), the
  samples shipped with the package and ``mnist_7vs9_derived.npz`` (by its
  arrays' shapes and the sha256 of their contents) are checked the same way.

A file of unknown size, such as a user's own CSV given to :func:`load_file`
or :func:`load_higgs`, can only be checked for what shows: complete gzip
data, parseable rows, no missing values.

Caching and memory mapping
--------------------------
Parsing text is the slow part (full HIGGS is 11 million rows, about 8 GB of
text). Integers are parsed with ``np.loadtxt``; floats with pandas' C parser
when pandas is installed (about three times faster, same values), else with
``np.loadtxt``. With ``cache=True`` the parsed arrays are written once as
``.npy`` files in a cache directory (:func:`get_cache_dir`) and every later
call opens them with ``np.load(..., mmap_mode="r")``: the arrays are
read-only memory maps, and parallel chains or joblib workers that open the
same file share one copy through the operating system's page cache. While
the cache is being built the rows are streamed to disk block by block (32 MB
of text at a time), so even full HIGGS needs only about 100 MB of memory to
parse. The cache key covers the source file's path, size and modification
time and every option that changes the result.

An entry is written to a temporary folder beside it, with a ``meta.json``
holding each ``.npy`` file's size and sha256, and renamed into place only
when complete, so an interrupted build never passes for an entry. Every open
checks the sizes and the sha256 of the whole files (one sequential read,
about a second per GB, against minutes of parsing; the pages read stay in
the shared page cache). A damaged or partial entry is deleted, with a
:class:`RuntimeWarning`, and rebuilt from the source file. The entry also
holds the BLAKE2b hash of the source file's bytes, compared with the file's
at every open (another sequential read, of the compressed file): a source
replaced by other contents of the same size and modification time is parsed
again, never served stale. A cache folder that cannot take an entry (a full
disk or quota, a read-only or unwritable folder) gives a
:class:`RuntimeWarning` naming that folder, and the arrays are parsed in
memory as with ``cache=False``; the build's temporary folder is removed
however it stops. :func:`clear_cache` deletes every entry, complete or not,
and the leftovers of interrupted builds.

Targets
-------
Binary targets are float64 arrays of 0.0 / 1.0 (the layout the package's GLM
kernels take directly); multi-class targets are int64. Feature matrices are
C-contiguous float32 or float64 (``dtype``).

Synthetic data
--------------
:func:`make_logistic_data` draws HIGGS-shaped logistic-regression data of any
size in chunks into one preallocated array (:func:`make_logistic_data_dask`:
the same rows as Dask arrays drawn where their chunks are computed, for
cluster-sized data); :func:`make_gaussian_regression`
draws linear-Gaussian data for tests against exact conjugate posteriors.
Neither adds an intercept column: the package's estimators have
``fit_intercept`` and treat the intercept as a virtual column of ones.
"""
from ._base import DataFileError, clear_cache, get_cache_dir, get_data_home
from ._covtype import load_covtype, load_covtype_sample
from ._files import load_file
from ._higgs import load_higgs, load_higgs_sample
from ._kddcup99 import load_kddcup99
from ._mnist import load_mnist_7vs9
from ._samples_generator import (make_gaussian_regression, make_logistic_data,
                                 make_logistic_data_dask)
from ._npy import open_npy_dask

# public constants: importable from here, as always, though not in __all__
from ._base import CACHE_DIR_ENV, DATA_HOME_ENV, DEFAULT_DATA_HOME  # noqa: F401
from ._covtype import COVTYPE_CLASS_NAMES, COVTYPE_FEATURE_NAMES  # noqa: F401
from ._higgs import HIGGS_FEATURE_NAMES, HIGGS_LABEL_NAMES  # noqa: F401
from ._kddcup99 import KDDCUP99_COLUMN_NAMES  # noqa: F401

__all__ = [
    "DataFileError",
    "clear_cache",
    "get_cache_dir",
    "get_data_home",
    "load_covtype",
    "load_covtype_sample",
    "load_file",
    "load_higgs",
    "load_higgs_sample",
    "load_kddcup99",
    "load_mnist_7vs9",
    "make_gaussian_regression",
    "make_logistic_data",
    "make_logistic_data_dask",
    "open_npy_dask",
]
