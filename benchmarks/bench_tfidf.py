"""Benchmark: a scikit-learn text pipeline with thousands of features, at the
defaults -- ``make_pipeline(TfidfVectorizer(), BayesianLogisticRegression())``.

Synthetic documents: 6,000 texts of 15 words drawn uniformly from a vocabulary
of 5,000; a text's label is Bernoulli(sigmoid(score)) with score +1 per word
from a set of every 7th word and -0.15 per other word. TF-IDF gives a sparse
6,000 x 5,000 design, so the estimator's default HMC-ECS uses the diagonal
metric (beyond 2,000 parameters) and, its order-1 control variates needing
more rows than there are, runs full-data HMC (4 chains x (1000 + 1000)). It
prints the fit time, the metric, the smallest bulk ESS and the largest R-hat.

Usage::

    python benchmarks/bench_tfidf.py

Writes ``benchmarks/results/tfidf.json`` (or ``--out``).
"""
from __future__ import annotations

import argparse
import os
import time
import warnings

import numpy as np

from _procmem import run_info, write_result


def texts_and_labels(n_texts=6000, vocab_size=5000, words=15, seed=0):
    rng = np.random.default_rng(seed)
    vocab = np.array([f"w{i}" for i in range(vocab_size)])
    good = set(range(0, vocab_size, 7))
    texts, labels = [], []
    for _ in range(n_texts):
        idx = rng.choice(vocab_size, size=words)
        texts.append(" ".join(vocab[idx]))
        score = sum(1.0 if w in good else -0.15 for w in idx)
        labels.append(int(rng.random() < 1.0 / (1.0 + np.exp(-score))))
    return texts, labels


def main(argv=None):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.pipeline import make_pipeline

    from bayes_subsample import BayesianLogisticRegression
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "results",
                                                  "tfidf.json"))
    args = ap.parse_args(argv)
    texts, labels = texts_and_labels()
    clf = make_pipeline(TfidfVectorizer(), BayesianLogisticRegression(random_state=0))
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        clf.fit(texts, labels)
    seconds = time.perf_counter() - t0
    est = clf[-1]
    d = est.diagnostics_
    tuning = d["tuning"][0]
    row = {"n": len(texts), "n_features": int(est.n_features_in_), "fit_seconds": seconds,
           "metric": "diag" if np.ndim(tuning["mass_matrix"]) == 1 else "dense",
           "full_data": bool(tuning.get("full_data", False)),
           "m_needed": tuning.get("m_needed"),
           "min_ess_bulk": float(np.min(d["ess_bulk"])),
           "n_draws": int(np.sum(d["chain_lengths"])),
           "max_r_hat": float(np.max(d["r_hat"])),
           "warnings": [str(w.message) for w in caught]}
    print("| rows | features | metric | fit s | min bulk ESS | max R-hat |")
    print("|---|---|---|---|---|---|")
    print(f"| {row['n']:,} | {row['n_features']:,} | {row['metric']} | "
          f"{seconds:.1f} | {row['min_ess_bulk']:.0f} of {row['n_draws']} | "
          f"{row['max_r_hat']:.3f} |")
    write_result({**run_info("bench_tfidf.py", argv), "runs": [row]}, args.out)


if __name__ == "__main__":
    main()
