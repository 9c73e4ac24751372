"""The commands ``demo``, ``fit`` and ``compare``, and the samplers and
estimators they build from the options."""
import ast
import json
import sys
import time
import traceback
import warnings

import numpy as np

from .._interrupt import exit_status, stop_description
from ..diagnostics import MIN_DRAWS
from ..samplers import SAMPLERS
from ._data import _check_model_target, data_files, load_data
from ._report import (PROG, CLIError, OutputError, _fmt_fraction, _image_path, _legend, _npz_path,
                      _print_all_notes, _print_missing, _print_notes, _plt_or_none, _roc_plot,
                      _save, _say, _say_no_matplotlib, _summary_json, _summary_path, _wrap,
                      check_free_space, format_table, plan_outputs, save_elsewhere, table_row,
                      write_outputs)

# --------------------------------------------------------------------------
# samplers and models
# --------------------------------------------------------------------------

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


def _check_sampler(name):
    if name not in SAMPLERS:
        raise CLIError(f"unknown sampler {name!r}; registered samplers: {', '.join(SAMPLERS)}")


def make_sampler(name, params):
    _check_sampler(name)
    sampler = SAMPLERS[name]()
    if params:
        valid = sampler.get_params()
        for key in params:
            if key not in valid:
                raise CLIError(f"sampler {name!r} has no parameter {key!r}; its parameters "
                               f"are {', '.join(sorted(valid))}")
        sampler.set_params(**params)
    return sampler


def make_estimator(model, sampler, args):
    from ..linear_model import (
        BayesianLinearRegression,
        BayesianLogisticRegression,
        BayesianPoissonRegression,
    )

    cls = {"logistic": BayesianLogisticRegression, "linear": BayesianLinearRegression,
           "poisson": BayesianPoissonRegression}[model]
    return cls(sampler=sampler, n_samples=args.n_samples, n_warmup=args.n_warmup,
               n_chains=args.chains, n_jobs=args.jobs, prior_scale=args.prior_scale,
               fit_intercept=not args.no_intercept, random_state=args.seed,
               progress=getattr(args, "progress", None))


def _fit(est, X, y, label, quiet=False):
    """Fit, collecting warnings as notes; returns (estimator, notes, seconds).
    Ctrl-C (or SIGTERM, SIGHUP) after the first retained draw returns the
    draws made (``est.trace_.interrupted``); before it, the KeyboardInterrupt
    propagates."""
    if not quiet:
        print(f"  sampling with {label:<16} ...", end="", flush=True)
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            est.fit(X, y)
        except KeyboardInterrupt as exc:
            if not quiet:
                print(f" {stop_description(exc)}", flush=True)
            raise
        except Exception:
            if not quiet:
                print(" failed", flush=True)
            raise
    seconds = time.perf_counter() - t0
    tr = est.trace_
    if not quiet:
        kept = ", ".join(str(int(k)) for k in tr.chain_lengths)
        print(f" {stop_description()} after {seconds:.1f} s: kept {kept} draws in the "
              f"{tr.n_chains} chains" if tr.interrupted else f" done in {seconds:.1f} s",
              flush=True)
    notes = []
    for w in caught:
        msg = str(w.message)
        if msg not in notes and not issubclass(w.category, (DeprecationWarning,
                                                            PendingDeprecationWarning)):
            notes.append(msg)
    return est, notes, seconds


class _Fits:
    """The fits of a command that runs several samplers: ``fitted``
    {label: estimator} of those that made draws, ``notes`` {label: warnings},
    ``missing`` {label: (status, reason)} of those that made none, and
    ``interrupted`` (Ctrl-C, SIGTERM or SIGHUP stopped the run)."""

    def __init__(self):
        self.fitted, self.notes, self.missing = {}, {}, {}
        self.interrupted = False

    def rows(self, labels, reference=None, X_test=None, y_test=None):
        """The table rows of ``labels``, in that order; a missing fit's row says why."""
        ref = self.fitted.get(reference)
        return [table_row(n, self.fitted[n], ref, X_test, y_test) if n in self.fitted
                else {"label": n, "status": ": ".join(self.missing[n])} for n in labels]

    def exit_status(self):
        """0; 1 if a sampler failed; 128 + the signal's number if a signal
        stopped the run (130 for Ctrl-C, 143 for SIGTERM, 129 for SIGHUP)."""
        return exit_status() if self.interrupted else (1 if self.missing else 0)


def _fit_each(samplers, model, X, y, args):
    """Fit ``model`` once with each of ``samplers`` ({label: sampler}). A
    sampler that raises (a diverging SGLD, say) is recorded with its error and
    the next one runs; with ``--traceback`` its traceback is printed. Ctrl-C
    stops the run, keeping the draws the interrupted sampler made. Returns a
    :class:`_Fits`."""
    fits = _Fits()
    for label, sampler in samplers.items():
        if fits.interrupted:
            fits.missing[label] = ("not run", "the run was interrupted")
            continue
        try:
            est, fits.notes[label], _ = _fit(make_estimator(model, sampler, args), X, y, label)
        except KeyboardInterrupt:
            fits.interrupted = True
            fits.missing[label] = ("interrupted", "before any draw was retained")
        except Exception as exc:
            if args.traceback:
                traceback.print_exc()
            msg = " ".join(str(exc).split())
            fits.missing[label] = ("failed", type(exc).__name__ + (f": {msg}" if msg else ""))
        else:
            fits.fitted[label] = est
            fits.interrupted = est.trace_.interrupted
    return fits


def _run_length(args):
    return f"{args.chains} chains x ({args.n_warmup} warmup + {args.n_samples} kept) iterations"


# --------------------------------------------------------------------------
# demo
# --------------------------------------------------------------------------

def cmd_demo(args):
    from ..datasets import load_higgs_sample

    if args.quick:
        defaults = {"n_samples": 200, "n_warmup": 200, "chains": 2}
    else:
        defaults = {"n_samples": 1000, "n_warmup": 500, "chains": 4}
    for k, v in defaults.items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    args.prior_scale, args.no_intercept = "auto", False
    plt = None if args.no_plot else _plt_or_none()
    if plt is not None:
        out, = plan_outputs([("--out", _image_path(args.out, "--out"))], force=args.force)
    train = load_higgs_sample("train", standardize=True)
    test = load_higgs_sample("test")
    X, y = train.data, train.target
    X_test = (test.data - train.feature_mean) / train.feature_scale
    y_test = test.target
    _say(_wrap(
        f"Bayesian logistic regression on {X.shape[0]:,} real HIGGS collision events "
        f"({X.shape[1]} standardised features + intercept = {X.shape[1] + 1} parameters), "
        f"{_run_length(args)}; {X_test.shape[0]} held-out events for the ROC curve."), "")
    samplers = {"full HMC": make_sampler("hmc", {}), "HMC-ECS": make_sampler("hmc_ecs", {})}
    fits = _fit_each(samplers, "logistic", X, y, args)
    fitted = fits.fitted
    rows = fits.rows(samplers, "full HMC", X_test, y_test)
    _say("", format_table(rows), "")
    _print_missing(fits.missing)
    if fitted:
        _say(_legend(rows, X.shape[0], "full HMC"), "")
    r_h, r_e = rows
    if len(fitted) == 2 and not fits.interrupted and r_h["ess_s"] and r_e["ess_s"]:
        _say(_wrap(
            f"HMC-ECS evaluated {_fmt_fraction(r_e['data_fraction'])} of the likelihood terms "
            f"per iteration (full HMC: {_fmt_fraction(r_h['data_fraction'])}) and produced "
            f"{r_e['ess_s'] / r_h['ess_s']:.1f} times the effective samples per second; its "
            f"posterior means are within {r_e['err']:.2f} posterior standard deviations of "
            "full HMC's. The gap in cost grows with n: HMC-ECS's subsample size stays "
            "roughly fixed while every full-HMC step reads all the data."))
    _print_all_notes(fits.notes)
    if args.no_plot or not fitted:
        return fits.exit_status()
    if plt is None:
        _say_no_matplotlib("")
        return fits.exit_status()
    path = _roc_plot(plt, fitted, X_test, y_test,
                     f"HIGGS sample: posterior-predictive ROC\n({X_test.shape[0]} held-out "
                     "events, bands: 90% of per-draw curves)", out, args.force)
    _say("", f"ROC plot written to {path}")
    return fits.exit_status()


# --------------------------------------------------------------------------
# fit
# --------------------------------------------------------------------------

def cmd_fit(args):
    params = _sampler_params(args.param, [args.sampler], allow_unprefixed=True)[args.sampler]
    sampler = make_sampler(args.sampler, params)
    out = _npz_path(args.out)
    summary_path = (_summary_path(args.summary) if args.summary
                    else out.with_name(out.stem + "_summary.json"))
    plan_outputs([("--out", out), ("--summary", summary_path)], data_files(args.data),
                 args.force)
    data = load_data(args)
    _check_model_target(args.model, data.y, args.data)
    check_free_space(out, _draws_bytes(data, args))
    if not args.quiet:
        _say(_wrap(f"{data.description}; {data.X.shape[1]} features"
                   f"{' (standardised)' if args.standardize else ''}; {args.model} regression, "
                   f"sampler {args.sampler}, {_run_length(args)}."))
    est = make_estimator(args.model, sampler, args)
    est, notes, _ = _fit(est, data.X, data.y, args.sampler, quiet=args.quiet)
    tr = est.trace_
    names = list(tr.param_names)
    classes = getattr(est, "classes_", None)
    if data.names and len(data.names) == data.X.shape[1]:
        if classes is not None and len(classes) > 2:
            # multinomial: one block per class (coefficients, then the intercept);
            # numeric labels read as floats are shown as the integers they are
            labels = [int(c) if isinstance(c, (float, np.floating)) and float(c).is_integer()
                      else c for c in classes]
            names = [name for c in labels for name in
                     [f"{n}[{c}]" for n in data.names]
                     + ([f"intercept[{c}]"] if est.fit_intercept else [])]
        else:
            names = [f"{n}" for n in data.names] + names[len(data.names):]
        tr.param_names = names
    arrays = {"draws": tr.draws, "param_names": np.array(names),
              "warmup_draws": tr.warmup_draws, "chain_lengths": tr.chain_lengths}
    for k, v in tr.stats.items():
        arrays[f"stats_{k}"] = v
    # an interrupted run may have kept too few draws for a summary
    common = tr.common_draws().shape[1]
    summary = tr.summary() if common >= MIN_DRAWS else None
    table = (str(summary) if summary is not None else
             f"no summary: {common} draws in the shortest chain, {MIN_DRAWS} needed")
    info = _summary_json(est, data, args, sampler, notes, summary)
    text = (table if summary_path.suffix.lower() == ".txt"
            else json.dumps(info, indent=2)) + "\n"
    signum = _write_fit_outputs(out, arrays, summary_path, text, args.force)
    if not args.quiet:
        s = table.splitlines()
        shown = s[:1 + 30]
        _say("", *shown)
        if len(s) > len(shown):
            _say(f"... {len(s) - len(shown)} more parameters in {summary_path}")
        if classes is not None and len(classes) > 2:
            _say(_wrap(f"multinomial, {len(classes)} classes: the table describes the centred "
                       "coefficients (each minus its mean over classes), which the data "
                       "identify; the saved draws are as sampled, one block per class, and "
                       "also carry a shift common to every class that keeps its prior "
                       "(user guide, 'Multiclass classification')."))
        if getattr(est, "noise_reference_", None) is not None:
            _say(_wrap(f"noise sd {est.noise_scale_:.4g} +- {est.noise_scale_std_:.2g} "
                       "(Gaussian; sampled: the posterior mean and sd; the last parameter, "
                       f"log_noise_ratio, is log(sd / {est.noise_reference_:.4g}), the sd of "
                       "y)"))
        elif hasattr(est, "noise_scale_"):
            _say(_wrap(f"noise sd {est.noise_scale_:.4g} (Gaussian; held fixed while "
                       "sampling)"))
        _say("", format_table([table_row(args.sampler, est)]), "")
        _print_notes(args.sampler, notes)
        ragged = (" NaN past each chain's length, array 'chain_lengths';" if tr.ragged
                  else "")
        last = ("intercept, then log_noise_ratio" if getattr(est, "noise_reference_", None)
                is not None else "intercept last")
        _say(_wrap(f"draws written to {out} (array 'draws': chains x draws x parameters, "
                   f"{last};{ragged})".replace(";)", ")")),
             f"summary written to {summary_path}")
    if signum is not None:
        _say(f"{PROG} fit: {stop_description()} while the outputs were written; they were "
             f"completed first: {out}, {summary_path}", file=sys.stderr)
    elif tr.interrupted:
        _say(f"{PROG} fit: {stop_description()}; the draws made were written to {out}",
             file=sys.stderr)
    return exit_status() if tr.interrupted or signum is not None else 0


def _draws_bytes(data, args):
    """About the size of the draws file of ``fit`` (uncompressed: draws of
    continuous parameters barely compress): float64 draws and about eight
    statistics per iteration, warmup included; parameters counted as the
    features plus two (intercept, noise), times the classes of a multinomial
    model."""
    n_classes = len(np.unique(data.y)) if args.model == "logistic" else 1
    n_params = (data.X.shape[1] + 2) * (n_classes if n_classes > 2 else 1)
    return 8 * args.chains * (args.n_samples + args.n_warmup) * (n_params + 8)


def _write_fit_outputs(out, arrays, summary_path, text, force):
    """Write the draws (``arrays``, an npz) to ``out``, then the summary
    ``text``, each complete or not at all, the draws first (see
    :func:`write_outputs`). If the draws cannot be written there, they are
    written to the temporary folder instead, and the error says where.
    Returns the number of a signal received meanwhile (or None)."""
    def draws(f):
        np.savez_compressed(f, **arrays)

    try:
        return write_outputs([(out, draws), (summary_path, lambda f: f.write(text.encode()))],
                             force)
    except OutputError as exc:
        if out in exc.published:
            raise OutputError(f"{exc}; the draws were written to {out}", exc.path,
                              exc.published) from exc
        saved = save_elsewhere(out, draws)
        where = (f"the draws were saved to {saved} instead (a temporary folder: move the "
                 "file somewhere safe)" if not isinstance(saved, OSError) else
                 "they could not be saved in the temporary folder either "
                 f"({saved.strerror or saved}): the draws are lost")
        raise OutputError(f"{exc}; {where}", exc.path, exc.published) from exc


# --------------------------------------------------------------------------
# compare
# --------------------------------------------------------------------------

def cmd_compare(args):
    names = [s.strip() for s in args.samplers.split(",") if s.strip()]
    if not names:
        raise CLIError("--samplers is empty")
    if len(set(names)) != len(names):
        raise CLIError(f"--samplers lists a sampler twice: {args.samplers}")
    for n in names:
        _check_sampler(n)
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
    plt = None if args.no_plot else _plt_or_none()
    if plt is not None:
        kinds = ["trace", "marginals"] + (["roc"] if Xt is not None else [])
        plots = dict(zip(kinds, plan_outputs(
            [("--out-prefix", f"{args.out_prefix}_{k}.png") for k in kinds],
            data_files(args.data), args.force)))
    _say(_wrap(f"{data.description}; {X.shape[0]:,} rows used for fitting"
               f"{'' if Xt is None else f', {Xt.shape[0]:,} held out'}; {args.model} "
               f"regression; {_run_length(args)}."), "")
    fits = _fit_each(samplers, args.model, X, y, args)
    fitted = fits.fitted
    rows = fits.rows(names, args.reference, Xt, yt)
    _say("", format_table(rows), "")
    _print_missing(fits.missing)
    if fitted:
        _say(_legend(rows, X.shape[0], args.reference), "")
    _print_all_notes(fits.notes)
    if args.no_plot or not fitted:
        return fits.exit_status()
    if plt is None:
        _say_no_matplotlib()
        return fits.exit_status()
    from ..plotting import plot_marginals, plot_trace
    written = []
    first = next(iter(fitted.values()))
    nplot = min(args.max_params, first.posterior_draws_.shape[2])
    if first.fit_intercept:
        # always show the intercept (the column after the coefficients)
        icpt = first.n_features_in_
        params = list(range(min(nplot - 1, icpt))) + [icpt]
    else:
        params = list(range(nplot))
    fig, axes = plt.subplots(len(params), len(fitted), squeeze=False, sharex=False,
                             figsize=(3.2 * len(fitted), 1.6 * len(params) + 0.8),
                             layout="constrained")
    for i, n in enumerate(fitted):
        tr_axes = plot_trace(fitted[n], params=params, density=False, axes=axes[:, i])
        tr_axes[0].set_title(n)
        if i:
            for ax in axes[:, i]:
                ax.set_ylabel("")
    written.append(_save(plt, fig, plots["trace"], args.force))
    ref = fitted.get(args.reference)
    others = {n: est for n, est in fitted.items() if est is not ref}
    axes = plot_marginals(others if others else fitted, reference=ref, params=params,
                          reference_label=f"{args.reference} (reference)", ncols=4)
    fig = axes.flat[0].figure
    fig.suptitle("posterior marginals")
    written.append(_save(plt, fig, plots["marginals"], args.force))
    if Xt is not None:
        written.append(_roc_plot(plt, fitted, Xt, yt,
                                 f"posterior-predictive ROC, {Xt.shape[0]:,} held-out rows",
                                 plots["roc"], args.force, band=len(fitted) <= 4))
    _say("plots written: " + ", ".join(str(p) for p in written))
    return fits.exit_status()
