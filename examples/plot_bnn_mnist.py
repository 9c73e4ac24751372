"""
A Bayesian neural network on MNIST: four SG samplers, and what it does not know
================================================================================

:class:`~bayes_subsample.BayesianMLPClassifier` samples the weights of a
784-100-10 relu network (an ``N(0, 1)`` prior on every weight and bias, the
EWSG paper's section 5.3 setting) with a stochastic-gradient sampler, keeps
``n_samples`` networks and predicts with their average, the posterior
predictive.

Left: test accuracy of the posterior predictive against data passes for
SGHMC, EWSG, SGLD and pSGLD at their default step sizes, all at the same
number of gradient evaluations per pass. The curve is made with
``warm_start=True``: each fit of ``n_passes=STEP`` continues from the last
networks of the previous one (momenta and pSGLD's preconditioner start
afresh at each segment) and its kept networks give one point.

Right: the network is fitted on the digits 0-4 only, then asked about the
test digits 0-4 (seen) and 5-9 (never seen). The entropy of the posterior
predictive (``predict_uncertainty(X).entropy``, 0 for a sure answer,
``log 5 = 1.61`` for a uniform one) is larger on the unseen digits, and larger
than that of scikit-learn's :class:`~sklearn.neural_network.MLPClassifier`,
a point estimate of the same network, which is confidently wrong about much
of what it has not seen.

The four MNIST IDX files are read from ``$BAYES_SUBSAMPLE_DATA/mnist/``; this
example uses 10,000 training images and 30 passes per sampler (6 minutes on
two shared cores; ``benchmarks/bench_bnn.py`` runs the full experiment,
60,000 images and 200 passes). ``BAYES_SUBSAMPLE_QUICK=1`` (or missing files) runs on
scikit-learn's 8x8 digits instead, in seconds. The figure
``plot_bnn_mnist.png`` goes to the current folder or to
``$BAYES_SUBSAMPLE_EXAMPLES_OUT``.
"""

# %%
# Data: pixels divided by 255
# ---------------------------
import gzip
import os
import warnings

import matplotlib.pyplot as plt
import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPClassifier

from bayes_subsample import BayesianMLPClassifier

QUICK = os.environ.get("BAYES_SUBSAMPLE_QUICK", "0") not in ("", "0")
OUT_DIR = os.environ.get("BAYES_SUBSAMPLE_EXAMPLES_OUT", ".")
FOLDER = os.path.join(os.environ.get("BAYES_SUBSAMPLE_DATA", "."), "mnist")
FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte",
         "t10k-labels-idx1-ubyte")


def read_idx(name):
    with gzip.open(os.path.join(FOLDER, name + ".gz")) as f:
        buf = f.read()
    if "images" in name:
        return np.frombuffer(buf, np.uint8, offset=16).reshape(-1, 784)
    return np.frombuffer(buf, np.uint8, offset=8).astype(np.int64)


if QUICK or not all(os.path.exists(os.path.join(FOLDER, f + ".gz")) for f in FILES):
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    X, y = load_digits(return_X_y=True)
    Xtr, Xte, ytr, yte = train_test_split((X / 16).astype(np.float32), y, test_size=0.25,
                                          random_state=0)
    DATA, HIDDEN, PASSES, STEP, N_SAMPLES = "8x8 digits", (32,), 10, 5, 5
else:
    images, labels, test_images, test_labels = (read_idx(f) for f in FILES)
    Xtr = images[:10_000].astype(np.float32) / np.float32(255)
    ytr = labels[:10_000]
    Xte, yte = test_images.astype(np.float32) / np.float32(255), test_labels
    DATA, HIDDEN, PASSES, STEP, N_SAMPLES = "MNIST", (100,), 30, 5, 20
print(f"{DATA}: {len(Xtr)} training and {len(Xte)} test images")

# %%
# Test accuracy against data passes, per sampler
# ----------------------------------------------
curves = {}
for name in ("sghmc", "ewsg", "sgld", "psgld"):
    clf = BayesianMLPClassifier(hidden_layer_sizes=HIDDEN, sampler=name, n_passes=STEP,
                                n_samples=N_SAMPLES, warm_start=True, random_state=0)
    points = []
    for done in range(STEP, PASSES + 1, STEP):
        clf.fit(Xtr, ytr)
        points.append((done, clf.score(Xte, yte)))
    curves[name] = np.array(points)
    d = clf.diagnostics_
    print(f"{name:6s} test accuracy {points[-1][1]:.4f} after {PASSES} passes "
          f"(step {d['step_size']:.3g}, {d['seconds_per_pass'][0]:.2f} s per pass)")

# %%
# What the network has not seen: fit on 0-4, ask about 5-9
# --------------------------------------------------------
seen_tr, seen_te = ytr < 5, yte < 5
bnn = BayesianMLPClassifier(hidden_layer_sizes=HIDDEN, n_passes=PASSES, n_samples=N_SAMPLES,
                            random_state=0).fit(Xtr[seen_tr], ytr[seen_tr])
with warnings.catch_warnings():
    warnings.simplefilter("ignore", ConvergenceWarning)
    mlp = MLPClassifier(hidden_layer_sizes=HIDDEN, batch_size=100,
                        random_state=0).fit(Xtr[seen_tr], ytr[seen_tr])


def entropy(P):
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.sum(np.where(P > 0, P * np.log(P), 0.0), axis=1)


H = {("Bayesian (SGHMC)", part): bnn.predict_uncertainty(Xte[rows]).entropy
     for part, rows in (("seen 0-4", seen_te), ("unseen 5-9", ~seen_te))}
H.update({("MLPClassifier", part): entropy(mlp.predict_proba(Xte[rows]))
          for part, rows in (("seen 0-4", seen_te), ("unseen 5-9", ~seen_te))})
for (who, part), h in H.items():
    print(f"{who:17s} {part:10s} mean predictive entropy {h.mean():.3f}")

# %%
# The figure
# ----------
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
for name, c in curves.items():
    ax1.plot(c[:, 0], c[:, 1], marker="o", label=name.upper() if name != "psgld" else "pSGLD")
ax1.set_xlabel("data passes (gradient evaluations / n)")
ax1.set_ylabel("test accuracy of the posterior predictive")
ax1.set_title(f"{DATA}, {len(Xtr)} training images")
ax1.legend()
bins = np.linspace(0, np.log(5), 30)
for (who, part), h in H.items():
    ax2.hist(h, bins=bins, histtype="step", density=True,
             linestyle="-" if who.startswith("Bayes") else "--",
             color="C0" if part.startswith("seen") else "C3", label=f"{who}, {part}")
ax2.set_yscale("log")
ax2.set_xlabel("predictive entropy (nats)")
ax2.set_ylabel("density")
ax2.set_title("fitted on digits 0-4")
ax2.legend(fontsize=8)
fig.tight_layout()
out = os.path.join(OUT_DIR, "plot_bnn_mnist.png")
fig.savefig(out, dpi=100)
print("wrote", out)
