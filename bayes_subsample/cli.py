"""The ``bayes-subsample`` command line (also ``python -m bayes_subsample``).

Commands
--------
``demo``
    Fits Bayesian logistic regression to the 7,000 real HIGGS rows shipped with
    the package with HMC-ECS and with full-data HMC, prints a diagnostics table
    and writes a posterior-predictive ROC plot of the 500 held-out rows.
``fit``
    Fits one model with one sampler to a CSV, npz or LIBSVM file or a named
    dataset; saves the draws (npz) and a summary (JSON or text).
``compare``
    Fits several samplers to one dataset; prints a table and writes trace,
    marginal-density and ROC plots.

Run ``bayes-subsample <command> --help`` for the options. Errors in the input
(missing files, unknown columns, samplers or options) exit with status 2 and a
one-line message.
"""
from __future__ import annotations

import argparse
import ast
import json
import os
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np

from .datasets._files import _load_file

__all__ = ["main"]

PROG = "bayes-subsample"
WIDTH = 79

#: named datasets accepted in place of a file path
DATASETS = {
    "higgs-sample": "7,000 + 500 held-out real HIGGS rows shipped with the package (28 features)",
    "covtype-sample": "20,000 real Covertype rows shipped with the package (54 features, "
                      "class 2 vs rest)",
    "covtype": "UCI Covertype, 581,012 rows (needs covtype.data.gz in the data home)",
    "higgs": "UCI HIGGS (needs HIGGS.csv.gz in the data home; --n-rows to read part)",
    "mnist7v9": "MNIST 7 vs 9, 12,214 + 2,037 held-out images, PCA to --pca components "
                "(needs the MNIST files in the data home)",
    "kddcup99": "KDD Cup 1999 10%, 494,021 rows, attack vs normal (needs "
                "kddcup.data_10_percent.gz in the data home)",
}

MODELS = ("logistic", "linear", "poisson")


class CLIError(Exception):
    """A user error: printed as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error message (no usage dump) and exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _say(*lines, file=None):
    print(*lines, sep="\n", file=file or sys.stdout, flush=True)


def _wrap(text, indent=""):
    return textwrap.fill(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False, break_long_words=False)


# --------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------

class _Data:
    def __init__(self, X, y, names, description, X_test=None, y_test=None):
        self.X, self.y, self.names, self.description = X, y, list(names), description
        self.X_test, self.y_test = X_test, y_test


def _standardize(X, X_test=None):
    """Centre and scale the columns with the rows of X (constant columns are
    only centred); the same transformation is applied to X_test."""
    X = np.array(X, dtype=np.float64 if X.dtype != np.float32 else np.float32, order="C")
    mean = X.mean(axis=0)
    scale = X.std(axis=0)
    scale[scale <= 1e-12] = 1.0
    X -= mean
    X /= scale
    if X_test is not None:
        X_test = (np.asarray(X_test, dtype=X.dtype) - mean) / scale
    return X, X_test, mean, scale


def _named_dataset(name, args):
    from . import datasets as ds

    std = args.standardize
    dtype = np.dtype(args.dtype)
    home = args.data_home
    if name == "higgs-sample":
        b = ds.load_higgs_sample("train", dtype=dtype, standardize=std)
        t = ds.load_higgs_sample("test", dtype=dtype)
        Xt = t.data
        if std:
            Xt = ((Xt - b.feature_mean) / b.feature_scale).astype(dtype)
        return _Data(b.data, b.target, b.feature_names, DATASETS[name], Xt, t.target)
    if name == "covtype-sample":
        b = ds.load_covtype_sample(dtype=dtype, standardize=std)
        return _Data(b.data, b.target, b.feature_names, DATASETS[name])
    if name == "covtype":
        b = ds.load_covtype(data_home=home, dtype=dtype, standardize=std, n_rows=args.n_rows,
                            cache=True)
        return _Data(b.data, b.target, b.feature_names, DATASETS[name])
    if name == "higgs":
        b = ds.load_higgs(data_home=home, dtype=dtype, standardize=std, n_rows=args.n_rows,
                          cache=True)
        return _Data(b.data, b.target, b.feature_names, DATASETS[name])
    if name == "kddcup99":
        b = ds.load_kddcup99(data_home=home, dtype=dtype, standardize=std, n_rows=args.n_rows,
                             cache=True)
        return _Data(b.data, b.target, b.feature_names, DATASETS[name])
    if name == "mnist7v9":
        b = ds.load_mnist_7vs9(pca_components=args.pca or None, data_home=home, dtype=dtype)
        X, Xt = b.X_train, b.X_test
        if std:
            X, Xt, _, _ = _standardize(X, Xt)
        return _Data(X, b.y_train, b.feature_names, DATASETS[name], Xt, b.y_test)
    raise AssertionError(name)  # pragma: no cover


def load_data(args):
    """The data named by ``args.data``: a named dataset or a file."""
    spec = args.data
    if spec.lower() in DATASETS and not Path(spec).exists():
        if getattr(args, "target", None) is not None:
            raise CLIError(f"--target applies to CSV files, not to the named dataset {spec!r}")
        try:
            data = _named_dataset(spec.lower(), args)
        except FileNotFoundError as exc:
            msg = " ".join(str(exc).split())
            raise CLIError(f"{msg} (--data-home sets the data home)") from exc
    else:
        path = Path(spec).expanduser()
        if not path.exists():
            names = ", ".join(DATASETS)
            if path.suffix or os.sep in spec:
                raise CLIError(f"no such file: {spec}")
            raise CLIError(f"{spec!r} is neither a file nor a named dataset ({names})")
        if path.is_dir():
            raise CLIError(f"{spec} is a directory, not a data file")
        try:
            f = _load_file(path, args.target, args.format, target_option="--target")
        except ValueError as exc:
            raise CLIError(str(exc)) from exc
        X, y, Xt, yt = f.data, f.target, f.data_test, f.target_test
        if args.n_rows is not None:
            X, y = X[:args.n_rows], y[:args.n_rows]
        if args.standardize:
            X, Xt, _, _ = _standardize(X, Xt)
        X = np.ascontiguousarray(X, dtype=np.dtype(args.dtype))
        if Xt is not None:
            Xt = np.ascontiguousarray(Xt, dtype=np.dtype(args.dtype))
        data = _Data(X, y, f.feature_names, f.DESCR, Xt, yt)
    if data.X.shape[0] < 2:
        raise CLIError(f"{spec} has {data.X.shape[0]} rows: need at least 2")
    return data


# --------------------------------------------------------------------------
# samplers and models
# --------------------------------------------------------------------------

def _registry():
    from .samplers import SAMPLERS
    return SAMPLERS


def _parse_value(text):
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        low = text.lower()
        if low in ("none", "null"):
            return None
        if low in ("true", "false"):
            return low == "true"
        return text


def _sampler_params(param_args, sampler_names, allow_unprefixed):
    """``--param KEY=VALUE`` / ``--param SAMPLER.KEY=VALUE`` -> {sampler: {key: value}}."""
    out = {name: {} for name in sampler_names}
    for item in param_args or []:
        if "=" not in item:
            raise CLIError(f"--param {item!r} must look like KEY=VALUE (e.g. step_size=0.01)")
        key, value = item.split("=", 1)
        key = key.strip()
        if "." in key:
            target, key = key.split(".", 1)
            if target not in out:
                raise CLIError(f"--param {item!r} names sampler {target!r}, which is not "
                               f"being run ({', '.join(sampler_names)})")
            targets = [target]
        elif allow_unprefixed:
            targets = list(sampler_names)
        else:
            raise CLIError(f"--param {item!r}: with several samplers write SAMPLER.KEY=VALUE "
                           f"(e.g. {sampler_names[0]}.{key}=...)")
        for t in targets:
            out[t][key] = _parse_value(value.strip())
    return out


def make_sampler(name, params):
    reg = _registry()
    if name not in reg:
        raise CLIError(f"unknown sampler {name!r}; registered samplers: {', '.join(reg)}")
    sampler = reg[name]()
    if params:
        valid = sampler.get_params()
        for key in params:
            if key not in valid:
                raise CLIError(f"sampler {name!r} has no parameter {key!r}; its parameters "
                               f"are {', '.join(sorted(valid))}")
        sampler.set_params(**params)
    return sampler


def make_estimator(model, sampler, args):
    from .linear_model import (
        BayesianLinearRegression,
        BayesianLogisticRegression,
        BayesianPoissonRegression,
    )

    cls = {"logistic": BayesianLogisticRegression, "linear": BayesianLinearRegression,
           "poisson": BayesianPoissonRegression}[model]
    return cls(sampler=sampler, n_samples=args.n_samples, n_warmup=args.n_warmup,
               n_chains=args.chains, n_jobs=args.jobs, prior_scale=args.prior_scale,
               fit_intercept=not args.no_intercept, random_state=args.seed,
               progress=getattr(args, "progress", False))


def _fit(est, X, y, label, quiet=False):
    """Fit, collecting warnings as notes; returns (estimator, notes, seconds)."""
    if not quiet:
        print(f"  sampling with {label:<16} ...", end="", flush=True)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            est.fit(X, y)
        except KeyboardInterrupt:
            if not quiet:
                print(" interrupted", flush=True)
            raise
        except Exception:
            if not quiet:
                print(" failed", flush=True)
            raise
    seconds = time.perf_counter() - t0
    if not quiet:
        print(f" done in {seconds:.1f} s", flush=True)
    notes = []
    for w in caught:
        msg = str(w.message)
        if msg not in notes and not issubclass(w.category, (DeprecationWarning,
                                                            PendingDeprecationWarning)):
            notes.append(msg)
    return est, notes, seconds


# --------------------------------------------------------------------------
# tables
# --------------------------------------------------------------------------

_COLUMNS = [  # key, header, width, format
    ("label", "sampler", 14, "{}"),
    ("r_hat", "R-hat", 6, "{:.3f}"),
    ("ess", "ESS", 6, "{:.0f}"),
    ("ess_s", "ESS/s", 7, "{:.1f}"),
    ("accept", "accept", 6, "{:.2f}"),
    ("data", "data/it", 7, "{}"),
    ("time", "time s", 7, "{:.1f}"),
    ("auc", "AUC", 5, "{:.3f}"),
    ("err", "err", 5, "{:.2f}"),
]


def _fmt_fraction(f):
    if not np.isfinite(f):
        return "-"
    pct = 100 * f
    return f"{pct:.0f}%" if pct >= 10 else (f"{pct:.1f}%" if pct >= 0.1 else f"{pct:.2g}%")


def table_row(label, est, reference=None, X_test=None, y_test=None):
    """The numbers of one sampler for :func:`format_table`."""
    d = est.diagnostics_
    row = {"label": label}
    rh = d.get("r_hat")
    row["r_hat"] = (float(np.nanmax(rh)) if rh is not None and est.n_chains > 1
                    and np.any(np.isfinite(rh)) else None)
    row["ess"] = float(np.nanmin(d["ess_bulk"])) if "ess_bulk" in d else None
    row["ess_s"] = float(np.nanmin(d["ess_per_second"])) if "ess_per_second" in d else None
    row["accept"] = float(np.mean(d["acceptance_rate"]))
    row["data"] = _fmt_fraction(float(np.mean(d["data_fraction_per_iteration"])))
    row["data_fraction"] = float(np.mean(d["data_fraction_per_iteration"]))
    row["time"] = float(est.trace_.wall_time["total"])
    row["auc"] = None
    if X_test is not None and hasattr(est, "predict_proba"):
        from sklearn.metrics import roc_auc_score
        yt = (np.asarray(y_test) == est.classes_[1]).astype(int)
        if 0 < yt.sum() < yt.size:
            row["auc"] = float(roc_auc_score(yt, est.predict_proba(X_test)[:, 1]))
    row["err"] = None
    if reference is not None and reference is not est:
        ref = reference.sample_posterior()
        sd = ref.std(axis=0)
        sd[sd <= 0] = 1.0
        row["err"] = float(np.max(np.abs(est.sample_posterior().mean(axis=0)
                                         - ref.mean(axis=0)) / sd))
    return row


def format_table(rows):
    """An aligned table (79 columns at most) of :func:`table_row` results."""
    cols = [c for c in _COLUMNS if any(r.get(c[0]) is not None for r in rows)]
    lines = ["  ".join(h.ljust(w) if k == "label" else h.rjust(w) for k, h, w, _ in cols)]
    lines.append("-" * len(lines[0]))
    for r in rows:
        cells = []
        for k, _, w, f in cols:
            v = r.get(k)
            s = "-" if v is None or (isinstance(v, float) and not np.isfinite(v)) else f.format(v)
            cells.append(s[:w].ljust(w) if k == "label" else s.rjust(w))
        lines.append("  ".join(cells))
    return "\n".join(lines)


def _legend(rows, n, reference_label=None):
    keys = {k for r in rows for k, v in r.items() if v is not None}
    parts = ["R-hat: largest over parameters; below 1.01 means the chains agree.",
             "ESS: smallest effective sample size (bulk) over parameters.",
             "accept: acceptance rate.",
             (f"data/it: likelihood terms evaluated per iteration as a share of the n = {n:,} "
              "rows (full HMC evaluates every row at each leapfrog step, so it can exceed "
              "100%)."),
             ("time s: sampling time including tuning, summed over chains (chains may run "
              "in parallel, so it can exceed the elapsed time); ESS/s uses it.")]
    if "auc" in keys:
        parts.append("AUC: posterior-predictive AUC on the held-out rows.")
    if "err" in keys and reference_label:
        parts.append(f"err: largest |posterior mean - {reference_label}'s| over parameters, "
                     f"in {reference_label} posterior standard deviations.")
    return "\n".join(_wrap(p) for p in parts)


def _print_notes(label, notes, short=False):
    """Warnings raised while fitting; ``short`` keeps the part before the
    first colon of each (the finding, without the advice)."""
    if not notes:
        return
    if short:
        _say(_wrap(f"warnings [{label}]: " + "; ".join(m.split(":")[0] for m in notes) + "."))
    else:
        for msg in notes:
            _say(_wrap(f"warning [{label}]: {msg}"))


def _print_all_notes(notes):
    if any(notes.values()):
        for label, msgs in notes.items():
            _print_notes(label, msgs, short=True)
        _say(_wrap("Longer runs (--n-warmup, --n-samples, --chains) fix most R-hat and ESS "
                   "warnings; samplers without an MH correction (sgld, sghmc, ewsg) also "
                   "need a suitable step size (--param)."))


# --------------------------------------------------------------------------
# plots
# --------------------------------------------------------------------------

def _plt_or_none():
    try:
        import matplotlib
        if "matplotlib.pyplot" not in sys.modules and not os.environ.get("MPLBACKEND"):
            matplotlib.use("Agg")  # writing files only: no window needed
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


_NO_MPL = ("matplotlib is not installed, so no plot was written; get it with "
           "'pip install matplotlib' (or pip install 'bayes_subsample[plot]') and run "
           "again.")


def _save(fig, path):
    path = Path(path)
    if path.parent and not path.parent.exists():
        raise CLIError(f"cannot write {path}: folder {path.parent} does not exist")
    try:
        fig.savefig(path, dpi=110)
    except (OSError, ValueError) as exc:
        raise CLIError(f"cannot write {path}: {exc}") from exc
    return path


# --------------------------------------------------------------------------
# demo
# --------------------------------------------------------------------------

def cmd_demo(args):
    from .datasets import load_higgs_sample

    if args.quick:
        defaults = {"n_samples": 200, "n_warmup": 200, "chains": 2}
    else:
        defaults = {"n_samples": 1000, "n_warmup": 500, "chains": 4}
    for k, v in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    args.prior_scale, args.no_intercept = 10.0, False
    train = load_higgs_sample("train", standardize=True)
    test = load_higgs_sample("test")
    X, y = train.data, train.target
    X_test = (test.data - train.feature_mean) / train.feature_scale
    y_test = test.target
    _say(_wrap(
        f"Bayesian logistic regression on {X.shape[0]:,} real HIGGS collision events "
        f"({X.shape[1]} standardised features + intercept = {X.shape[1] + 1} parameters), "
        f"{args.chains} chains x ({args.n_warmup} warmup + {args.n_samples} kept) "
        f"iterations; {X_test.shape[0]} held-out events for the ROC curve."), "")
    runs = [("hmc", "full HMC"), ("hmc_ecs", "HMC-ECS")]
    fitted, notes = {}, {}
    for name, label in runs:
        est = make_estimator("logistic", make_sampler(name, {}), args)
        fitted[label], notes[label], _ = _fit(est, X, y, label)
    ref = fitted["full HMC"]
    rows = [table_row(label, est, ref, X_test, y_test) for label, est in fitted.items()]
    _say("", format_table(rows), "")
    _say(_legend(rows, X.shape[0], "full HMC"), "")
    r_h, r_e = rows
    if r_h["ess_s"] and r_e["ess_s"]:
        _say(_wrap(
            f"HMC-ECS evaluated {_fmt_fraction(r_e['data_fraction'])} of the likelihood terms "
            f"per iteration (full HMC: {_fmt_fraction(r_h['data_fraction'])}) and produced "
            f"{r_e['ess_s'] / r_h['ess_s']:.1f} times the effective samples per second; its "
            f"posterior means are within {r_e['err']:.2f} posterior standard deviations of "
            "full HMC's. The gap in cost grows with n: HMC-ECS's subsample size stays "
            "roughly fixed while every full-HMC step reads all the data."))
    _print_all_notes(notes)
    if args.no_plot:
        return 0
    plt = _plt_or_none()
    if plt is None:
        _say("", _wrap(_NO_MPL))
        return 0
    from .plotting import plot_roc
    fig, ax = plt.subplots(figsize=(5.6, 5.0), layout="constrained")
    for (label, est), color in zip(fitted.items(), ("C0", "C1")):
        plot_roc(est, X_test, y_test, ax=ax, label=label, color=color)
    ax.set_title(f"HIGGS sample: posterior-predictive ROC\n({X_test.shape[0]} held-out "
                 "events, bands: 90% of per-draw curves)", fontsize="medium")
    path = _save(fig, args.out)
    plt.close(fig)
    _say("", f"ROC plot written to {path}")
    return 0


# --------------------------------------------------------------------------
# fit
# --------------------------------------------------------------------------

def _check_model_target(model, y, spec):
    y = np.asarray(y, dtype=np.float64)
    if model == "logistic":
        n_classes = np.unique(y).size
        if n_classes != 2:
            raise CLIError(f"--model logistic needs a binary target; the target of {spec} has "
                           f"{n_classes} distinct values (use --model linear or poisson, or "
                           "another --target)")
    elif model == "poisson" and (np.any(y < 0) or np.any(y != np.round(y))):
        raise CLIError(f"--model poisson needs non-negative integer counts; the target of "
                       f"{spec} has other values")


def _summary_json(est, data, args, sampler, notes):
    d = est.diagnostics_
    s = est.trace_.summary()
    summ = {name: {c: float(s[c][i]) for c in s.columns} for i, name in enumerate(s.names)}

    def f(v):
        return None if v is None or not np.isfinite(v) else float(v)

    return {
        "data": args.data, "n_rows": int(data.X.shape[0]), "n_features": int(data.X.shape[1]),
        "feature_names": data.names, "model": args.model, "sampler": args.sampler,
        "sampler_params": {k: (v if isinstance(v, (int, float, str, bool, type(None)))
                               else repr(v)) for k, v in sampler.get_params().items()},
        "n_samples": args.n_samples, "n_warmup": args.n_warmup, "n_chains": args.chains,
        "seed": args.seed, "standardize": bool(args.standardize),
        "param_names": list(est.trace_.param_names),
        "summary": summ,
        "diagnostics": {
            "max_r_hat": f(np.nanmax(d["r_hat"])) if "r_hat" in d and est.n_chains > 1 else None,
            "min_ess_bulk": f(np.nanmin(d["ess_bulk"])) if "ess_bulk" in d else None,
            "min_ess_per_second": (f(np.nanmin(d["ess_per_second"]))
                                   if "ess_per_second" in d else None),
            "acceptance_rate": [float(a) for a in d["acceptance_rate"]],
            "data_fraction_per_iteration": [float(a) for a in d["data_fraction_per_iteration"]],
            "n_divergences": [int(a) for a in d["n_divergences"]],
            "wall_time_seconds": float(est.trace_.wall_time["total"]),
            "tau_hat": float(est.tau_hat_) if hasattr(est, "tau_hat_") else None,
        },
        "warnings": notes,
    }


def cmd_fit(args):
    data = load_data(args)
    _check_model_target(args.model, data.y, args.data)
    params = _sampler_params(args.param, [args.sampler], allow_unprefixed=True)[args.sampler]
    sampler = make_sampler(args.sampler, params)
    out = Path(args.out)
    summary_path = Path(args.summary) if args.summary else out.with_name(out.stem + "_summary.json")
    for p in (out, summary_path):
        if not p.parent.exists():
            raise CLIError(f"cannot write {p}: folder {p.parent} does not exist")
    if not args.quiet:
        _say(_wrap(f"{data.description}; {data.X.shape[1]} features"
                   f"{' (standardised)' if args.standardize else ''}; {args.model} regression, "
                   f"sampler {args.sampler}, {args.chains} chains x ({args.n_warmup} warmup + "
                   f"{args.n_samples} kept) iterations."))
    est = make_estimator(args.model, sampler, args)
    est, notes, _ = _fit(est, data.X, data.y, args.sampler, quiet=args.quiet)
    tr = est.trace_
    names = list(tr.param_names)
    if data.names and len(data.names) == data.X.shape[1]:
        names = [f"{n}" for n in data.names] + names[len(data.names):]
        tr.param_names = names
    arrays = {"draws": tr.draws, "param_names": np.array(names),
              "warmup_draws": tr.warmup_draws}
    for k, v in tr.stats.items():
        arrays[f"stats_{k}"] = v
    try:
        np.savez_compressed(out, **arrays)
    except OSError as exc:
        raise CLIError(f"cannot write {out}: {exc}") from exc
    info = _summary_json(est, data, args, sampler, notes)
    try:
        if summary_path.suffix.lower() == ".txt":
            summary_path.write_text(str(tr.summary()) + "\n")
        else:
            summary_path.write_text(json.dumps(info, indent=2) + "\n")
    except OSError as exc:
        raise CLIError(f"cannot write {summary_path}: {exc}") from exc
    if not args.quiet:
        s = str(tr.summary()).splitlines()
        shown = s[:1 + 30]
        _say("", *shown)
        if len(s) > len(shown):
            _say(f"... {len(s) - len(shown)} more parameters in {summary_path}")
        _say("", format_table([table_row(args.sampler, est)]), "")
        _print_notes(args.sampler, notes)
        _say(_wrap(f"draws written to {out} (array 'draws': chains x draws x parameters, "
                   "intercept last)"), f"summary written to {summary_path}")
    return 0


# --------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------

def cmd_compare(args):
    names = [s.strip() for s in args.samplers.split(",") if s.strip()]
    if not names:
        raise CLIError("--samplers is empty")
    if len(set(names)) != len(names):
        raise CLIError(f"--samplers lists a sampler twice: {args.samplers}")
    reg = _registry()
    for n in names:
        if n not in reg:
            raise CLIError(f"unknown sampler {n!r}; registered samplers: {', '.join(reg)}")
    if args.reference is None:
        args.reference = names[0]
    if args.reference not in names:
        raise CLIError(f"--reference {args.reference!r} is not among --samplers")
    params = _sampler_params(args.param, names, allow_unprefixed=len(names) == 1)
    samplers = {n: make_sampler(n, params[n]) for n in names}
    data = load_data(args)
    _check_model_target(args.model, data.y, args.data)
    X, y, Xt, yt = data.X, data.y, data.X_test, data.y_test
    if args.model == "logistic" and Xt is None and args.test_fraction > 0:
        rng = np.random.default_rng(args.seed)
        perm = rng.permutation(X.shape[0])
        k = round(args.test_fraction * X.shape[0])
        if k < 2 or k >= X.shape[0] - 1:
            raise CLIError(f"--test-fraction {args.test_fraction} leaves too few rows")
        te, tr = np.sort(perm[:k]), np.sort(perm[k:])
        X, y, Xt, yt = X[tr], y[tr], X[te], y[te]
    if args.model != "logistic":
        Xt = yt = None
    _say(_wrap(f"{data.description}; {X.shape[0]:,} rows used for fitting"
               f"{'' if Xt is None else f', {Xt.shape[0]:,} held out'}; {args.model} "
               f"regression; {args.chains} chains x ({args.n_warmup} warmup + "
               f"{args.n_samples} kept) iterations."), "")
    fitted, notes = {}, {}
    for n in names:
        est = make_estimator(args.model, samplers[n], args)
        fitted[n], notes[n], _ = _fit(est, X, y, n)
    ref = fitted[args.reference]
    rows = [table_row(n, est, ref, Xt, yt) for n, est in fitted.items()]
    _say("", format_table(rows), "", _legend(rows, X.shape[0], args.reference), "")
    _print_all_notes(notes)
    if args.no_plot:
        return 0
    plt = _plt_or_none()
    if plt is None:
        _say(_wrap(_NO_MPL))
        return 0
    from .plotting import plot_marginals, plot_roc, plot_trace
    prefix = args.out_prefix
    written = []
    nplot = min(args.max_params, fitted[names[0]].posterior_draws_.shape[2])
    params = list(range(nplot - 1)) + [-1] if nplot > 1 else [-1]  # always show the intercept
    if not fitted[names[0]].fit_intercept:
        params = list(range(nplot))
    fig, axes = plt.subplots(len(params), len(names), squeeze=False, sharex=False,
                             figsize=(3.2 * len(names), 1.6 * len(params) + 0.8),
                             layout="constrained")
    for i, n in enumerate(names):
        tr_axes = plot_trace(fitted[n], params=params, density=False, axes=axes[:, i])
        tr_axes[0].set_title(n)
        if i:
            for ax in axes[:, i]:
                ax.set_ylabel("")
    written.append(_save(fig, f"{prefix}_trace.png"))
    plt.close(fig)
    others = {n: fitted[n] for n in names if n != args.reference}
    axes = plot_marginals(others if others else fitted, reference=ref, params=params,
                          reference_label=f"{args.reference} (reference)", ncols=4)
    fig = axes.flat[0].figure
    fig.suptitle("posterior marginals")
    written.append(_save(fig, f"{prefix}_marginals.png"))
    plt.close(fig)
    if Xt is not None:
        fig, ax = plt.subplots(figsize=(5.6, 5.0), layout="constrained")
        for i, n in enumerate(names):
            plot_roc(fitted[n], Xt, yt, ax=ax, label=n, color=f"C{i}", band=len(names) <= 4)
        ax.set_title(f"posterior-predictive ROC, {Xt.shape[0]:,} held-out rows",
                     fontsize="medium")
        written.append(_save(fig, f"{prefix}_roc.png"))
        plt.close(fig)
    _say("plots written: " + ", ".join(str(p) for p in written))
    return 0


# --------------------------------------------------------------------------
# the parser
# --------------------------------------------------------------------------

def _positive_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return v


def _nonneg_int(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return v


def _positive_float(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not v > 0 or not np.isfinite(v):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return v


def _fraction(text):
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}") from None
    if not 0 <= v < 1:
        raise argparse.ArgumentTypeError(f"expected a number in [0, 1), got {text!r}")
    return v


def _jobs(text):
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v == 0:
        raise argparse.ArgumentTypeError("0 jobs has no meaning; use 1, 2, ... or -1 (all cores)")
    return v


def _add_sampling(p, defaults=True):
    p.add_argument("--n-samples", type=_positive_int, default=1000 if defaults else None,
                   metavar="N", help="kept iterations per chain (default: %(default)s)")
    p.add_argument("--n-warmup", type=_nonneg_int, default=1000 if defaults else None,
                   metavar="N", help="warmup (tuning) iterations per chain, discarded "
                   "(default: %(default)s)")
    p.add_argument("--chains", type=_positive_int, default=4 if defaults else None, metavar="C",
                   help="independent chains; R-hat needs 2 or more (default: %(default)s)")
    p.add_argument("--jobs", type=_jobs, default=None, metavar="J",
                   help="chains run in J threads (-1: all cores); draws do not depend on it "
                   "(default: 1)")
    p.add_argument("--seed", type=_nonneg_int, default=0,
                   help="random seed; the same seed gives the same draws (default: %(default)s)")


def _add_data(p):
    p.add_argument("data", help="a file (CSV/TSV with a header or not, .npz with arrays X and y, "
                   "LIBSVM/svmlight; .gz allowed) or a named dataset: " + ", ".join(DATASETS))
    p.add_argument("--target", metavar="COLUMN",
                   help="CSV only: name or index of the target column (default: the last)")
    p.add_argument("--format", choices=("auto", "csv", "npz", "libsvm"), default="auto",
                   help="file format (default: from the extension, else sniffed)")
    p.add_argument("--model", choices=MODELS, default="logistic",
                   help="logistic (binary target), linear (Gaussian noise) or poisson (counts) "
                   "regression (default: %(default)s)")
    p.add_argument("--standardize", action="store_true",
                   help="centre and scale the features (recommended; the priors and the "
                   "samplers' tuning assume comparable scales)")
    p.add_argument("--dtype", choices=("float64", "float32"), default="float64",
                   help="feature dtype; float32 halves memory (default: %(default)s)")
    p.add_argument("--n-rows", type=_positive_int, metavar="N",
                   help="use only the first N rows")
    p.add_argument("--pca", type=_nonneg_int, default=50, metavar="K",
                   help="mnist7v9 only: principal components to keep, 0 for all 784 pixels "
                   "(default: %(default)s)")
    p.add_argument("--data-home", metavar="DIR",
                   help="folder of the named datasets' files (default: $BAYES_SUBSAMPLE_DATA, "
                   "else ~/bayes_subsample_data)")
    p.add_argument("--prior-scale", type=_positive_float, default=10.0, metavar="S",
                   help="sd of the Gaussian prior on each coefficient (default: %(default)s)")
    p.add_argument("--no-intercept", action="store_true", help="fit no intercept")
    p.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="a sampler hyperparameter, e.g. --param step_size=0.01 (compare: "
                   "--param sgld.step_size=0.01); repeat for several")


def build_parser():
    """The argparse parser of ``bayes-subsample``."""
    from . import __version__

    try:
        sampler_names = ", ".join(_registry())
    except ImportError:  # pragma: no cover - broken install
        sampler_names = "see bayes_subsample.samplers.SAMPLERS"
    samplers_line = _wrap("samplers: " + sampler_names)
    parser = _Parser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Subsampling MCMC for tall data: Bayesian logistic, linear and Poisson "
                    "regression\nsampled by HMC-ECS, austerity MH, the confidence sampler, "
                    "SG-MCMC,\nor exact HMC/MH.",
        epilog="start with:  bayes-subsample demo\n"
               "then:        bayes-subsample fit data.csv --target y --standardize\n\n"
               + samplers_line)
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--traceback", action="store_true",
                        help="show the Python traceback of errors (for bug reports)")
    sub = parser.add_subparsers(dest="command", metavar="{demo,fit,compare}",
                                parser_class=_Parser)

    p = sub.add_parser(
        "demo", help="HMC-ECS vs full HMC on real HIGGS data: table + ROC plot",
        description="Fits Bayesian logistic regression to the 7,000 real HIGGS rows shipped "
                    "with the package (standardised, 28 features + intercept) with HMC-ECS "
                    "(energy-conserving subsampling) and with full-data HMC, prints R-hat, "
                    "ESS, ESS per second, acceptance rate, the share of the data read per "
                    "iteration and the wall time, and writes the posterior-predictive ROC "
                    "curves of the 500 held-out rows, with posterior bands, to a PNG. Takes "
                    "about 10-30 s on 2 cores; --quick takes a few seconds.")
    p.add_argument("--out", default="bayes_subsample_demo_roc.png", metavar="PNG",
                   help="ROC plot file (default: %(default)s)")
    p.add_argument("--quick", action="store_true",
                   help="short chains (2 x 200 + 200 iterations): a few seconds")
    p.add_argument("--no-plot", action="store_true", help="print the table only")
    p.add_argument("--n-samples", type=_positive_int, metavar="N",
                   help="kept iterations per chain (default: 1000; --quick: 200)")
    p.add_argument("--n-warmup", type=_nonneg_int, metavar="N",
                   help="warmup iterations per chain (default: 500; --quick: 200)")
    p.add_argument("--chains", type=_positive_int, metavar="C",
                   help="chains (default: 4; --quick: 2)")
    p.add_argument("--jobs", type=_jobs, default=2, metavar="J",
                   help="chains run in J threads (default: %(default)s)")
    p.add_argument("--seed", type=_nonneg_int, default=0, help="random seed (default: 0)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser(
        "fit", help="fit one model with one sampler; save draws and a summary",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Fits a Bayesian GLM by MCMC and saves the draws (.npz: 'draws' of\n"
                    "shape chains x draws x parameters, 'param_names', 'warmup_draws',\n"
                    "'stats_*') and a summary (JSON, or a text table if --summary ends in "
                    ".txt).",
        epilog="examples:\n"
               "  bayes-subsample fit higgs-sample --standardize --sampler hmc_ecs\n"
               "  bayes-subsample fit data.csv --target y --model poisson --standardize\n"
               "  bayes-subsample fit train.svm --sampler sgld --param batch_size=200\n\n"
               + samplers_line)
    _add_data(p)
    p.add_argument("--sampler", default="hmc_ecs", metavar="NAME",
                   help=f"one of: {sampler_names} (default: %(default)s)")
    _add_sampling(p)
    p.add_argument("--out", default="bayes_subsample_draws.npz", metavar="NPZ",
                   help="draws file (default: %(default)s)")
    p.add_argument("--summary", metavar="PATH",
                   help="summary file, .json or .txt (default: <out>_summary.json)")
    p.add_argument("--progress", action="store_true", help="show a progress bar (needs tqdm)")
    p.add_argument("--quiet", action="store_true", help="print nothing on success")
    p.set_defaults(func=cmd_fit)

    p = sub.add_parser(
        "compare", help="several samplers on one dataset: table + trace/marginal/ROC plots",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Fits the same model with several samplers and prints one row per "
                    "sampler;\nwrites <prefix>_trace.png, <prefix>_marginals.png "
                    "(densities against the\nreference sampler) and, for logistic "
                    "regression, <prefix>_roc.png on held-out rows.",
        epilog="example:\n  bayes-subsample compare higgs-sample --standardize \\\n"
               "      --samplers hmc,hmc_ecs,hmc_ecs_signed\n\n" + samplers_line)
    _add_data(p)
    p.add_argument("--samplers", default="hmc,hmc_ecs", metavar="A,B,...",
                   help="comma-separated sampler names (default: %(default)s)")
    p.add_argument("--reference", metavar="NAME",
                   help="sampler whose posterior the others are compared with (default: the "
                   "first)")
    _add_sampling(p)
    p.add_argument("--test-fraction", type=_fraction, default=0.2, metavar="F",
                   help="logistic only, for data without a test split: share of rows held "
                   "out for the ROC plot, 0 for none (default: %(default)s)")
    p.add_argument("--out-prefix", default="bayes_subsample_compare", metavar="PREFIX",
                   help="plot file prefix (default: %(default)s)")
    p.add_argument("--max-params", type=_positive_int, default=6, metavar="K",
                   help="parameters shown in the plots (default: %(default)s)")
    p.add_argument("--no-plot", action="store_true", help="print the table only")
    p.set_defaults(func=cmd_compare)
    return parser


def main(argv=None):
    """Run the command line; returns the exit status (0 success, 2 user error)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a parse error
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    if args.command is None:
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except CLIError as exc:
        if args.traceback:
            raise
        print(f"{PROG} {args.command}: error: {exc}", file=sys.stderr, flush=True)
        return 2
    except (ValueError, TypeError, FileNotFoundError, ImportError, MemoryError) as exc:
        if args.traceback:
            raise
        msg = " ".join(str(exc).split()) or type(exc).__name__
        print(f"{PROG} {args.command}: error: {msg}", file=sys.stderr, flush=True)
        return 2
    except KeyboardInterrupt:
        print(f"\n{PROG}: interrupted", file=sys.stderr, flush=True)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
