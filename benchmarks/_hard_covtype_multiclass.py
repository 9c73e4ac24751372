"""covtype, 7 classes, all 54 attributes, all 581,012 rows, 80/20 split: the
default fit against scikit-learn (held-out accuracy) and, where its cached
reference exists (``results/reference_covtype_multiclass.npz``, made with
``bench_hard_data.py --reference``: a full-data NUTS run of 385 parameters on
464,809 rows, 4 chains x (1000 + 1000) at mean tree depth 4, 5,664 s on 2 cores
shared with other work), a long full-data NUTS run (see ``_hard_covtype.py``)."""
from __future__ import annotations

from _hard_covtype import run_covtype
from _hard_covtype import table as covtype_table

#: make the cached reference if it is missing (``bench_hard_data.py --reference``)
MAKE_REFERENCE = False


def run(seeds=(0, 1, 2), quick=False):
    return run_covtype("covtype_multiclass", False, seeds, quick,
                       make_reference=MAKE_REFERENCE)


def table(result):
    return covtype_table(result, "accuracy")
