"""Tests of the bayes-subsample command line."""
import gzip
import json
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from bayes_subsample.cli import main

FAST = ["--n-samples", "40", "--n-warmup", "40", "--chains", "2"]


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


def test_fit_multiclass_csv_names_each_class_block(tmp_path, capsys):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(300, 2))
    y = np.array([3, 5, 7])[np.argmax(X @ [[1.0, 0.0, -1.0], [0.0, 1.0, -1.0]]
                                            + rng.gumbel(size=(300, 3)), axis=1)]
    path = tmp_path / "three.csv"
    with open(path, "w") as fh:
        fh.write("a,b,kind\n")
        fh.writelines(f"{r[0]:.5f},{r[1]:.5f},{t}\n" for r, t in zip(X, y))
    out = tmp_path / "draws.npz"
    assert main(["fit", str(path), "--sampler", "hmc", "--out", str(out)] + FAST) == 0
    z = np.load(out)
    assert z["draws"].shape == (2, 40, 9)
    assert list(z["param_names"]) == ["a[3]", "b[3]", "intercept[3]", "a[5]", "b[5]",
                                      "intercept[5]", "a[7]", "b[7]", "intercept[7]"]
    assert "multinomial, 3 classes" in " ".join(capsys.readouterr().out.split())


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
    # times are elapsed wall-clock seconds, the basis of ESS/s
    d = info["diagnostics"]
    assert 0 < d["wall_time_seconds"] <= d["compute_time_seconds"] + 0.5
    assert d["min_ess_per_second"] == pytest.approx(d["min_ess_bulk"] / d["wall_time_seconds"],
                                                    rel=1e-6)
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
    (["fit", "{csv}", "--target", "alpha"], "needs class labels"),
    (["fit", "{csv}", "--out", "/nonexistent/dir/x.npz"], "does not exist"),
    (["fit", "{csv}", "--summary", "s.yaml"], "cannot write a summary as .yaml; name it "
                                              ".json (JSON) or .txt (text table)"),
    (["fit", "{csv}", "--summary", "s"], "without extension"),
    (["fit", "{csv}", "--out", "/"], "is a folder"),
    (["demo", "--out", "roc.yaml"], "cannot write .yaml images; use one of"),
    (["fit", "covtype", "--data-home", "/nonexistent"], "Could not find"),
    (["compare", "{csv}", "--samplers", "hmc,nope"], "unknown sampler"),
    (["compare", "{csv}", "--samplers", "hmc,mh", "--param", "step_size=1"], "SAMPLER.KEY"),
    (["compare", "{csv}", "--reference", "sgld"], "not among"),
    (["nope"], "invalid choice"),
    (["demo", "--chains", "x"], "positive integer"),
])
def test_user_errors_exit_2_with_one_line(argv, expected, csv_file, capsys, tmp_path,
                                         monkeypatch):
    monkeypatch.chdir(tmp_path)  # default outputs left in the working folder are not in the way
    argv = [a.replace("{csv}", str(csv_file[0])) for a in argv]
    assert main(argv) == 2
    assert expected in _one_line_error(capsys)


@pytest.mark.parametrize("samplers, failing, error", [
    ("mh,sgld", "sgld", "SamplingError: SGLD ran away"),   # a real divergence
    ("sgld,mh", "sgld", "SamplingError: SGLD ran away"),   # ... of the reference
    ("hmc,mh", "mh", "RuntimeError: a bug in a kernel"),         # any error
])
def test_compare_reports_a_failing_sampler_and_keeps_the_others(samplers, failing, error, csv_file,
                                                                 tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    from bayes_subsample.samplers.mh import MHKernel

    def broken(self, rng, state):
        raise RuntimeError("a bug in a kernel")

    if failing == "mh":
        monkeypatch.setattr(MHKernel, "transition", broken)
    unstable = ["--param", "sgld.step_size=100"] if "sgld" in samplers else []
    rc = main(["compare", str(csv_file[0]), "--samplers", samplers, "--out-prefix",
               str(tmp_path / "cmp")] + unstable + FAST)
    assert rc == 1
    res = capsys.readouterr()
    assert "Traceback" not in res.err
    (ok,) = set(samplers.split(",")) - {failing}
    table = res.out.split("sampler ")[1].split("\n\n")[0].splitlines()
    assert any(ln.startswith(f"{failing} ") and f"failed: {error}" in ln for ln in table)
    assert any(ln.startswith(f"{ok} ") and "failed" not in ln for ln in table)
    assert f"failed [{failing}]: {error}" in res.out
    for suffix in ("trace", "marginals", "roc"):
        assert (tmp_path / f"cmp_{suffix}.png").is_file()


# ---- Ctrl-C: keep what was made, exit 130 ------------------------------------------------
@pytest.fixture
def ctrl_c_after(monkeypatch):
    """``ctrl_c_after(k)``: MH raises KeyboardInterrupt (a user pressing Ctrl-C)
    at its (k+1)-th transition, counted over all chains. With --param
    n_steps=1 and FAST, a transition is an iteration: chain 0 makes 80
    (40 warmup + 40 kept), then chain 1 its 40 warmup and its kept ones."""
    from bayes_subsample.samplers.mh import MHKernel

    def arm(k):
        calls = [0]
        transition = MHKernel.transition

        def interrupted(self, rng, state):
            calls[0] += 1
            if calls[0] > k:
                raise KeyboardInterrupt
            return transition(self, rng, state)

        monkeypatch.setattr(MHKernel, "transition", interrupted)

    return arm


def _main_without_runtime_warnings(argv):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rc = main(argv)
    stray = [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]
    assert not stray  # e.g. numpy's "All-NaN slice encountered" on one kept chain
    return rc


@pytest.mark.parametrize("k, kept", [
    (140, (40, 20)),   # chain 0 complete, chain 1 at 20 draws: every draw is kept
    (60, (20, 0)),     # chain 1 never sampled: one chain, no R-hat
    (121, (40, 1)),    # one draw in chain 1: too few for a summary
])
def test_fit_interrupted_saves_the_draws_made_and_exits_130(k, kept, ctrl_c_after, csv_file,
                                                             tmp_path, capsys):
    ctrl_c_after(k)
    out = tmp_path / "d.npz"
    rc = _main_without_runtime_warnings(["fit", str(csv_file[0]), "--sampler", "mh", "--param",
                                         "n_steps=1", "--out", str(out)] + FAST)
    assert rc == 130
    res = capsys.readouterr()
    assert "Traceback" not in res.err
    said = " ".join(res.out.split())
    assert re.search(fr"interrupted after [0-9.]+ s: kept {kept[0]}, {kept[1]} draws in the 2 "
                     "chains", said)
    assert f"draws written to {out} " in said
    saved = np.load(out)
    assert saved["draws"].shape == (2, max(kept), 4)
    assert saved["chain_lengths"].tolist() == list(kept)
    for c in range(2):
        assert np.isfinite(saved["draws"][c, :kept[c]]).all()
        assert np.isnan(saved["draws"][c, kept[c]:]).all()
    info = json.loads((tmp_path / "d_summary.json").read_text())
    assert info["diagnostics"]["interrupted"] is True
    assert (info["summary"] is None) == (min(k for k in kept if k) < 4)
    if 0 in kept:
        assert info["diagnostics"]["max_r_hat"] is None


def test_fit_interrupted_before_any_draw_writes_nothing(ctrl_c_after, csv_file, tmp_path):
    ctrl_c_after(30)
    assert main(["fit", str(csv_file[0]), "--sampler", "mh", "--param", "n_steps=1",
                 "--out", str(tmp_path / "d.npz"), "--quiet"] + FAST) == 130
    assert list(tmp_path.iterdir()) == []


def test_compare_interrupted_keeps_the_fits_made_and_exits_130(ctrl_c_after, csv_file,
                                                               tmp_path, capsys):
    pytest.importorskip("matplotlib")
    ctrl_c_after(140)
    rc = _main_without_runtime_warnings(
        ["compare", str(csv_file[0]), "--samplers", "hmc,mh,hmc_ecs", "--param",
         "mh.n_steps=1", "--out-prefix", str(tmp_path / "cmp")] + FAST)
    assert rc == 130
    out = capsys.readouterr().out
    table = out.split("sampler ")[1].split("\n\n")[0].splitlines()
    assert [ln.split()[0] for ln in table[2:]] == ["hmc", "mh", "hmc_ecs"]
    assert "not run" not in table[2] + table[3] and "not run" in table[4]
    for suffix in ("trace", "marginals", "roc"):
        assert (tmp_path / f"cmp_{suffix}.png").is_file()


def _damaged_files(folder, csv_path):
    """Files that open but cannot be read: gzip magic then garbage, gzip data
    damaged in the middle, an .npz whose member fails its CRC."""
    import gzip

    garbage = b"\x1f\x8b" + b"garbage after the gzip magic" * 4
    text = gzip.compress(csv_path.read_bytes() * 20)
    damaged = text[:200] + b"\x00" * 60 + text[260:]
    np.savez_compressed(folder / "good.npz", X=np.arange(600.0).reshape(200, 3),
                        y=np.ones(200))
    npz = bytearray((folder / "good.npz").read_bytes())
    npz[300:400] = b"\xff" * 100
    files = {"magic.csv": garbage, "magic_no_extension": garbage, "damaged.csv.gz": damaged,
             "crc.npz": bytes(npz)}
    for name, content in files.items():
        (folder / name).write_bytes(content)
    return list(files)


def test_unreadable_input_is_a_one_line_error_naming_it(csv_file, tmp_path, capsys):
    for name in _damaged_files(tmp_path, csv_file[0]):
        path = tmp_path / name
        assert main(["fit", str(path), "--out", str(tmp_path / "out.npz")] + FAST) == 2, name
        msg = _one_line_error(capsys)
        assert str(path) in msg and re.search("damaged|truncated|corrupt", msg), msg
    home = tmp_path / "home"
    home.mkdir()
    (home / "covtype.data.gz").write_bytes((tmp_path / "magic.csv").read_bytes())
    assert main(["fit", "covtype", "--data-home", str(home), "--out",
                 str(tmp_path / "out.npz")]) == 2
    msg = _one_line_error(capsys)
    assert str(home / "covtype.data.gz") in msg and "delete it" in msg.lower(), msg
    assert not (tmp_path / "out.npz").exists()


def test_python_dash_m(tmp_path):
    res = subprocess.run([sys.executable, "-m", "bayes_subsample", "fit", "nope"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120,
                         check=False)
    assert res.returncode == 2
    assert "Traceback" not in res.stderr and "named dataset" in res.stderr


# ---- output files: never the input, never twice, never an existing file without --force ----
def _snapshot(folder):
    return {p.name: p.read_bytes() for p in folder.iterdir()}


@pytest.mark.parametrize("data_name, options", [
    ("d.npz", ["--out", "d.npz"]),
    ("d.npz", ["--out", "d"]),                  # the .npz the CLI adds makes it the input
    ("d.txt", ["--summary", "d.txt"]),
    ("d.npz", ["--out", "link.npz"]),           # a symlink to the input
])
def test_fit_never_overwrites_its_input(data_name, options, tmp_path, capsys, csv_file):
    path = tmp_path / data_name
    if data_name.endswith(".npz"):
        np.savez(path, X=csv_file[1], y=csv_file[2])
    else:
        path.write_bytes(csv_file[0].read_bytes())
    (tmp_path / "link.npz").symlink_to(path)
    before = _snapshot(tmp_path)
    argv = ["fit", str(path), "--force", "--quiet"] + FAST
    assert main(argv + [str(tmp_path / o) if i % 2 else o for i, o in enumerate(options)]) == 2
    assert "would overwrite the input data" in _one_line_error(capsys)
    assert _snapshot(tmp_path) == before


def test_fit_never_writes_two_outputs_to_one_file(csv_file, tmp_path, capsys):
    (tmp_path / "s.json").symlink_to(tmp_path / "s.npz")
    argv = ["fit", str(csv_file[0]), "--out", str(tmp_path / "s"), "--summary",
            str(tmp_path / "s.json"), "--force"] + FAST
    assert main(argv) == 2
    assert "is also the --out file of this run" in _one_line_error(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json"]


@pytest.mark.parametrize("argv, existing", [
    (["fit", "{csv}", "--out", "{tmp}/d"], "d.npz"),
    (["fit", "{csv}", "--out", "{tmp}/d.npz"], "d_summary.json"),
    (["fit", "{csv}", "--out", "{tmp}/d.npz", "--summary", "{tmp}/s.txt"], "s.txt"),
    (["demo", "--out", "{tmp}/roc"], "roc.png"),
    (["compare", "{csv}", "--out-prefix", "{tmp}/c"], "c_roc.png"),
])
def test_existing_outputs_need_force_and_are_checked_before_fitting(argv, existing, csv_file,
                                                                    tmp_path, capsys):
    pytest.importorskip("matplotlib")
    (tmp_path / existing).write_text("precious")
    argv = [a.replace("{csv}", str(csv_file[0])).replace("{tmp}", str(tmp_path)) for a in argv]
    assert main(argv + FAST) == 2
    res = capsys.readouterr()
    assert "sampling" not in res.out  # refused before the fit
    assert "Traceback" not in res.err and len(res.err.splitlines()) == 1
    assert f"{tmp_path / existing} exists; use --force" in res.err
    assert [p.name for p in tmp_path.iterdir()] == [existing]
    assert (tmp_path / existing).read_text() == "precious"


def test_force_overwrites_and_the_written_paths_are_reported(csv_file, tmp_path, capsys):
    out = tmp_path / "draws"
    argv = ["fit", str(csv_file[0]), "--sampler", "mh", "--out", str(out)] + FAST
    assert main(argv) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert f"draws written to {tmp_path / 'draws.npz'} " in said
    assert f"summary written to {tmp_path / 'draws_summary.json'}" in said
    assert sorted(p.name for p in tmp_path.iterdir()) == ["draws.npz", "draws_summary.json"]
    (tmp_path / "draws_summary.json").write_text("old")
    assert main(argv + ["--quiet"]) == 2
    assert main(argv + ["--quiet", "--force"]) == 0
    assert json.loads((tmp_path / "draws_summary.json").read_text())["sampler"] == "mh"


# ---- every option run through main, checked by its effect ----------------------------------
_DATA_HOME = os.environ.get("BAYES_SUBSAMPLE_DATA")


def _need_data_files(*alternatives):
    """Skip unless one of ``alternatives`` (paths under $BAYES_SUBSAMPLE_DATA) exists."""
    if not _DATA_HOME:
        pytest.skip("BAYES_SUBSAMPLE_DATA is not set; it should point at the shared data folder")
    if not any((Path(_DATA_HOME) / a).is_file() for a in alternatives):
        pytest.skip(f"{' or '.join(alternatives)} not found in BAYES_SUBSAMPLE_DATA={_DATA_HOME}")


@pytest.fixture
def fits_seen(monkeypatch):
    """The (estimator, X, y) of every fit the command makes, in order."""
    from bayes_subsample.cli import _commands

    seen = []
    fit = _commands._fit

    def spy(est, X, y, *args, **kwargs):
        seen.append((est, X, y))
        return fit(est, X, y, *args, **kwargs)

    monkeypatch.setattr(_commands, "_fit", spy)
    return seen


@pytest.fixture
def rows_seen(monkeypatch):
    """{label: (estimator, reference estimator, X_test)} of every table row made."""
    from bayes_subsample.cli import _commands

    seen = {}
    table_row = _commands.table_row

    def spy(label, est, reference=None, X_test=None, y_test=None):
        seen[label] = (est, reference, X_test)
        return table_row(label, est, reference, X_test, y_test)

    monkeypatch.setattr(_commands, "table_row", spy)
    return seen


def _fit_json(tmp_path, argv, name="d", quiet=True):
    """Run ``fit`` with ``argv`` (FAST, output in tmp_path); returns the
    summary JSON and the saved npz arrays."""
    out = tmp_path / f"{name}.npz"
    assert main(["fit"] + argv + ["--out", str(out)] + FAST + ["--quiet"] * quiet) == 0
    return json.loads((tmp_path / f"{name}_summary.json").read_text()), np.load(out)


@pytest.mark.parametrize("model", ["linear", "poisson"])
def test_fit_regression_models_recover_the_coefficients(model, tmp_path, capsys):
    rng = np.random.default_rng(2)
    X = rng.normal(size=(400, 2))
    eta = X @ [0.8, -0.5] + 0.3
    y = eta + 0.5 * rng.normal(size=400) if model == "linear" else rng.poisson(np.exp(eta))
    np.savez(tmp_path / "d.npz", X=X, y=y.astype(float))
    info, z = _fit_json(tmp_path, [str(tmp_path / "d.npz"), "--model", model, "--sampler", "hmc"],
                        name="out", quiet=False)
    said = " ".join(capsys.readouterr().out.split())
    assert f"{model} regression" in said
    assert info["model"] == model
    s = info["summary"]
    for name, truth in zip(["x0", "x1", "intercept"], [0.8, -0.5, 0.3]):
        assert abs(s[name]["mean"] - truth) < 5 * s[name]["sd"] + 0.05, (name, s[name])
    if model == "linear":  # the noise sd, sampled, is reported: posterior mean and sd
        assert info["noise_scale"] == pytest.approx(0.5, rel=0.15)
        assert 0 < info["noise_scale_sd"] < 0.1
        assert s["x0"]["sd"] == pytest.approx(info["noise_scale"] / np.sqrt(400), rel=0.5)
        assert f"noise sd {info['noise_scale']:.4g} +- " in said
        assert list(z["param_names"][-2:]) == ["intercept", "log_noise_ratio"]
        assert z["draws"].shape == (2, 40, 4)
    else:
        assert info["noise_scale"] is None and "noise sd" not in said
        assert z["draws"].shape == (2, 40, 3)


def _write_libsvm(path, X, y):
    with open(path, "w") as fh:
        fh.writelines(" ".join([str(t)] + [f"{j + 1}:{v:.5f}" for j, v in enumerate(row)]) + "\n"
                      for row, t in zip(X, y))


@pytest.mark.parametrize("fmt, name", [
    ("libsvm", "d.txt"),     # .txt alone would be read as CSV
    ("npz", "d.bin"),        # an unknown extension alone would be sniffed as CSV
    ("csv", "d.svm"),        # .svm alone would be read as LIBSVM
    ("auto", "d.points"),    # sniffed from the content: "label index:value" is LIBSVM
    ("auto", "d.csv"),
])
def test_fit_format_reads_the_file_as_told(fmt, name, csv_file, tmp_path, capsys):
    _, X, y = csv_file
    path = tmp_path / name
    if name in ("d.txt", "d.points"):
        _write_libsvm(path, X, y)
    elif fmt == "npz":
        with open(path, "wb") as fh:  # np.savez would add .npz to the name
            np.savez(fh, X=X, y=y)
    else:
        path.write_bytes(csv_file[0].read_bytes())
    info, z = _fit_json(tmp_path, [str(path), "--format", fmt, "--sampler", "mh"])
    assert (info["n_rows"], info["n_features"]) == (300, 3)
    header = fmt == "csv" or name.endswith(".csv")
    expect = ["alpha", "beta", "gamma"] if header else ["x0", "x1", "x2"]
    assert info["feature_names"] == expect and info["param_names"] == expect + ["intercept"]
    assert info["summary"][expect[0]]["mean"] > 0 > info["summary"][expect[1]]["mean"]
    assert z["draws"].shape == (2, 40, 4)
    if fmt != "auto":  # without --format the same file is misread and refused
        assert main(["fit", str(path), "--quiet", "--out", str(tmp_path / "e.npz")]
                    + FAST) == 2
        assert "error:" in _one_line_error(capsys)


@pytest.mark.parametrize("data", ["{csv}", "covtype-sample"])
def test_fit_dtype_float32_fits_float32_features(data, csv_file, tmp_path, fits_seen):
    data = data.replace("{csv}", str(csv_file[0]))
    argv = [data, "--standardize", "--sampler", "mh"]
    if data == "covtype-sample":
        argv += ["--n-rows", "300"]
    runs = {}
    for dtype in ("float64", "float32"):
        runs[dtype], _ = _fit_json(tmp_path, argv + ["--dtype", dtype], name=dtype)
    assert [X.dtype for _, X, _ in fits_seen] == [np.float64, np.float32]
    X64, X32 = fits_seen[0][1], fits_seen[1][1]
    np.testing.assert_allclose(X32, X64, rtol=1e-5, atol=1e-5)  # the same data, rounded
    # the same posterior, up to the rounding of the features
    for name, s in runs["float64"]["summary"].items():
        assert abs(runs["float32"]["summary"][name]["mean"] - s["mean"]) < 0.5 * s["sd"] + 1e-3


def test_fit_jobs_do_not_change_the_draws(csv_file, tmp_path, fits_seen):
    argv = [str(csv_file[0]), "--sampler", "hmc", "--seed", "3"]
    _, z1 = _fit_json(tmp_path, argv + ["--jobs", "1"], name="j1")
    _, z2 = _fit_json(tmp_path, argv + ["--jobs", "2"], name="j2")
    _, z3 = _fit_json(tmp_path, argv[:-1] + ["4", "--jobs", "2"], name="seed4")
    assert [est.n_jobs for est, _, _ in fits_seen] == [1, 2, 2]
    np.testing.assert_array_equal(z1["draws"], z2["draws"])
    np.testing.assert_array_equal(z1["warmup_draws"], z2["warmup_draws"])
    assert not np.array_equal(z1["draws"], z3["draws"])  # the seed, not the jobs, sets them


def _table(out):
    """The rows of the first table ``out`` prints, by sampler: {label: cells}."""
    lines = ("sampler " + out.split("sampler ", 1)[1]).split("\n\n")[0].splitlines()
    header = re.split(r"\s{2,}", lines[0])  # "time s" is one header
    return {ln.split()[0]: dict(zip(header, ln.split())) for ln in lines[2:]}


@pytest.mark.parametrize("fraction, n_fit, n_test", [("0.1", 270, 30), ("0.25", 225, 75),
                                                     ("0", 300, 0)])
def test_compare_test_fraction_holds_out_rows(fraction, n_fit, n_test, csv_file, tmp_path,
                                             capsys, fits_seen, rows_seen):
    pytest.importorskip("matplotlib")
    prefix = tmp_path / "cmp"
    assert main(["compare", str(csv_file[0]), "--samplers", "mh", "--test-fraction", fraction,
                 "--out-prefix", str(prefix)] + FAST) == 0
    said = " ".join(capsys.readouterr().out.split())
    held = f", {n_test} held out" if n_test else ""
    assert f"{n_fit} rows used for fitting{held};" in said
    (_, X, _), = fits_seen
    assert X.shape[0] == n_fit
    Xt = rows_seen["mh"][2]
    if n_test:
        assert Xt.shape[0] == n_test
        # the held-out rows and the rows fitted are the data, each row once
        rows = np.loadtxt(csv_file[0], delimiter=",", skiprows=1)[:, :3]
        assert {tuple(r) for r in np.vstack([X, Xt])} == {tuple(r) for r in rows}
        assert "AUC" in said and (tmp_path / "cmp_roc.png").is_file()
    else:
        assert Xt is None
        assert "AUC" not in said and not (tmp_path / "cmp_roc.png").exists()


def test_compare_test_fraction_is_for_logistic_data_without_a_test_split(tmp_path, capsys,
                                                                         fits_seen):
    rng = np.random.default_rng(4)
    X = rng.normal(size=(200, 2))
    np.savez(tmp_path / "lin.npz", X=X, y=X @ [1.0, 2.0] + rng.normal(size=200))
    argv = ["--samplers", "mh", "--test-fraction", "0.5", "--no-plot"] + FAST
    assert main(["compare", str(tmp_path / "lin.npz"), "--model", "linear"] + argv) == 0
    assert main(["compare", "higgs-sample"] + argv) == 0
    said = " ".join(capsys.readouterr().out.split())
    assert "200 rows used for fitting; linear regression" in said
    assert "7,000 rows used for fitting, 500 held out" in said  # higgs-sample's own test split
    assert [X.shape[0] for _, X, _ in fits_seen] == [200, 7000]


def test_compare_reference_errors_are_relative_to_the_reference(csv_file, capsys, rows_seen):
    assert main(["compare", str(csv_file[0]), "--samplers", "hmc,mh,hmc_ecs", "--reference",
                 "mh", "--no-plot", "--param", "hmc_ecs.n_blocks=10"] + FAST) == 0
    out = capsys.readouterr().out
    rows = _table(out)
    assert rows["mh"]["err"] == "-"
    ref = rows_seen["mh"][0]
    ref_draws = ref.sample_posterior()
    for label in ("hmc", "hmc_ecs"):
        est, reference, _ = rows_seen[label]
        assert reference is ref
        expect = np.max(np.abs(est.sample_posterior().mean(axis=0) - ref_draws.mean(axis=0))
                        / ref_draws.std(axis=0))
        assert float(rows[label]["err"]) == pytest.approx(expect, abs=0.006)
    assert "posterior mean - mh's| over parameters, in mh posterior standard" in \
        " ".join(out.split())


@pytest.fixture
def cache_home(tmp_path, monkeypatch):
    """The loaders' cache (``fit`` caches the parsed full datasets) in tmp_path."""
    monkeypatch.setenv("BAYES_SUBSAMPLE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


_MNIST_FILES = ("mnist/mnist_7vs9_derived.npz", "mnist/train-images-idx3-ubyte.gz")


# name, files (any one of them in the data home), options, features, first names, standardised
# columns (covtype and kddcup99 keep their indicator columns 0/1; constant columns count too)
@pytest.mark.parametrize("name, files, options, n_features, first_names, n_scaled", [
    ("higgs-sample", (), [], 28, ["lepton_pT", "lepton_eta"], 28),
    ("covtype-sample", (), [], 54, ["Elevation", "Aspect"], 10),
    ("covtype", ("covtype/covtype.data.gz", "covtype/covtype.data"), [], 54,
     ["Elevation", "Aspect"], 10),
    ("kddcup99", ("kddcup99/kddcup.data_10_percent.gz", "kddcup99/kddcup.data_10_percent"),
     [], None, ["duration", "protocol_type=icmp"], 38),
    ("higgs", ("higgs/HIGGS.csv.gz", "higgs/HIGGS.csv"), [], 28, ["lepton_pT", "lepton_eta"],
     28),
    ("mnist7v9", _MNIST_FILES, ["--pca", "5"], 5, ["pc_0", "pc_1"], 5),
    ("mnist7v9", _MNIST_FILES, ["--pca", "0"], 784, ["pixel_0_0", "pixel_0_1"], 784),
])
def test_fit_named_datasets_read_the_first_n_rows(name, files, options, n_features, first_names,
                                                  n_scaled, tmp_path, cache_home, fits_seen):
    if files:
        _need_data_files(*files)
    # kddcup99: the first 744 rows are all "normal."; 1000 rows hold two attacks
    n_rows = 1000 if name == "kddcup99" else 300
    info, z = _fit_json(tmp_path, [name, "--standardize", "--n-rows", str(n_rows), "--sampler",
                                   "mh", "--param", "n_steps=1"] + options)
    (_, X, y), = fits_seen
    assert X.shape[0] == y.shape[0] == info["n_rows"] == n_rows
    assert set(np.unique(y)) == {0.0, 1.0}
    n_features = n_features or X.shape[1]
    assert X.shape[1] == info["n_features"] == n_features
    assert info["feature_names"][:2] == first_names
    assert info["param_names"] == info["feature_names"] + ["intercept"]
    assert z["draws"].shape == (2, 40, n_features + 1)
    # --standardize, with the statistics of the rows read: mean 0 and sd 1 (0 if constant)
    sd = X.std(axis=0)
    scaled = (np.abs(X.mean(axis=0)) < 1e-6) & ((np.abs(sd - 1) < 1e-6) | (sd < 1e-6))
    assert scaled.sum() >= n_scaled and np.all(scaled | np.isin(X, [0, 1]).all(axis=0))


def test_fit_higgs_reads_the_uci_file_in_the_data_home(tmp_path, cache_home, fits_seen, capsys):
    # full HIGGS (2.6 GB) is not in the shared data: its first rows in the UCI layout
    # (no header, label first) are those of the shipped sample
    from bayes_subsample.datasets import load_higgs_sample

    X, y = load_higgs_sample("train", return_X_y=True)
    home = tmp_path / "home"
    (home / "higgs").mkdir(parents=True)
    with gzip.open(home / "higgs" / "HIGGS.csv.gz", "wt") as fh:
        fh.writelines(",".join(f"{v:.6e}" for v in row) + "\n"
                      for row in np.column_stack([y[:400], X[:400]]))
    info, _ = _fit_json(tmp_path, ["higgs", "--data-home", str(home), "--n-rows", "300",
                                   "--sampler", "mh", "--param", "n_steps=1"])
    (_, Xf, yf), = fits_seen
    np.testing.assert_allclose(Xf, X[:300], rtol=1e-6)
    np.testing.assert_array_equal(yf, y[:300])
    assert info["n_rows"] == 300 and info["feature_names"][:2] == ["lepton_pT", "lepton_eta"]
    # all of it is refused: 400 rows cannot be the complete UCI file
    assert main(["fit", "higgs", "--data-home", str(home), "--quiet", "--out",
                 str(tmp_path / "all.npz")] + FAST) == 2
    assert "11,000,000" in _one_line_error(capsys)
