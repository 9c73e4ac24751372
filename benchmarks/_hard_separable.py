"""Separable data, every sampler at its defaults against a long NUTS run: iris
setosa against the rest (standardised) and a separable synthetic set of
1e5 x 20. Bounds: exact samplers' means within 0.1 sd, approximate ones' within
0.3 sd with sds within 30%, or a clear error before any draw."""
from __future__ import annotations

from _hard_every_sampler import (SAMPLERS, criteria, merge_rows, ref_summary, run_problem,
                                 stored_reference)
from _hard_every_sampler import table as rows_table
from _hard_problems import iris_setosa, separable_synthetic
from bayes_subsample.models import LogisticRegressionModel


def problems(quick):
    X, y = iris_setosa()
    yield "iris setosa", LogisticRegressionModel(X, y, prior_scale=10.0,
                                                 intercept_prior_scale=10.0)
    X, y = separable_synthetic(n=20_000 if quick else 100_000)
    yield "separable 1e5 x 20", LogisticRegressionModel(X, y, prior_scale=10.0,
                                                        intercept_prior_scale=10.0)


def run(seeds=(0, 1, 2), quick=False, samplers=None, stored=None):
    """Every sampler's rows; ``samplers`` (with ``stored``, this section's stored
    result): only theirs, against the stored references, merged into the
    stored rows."""
    rows, refs = [], {}
    for label, model in problems(quick):
        ref = stored_reference(stored, label) if samplers else None
        r, ref = run_problem(label, model, seeds, quick, samplers=samplers or SAMPLERS,
                             reference=ref)
        rows += r
        refs[label] = ref_summary(ref)
    if samplers:
        rows = merge_rows(stored, rows, samplers)
    return {"rows": rows, "references": refs, "criteria": criteria(rows)}


def table(result):
    return rows_table(result["rows"])
