"""Tests of the bayes-subsample command line."""
import json
import subprocess
import sys

import numpy as np
import pytest

from bayes_subsample.cli import main

FAST = ["--n-samples", "40", "--n-warmup", "40", "--chains", "2"]


@pytest.fixture(scope="module")
def csv_file(tmp_path_factory):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = (X @ [1.0, -1.0, 0.5] + rng.logistic(size=300) > 0).astype(int)
    path = tmp_path_factory.mktemp("data") / "small.csv"
    with open(path, "w") as fh:
        fh.write("alpha,beta,gamma,label\n")
        fh.writelines(",".join(f"{v:.5f}" for v in row) + f",{t}\n" for row, t in zip(X, y))
    return path, X, y


def _one_line_error(capsys):
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1, err
    assert "error:" in lines[0]
    return lines[0]


@pytest.mark.parametrize("argv", [[], ["demo"], ["fit"], ["compare"]])
def test_help_everywhere(argv, capsys):
    assert main(argv + ["--help"]) == 0
    out = capsys.readouterr().out
    assert "usage:" in out


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "demo" in capsys.readouterr().out


def test_demo_quick_writes_roc_and_fits_80_columns(tmp_path, capsys):
    png = tmp_path / "roc.png"
    assert main(["demo", "--quick", "--out", str(png)]) == 0
    out = capsys.readouterr().out
    assert png.is_file() and png.stat().st_size > 1000
    for word in ("R-hat", "ESS", "ESS/s", "accept", "data/it", "time s", "full HMC", "HMC-ECS"):
        assert word in out
    # every line fits an 80-column terminal (except the one naming the long tmp path)
    assert max(len(line) for line in out.splitlines() if str(png) not in line) <= 80


def test_demo_without_matplotlib_still_prints_table(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    png = tmp_path / "roc.png"
    assert main(["demo", "--out", str(png)] + FAST) == 0
    out = capsys.readouterr().out
    assert "R-hat" in out and "HMC-ECS" in out
    assert "pip install matplotlib" in " ".join(out.split())
    assert not png.exists()


def test_fit_csv_saves_draws_and_json(csv_file, tmp_path, capsys):
    path = csv_file[0]
    out = tmp_path / "draws.npz"
    rc = main(["fit", str(path), "--target", "label", "--standardize", "--sampler", "hmc",
               "--out", str(out)] + FAST)
    assert rc == 0
    z = np.load(out)
    assert z["draws"].shape == (2, 40, 4)
    assert list(z["param_names"]) == ["alpha", "beta", "gamma", "intercept"]
    assert "stats_accept_prob" in z.files
    info = json.loads((tmp_path / "draws_summary.json").read_text())
    assert info["sampler"] == "hmc" and info["n_rows"] == 300
    assert set(info["summary"]) == {"alpha", "beta", "gamma", "intercept"}
    assert info["summary"]["alpha"]["mean"] > 0 > info["summary"]["beta"]["mean"]
    assert "summary written" in capsys.readouterr().out


def test_fit_text_summary_and_params(csv_file, tmp_path):
    path = csv_file[0]
    summary = tmp_path / "s.txt"
    rc = main(["fit", str(path), "--target", "3", "--sampler", "hmc_ecs", "--param",
               "n_blocks=10", "--quiet", "--out", str(tmp_path / "d.npz"), "--summary",
               str(summary)] + FAST)
    assert rc == 0
    assert "intercept" in summary.read_text()


def test_fit_npz_and_libsvm(tmp_path):
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 2))
    y = rng.poisson(np.exp(0.5 * X[:, 0])).astype(float)
    np.savez(tmp_path / "d.npz", X=X, y=y)
    assert main(["fit", str(tmp_path / "d.npz"), "--model", "poisson", "--sampler", "mh",
                 "--quiet", "--out", str(tmp_path / "a.npz")] + FAST) == 0
    dump_svmlight_file(X, (y > 0).astype(int), str(tmp_path / "d.svm"))
    assert main(["fit", str(tmp_path / "d.svm"), "--quiet", "--out",
                 str(tmp_path / "b.npz")] + FAST) == 0
    assert np.load(tmp_path / "b.npz")["draws"].shape == (2, 40, 3)


def test_fit_named_dataset(tmp_path):
    assert main(["fit", "higgs-sample", "--standardize", "--sampler", "hmc_ecs", "--quiet",
                 "--out", str(tmp_path / "h.npz")] + FAST) == 0
    assert np.load(tmp_path / "h.npz")["draws"].shape == (2, 40, 29)


def test_compare_table_and_plots(csv_file, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    path = csv_file[0]
    prefix = tmp_path / "cmp"
    rc = main(["compare", str(path), "--samplers", "hmc,hmc_ecs", "--standardize",
               "--param", "hmc_ecs.n_blocks=10", "--out-prefix", str(prefix)] + FAST)
    assert rc == 0
    out = capsys.readouterr().out
    assert "hmc_ecs" in out and "AUC" in out
    for suffix in ("trace", "marginals", "roc"):
        assert (tmp_path / f"cmp_{suffix}.png").is_file()


@pytest.mark.parametrize("argv, expected", [
    (["fit", "/nonexistent/data.csv"], "no such file"),
    (["fit", "no-such-dataset"], "neither a file nor a named dataset"),
    (["fit", "{csv}", "--target", "nope"], "not a column"),
    (["fit", "{csv}", "--target", "17"], "out of range"),
    (["fit", "{csv}", "--sampler", "nope"], "unknown sampler"),
    (["fit", "{csv}", "--param", "nope=1"], "has no parameter"),
    (["fit", "{csv}", "--param", "novalue"], "KEY=VALUE"),
    (["fit", "{csv}", "--n-samples", "0"], "positive integer"),
    (["fit", "{csv}", "--model", "probit"], "invalid choice"),
    (["fit", "{csv}", "--target", "alpha"], "binary target"),
    (["fit", "{csv}", "--out", "/nonexistent/dir/x.npz"], "does not exist"),
    (["fit", "covtype", "--data-home", "/nonexistent"], "Could not find"),
    (["compare", "{csv}", "--samplers", "hmc,nope"], "unknown sampler"),
    (["compare", "{csv}", "--samplers", "hmc,mh", "--param", "step_size=1"], "SAMPLER.KEY"),
    (["compare", "{csv}", "--reference", "sgld"], "not among"),
    (["nope"], "invalid choice"),
    (["demo", "--chains", "x"], "positive integer"),
])
def test_user_errors_exit_2_with_one_line(argv, expected, csv_file, capsys):
    argv = [a.replace("{csv}", str(csv_file[0])) for a in argv]
    assert main(argv) == 2
    assert expected in _one_line_error(capsys)


def test_python_dash_m(tmp_path):
    res = subprocess.run([sys.executable, "-m", "bayes_subsample", "fit", "nope"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120,
                         check=False)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr and "named dataset" in res.stderr
