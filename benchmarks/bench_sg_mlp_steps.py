"""The SG samplers' default step sizes on neural networks (models without a
Hessian, doc/algorithms/sgmcmc.rst, ``algo-sg-no-hessian``).

Each sampler (SGLD, SGHMC, EWSG, pSGLD) runs at its defaults (batch 100,
friction 0.1, chains from ``MLPModel.init_params``) with its default step
times 1/10, 1/3, 1, 3 and 10 (1/3, 1 and 3 on MNIST), on

* load_digits, 64-50-10 relu, a 75/25 split (``random_state=0``), inputs
  divided by 16 and raw (0 to 16: the curvature is about 100 times larger);
* MNIST 784-100-10 relu (``--mnist DIR``: the four IDX ``.gz`` files), inputs
  divided by 255, fewer passes (one seed). Set ``OPENBLAS_NUM_THREADS=1``
  on a busy machine: the minibatch products are small, and BLAS threads
  competing for cores slowed them 20-fold in our runs.

A run spends ``--passes`` data passes (per-datum gradients / n, EWSG's index
chain included) and keeps 100 draws, thinned, from its second half; the
posterior predictive mean of those draws gives the train and test accuracy and
the test log loss. scikit-learn's ``MLPClassifier`` (same hidden layer, its
defaults) on the same split is the reference. A step that diverges (the
sampler raises) is reported as such.

Prints a Markdown table and writes ``benchmarks/results/sg_mlp_steps.json``
(``--out``).

Usage::

    python benchmarks/bench_sg_mlp_steps.py                   # digits, about 2 minutes
    python benchmarks/bench_sg_mlp_steps.py --mnist /path/to/mnist   # + MNIST, 20 passes:
                                                                     # about 15 minutes
"""
from __future__ import annotations

import argparse
import json
import os
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import train_test_split
from sklearn.neural_network import MLPClassifier

from bayes_subsample import sample
from bayes_subsample.exceptions import SamplingError
from bayes_subsample.models import MLPModel
from bayes_subsample.samplers import SAMPLERS
from bayes_subsample.samplers._sg_tuning import START_STEP
from _provenance import stamp  # noqa: E402
from bench_bnn import load_mnist  # noqa: E402  (the four IDX files, pixels / 255)

SAMPLER_NAMES = ("sgld", "sghmc", "ewsg", "psgld")
FACTORS = (0.1, 1 / 3, 1.0, 3.0, 10.0)
KEEP = 100


def problems(args):
    X, y = load_digits(return_X_y=True)
    for name, scale in (("digits /16", 16.0), ("digits raw", 1.0)):
        Xtr, Xte, ytr, yte = train_test_split((X / scale).astype(np.float32), y,
                                              test_size=0.25, random_state=0)
        yield name, (Xtr, Xte, ytr, yte), (50,), args.passes
    if args.mnist:
        yield "MNIST", load_mnist(args.mnist), (100,), args.mnist_passes


def predictive(model, draws, X, y):
    P = np.zeros((len(X), model.n_outputs))
    for theta in draws:
        P += model.predict_proba(theta, X)
    P /= len(draws)
    return float(np.mean(P.argmax(1) == y)), float(-np.mean(np.log(P[np.arange(len(y)), y]
                                                                    + 1e-300)))


def run(model, name, factor, passes, seed, data):
    Xtr, Xte, ytr, yte = data
    sampler = SAMPLERS[name]()
    default = sampler.prepare(model, np.random.default_rng(0)).step_size
    sampler.set_params(step_size=default * factor)
    per_step = (2 if name == "ewsg" else 1) * 100
    steps = int(passes * model.n_data / per_step)
    thin = max(1, steps // (2 * KEEP))
    n_warmup = max(0, steps // thin - KEEP)
    t0 = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            tr = sample(model, sampler.set_params(n_steps=thin), n_samples=KEEP,
                        n_warmup=n_warmup, n_chains=1, random_state=seed,
                        check_convergence=False)
    except SamplingError as e:
        return {"diverged": str(e)[:120], "step_size": default * factor}
    draws = tr.draws[0]
    tr_acc, _ = predictive(model, draws, Xtr, ytr)
    te_acc, te_ll = predictive(model, draws, Xte, yte)
    return {"step_size": default * factor, "train_acc": tr_acc, "test_acc": te_acc,
            "test_logloss": te_ll, "passes": float(tr.stats["data_passes"][0, -1]),
            "seconds": time.perf_counter() - t0}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=float, default=200)
    ap.add_argument("--seeds", type=int, default=2)
    ap.add_argument("--mnist", help="folder with the MNIST IDX .gz files")
    ap.add_argument("--mnist-passes", type=float, default=20)
    ap.add_argument("--mnist-factors", default="0.333333,1,3",
                    help="step / default on MNIST (each run takes a minute or two)")
    ap.add_argument("--samplers", default=",".join(SAMPLER_NAMES))
    ap.add_argument("--factors", default=",".join(f"{f:g}" for f in FACTORS))
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "sg_mlp_steps.json"))
    args = ap.parse_args()
    names = args.samplers.split(",")
    factors = [float(f) for f in args.factors.split(",")]
    mnist_factors = [float(f) for f in args.mnist_factors.split(",")]
    out = {"START_STEP": START_STEP, "results": []}
    rows = ["| data | sampler | step / default | train acc | test acc | test log loss |",
            "|---|---|---|---|---|---|"]
    for label, data, hidden, passes in problems(args):
        Xtr, Xte, ytr, yte = data
        model = MLPModel(Xtr, ytr, hidden_layer_sizes=hidden, n_classes=10)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            clf = MLPClassifier(hidden_layer_sizes=hidden, random_state=0).fit(Xtr, ytr)
        ref = {"train_acc": clf.score(Xtr, ytr), "test_acc": clf.score(Xte, yte)}
        out["results"].append({"data": label, "sampler": "MLPClassifier", **ref})
        rows.append(f"| {label} | MLPClassifier | - | {ref['train_acc']:.3f} | "
                    f"{ref['test_acc']:.3f} | - |")
        seeds = range(args.seeds if label != "MNIST" else 1)
        for name in names:
            for factor in (mnist_factors if label == "MNIST" else factors):
                res = [run(model, name, factor, passes, s, data) for s in seeds]
                out["results"].append({"data": label, "sampler": name, "factor": factor,
                                       "passes": passes, "runs": res})
                ok = [r for r in res if "diverged" not in r]
                if not ok:
                    rows.append(f"| {label} | {name} | {factor:.3g} | diverged | | |")
                    continue
                cell = lambda k: " / ".join(f"{r[k]:.3f}" for r in ok)  # noqa: E731
                note = f" ({len(res) - len(ok)} diverged)" if len(ok) < len(res) else ""
                rows.append(f"| {label} | {name} | {factor:.3g}{note} | {cell('train_acc')} | "
                            f"{cell('test_acc')} | {cell('test_logloss')} |")
                print(rows[-1], flush=True)
    print("\n".join(rows))
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(stamp(out), f, indent=1)


if __name__ == "__main__":
    main()
