"""benchmarks/bench_bnn.py runs (its ``--quick`` smoke run on scikit-learn's 8x8
digits, under a second) and writes what benchmarks/README.md's figures read;
its expected calibration error is the textbook one."""
import json
from pathlib import Path

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    if not (BENCH / "bench_bnn.py").exists():
        pytest.skip("benchmarks/ is not in this checkout")
    monkeypatch.syspath_prepend(str(BENCH))
    import bench_bnn
    return bench_bnn


def test_expected_calibration_error(bench):
    # two bins: 0.95 confident and right 19 times out of 20 (calibrated), 0.65
    # confident and right 10 times out of 20 (off by 0.15)
    P = np.array([[0.95, 0.05]] * 20 + [[0.65, 0.35]] * 20)
    y = np.array([0] * 19 + [1] + [0] * 10 + [1] * 10)
    assert bench.ece(P, y) == pytest.approx(0.5 * 0.0 + 0.5 * 0.15)
    assert bench.ece(np.eye(3)[[0, 1, 2]], np.array([0, 1, 2])) == 0.0


@pytest.mark.filterwarnings("ignore::bayes_subsample.exceptions.LongFitWarning")
def test_quick_run_writes_the_results(bench, tmp_path):
    out = tmp_path / "bnn.json"
    bench.main(["--quick", "--out", str(out)])
    res = json.loads(out.read_text())
    assert {"command", "commit", "version", "machine", "python", "date",
            "load_average_before", "load_average_after"} <= set(res)
    assert [r["sampler"] for r in res["runs"]] == ["ewsg", "sghmc", "sgld", "psgld"]
    for r in res["runs"]:
        assert r["n_kept"] == 10 and r["data_passes"] == pytest.approx(10, rel=0.05)
        assert r["test"]["accuracy"] > 0.5 and 0 <= r["test"]["ece"] <= 1
        # the first recorded draw at or past every 5 passes (a draw is half a pass here)
        assert [p["passes"] for p in r["curve"]] == pytest.approx([5, 10], abs=0.6)
        assert "predictive_test_acc" in r["curve"][-1]
    sk = res["sklearn"][0]
    assert sk["epochs"] >= 1 and sk["seconds_per_epoch"] > 0
    ood = res["ood"]
    assert {"unseen", "seen"} <= set(ood["bayesian"]) and {"unseen", "seen"} <= set(
        ood["MLPClassifier"])
    # the figures script skips a quick run (not MNIST)
    import readme_figures
    assert readme_figures._bnn_rows(res) == []
