"""The argparse parser of ``bayes-subsample``: option types, shared option
groups and the three subcommands."""
import argparse

import numpy as np

from ..samplers import SAMPLERS
from ._data import DATASETS, MODELS
from ._report import PROG, _wrap


class _Parser(argparse.ArgumentParser):
    """argparse with a one-line error message (no usage dump) and exit status 2."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def _command(name):
    """The command function ``name`` of ``_commands``, imported when it runs: the
    commands need scikit-learn (about a second to import), ``--help`` does not."""

    def run(args):
        from . import _commands

        return getattr(_commands, name)(args)

    run.__name__ = run.__qualname__ = name
    return run


def _number(kind, accept, expected, refused=None):
    """An argparse ``type``: ``kind(text)`` (``int`` or ``float``) for which
    ``accept(value)`` holds. The error says "expected <expected>, got '<text>'",
    or ``refused`` when the text is a number that ``accept`` turns down."""

    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not accept(value):
            raise argparse.ArgumentTypeError(refused or f"expected {expected}, got {text!r}")
        return value

    return parse


_positive_int = _number(int, lambda v: v >= 1, "a positive integer")
_nonneg_int = _number(int, lambda v: v >= 0, "an integer >= 0")
_positive_float = _number(float, lambda v: v > 0 and np.isfinite(v), "a positive number")


def _prior_scale(text):
    """``auto`` (the priors on the data's scale) or a positive number."""
    return "auto" if text.strip().lower() == "auto" else _positive_float(text)
_fraction = _number(float, lambda v: 0 <= v < 1, "a number in [0, 1)")
_jobs = _number(int, lambda v: v != 0, "an integer",
                refused="0 jobs has no meaning; use 1, 2, ... or -1 (all cores)")

# the sampling options: type and metavar, then (default, help) for fit/compare and for demo
_SAMPLING_TYPES = {
    "--n-samples": (_positive_int, "N"),
    "--n-warmup": (_nonneg_int, "N"),
    "--chains": (_positive_int, "C"),
    "--jobs": (_jobs, "J"),
    "--seed": (_nonneg_int, None),
}
_SAMPLING = {
    "--n-samples": (1000, "kept iterations per chain (default: %(default)s)"),
    "--n-warmup": (1000, "warmup (tuning) iterations per chain, discarded "
                         "(default: %(default)s)"),
    "--chains": (4, "independent chains; R-hat needs 2 or more (default: %(default)s)"),
    "--jobs": (None, "chains run in J threads (-1: all cores); draws do not depend on it "
                     "(default: 1)"),
    "--seed": (0, "random seed; the same seed gives the same draws (default: %(default)s)"),
}
_DEMO_SAMPLING = {  # None: cmd_demo picks the default (shorter with --quick)
    "--n-samples": (None, "kept iterations per chain (default: 1000; --quick: 200)"),
    "--n-warmup": (None, "warmup iterations per chain (default: 500; --quick: 200)"),
    "--chains": (None, "chains (default: 4; --quick: 2)"),
    "--jobs": (2, "chains run in J threads (default: %(default)s)"),
    "--seed": (0, "random seed (default: 0)"),
}


def _add_sampling(p, options=_SAMPLING):
    for flag, (default, text) in options.items():
        kind, metavar = _SAMPLING_TYPES[flag]
        p.add_argument(flag, type=kind, default=default, metavar=metavar, help=text)


_OUTPUTS_AND_STATUS = (
    _wrap("outputs: every file appears complete or not at all (written under no name, "
          "then named in one step), so a kill leaves the old file or the new one; Ctrl-C, "
          "SIGTERM and SIGHUP keep the draws made and write them.") + "\n"
    + _wrap("exit status: 0 done; 1 a sampler failed (demo, compare), or an output could "
            "not be written after the run (the draws then go to the temporary folder; the "
            "message says where); 2 a user error, nothing run; 130 Ctrl-C, 143 SIGTERM, "
            "129 SIGHUP (the draws made are written)."))


def _add_force(p):
    p.add_argument("--force", action="store_true",
                   help="overwrite output files that exist (never the input data or another "
                   "output of the same run); each is replaced in one step, complete")


def _add_data(p):
    p.add_argument("data", help="a file (CSV/TSV with a header or not, .npz with arrays X and y, "
                   "LIBSVM/svmlight; .gz allowed) or a named dataset: " + ", ".join(DATASETS))
    p.add_argument("--target", metavar="COLUMN",
                   help="CSV only: name or index of the target column (default: the last)")
    p.add_argument("--format", choices=("auto", "csv", "npz", "libsvm"), default="auto",
                   help="file format (default: from the extension, else sniffed)")
    p.add_argument("--header", choices=("auto", "yes", "no"), default="auto",
                   help="CSV only: whether the first line names the columns (auto: yes if a "
                   "field is not a number, or if the fields are the column numbers 0..d-1 "
                   "or 1..d)")
    p.add_argument("--model", choices=MODELS, default="logistic",
                   help="logistic (two classes, or multinomial with more), linear (Gaussian "
                        "noise) or poisson (counts) regression (default: %(default)s)")
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
    p.add_argument("--prior-scale", type=_prior_scale, default="auto", metavar="S",
                   help="sd of the Gaussian prior on each coefficient, or 'auto': 2.5 / the "
                   "column's spread (the sd, or a 0/1 column's 1), times the sd of y for "
                   "linear regression (default: %(default)s)")
    p.add_argument("--no-intercept", action="store_true", help="fit no intercept")
    p.add_argument("--param", action="append", metavar="KEY=VALUE",
                   help="a sampler hyperparameter, e.g. --param step_size=0.01 (compare: "
                   "--param sgld.step_size=0.01); repeat for several")


def _add_data_command(sub, name, func, samplers_line, *, help_text, description, examples):
    """A subcommand that reads data (fit, compare): the data options, then the
    examples and the sampler names below the option list."""
    p = sub.add_parser(name, help=help_text, description=description,
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog=f"{examples}\n\n{samplers_line}")
    p.set_defaults(func=func)
    _add_data(p)
    return p


def build_parser():
    """The argparse parser of ``bayes-subsample``."""
    from .. import __version__

    sampler_names = ", ".join(SAMPLERS)
    samplers_line = _wrap("samplers: " + sampler_names)
    parser = _Parser(
        prog=PROG, formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Subsampling MCMC for tall data: Bayesian logistic, linear and Poisson "
                    "regression\nsampled by HMC-ECS, austerity MH, the confidence sampler, "
                    "SG-MCMC,\nor exact HMC/MH.",
        epilog="start with:  bayes-subsample demo\n"
               "then:        bayes-subsample fit data.csv --target y --standardize\n\n"
               + samplers_line + "\n\n" + _OUTPUTS_AND_STATUS)
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
                   help="ROC plot file; .png is added to a name without extension "
                   "(default: %(default)s)")
    _add_force(p)
    p.add_argument("--quick", action="store_true",
                   help="short chains (2 x 200 + 200 iterations): a few seconds")
    p.add_argument("--no-plot", action="store_true", help="print the table only")
    _add_sampling(p, _DEMO_SAMPLING)
    p.set_defaults(func=_command("cmd_demo"))

    p = _add_data_command(
        sub, "fit", _command("cmd_fit"), samplers_line,
        help_text="fit one model with one sampler; save draws and a summary",
        description="Fits a Bayesian GLM by MCMC and saves the draws (.npz: 'draws' of\n"
                    "shape chains x draws x parameters, 'param_names', 'warmup_draws',\n"
                    "'stats_*') and a summary (JSON, or a text table if --summary ends in "
                    ".txt).",
        examples="examples:\n"
                 "  bayes-subsample fit higgs-sample --standardize --sampler hmc_ecs\n"
                 "  bayes-subsample fit data.csv --target y --model poisson --standardize\n"
                 "  bayes-subsample fit train.svm --sampler sgld --param batch_size=200")
    p.add_argument("--sampler", default="hmc_ecs", metavar="NAME",
                   help=f"one of: {sampler_names} (default: %(default)s)")
    _add_sampling(p)
    p.add_argument("--out", default="bayes_subsample_draws.npz", metavar="NPZ",
                   help="draws file; .npz is added to a name not ending in it "
                   "(default: %(default)s)")
    p.add_argument("--summary", metavar="PATH",
                   help="summary file, .json or .txt (default: <out>_summary.json)")
    _add_force(p)
    p.add_argument("--progress", action="store_true", default=None,
                   help="show a progress bar from the start (needs tqdm; without it, one "
                   "appears when the fit is estimated to be long)")
    p.add_argument("--quiet", action="store_true", help="print nothing on success")

    p = _add_data_command(
        sub, "compare", _command("cmd_compare"), samplers_line,
        help_text="several samplers on one dataset: table + trace/marginal/ROC plots",
        description="Fits the same model with several samplers and prints one row per "
                    "sampler;\nwrites <prefix>_trace.png, <prefix>_marginals.png "
                    "(densities against the\nreference sampler) and, for logistic "
                    "regression, <prefix>_roc.png on\nheld-out rows. A sampler that fails "
                    "is marked failed in its row, with the\nreason, and the others' results "
                    "are kept; the exit status is then 1.",
        examples="example:\n  bayes-subsample compare higgs-sample --standardize \\\n"
                 "      --samplers hmc,hmc_ecs,hmc_ecs_signed")
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
    _add_force(p)
    return parser
