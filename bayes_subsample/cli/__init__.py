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
    marginal-density and ROC plots. A sampler that fails is reported in its
    row and the others run; the exit status is then 1.

Run ``bayes-subsample <command> --help`` for the options. Errors in the input
(missing files, unknown columns, samplers or options) exit with status 2 and a
one-line message, as do output files refused before the run starts: the
input, two outputs in one file, an existing file without ``--force``, a
missing or read-only folder, or one without room for the draws.

Every output file is written under a temporary name (or none) in its folder
and put in place complete, in one step (``bayes_subsample._atomic``): a
kill at any moment leaves the old file or the whole new one. A file that
cannot be written after the run (a full disk, another run that took the
name meanwhile) leaves nothing partial, exits with status 1 and says where
the draws went instead. After Ctrl-C, SIGTERM or SIGHUP the draws made so far
are written and the status is 128 + the signal's number (130, 143, 129).
"""
import sys

from .._interrupt import exit_status, stop_description, stop_signals
from .._lazy import attach
from ._args import PROG, build_parser
from ._data import DATASETS, MODELS, load_data  # noqa: F401
from ._report import CLIError, format_table, table_row  # noqa: F401

__all__ = ["main"]

# the commands, public names of the former single-module cli still importable from
# here, load scikit-learn: imported on first use, so that --help is quick
__getattr__, __dir__ = attach(
    __name__, names=dict.fromkeys(["cmd_compare", "cmd_demo", "cmd_fit", "make_estimator",
                                   "make_sampler"], "._commands"))
del attach


def main(argv=None):
    """Run the command line; returns the exit status (0 success, 1 a sampler of
    ``demo``/``compare`` failed or an output could not be written after the
    run, 2 user error, 130 interrupted by Ctrl-C, 143 stopped by SIGTERM, 129
    by SIGHUP)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, --version, or a parse error
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    if args.command is None:
        parser.print_help()
        return 2
    # SIGTERM and SIGHUP stop the run as Ctrl-C does: the draws made are kept
    with stop_signals(sigint=True):
        try:
            return args.func(args)
        except CLIError as exc:
            if args.traceback:
                raise
            print(f"{PROG} {args.command}: error: {exc}", file=sys.stderr, flush=True)
            return exc.status
        except (ValueError, TypeError, FileNotFoundError, ImportError, MemoryError) as exc:
            if args.traceback:
                raise
            msg = " ".join(str(exc).split()) or type(exc).__name__
            print(f"{PROG} {args.command}: error: {msg}", file=sys.stderr, flush=True)
            return 2
        except KeyboardInterrupt as exc:
            print(f"\n{PROG}: {stop_description(exc)}", file=sys.stderr, flush=True)
            return exit_status(exc)
