"""Approximate MH on tall data against exact MH, in wall-clock time.

Every figure is measured in this run; ratios compare samplers of the same run.

1. ``higgs``: synthetic HIGGS-shaped logistic regression (``make_logistic_data``,
   n = 1e6, d = 28 + intercept). Exact MH, austerity MH at epsilon = 0.05 (its
   default, control-variate proxy) and the confidence sampler (its default: proxy
   and high-leverage stratum), all with the same adapted random-walk proposal and
   their default thinning (one transition per parameter per draw), 2 chains run
   one after the other. All-in ESS/s = min bulk ESS over parameters / wall time of
   the whole ``sample`` call (preparation, warmup, draws). Accuracy: posterior
   means against a full-data NUTS run, in posterior sds. Wrong-decision rates from
   short runs with ``check_exact``.
2. ``covtype``: covtype.binary (Lodgepole Pine vs rest), all 581,012 rows, the 10
   quantitative attributes standardised + intercept. The same samplers and the
   same figures; the data fraction per decision after warmup.
3. ``scaling``: the data fraction per decision and the time per decision of
   austerity MH and the confidence sampler (proxies) on synthetic data with 10
   attributes from n = 1e4 to 1e7, against the time of an exact MH decision.
4. ``risk``: risk of the posterior predictive mean against wall time (including
   preparation and warmup), as in the austerity paper's Figures 2-3, for exact MH,
   austerity MH (proxy, and the plain test of the paper) and the confidence
   sampler, on MNIST 7 vs 9 (50 PCA components) and on the synthetic 1e6 set:
   risk(t) = mean over held-out points of (p_t(x) - p_ref(x))^2, p_t the predictive
   mean of the draws made by time t, p_ref from full-data NUTS. Written as
   ``results/risk_vs_time_<data>.png`` with the numbers in the JSON.

Usage::

    python benchmarks/bench_tall_mh.py [--sections higgs covtype scaling risk]
                                       [--quick] [--out results/tall_mh.json]

All sections take about 30 minutes on 2 cores; ``--quick`` (smaller n and runs)
a few minutes, for checking the script. Timings are noisy on a shared machine:
compare within one run, on an otherwise idle machine.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
import warnings

import numpy as np

from bayes_subsample._driver import sample
from bayes_subsample.datasets import load_covtype, make_logistic_data
from bayes_subsample.models import LogisticRegressionModel
from bayes_subsample.samplers import MH, NUTS
from bayes_subsample.samplers.austerity import AusterityMH
from bayes_subsample.samplers.confidence import ConfidenceMH

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_approx_mh import _sigmoid, mnist_7v9_pca  # noqa: E402
from _provenance import stamp  # noqa: E402

DATA = os.environ.get("BAYES_SUBSAMPLE_DATA", "/work/shared/data")
HERE = os.path.dirname(os.path.abspath(__file__))


def _quiet_sample(model, sampler, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = time.perf_counter()
        tr = sample(model, sampler, **kw)
        return tr, time.perf_counter() - t0


def _ess(tr):
    d = tr.diagnostics()
    return float(np.nanmin(d["ess_bulk"])), d


def _reference(model, quick):
    n_w, n_s = (150, 300) if quick else (400, 1000)
    tr, el = _quiet_sample(model, NUTS(), n_samples=n_s, n_warmup=n_w, n_chains=2, n_jobs=1,
                           random_state=0)
    flat = tr.draws.reshape(-1, model.n_params)
    ess, d = _ess(tr)
    return {"seconds": el, "mean": flat.mean(axis=0), "sd": flat.std(axis=0),
            "mcse": np.asarray(d["mcse_mean"]), "min_ess": ess, "draws": flat}


def _compare(tr, el, ref):
    ess, d = _ess(tr)
    flat = tr.draws.reshape(-1, tr.draws.shape[-1])
    err = np.abs(flat.mean(axis=0) - ref["mean"]) / ref["sd"]
    mcse = np.hypot(np.asarray(d["mcse_mean"]), ref["mcse"]) / ref["sd"]
    out = {"seconds": el, "min_ess_bulk": ess, "ess_per_s": ess / el,
           "max_mean_error_in_sd": float(err.max()),
           "max_mean_error_beyond_3_mcse_in_sd": float(np.max(np.clip(err - 3 * mcse, 0, None))),
           "max_sd_ratio_error": float(np.max(np.abs(flat.std(axis=0) / ref["sd"] - 1.0))),
           "acceptance": float(np.mean(tr.stats["accepted"])),
           "n_draws": int(flat.shape[0])}
    if "data_fraction" in tr.stats:
        out["data_fraction_after_warmup"] = float(np.mean(tr.stats["data_fraction"]))
    return out


def _wrong_rate(model, sampler, n_iter):
    """Decisions differing from the full-data decision with the same u."""
    s = type(sampler)(**{**sampler.get_params(), "check_exact": True, "n_steps": 1})
    tr, _ = _quiet_sample(model, s, n_samples=n_iter, n_warmup=200, n_chains=1,
                          random_state=5, check_convergence=False)
    return float(np.mean(tr.stats["wrong_decision"]))


def compare_samplers(name, model, quick, draws):
    """Exact MH vs the approximate samplers at their defaults, all-in ESS/s."""
    print(f"\n## {name}: n = {model.n_data:,}, d = {model.n_params} (with intercept)", flush=True)
    ref = _reference(model, quick)
    print(f"reference NUTS: {ref['seconds']:.1f} s, min ESS {ref['min_ess']:.0f}", flush=True)
    rows = {}
    runs = {"mh": MH(), "austerity": AusterityMH(epsilon=0.05), "confidence": ConfidenceMH()}
    for key, s in runs.items():
        n_w, n_s = draws[key]
        tr, el = _quiet_sample(model, s, n_samples=n_s, n_warmup=n_w, n_chains=2, n_jobs=1,
                               random_state=1)
        rows[key] = {"warmup": n_w, "draws_per_chain": n_s, **_compare(tr, el, ref)}
        if key != "mh":
            rows[key]["wrong_decision_rate"] = _wrong_rate(model, s, 300 if quick else 1000)
        print(f"{key}: {el:.1f} s, min ESS {rows[key]['min_ess_bulk']:.1f}, "
              f"ESS/s {rows[key]['ess_per_s']:.3f}, data fraction "
              f"{rows[key].get('data_fraction_after_warmup', 1.0):.4f}", flush=True)
    for key in ("austerity", "confidence"):
        rows[key]["ess_per_s_ratio_vs_mh"] = rows[key]["ess_per_s"] / rows["mh"]["ess_per_s"]
    print("| sampler | time (s) | min bulk ESS | ESS/s | x exact MH | data fraction | "
          "max mean error (sd) | beyond 3 MCSE (sd) | max sd error | wrong decisions |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for key, r in rows.items():
        print(f"| {key} | {r['seconds']:.1f} | {r['min_ess_bulk']:.1f} | {r['ess_per_s']:.3f} | "
              f"{r.get('ess_per_s_ratio_vs_mh', 1.0):.1f} | "
              f"{r.get('data_fraction_after_warmup', 1.0):.4f} | "
              f"{r['max_mean_error_in_sd']:.3f} | "
              f"{r['max_mean_error_beyond_3_mcse_in_sd']:.3f} | "
              f"{r['max_sd_ratio_error']:.3f} | {r.get('wrong_decision_rate', 0.0):.4f} |",
              flush=True)
    reference = {k: ref[k] for k in ("seconds", "min_ess")}
    return {"n": model.n_data, "n_params": model.n_params, "reference_nuts": reference,
            "samplers": rows}, ref


# --------------------------------------------------------------------------------------
def higgs_section(quick):
    n = 100_000 if quick else 1_000_000
    X, y = make_logistic_data(n, 28, random_state=0)
    model = LogisticRegressionModel(X, y)
    draws = ({"mh": (50, 60), "austerity": (200, 400), "confidence": (50, 60)} if quick else
             {"mh": (100, 200), "austerity": (500, 2000), "confidence": (100, 200)})
    res, _ = compare_samplers("synthetic HIGGS-shaped logistic regression", model, quick, draws)
    return res


def covtype_section(quick):
    X, y = load_covtype(return_X_y=True, data_home=DATA, n_rows=100_000 if quick else None)
    Z = X[:, :10]
    Z = np.ascontiguousarray((Z - Z.mean(axis=0)) / Z.std(axis=0))
    model = LogisticRegressionModel(Z, y)
    draws = ({"mh": (100, 150), "austerity": (200, 400), "confidence": (100, 150)} if quick else
             {"mh": (200, 500), "austerity": (500, 2000), "confidence": (200, 500)})
    res, _ = compare_samplers("covtype.binary, 10 standardised attributes", model, quick, draws)
    return res


def scaling_section(quick):
    sizes = [10_000, 100_000, 1_000_000] + ([] if quick else [10_000_000])
    rows = []
    print("\n## data fraction per decision against n (synthetic, 10 attributes + intercept)")
    print("| n | sampler | data fraction | rows per decision | ms per decision | "
          "exact MH ms per decision |")
    print("|---|---|---|---|---|---|")
    for n in sizes:
        X, y = make_logistic_data(n, 10, random_state=1)
        model = LogisticRegressionModel(X, y)
        tr, el = _quiet_sample(model, MH(n_steps=1), n_samples=50, n_warmup=20, n_chains=1,
                               random_state=0, check_convergence=False)
        mh_ms = 1e3 * el / 70          # preparation included: an upper bound per decision
        for name, s in {"austerity": AusterityMH(n_steps=1),
                        "confidence": ConfidenceMH(n_steps=1)}.items():
            prepared = s.prepare(model, np.random.default_rng(0))
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                tr = sample(model, s, n_samples=400, n_warmup=200, n_chains=1, random_state=0,
                            check_convergence=False)
            el = time.perf_counter() - t0
            frac = float(np.mean(tr.stats["data_fraction"]))
            row = {"n": n, "sampler": name, "data_fraction": frac, "rows_per_decision": frac * n,
                   "ms_per_decision_all_in": 1e3 * el / 600,
                   "exact_mh_ms_per_decision_all_in": mh_ms,
                   "exact_rows": int(len(prepared.strata.exact))
                   if getattr(prepared, "strata", None) is not None else 0}
            rows.append(row)
            print(f"| {n:,} | {name} | {frac:.5f} | {frac * n:,.0f} | "
                  f"{row['ms_per_decision_all_in']:.2f} | {mh_ms:.2f} |", flush=True)
        del X, y, model
    return rows


# --------------------------------------------------------------------------------------
def risk_curve(sampler, model, Zte, p_ref, seconds, seed):
    """Run one chain by hand for ``seconds`` after preparation and warmup, and the
    risk of its running predictive mean at log-spaced wall times (from the start of
    preparation)."""
    t_start = time.perf_counter()
    prepared = sampler.prepare(model, np.random.default_rng(seed))
    n_warmup = 200
    kernel = sampler.build(model, prepared, n_warmup)
    rng = np.random.default_rng(seed)
    state = kernel.init(rng, prepared.theta_init.copy())
    for i in range(n_warmup):
        state, _ = kernel.warmup_step(rng, state, i)
    state = kernel.end_warmup(state)
    t_warm = time.perf_counter() - t_start
    psum = np.zeros(Zte.shape[0])
    count, times, risks = 0, [], []
    next_check = t_warm
    while True:
        state, _ = kernel.step(rng, state)
        th = state.theta
        psum += _sigmoid(Zte @ th[:-1] + th[-1])
        count += 1
        now = time.perf_counter() - t_start
        if now >= next_check:
            times.append(now)
            risks.append(float(np.mean((psum / count - p_ref) ** 2)))
            next_check = now * 1.15
        if now >= t_warm + seconds:
            break
    return {"seconds_to_first_draw": t_warm, "steps": count, "times": times, "risks": risks}


def risk_section(quick, out_dir):
    out = {}
    problems = {}
    # MNIST 7 vs 9, 50 PCA components scaled to unit variance (as bench_approx_mh.py)
    Ztr, ytr, Zte = mnist_7v9_pca()
    problems["mnist7v9"] = (LogisticRegressionModel(Ztr, ytr, prior_scale=1.0,
                                                    intercept_prior_scale=10.0),
                            Zte, 10.0 if quick else 30.0)
    n = 100_000 if quick else 1_000_000
    X, y = make_logistic_data(n + 10_000, 28, random_state=3)
    problems["synthetic1e6"] = (LogisticRegressionModel(X[:n], y[:n]), X[n:],
                                20.0 if quick else 90.0)
    samplers = {"exact MH": MH(n_steps=1),
                "austerity eps=0.05 (proxy)": AusterityMH(epsilon=0.05, n_steps=1),
                "austerity eps=0.05 (plain test)": AusterityMH(epsilon=0.05, proxy=None,
                                                               n_steps=1),
                "confidence delta=0.01 (proxy, strata)": ConfidenceMH(n_steps=1)}
    for key, (model, Zte, seconds) in problems.items():
        ref = _reference(model, quick)
        flat = ref["draws"]
        p_ref = _sigmoid(Zte @ flat[:, :-1].T + flat[:, -1]).mean(axis=1)
        curves = {}
        for name, s in samplers.items():
            curves[name] = risk_curve(s, model, Zte, p_ref, seconds, seed=11)
            c = curves[name]
            print(f"{key} {name}: {c['steps']} steps, final risk {c['risks'][-1]:.2e} at "
                  f"{c['times'][-1]:.1f} s", flush=True)
        out[key] = {"n": model.n_data, "seconds": seconds, "curves": curves}
        _plot(key, curves, os.path.join(out_dir, f"risk_vs_time_{key}.png"))
    return out


def _plot(key, curves, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:          # pragma: no cover - plotting is optional
        print("matplotlib is not installed: no figure written")
        return
    fig, ax = plt.subplots(figsize=(6, 4))
    for name, c in curves.items():
        ax.loglog(c["times"], c["risks"], label=name)
    ax.set_xlabel("wall time (s), preparation and warmup included")
    ax.set_ylabel("risk of the predictive mean")
    ax.set_title(f"{key}: risk against wall time")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"wrote {path}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", nargs="*", default=["higgs", "covtype", "scaling", "risk"],
                    choices=["higgs", "covtype", "scaling", "risk"])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "tall_mh.json"))
    args = ap.parse_args(argv)
    result = {"platform": platform.platform(), "python": platform.python_version(),
              "cpu_count": os.cpu_count(), "load_average_start": os.getloadavg(),
              "quick": args.quick}
    out_dir = os.path.dirname(os.path.abspath(args.out))
    os.makedirs(out_dir, exist_ok=True)
    sections = {"higgs": higgs_section, "covtype": covtype_section, "scaling": scaling_section}
    for name in args.sections:
        t0 = time.perf_counter()
        if name == "risk":
            result[name] = risk_section(args.quick, out_dir)
        else:
            result[name] = sections[name](args.quick)
        print(f"[{name}: {time.perf_counter() - t0:.0f} s]", flush=True)
    result["load_average_end"] = os.getloadavg()
    with open(args.out, "w") as f:
        json.dump(stamp(result), f, indent=1, default=float)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
