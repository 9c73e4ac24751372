"""Separable data, every sampler at its defaults against a long NUTS run: iris
setosa against the rest (standardised) and a separable synthetic set of
1e5 x 20. Bounds: exact samplers' means within 0.1 sd, approximate ones' within
0.3 sd with sds within 30%, or a clear error before any draw."""
from __future__ import annotations

from _hard_every_sampler import criteria, ref_summary, run_problem
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


def run(seeds=(0, 1, 2), quick=False):
    rows, refs = [], {}
    for label, model in problems(quick):
        r, ref = run_problem(label, model, seeds, quick)
        rows += r
        refs[label] = ref_summary(ref)
    return {"rows": rows, "references": refs, "criteria": criteria(rows)}


def table(result):
    return rows_table(result["rows"])
