"""Bayesian neural networks on MNIST: the EWSG paper's section 5.3 experiment
(its Figure 3a), with scikit-learn's ``MLPClassifier`` as the reference.

MNIST from the four IDX ``.gz`` files (``--mnist DIR``; pixels / 255, float32),
a 784-100-10 relu network, N(0, 1) prior on every weight and bias, minibatches
of 100, friction 0.1 (SGHMC, EWSG), 200 data passes, 100 networks kept from
the second half (evenly spaced). EWSG, SGHMC, SGLD and pSGLD run at equal
gradient evaluations (a data pass is n per-datum gradients; EWSG's index chain
included) at their default step sizes (no grid search, unlike the paper's).
Each run is the chain that ``BayesianMLPClassifier`` runs (its plan of
thinning and burn-in), sampled with ``bayes_subsample.sample`` so that the
burn-in draws are kept for the learning curves.

Reported per sampler: training and test accuracy of the current network every
``--every`` passes and of the posterior predictive of the draws kept so far
(second half); the final posterior-predictive test accuracy, log loss and
expected calibration error (15 equal-width bins of the top probability);
seconds per data pass (sampling only, from the trace). scikit-learn's
``MLPClassifier(hidden_layer_sizes=(100,), batch_size=100)`` on the same data
in the same run: test accuracy, ECE, seconds per epoch (on one BLAS thread, as
the chains run: its faster setting on this 2-core machine; its time per epoch
with BLAS's default threads is measured over two epochs and reported too). Out of distribution:
``BayesianMLPClassifier`` (SGHMC, the same settings) and ``MLPClassifier``
fitted on digits 0-4, the mean predictive entropy on the test digits 5-9
(unseen) and 0-4 (seen).

Prints a Markdown table and writes ``benchmarks/results/bnn.json`` (``--out``).

Usage::

    python benchmarks/bench_bnn.py                       # about 45 minutes on 2 cores
    python benchmarks/bench_bnn.py --passes 20 --samplers sghmc,ewsg
    python benchmarks/bench_bnn.py --quick               # scikit-learn's digits, seconds
    python benchmarks/bench_bnn.py --timing-only         # + interleaved times, 1 minute

``--timing-only`` times SGHMC and EWSG passes and ``MLPClassifier`` epochs in
alternation (three rounds of two each, one BLAS thread) and stores them, with
their own command and load, in the ``timing`` entry of the results: a fairer
ratio on a shared machine than the main run's, whose fits run minutes apart.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import time
import warnings

import numpy as np
from scipy.special import softmax
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier
from threadpoolctl import threadpool_info, threadpool_limits

from _provenance import command, commit, stamp  # noqa: E402  (first: the header as the run starts)
from bayes_subsample import BayesianMLPClassifier, sample
from bayes_subsample.models import MLPModel
from bayes_subsample.neural_network._base import forward
from bayes_subsample.samplers import resolve_sampler

SAMPLER_NAMES = ("ewsg", "sghmc", "sgld", "psgld")
ECE_BINS = 15
HERE = os.path.dirname(os.path.abspath(__file__))
#: BLAS's threads as the process started (the script then holds it to one)
DEFAULT_BLAS_THREADS = max([i["num_threads"] for i in threadpool_info()
                            if i["user_api"] == "blas"] or [1])


# ---- data --------------------------------------------------------------------------------
def _idx(path, images):
    with gzip.open(path) as f:
        buf = f.read()
    if images:
        return np.frombuffer(buf, np.uint8, offset=16).reshape(-1, 784)
    return np.frombuffer(buf, np.uint8, offset=8).astype(np.int64)


def load_mnist(folder):
    """``(Xtr, Xte, ytr, yte)``: pixels / 255 as float32."""
    f = lambda name: os.path.join(folder, name + ".gz")          # noqa: E731
    Xtr = _idx(f("train-images-idx3-ubyte"), True).astype(np.float32) / np.float32(255)
    Xte = _idx(f("t10k-images-idx3-ubyte"), True).astype(np.float32) / np.float32(255)
    return Xtr, Xte, _idx(f("train-labels-idx1-ubyte"), False), _idx(
        f("t10k-labels-idx1-ubyte"), False)


def load_quick():
    """scikit-learn's 8x8 digits (/ 16, float32), a 75/25 split: the smoke run."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    X, y = load_digits(return_X_y=True)
    return tuple(train_test_split((X / 16).astype(np.float32), y, test_size=0.25,
                                  random_state=0))


# ---- metrics -----------------------------------------------------------------------------
def ece(P, y, bins=ECE_BINS):
    """Expected calibration error: the top probability against the accuracy
    in ``bins`` equal-width bins of it, weighted by the rows in each bin."""
    conf = P.max(axis=1)
    hit = P.argmax(axis=1) == y
    which = np.minimum((conf * bins).astype(np.int64), bins - 1)
    total = 0.0
    for b in range(bins):
        m = which == b
        if m.any():
            total += m.sum() * abs(hit[m].mean() - conf[m].mean())
    return float(total / len(y))


def entropy(P):
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.sum(np.where(P > 0, P * np.log(P), 0.0), axis=1)


def summary(P, y):
    return {"accuracy": float(np.mean(P.argmax(1) == y)),
            "log_loss": float(-np.mean(np.log(np.clip(P[np.arange(len(y)), y], 1e-300, None)))),
            "ece": ece(P, y)}


def probabilities(model, theta, X):
    """Class probabilities of one network (flat ``theta``) on ``X``, float64."""
    layers = [(W.astype(X.dtype), b.astype(X.dtype)) for W, b in model.unpack(theta)]
    return softmax(forward(X, layers, "relu").astype(np.float64), axis=1)


# ---- one sampler -------------------------------------------------------------------------
def run_sampler(name, data, args, seed):
    Xtr, Xte, ytr, yte = data
    model = MLPModel(Xtr, ytr, hidden_layer_sizes=args.hidden, n_classes=10)
    est = BayesianMLPClassifier(hidden_layer_sizes=args.hidden, sampler=name,
                                n_passes=args.passes, n_samples=args.n_samples)
    sampler, n_warmup = est._plan(resolve_sampler(name), model.n_data)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        trace = sample(model, sampler, n_samples=args.n_samples, n_warmup=n_warmup,
                       n_chains=1, random_state=seed, check_convergence=False)
    wall = time.perf_counter() - t0
    passes = np.concatenate([trace.warmup_stats["data_passes"][0], trace.stats["data_passes"][0]])
    draws = np.concatenate([trace.warmup_draws[0], trace.draws[0]])
    seconds = float(trace.wall_time["warmup"][0] + trace.wall_time["sampling"][0])
    # the learning curves: the current network every `every` passes, and the
    # predictive of the kept draws so far
    marks = set(np.searchsorted(passes, np.arange(args.every, passes[-1] + 1e-9, args.every)))
    marks.add(len(passes) - 1)
    curve = []
    sum_tr, sum_te, kept = np.zeros((len(ytr), 10)), np.zeros((len(yte), 10)), 0
    for r in range(len(passes)):       # (BLAS on one thread: see main)
        is_kept = r >= n_warmup
        mark = r in marks
        if not (is_kept or mark):
            continue
        Pte = probabilities(model, draws[r], Xte)
        Ptr = probabilities(model, draws[r], Xtr)
        if is_kept:
            sum_tr += Ptr
            sum_te += Pte
            kept += 1
        if mark:
            point = {"passes": float(passes[r]),
                     "train_acc": float(np.mean(Ptr.argmax(1) == ytr)),
                     "test_acc": float(np.mean(Pte.argmax(1) == yte))}
            if kept:
                point["predictive_train_acc"] = float(np.mean(sum_tr.argmax(1) == ytr))
                point["predictive_test_acc"] = float(np.mean(sum_te.argmax(1) == yte))
            curve.append(point)
    test = summary(sum_te / kept, yte)
    train = summary(sum_tr / kept, ytr)
    return {"sampler": name, "seed": seed, "step_size": float(trace.tuning[0]["step_size"]),
            "thinning": int(sampler.n_steps), "n_kept": int(kept),
            "data_passes": float(passes[-1]), "seconds_sampling": seconds,
            "seconds_per_pass": seconds / float(passes[-1]), "seconds_with_prepare":
            wall, "train": train, "test": test, "curve": curve}


# ---- the references ----------------------------------------------------------------------
def _mlp_classifier(args, seed, max_iter=None):
    max_iter = max_iter or args.sklearn_max_iter
    return MLPClassifier(hidden_layer_sizes=args.hidden, batch_size=100, random_state=seed,
                         **({"max_iter": max_iter} if max_iter else {}))


def _fit_quietly(est, X, y):
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        est.fit(X, y)
    return time.perf_counter() - t0


def run_sklearn(data, args, seed):
    """``MLPClassifier`` on one BLAS thread, as the chains run (its faster
    setting on this machine), and its time per epoch over two epochs with
    BLAS's default threads."""
    Xtr, Xte, ytr, yte = data
    with threadpool_limits(DEFAULT_BLAS_THREADS, user_api="blas"):
        two = _mlp_classifier(args, seed, max_iter=2)
        default_threads = _fit_quietly(two, Xtr, ytr) / two.n_iter_
    clf = _mlp_classifier(args, seed)
    with threadpool_limits(1, user_api="blas"):
        seconds = _fit_quietly(clf, Xtr, ytr)
        return {"sampler": "MLPClassifier", "seed": seed, "epochs": int(clf.n_iter_),
                "seconds": seconds, "seconds_per_epoch": seconds / clf.n_iter_,
                "seconds_per_epoch_default_blas_threads": default_threads,
                "train": summary(clf.predict_proba(Xtr), ytr),
                "test": summary(clf.predict_proba(Xte), yte)}


def run_ood(data, args, seed):
    """Fit on the digits 0-4; the mean predictive entropy on the test digits
    5-9 (unseen) and 0-4 (seen), for the Bayesian network and MLPClassifier."""
    Xtr, Xte, ytr, yte = data
    seen_tr, seen_te = ytr < 5, yte < 5
    out = {"sampler": args.ood_sampler, "passes": args.passes, "seed": seed}
    bnn = BayesianMLPClassifier(hidden_layer_sizes=args.hidden, sampler=args.ood_sampler,
                                n_passes=args.passes, n_samples=args.n_samples,
                                random_state=seed)
    clf = _mlp_classifier(args, seed)
    for label, est in (("bayesian", bnn), ("MLPClassifier", clf)):
        res = {"seconds": _fit_quietly(est, Xtr[seen_tr], ytr[seen_tr])}
        for part, rows in (("unseen", ~seen_te), ("seen", seen_te)):
            if label == "bayesian":
                u = est.predict_uncertainty(Xte[rows])
                res[part] = {"mean_entropy": float(u.entropy.mean()),
                             "mean_mutual_information": float(u.mutual_information.mean())}
                P = u.proba
            else:
                P = est.predict_proba(Xte[rows])
                res[part] = {"mean_entropy": float(entropy(P).mean())}
            res[part]["mean_top_probability"] = float(P.max(axis=1).mean())
        res["seen_test_accuracy"] = float(np.mean(est.predict(Xte[seen_te]) == yte[seen_te]))
        out[label] = res
    return out


def run_timing(data, args):
    """Seconds per data pass of SGHMC and EWSG and per epoch of ``MLPClassifier``,
    interleaved (``--timing-repeats`` rounds of two passes or epochs each, all
    on one BLAS thread), so that the machine's load weighs on each alike."""
    Xtr, _, ytr, _ = data
    model = MLPModel(Xtr, ytr, hidden_layer_sizes=args.hidden, n_classes=10)
    out = {"repeats": args.timing_repeats, "passes_per_round": 2,
           "load_average_before": list(os.getloadavg()),
           "sghmc": [], "ewsg": [], "MLPClassifier": []}
    for _ in range(args.timing_repeats):
        two = _mlp_classifier(args, 0, max_iter=2)
        out["MLPClassifier"].append(_fit_quietly(two, Xtr, ytr) / two.n_iter_)
        for name in ("sghmc", "ewsg"):
            est = BayesianMLPClassifier(hidden_layer_sizes=args.hidden, sampler=name,
                                        n_passes=2, n_samples=2)
            sampler, n_warmup = est._plan(resolve_sampler(name), model.n_data)
            trace = sample(model, sampler, n_samples=2, n_warmup=n_warmup, n_chains=1,
                           random_state=0, check_convergence=False)
            seconds = trace.wall_time["warmup"][0] + trace.wall_time["sampling"][0]
            out[name].append(float(seconds / trace.stats["data_passes"][0, -1]))
    out["load_average_after"] = list(os.getloadavg())
    out["median"] = {k: float(np.median(out[k])) for k in ("sghmc", "ewsg", "MLPClassifier")}
    return out


# ---- the report --------------------------------------------------------------------------
def table(result):
    rows = ["| method | test acc (predictive) | train acc | test log loss | ECE (15 bins) | "
            "s / pass |", "|---|---|---|---|---|---|"]
    for r in result["runs"]:
        rows.append(f"| {r['sampler']} (seed {r['seed']}) | {r['test']['accuracy']:.4f} | "
                    f"{r['train']['accuracy']:.4f} | {r['test']['log_loss']:.4f} | "
                    f"{r['test']['ece']:.4f} | {r['seconds_per_pass']:.2f} |")
    for r in result["sklearn"]:
        rows.append(f"| MLPClassifier (seed {r['seed']}, {r['epochs']} epochs) | "
                    f"{r['test']['accuracy']:.4f} | {r['train']['accuracy']:.4f} | "
                    f"{r['test']['log_loss']:.4f} | {r['test']['ece']:.4f} | "
                    f"{r['seconds_per_epoch']:.2f} (epoch; "
                    f"{r['seconds_per_epoch_default_blas_threads']:.2f} on BLAS's default "
                    "threads) |")
    o = result.get("ood")
    if o:
        rows += ["", "| fitted on digits 0-4 | mean entropy, digits 5-9 | mean entropy, 0-4 | "
                 "accuracy on 0-4 |", "|---|---|---|---|"]
        for label in ("bayesian", "MLPClassifier"):
            name = f"BayesianMLPClassifier ({o['sampler']})" if label == "bayesian" else label
            r = o[label]
            rows.append(f"| {name} | {r['unseen']['mean_entropy']:.3f} | "
                        f"{r['seen']['mean_entropy']:.3f} | {r['seen_test_accuracy']:.4f} |")
    return "\n".join(rows)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mnist", default=os.path.join(
        os.environ.get("BAYES_SUBSAMPLE_DATA", "/work/shared/data"), "mnist"),
        help="folder with the four MNIST IDX .gz files")
    ap.add_argument("--passes", type=float, default=200)
    ap.add_argument("--n-samples", type=int, default=100, help="networks kept per run")
    ap.add_argument("--every", type=float, default=10, help="passes between curve points")
    ap.add_argument("--samplers", default=",".join(SAMPLER_NAMES))
    ap.add_argument("--seeds", type=int, default=1, help="seeds FIRST .. FIRST+SEEDS-1 per sampler")
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--hidden", type=int, nargs="*", default=[100])
    ap.add_argument("--no-ood", action="store_true", help="skip the out-of-distribution check")
    ap.add_argument("--ood-sampler", default="sghmc")
    ap.add_argument("--sklearn-max-iter", type=int, default=None,
                    help="MLPClassifier's max_iter (default: its own, 200)")
    ap.add_argument("--timing-only", action="store_true",
                    help="only the interleaved timing of SGHMC, EWSG and MLPClassifier, "
                    "written into the 'timing' entry of --out (the rest kept)")
    ap.add_argument("--timing-repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: scikit-learn's digits, 64-32-10, 10 passes, 10 draws")
    ap.add_argument("--out", default=None,
                    help="JSON output (default benchmarks/results/bnn.json; none with --quick)")
    args = ap.parse_args(argv)
    if args.quick:
        data = load_quick()
        args.hidden, args.passes, args.n_samples, args.every = [32], 10.0, 10, 5.0
        args.sklearn_max_iter = args.sklearn_max_iter or 10
        label = "digits 8x8 (quick)"
    else:
        data = load_mnist(args.mnist)
        label = "MNIST"
    args.hidden = tuple(args.hidden)
    out_path = args.out or (None if args.quick else os.path.join(HERE, "results", "bnn.json"))
    if args.timing_only:
        with threadpool_limits(1, user_api="blas"):
            timing = run_timing(data, args)
        timing = {"command": command(), "commit": commit(),
                  "date": time.strftime("%Y-%m-%d %H:%M"), **timing}
        print(json.dumps(timing["median"]))
        if out_path:
            result = {}
            if os.path.exists(out_path):
                with open(out_path) as f:
                    result = json.load(f)
            # the latest run is 'timing' (the README's figure); every run is kept
            result["timing"] = timing
            result.setdefault("timing_runs", []).append(timing)
            with open(out_path, "w") as f:
                json.dump(result, f, indent=1)
        return timing
    names = args.samplers.split(",")
    result = {"data": label, "n_train": int(len(data[2])), "n_test": int(len(data[3])),
              "architecture": [int(data[0].shape[1]), *args.hidden, 10],
              "passes": args.passes, "n_samples": args.n_samples, "batch_size": 100,
              "prior_scale": 1.0, "ece_bins": ECE_BINS, "runs": [], "sklearn": []}
    # predictions on one BLAS thread too (predictable on a shared machine;
    # the fits' times do not include them)
    _blas = threadpool_limits(1, user_api="blas")
    for seed in range(args.first_seed, args.first_seed + args.seeds):
        result["sklearn"].append(run_sklearn(data, args, seed))
        print(f"MLPClassifier seed {seed}: test acc {result['sklearn'][-1]['test']['accuracy']:.4f}"
              f", {result['sklearn'][-1]['seconds_per_epoch']:.2f} s / epoch", flush=True)
        for name in names:
            r = run_sampler(name, data, args, seed)
            result["runs"].append(r)
            print(f"{name} seed {seed}: test acc {r['test']['accuracy']:.4f}, "
                  f"{r['seconds_per_pass']:.2f} s / pass", flush=True)
    if not args.no_ood:
        result["ood"] = run_ood(data, args, 0)
    _blas.restore_original_limits()
    print(table(result))
    if out_path:
        os.makedirs(os.path.dirname(os.path.abspath(out_path)), exist_ok=True)
        result = stamp(result)
        if os.path.exists(out_path):
            # --timing-only runs carry their own command and commit: keep them
            with open(out_path) as f:
                previous = json.load(f)
            for key in ("timing", "timing_runs"):
                if key in previous:
                    result[key] = previous[key]
        with open(out_path, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
