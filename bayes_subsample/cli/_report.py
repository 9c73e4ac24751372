"""What the commands print and write: the one-line user error, wrapped text,
the diagnostics table, warning notes, plot files and the JSON summary."""
import errno
import os
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np

from .._atomic import StagedFile, probe_folder
from .._interrupt import StopSignal, signals_deferred

WIDTH = 79
PROG = "bayes-subsample"


class CLIError(Exception):
    """A user error: printed as one line, exit status ``status`` (2: bad
    input, nothing run; 1: the run's outputs could not be written)."""

    def __init__(self, message, status=2):
        super().__init__(message)
        self.status = status


def _say(*lines, file=None):
    print(*lines, sep="\n", file=file or sys.stdout, flush=True)


def _wrap(text, indent=""):
    return textwrap.fill(text, WIDTH, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False, break_long_words=False)


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


def _extreme(reduce, values):
    """``reduce`` (np.min or np.max) of the non-NaN ``values`` as a float; None
    if there are none (short or interrupted runs: no warning, unlike np.nanmin)."""
    if values is None:
        return None
    values = np.asarray(values, dtype=np.float64)
    values = values[~np.isnan(values)]
    return float(reduce(values)) if values.size else None


def table_row(label, est, reference=None, X_test=None, y_test=None):
    """The numbers of one sampler for :func:`format_table`."""
    d = est.diagnostics_
    row = {"label": label}
    # R-hat needs 2 chains; an interrupted run may keep fewer than est.n_chains
    row["r_hat"] = _extreme(np.max, d.get("r_hat")) if est.trace_.n_chains > 1 else None
    row["ess"] = _extreme(np.min, d.get("ess_bulk"))
    row["ess_s"] = _extreme(np.min, d.get("ess_per_second"))
    row["accept"] = float(np.mean(d["acceptance_rate"]))
    row["data"] = _fmt_fraction(float(np.mean(d["data_fraction_per_iteration"])))
    row["data_fraction"] = float(np.mean(d["data_fraction_per_iteration"]))
    row["time"] = float(est.trace_.wall_time["elapsed"])
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
    """An aligned table (79 columns at most) of :func:`table_row` results; a
    row ``{"label": ..., "status": text}`` (a sampler without draws) shows the
    text, shortened to fit, in place of numbers."""
    cols = [c for c in _COLUMNS
            if c[0] == "label" or any(r.get(c[0]) is not None for r in rows)]
    lines = ["  ".join(h.ljust(w) if k == "label" else h.rjust(w) for k, h, w, _ in cols)]
    lines.append("-" * len(lines[0]))
    for r in rows:
        if "status" in r:
            w = cols[0][2]
            status = textwrap.shorten(r["status"], WIDTH - w - 2, placeholder=" ...")
            lines.append(f"{r['label'][:w]:<{w}}  {status}")
            continue
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
             ("time s: elapsed wall-clock time of the fit (preparation, tuning and "
              "sampling; chains in parallel overlap); ESS/s uses it.")]
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


def _print_missing(missing):
    """Why each sampler of ``missing`` ({label: (status, reason)}) has no
    draws, in full."""
    for label, (status, reason) in missing.items():
        _say(_wrap(f"{status} [{label}]: {reason}"))
    if missing:
        _say("")


def _print_all_notes(notes):
    if any(notes.values()):
        for label, msgs in notes.items():
            _print_notes(label, msgs, short=True)
        _say(_wrap("Longer runs (--n-warmup, --n-samples, --chains) fix most R-hat and ESS "
                   "warnings; samplers without an MH correction (sgld, sghmc, ewsg, psgld) also "
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


def _say_no_matplotlib(*lead):
    """Say (below the ``lead`` lines) that matplotlib is needed for the plots."""
    _say(*lead, _wrap(_NO_MPL))


# --------------------------------------------------------------------------
# output files
# --------------------------------------------------------------------------

#: the formats of ``fit --summary``, by extension
SUMMARY_FORMATS = {".json": "JSON", ".txt": "text table"}


def _npz_path(text):
    """The file ``numpy.savez`` writes for ``--out text``: it adds ``.npz``
    unless the name ends in it."""
    path = Path(text)
    if path.is_dir():
        raise CLIError(f"--out: {text} is a folder; give a file name")
    return path if path.name.endswith(".npz") else path.with_name(path.name + ".npz")


def _summary_path(text):
    """The path of ``--summary text``, or a CLIError for a format it cannot write."""
    path = Path(text)
    if path.suffix.lower() not in SUMMARY_FORMATS:
        known = " or ".join(f"{k} ({v})" for k, v in SUMMARY_FORMATS.items())
        given = f"as {path.suffix}" if path.suffix else "without extension"
        raise CLIError(f"--summary {text}: cannot write a summary {given}; name it {known}")
    return path


def _image_path(path, option):
    """The file matplotlib writes for ``path`` (``.png`` added to a name without
    extension), or a CLIError if matplotlib cannot write its extension."""
    from matplotlib.backend_bases import FigureCanvasBase

    path = Path(path)
    if not path.suffix:
        return path.with_name(path.name + ".png")
    kinds = FigureCanvasBase.get_supported_filetypes()
    if path.suffix[1:].lower() not in kinds:
        raise CLIError(f"{option} {path}: cannot write {path.suffix} images; use one of "
                       + ", ".join(f".{k}" for k in sorted(kinds)))
    return path


def _same_file(a, b):
    # realpath, not Path.resolve: it does not raise on a loop of symbolic links
    return (os.path.realpath(a) == os.path.realpath(b)
            or (a.exists() and b.exists() and os.path.samefile(a, b)))


def plan_outputs(outputs, inputs=(), force=False):
    """Check, before a run starts, the files it is to write.

    ``outputs`` is a list of ``(option, path)``: each file to write (the exact
    path, suffixes added) and the option that names it; ``inputs`` are the
    files the run reads. A CLIError, with nothing written yet, if an output's
    folder is missing, or it is a folder, an input or another output of the
    run, or it exists and not ``force``. Returns the paths.
    """
    done = []
    for option, path in outputs:
        path = Path(path)
        if any(_same_file(path, Path(src)) for src in inputs):
            raise CLIError(f"{option}: writing {path} would overwrite the input data; "
                           "choose another name")
        for other_option, other in done:
            if _same_file(path, other):
                raise CLIError(f"{option}: {path} is also the {other_option} file of this run; "
                               "choose another name")
        if path.is_symlink() and not path.exists():
            _check_dangling(option, path, force)
        if not path.parent.is_dir():
            raise CLIError(f"cannot write {path}: folder {path.parent} does not exist")
        if path.is_dir():
            raise CLIError(f"{option}: {path} is a folder")
        if path.exists() and not force:
            raise CLIError(f"{option}: {path} exists; use --force to overwrite it, or choose "
                           "another name")
        _check_folder(path.parent, _MIN_FREE, f"cannot write {path}")
        done.append((option, path))
    return [path for _, path in done]


def _check_dangling(option, path, force):
    """An output name that is a symbolic link to nothing: a loop of links is
    refused; a link to a missing file exists (--force replaces the link)."""
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise CLIError(f"{option}: {path} is a loop of symbolic links; remove it or "
                           "choose another name") from exc
    if not force:
        raise CLIError(f"{option}: {path} exists (a symbolic link to a missing file); use "
                       "--force to replace the link, or choose another name")


#: free space asked of an output folder before a run (a plot, a summary)
_MIN_FREE = 1 << 20


def _check_folder(folder, need, lead):
    """A CLIError starting with ``lead`` unless ``folder`` takes a new file
    and has ``need`` bytes free (a rough check, made before sampling)."""
    try:
        probe_folder(folder)
    except OSError as exc:
        why = ("is read-only" if exc.errno == errno.EROFS else
               "is not writable (permission denied)" if exc.errno in (errno.EACCES, errno.EPERM)
               else f"does not take a new file ({exc.strerror})")
        raise CLIError(f"{lead}: folder {folder} {why}") from exc
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):   # no statvfs (Windows): not checked
        return
    free = st.f_bavail * st.f_frsize
    if free < need:
        raise CLIError(f"{lead}: folder {folder} has {_size(free)} free, and about "
                       f"{_size(need)} are needed; free some space or choose another folder")


def check_free_space(path, need):
    """Before sampling: a CLIError unless the folder of ``path`` has about
    ``need`` bytes free."""
    _check_folder(Path(path).parent, need, f"cannot write {path}")


def _size(n):
    for unit, k in (("GB", 30), ("MB", 20)):
        if n >= 2**k:
            return f"{n / 2**k:.1f} {unit}"
    return f"{n / 2**10:.0f} kB"


class OutputError(CLIError):
    """Outputs that could not be written after the run (exit status 1):
    ``path`` is the file at fault, ``published`` the files written."""

    def __init__(self, message, path, published):
        super().__init__(message, status=1)
        self.path, self.published = path, published


def _write_error(path, exc):
    if isinstance(exc, FileExistsError):
        return (f"cannot write {path}: it was created by another program while this run "
                "sampled, and is left as it is (--force would replace it)")
    return f"cannot write {path}: {exc.strerror or exc} (no partial file was left)"


def write_outputs(files, force=False):
    """Write the files of a run together: ``files`` is a list of
    ``(path, write)``, ``write(file)`` filling a binary file.

    Every file is first written in full under no name (or a temporary one)
    in its folder (:class:`~bayes_subsample._atomic.StagedFile`), then they
    are put in place in their order, each in one step. Without ``force`` a
    file that exists by then (another run's) is not replaced. With
    ``force`` the existing files of the list after the first are removed
    before the first is put in place, so a kill at any moment leaves either
    old files or new ones beside the first, never a new first file beside
    an old second (a summary describing other draws). Signals (Ctrl-C,
    SIGTERM, SIGHUP) are held back while writing; a second one stops it,
    leaving nothing partial. Returns the deferred signal's number (None if
    none). Raises :class:`OutputError` if a file cannot be written (nothing
    partial is left; ``published`` lists the files put in place).
    """
    staged, published = [], []
    with signals_deferred() as deferred:
        try:
            for path, write in files:
                try:
                    f = StagedFile(path)
                    staged.append(f)
                    write(f.file)
                    f.file.flush()
                except OSError as exc:
                    raise OutputError(_write_error(path, exc), path, published) from exc
            if force:
                for path, _ in files[1:]:
                    try:
                        os.unlink(path)
                    except FileNotFoundError:
                        pass
                    except OSError as exc:
                        raise OutputError(_write_error(path, exc), path, published) from exc
            for (path, _), f in zip(files, staged):
                try:
                    f.publish(overwrite=force)
                    published.append(path)
                except OSError as exc:
                    raise OutputError(_write_error(path, exc), path, published) from exc
        finally:
            for f in staged:
                f.discard()
    return deferred.signum


def save_elsewhere(path, write):
    """After ``path`` could not be written: write it (``write(file)``) to a
    new file in the temporary folder instead. Returns the path, or the
    OSError met there."""
    path = Path(path)
    folder = Path(tempfile.gettempdir())
    try:
        fd, name = tempfile.mkstemp(prefix=f"{path.stem}-", suffix=path.suffix, dir=folder)
        os.close(fd)
        os.unlink(name)   # a free name; StagedFile writes it complete or not at all
        with StagedFile(name) as f:
            write(f.file)
            return f.publish()
    except OSError as exc:
        return exc


def _save(plt, fig, path, overwrite=False):
    """Write ``fig`` to ``path`` (complete or not at all) and close it;
    returns the path."""
    path = Path(path)
    fmt = path.suffix[1:].lower() or "png"
    try:
        signum = write_outputs([(path, lambda f: fig.savefig(f, format=fmt, dpi=110))],
                               overwrite)
    except ValueError as exc:
        raise CLIError(f"cannot write {path}: {exc}") from exc
    plt.close(fig)
    if signum is not None:
        raise StopSignal(signum)   # held back while the plot was written
    return path


def _roc_plot(plt, fitted, X_test, y_test, title, path, overwrite=False, **kwargs):
    """One posterior-predictive ROC curve per estimator of ``fitted``
    ({label: estimator}), written to ``path`` (over an existing file if
    ``overwrite``); ``kwargs`` go to ``plot_roc``."""
    from ..plotting import plot_roc

    fig, ax = plt.subplots(figsize=(5.6, 5.0), layout="constrained")
    for i, (label, est) in enumerate(fitted.items()):
        plot_roc(est, X_test, y_test, ax=ax, label=label, color=f"C{i}", **kwargs)
    ax.set_title(title, fontsize="medium")
    return _save(plt, fig, path, overwrite)


def _summary_json(est, data, args, sampler, notes, s):
    """The JSON summary of ``fit``; ``s`` is the trace's summary (None if too few draws)."""
    d = est.diagnostics_
    summ = (None if s is None else
            {name: {c: float(s[c][i]) for c in s.columns} for i, name in enumerate(s.names)})

    def f(v):
        return None if v is None or not np.isfinite(v) else float(v)

    return {
        "data": args.data, "n_rows": int(data.X.shape[0]), "n_features": int(data.X.shape[1]),
        "feature_names": data.names, "model": args.model,
        # linear: the Gaussian noise sd (its posterior mean and sd when sampled; else
        # the value held fixed, noise_scale_sd 0)
        "noise_scale": f(getattr(est, "noise_scale_", None)),
        "noise_scale_sd": f(getattr(est, "noise_scale_std_", None)),
        "sampler": args.sampler,
        "sampler_params": {k: (v if isinstance(v, (int, float, str, bool, type(None)))
                               else repr(v)) for k, v in sampler.get_params().items()},
        "n_samples": args.n_samples, "n_warmup": args.n_warmup, "n_chains": args.chains,
        "seed": args.seed, "standardize": bool(args.standardize),
        "param_names": list(est.trace_.param_names),
        "summary": summ,
        "diagnostics": {
            "interrupted": bool(est.trace_.interrupted),
            "max_r_hat": (f(_extreme(np.max, d.get("r_hat")))
                          if est.trace_.n_chains > 1 else None),
            "min_ess_bulk": f(_extreme(np.min, d.get("ess_bulk"))),
            "min_ess_per_second": f(_extreme(np.min, d.get("ess_per_second"))),
            "acceptance_rate": [float(a) for a in d["acceptance_rate"]],
            "data_fraction_per_iteration": [float(a) for a in d["data_fraction_per_iteration"]],
            "n_divergences": [int(a) for a in d["n_divergences"]],
            "wall_time_seconds": float(est.trace_.wall_time["elapsed"]),
            "compute_time_seconds": float(est.trace_.wall_time["total"]),
            "tau_hat": float(est.tau_hat_) if hasattr(est, "tau_hat_") else None,
        },
        "warnings": notes,
    }
