"""The command line's outputs survive kills, races, full and read-only
disks, and every stop signal keeps the draws made: real processes, real
signals, real file systems (tests/_cli_processes.py runs the commands)."""
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from _subprocess_env import package_env

from bayes_subsample import _atomic
from bayes_subsample.cli import main

pytestmark = pytest.mark.skipif(not hasattr(os, "fork") or not os.path.isdir("/proc/self/fd"),
                                reason="forks processes and watches them in /proc")

HELPER = Path(__file__).with_name("_cli_processes.py")
N_SAMPLES = 3000


@pytest.fixture(scope="module")
def data(csv_file):
    return csv_file[0]


def _fit_argv(data, out, seed=1, n_samples=N_SAMPLES, extra=()):
    return ["fit", str(data), "--sampler", "mh", "--param", "n_steps=1", "--n-samples",
            str(n_samples), "--n-warmup", "20", "--chains", "2", "--seed", str(seed),
            "--out", str(out), *extra]


def _env(**extra):
    return package_env(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1",
                       PYTHONDONTWRITEBYTECODE="1", **extra)


def _run_jobs(jobs, tmp_path, prefix=(), env=None, timeout=300):
    """Run ``jobs`` with tests/_cli_processes.py (under the ``prefix``
    command, e.g. ``unshare``); returns one result per job."""
    spec = tmp_path / "jobs.json"
    spec.write_text(json.dumps(jobs))
    res = subprocess.run([*prefix, sys.executable, str(HELPER), str(spec)], capture_output=True,
                         text=True, timeout=timeout, env=env or _env())
    assert res.returncode == 0, res.stderr
    return [json.loads(line) for line in res.stdout.splitlines()]


def _check_draws(path, lengths):
    with np.load(path) as saved:
        draws = saved["draws"]
        assert saved["chain_lengths"].tolist() == list(lengths)
        assert draws.shape == (2, max(lengths), 4)
        for c, k in enumerate(lengths):
            assert np.isfinite(draws[c, :k]).all()
        assert saved["param_names"].tolist() == ["alpha", "beta", "gamma", "intercept"]


# ---- SIGKILL at random moments of the write: the old outputs or complete new ones ----------
@pytest.mark.parametrize("n_kills", [4, pytest.param(20, marks=pytest.mark.slow)])
def test_kill_while_writing_leaves_old_or_complete_new_outputs(n_kills, data, tmp_path):
    """Killed (SIGKILL) at a random moment while it writes, a run leaves, in
    a folder with a previous run's outputs (--force) or an empty one, the old
    draws file or a complete new one, a summary that describes the draws
    beside it (or none), and no temporary file, except with --force in the
    microseconds between naming a new file and renaming it over the old one:
    then a hidden .part file of the killed process, which the next write of
    that file removes."""
    old = tmp_path / "old"
    old.mkdir()
    assert main(_fit_argv(data, old / "d.npz", seed=0, extra=["--quiet"])) == 0
    old_draws, old_summary = (old / "d.npz").read_bytes(), (old / "d_summary.json").read_bytes()
    # a first run measures how long the outputs take to write (from the first
    # temporary file seen to the exit); the kills fall within 1.2 times that
    calib = tmp_path / "calib"
    calib.mkdir()
    jobs = [{"argv": _fit_argv(data, calib / "d.npz"),
             "action": {"kind": "none", "folder": str(calib)}}]
    rng = np.random.default_rng(1)
    folders = []
    for i in range(n_kills):
        folder = tmp_path / f"run{i}"
        folder.mkdir()
        force = i % 2 == 0
        if force:
            (folder / "d.npz").write_bytes(old_draws)
            (folder / "d_summary.json").write_bytes(old_summary)
        folders.append((folder, force))
        jobs.append({"argv": _fit_argv(data, folder / "d.npz", extra=["--force"] * force),
                     "action": {"kind": "kill_in_write", "folder": str(folder),
                                "delay": float(rng.uniform(0, 1.2))}})
    calibration, *results = _run_jobs(jobs, tmp_path)
    assert calibration["rc"] == 0
    outcomes = []
    for (folder, force), res in zip(folders, results):
        names = sorted(p.name for p in folder.iterdir())
        leftovers = [n for n in names if n not in ("d.npz", "d_summary.json")]
        if leftovers:
            # only an overwrite names its file before it is in place
            assert force and len(leftovers) == 1, names
            (name,) = leftovers
            pattern = rf"\.(d\.npz|d_summary\.json)\.\w+-{res['pid']}\.[0-9a-f]{{12}}\.part"
            assert re.fullmatch(pattern, name), name
            target = folder / name.split(".part")[0][1:].rsplit(".", 2)[0]
            stale_bytes = target.read_bytes() if target.exists() else None
            _atomic.write_bytes(folder / "probe", b"")        # another file: left alone
            assert (folder / name).exists()
            _atomic.StagedFile(target).discard()               # a write of that file
            assert not (folder / name).exists()
            assert (target.read_bytes() if target.exists() else None) == stale_bytes
            (folder / "probe").unlink()
            names.remove(name)
        assert set(names) <= {"d.npz", "d_summary.json"}, names
        draws = summary = None
        if "d.npz" in names:
            if (folder / "d.npz").read_bytes() == old_draws:
                draws = "old"
            else:
                _check_draws(folder / "d.npz", [N_SAMPLES, N_SAMPLES])
                draws = "new"
        if "d_summary.json" in names:
            text = (folder / "d_summary.json").read_bytes()
            summary = "old" if text == old_summary else "new"
            if summary == "new":
                assert json.loads(text)["seed"] == 1
        # a summary describes the draws beside it: never a new one beside old draws
        # (or none), nor an old one beside new draws
        assert summary in (None, draws), (draws, summary, res)
        if not force:
            assert draws != "old"
        outcomes.append(draws)
        assert res["rc"] in (0, -signal.SIGKILL), res
    if n_kills >= 20:
        # the kills fell before and after the draws were put in place
        assert {"old", None} & set(outcomes) and "new" in outcomes, outcomes


# ---- two runs racing for one --out -----------------------------------------------------
def test_two_runs_racing_for_one_out_one_wins_the_other_keeps_its_draws(data, tmp_path):
    """Two runs with the same --out (no --force) both pass the check made
    before sampling: exactly one writes the file, whole; the other exits 1,
    says the file appeared meanwhile and saves its draws in the temporary
    folder."""
    spare = tmp_path / "tmp"
    spare.mkdir()
    out = tmp_path / "d.npz"
    jobs = [{"together": [{"argv": _fit_argv(data, out, seed=s, n_samples=500)}
                          for s in (1, 2)]}]
    results = _run_jobs(jobs, tmp_path, env=_env(TMPDIR=str(spare)))[0]
    # on a loaded machine the second run may start after the first wrote its
    # file: it is then refused before sampling (status 2), which is also right
    assert sorted(r["rc"] for r in results) in ([0, 1], [0, 2]), results
    loser = next(r for r in results if r["rc"] != 0)
    said = " ".join(loser["out"].split())
    assert "Traceback" not in said
    _check_draws(out, [500, 500])
    if loser["rc"] == 2:
        assert f"{out} exists" in said, said
        assert not any(spare.iterdir())
    else:
        assert f"cannot write {out}: it was created by another program while this run " \
            "sampled" in said
        saved = re.search(r"the draws were saved to (\S+) instead", said).group(1)
        _check_draws(saved, [500, 500])
        assert Path(saved).parent == spare
    assert json.loads((tmp_path / "d_summary.json").read_text())["n_samples"] == 500
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.npz", "d_summary.json",
                                                         "jobs.json", "tmp"]


# ---- stop signals while sampling ---------------------------------------------------------
def test_stop_signals_while_sampling_write_the_draws_made(data, tmp_path):
    """SIGTERM (a batch system or container stopping the job), SIGHUP (the
    terminal closed) and Ctrl-C stop the chains; the draws made are written,
    the command says so and exits 128 + the signal's number."""
    signals = {name: 128 + getattr(signal, name) for name in ("SIGTERM", "SIGHUP", "SIGINT")
               if hasattr(signal, name)}
    assert signals.get("SIGTERM") == 143 and signals["SIGINT"] == 130
    jobs = [{"argv": _fit_argv(data, tmp_path / f"{name}.npz", n_samples=300_000),
             "action": {"kind": "signal_in_sampling", "signal": name, "delay": 0.5}}
            for name in signals]
    for (name, status), res in zip(signals.items(), _run_jobs(jobs, tmp_path)):
        out = tmp_path / f"{name}.npz"
        assert res["rc"] == status, res
        assert res["seconds"] < 5
        said = " ".join(res["out"].split())
        how = "interrupted" if name == "SIGINT" else f"stopped by {name}"
        assert f"sampling with mh ... {how} after" in said
        assert f"bayes-subsample fit: {how}; the draws made were written to {out}" in said
        with np.load(out) as saved:
            lengths = saved["chain_lengths"]
        assert 0 < lengths[0] < 300_000
        _check_draws(out, lengths.tolist())
        info = json.loads((tmp_path / f"{name}_summary.json").read_text())
        assert info["diagnostics"]["interrupted"] is True


_FIT_SCRIPT = textwrap.dedent("""
    import json, sys, threading, numpy as np
    from bayes_subsample.linear_model import BayesianLogisticRegression
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = (X @ [1.0, -1.0, 0.5] + rng.logistic(size=300) > 0).astype(int)
    est = BayesianLogisticRegression(sampler="mh", n_samples=10**6, n_warmup=10, n_chains=2,
                                     random_state=0)
    def fit():
        print("fitting", flush=True)
        est.fit(X, y)
    def watch():        # says when fit's SIGTERM handler is in place (sampling began)
        import signal, time
        while signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            time.sleep(0.01)
        print("sampling", flush=True)
    if sys.argv[1] == "thread":
        t = threading.Thread(target=fit)
        t.start()
        t.join()
    else:
        threading.Thread(target=watch, daemon=True).start()
        fit()
    print(json.dumps({"interrupted": est.trace_.interrupted,
                      "lengths": est.trace_.chain_lengths.tolist(),
                      "coef": est.coef_.tolist()}), flush=True)
""")


def test_sigterm_during_an_estimator_fit(tmp_path):
    """In the main thread, SIGTERM during ``fit`` keeps the draws made, as
    Ctrl-C does: the fit returns, interrupted. Called from another thread
    (a joblib or Dask worker) fit leaves signals alone: SIGTERM ends the
    process as it would without bayes_subsample."""
    procs = {where: subprocess.Popen([sys.executable, "-c", _FIT_SCRIPT, where],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=_env(), cwd=tmp_path)
             for where in ("main", "thread")}
    for proc in procs.values():
        assert proc.stdout.readline().strip() == "fitting"
    # in the main thread, not before fit's handler is in place (on a loaded machine
    # the preparation alone can take a second)
    assert procs["main"].stdout.readline().strip() == "sampling"
    time.sleep(1.0)
    for proc in procs.values():
        proc.send_signal(signal.SIGTERM)
    results = {where: (proc,) + proc.communicate(timeout=30) for where, proc in procs.items()}
    proc, out, err = results["thread"]
    assert proc.returncode == -signal.SIGTERM, (out, err)
    proc, out, err = results["main"]
    assert proc.returncode == 0, err
    res = json.loads(out)
    assert res["interrupted"] and 0 < res["lengths"][0] < 10**6
    assert np.all(np.isfinite(res["coef"]))
    assert "sampling stopped by SIGTERM: kept" in err


# ---- folders that cannot take the outputs -------------------------------------------------
def _private_tmpfs(folder, options):
    """A command prefix that runs a command with a tmpfs mounted (with
    ``options``) on ``folder``, in a private mount namespace (gone with the
    command); skips where that is not allowed."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.skip("needs unshare to mount a private file system")
    prefix = [unshare, "-rm", "sh", "-c", 'mount -t tmpfs -o "$1" tmpfs "$2" && shift 2 && '
              'exec "$@"', "sh", options, str(folder)]
    probe = subprocess.run(prefix + ["true"], capture_output=True)
    if probe.returncode != 0:
        pytest.skip(f"cannot mount a private tmpfs here: {probe.stderr.decode().strip()}")
    return prefix


def test_read_only_folder_is_refused_before_sampling(data, tmp_path, capsys):
    """A folder that cannot take the outputs is found before the run: one
    line naming it, status 2, nothing sampled (a read-only file system for
    root, which permissions do not stop)."""
    folder = tmp_path / "ro"
    folder.mkdir()
    root = os.geteuid() == 0
    if not root:
        folder.chmod(0o555)
        try:
            assert main(_fit_argv(data, folder / "d.npz")) == 2
        finally:
            folder.chmod(0o755)
        res = capsys.readouterr()
        out, err = res.out, res.err
    else:
        prefix = _private_tmpfs(folder, "ro,size=1m")
        proc = subprocess.run([*prefix, sys.executable, "-m", "bayes_subsample",
                               *_fit_argv(data, folder / "d.npz")], capture_output=True,
                              text=True, env=_env(), timeout=120, cwd=tmp_path)
        assert proc.returncode == 2
        out, err = proc.stdout, proc.stderr
    assert "sampling" not in out
    why = "is read-only" if root else "is not writable (permission denied)"
    assert err.strip() == (f"bayes-subsample fit: error: cannot write {folder / 'd.npz'}: "
                           f"folder {folder} {why}")


def test_folder_without_room_for_the_draws_is_refused_before_sampling(data, tmp_path,
                                                                      capsys):
    """The draws' size is estimated once the data are read: a folder with
    less room is refused before sampling."""
    free = shutil.disk_usage(tmp_path).free
    n_samples = free // (2 * 8 * 13) + 1          # 2 chains, 4 parameters + 9
    assert main(_fit_argv(data, tmp_path / "d.npz", n_samples=n_samples)) == 2
    res = capsys.readouterr()
    assert "sampling" not in res.out
    assert re.fullmatch(rf"bayes-subsample fit: error: cannot write {tmp_path}/d.npz: "
                        rf"folder {tmp_path} has [0-9.]+ [kMG]B free, and about [0-9.]+ [kMG]B "
                        "are needed; free some space or choose another folder\n", res.err)
    assert list(tmp_path.iterdir()) == []


def test_disk_full_while_sampling_leaves_nothing_partial_and_saves_the_draws(data, tmp_path):
    """The disk fills up while the chains sample (a real tmpfs): the
    outputs cannot be written; nothing partial is left; the draws are saved
    in the temporary folder and the message says where; status 1."""
    folder, spare = tmp_path / "out", tmp_path / "tmp"
    folder.mkdir()
    spare.mkdir()
    prefix = _private_tmpfs(folder, "size=2m")
    res = _run_jobs([{"argv": _fit_argv(data, folder / "d.npz", n_samples=2000),
                      "action": {"kind": "fill_in_sampling", "folder": str(folder)},
                      "list": str(folder)}],
                    tmp_path, prefix=prefix, env=_env(TMPDIR=str(spare)))[0]
    assert res["rc"] == 1, res
    said = " ".join(res["out"].split())
    assert (f"cannot write {folder}/d.npz: No space left on device (no partial file was left)"
            in said)
    saved = re.search(r"the draws were saved to (\S+) instead", said).group(1)
    assert Path(saved).parent == spare
    _check_draws(saved, [2000, 2000])
    assert res["files"] == ["filler"]


def test_file_size_limit_leaves_nothing_partial_and_says_so(data, tmp_path):
    """A file-size limit (RLIMIT_FSIZE, enforced by the kernel) that the
    draws exceed: no partial file in the folder or in the temporary folder,
    a message saying the draws could not be saved, status 1."""
    folder, spare = tmp_path / "out", tmp_path / "tmp"
    folder.mkdir()
    spare.mkdir()

    import resource

    def limit():
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))

    proc = subprocess.run([sys.executable, "-m", "bayes_subsample",
                           *_fit_argv(data, folder / "d.npz", n_samples=2000), "--quiet"],
                          capture_output=True, text=True, env=_env(TMPDIR=str(spare)),
                          preexec_fn=limit, timeout=120, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.strip() == (
        f"bayes-subsample fit: error: cannot write {folder}/d.npz: File too large (no partial "
        "file was left); they could not be saved in the temporary folder either (File too "
        "large): the draws are lost")
    assert list(folder.iterdir()) == [] and list(spare.iterdir()) == []


# ---- the staged file itself ---------------------------------------------------------------
@pytest.mark.parametrize("anonymous", [True, False])
def test_staged_file_never_overwrites_unless_asked_and_leaves_nothing(anonymous, tmp_path,
                                                                      monkeypatch):
    """Without overwrite the name is claimed at the moment of publishing (a
    file created meanwhile wins); a discarded file leaves nothing; with and
    without O_TMPFILE (then a hidden .part file)."""
    if not anonymous:
        monkeypatch.setattr(_atomic, "_PROC_FD", str(tmp_path / "no-proc"))
    path = tmp_path / "f.bin"
    staged = _atomic.StagedFile(path)
    staged.file.write(b"new")
    path.write_bytes(b"first")          # another process took the name meanwhile
    with pytest.raises(FileExistsError):
        staged.publish()
    staged.discard()
    assert path.read_bytes() == b"first" and os.listdir(tmp_path) == ["f.bin"]
    assert _atomic.write_bytes(path, b"second", overwrite=True) == path
    assert path.read_bytes() == b"second" and os.listdir(tmp_path) == ["f.bin"]
    with _atomic.StagedFile(tmp_path / "g.bin") as staged:
        staged.file.write(b"x" * 100_000)
        if not anonymous:
            assert [p.suffix for p in tmp_path.iterdir() if p.name != "f.bin"] == [".part"]
    assert os.listdir(tmp_path) == ["f.bin"]


def test_an_overwrite_killed_between_naming_and_renaming_is_cleaned_by_the_next_write(
        tmp_path):
    """An overwrite names the anonymous file before renaming it over the old
    one; a process killed in between leaves that hidden name (and the old
    file). The next write of the same file removes it; a live process's, another
    host's, and another file's are left alone."""
    path = tmp_path / "f.bin"
    path.write_bytes(b"old")
    pid = os.fork()
    if pid == 0:                                   # killed just before the rename
        try:
            _atomic.os.replace = lambda *a: os._exit(9)
            _atomic.write_bytes(path, b"new", overwrite=True)
        finally:
            os._exit(1)
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 9
    (left,) = [n for n in os.listdir(tmp_path) if n != "f.bin"]
    assert re.fullmatch(rf"\.f\.bin\.\w+-{pid}\.[0-9a-f]{{12}}\.part", left), left
    assert (tmp_path / left).read_bytes() == b"new" and path.read_bytes() == b"old"
    host = left.split(".")[3].rsplit("-", 1)[0]
    keep = [f".f.bin.{host}-{os.getpid()}.{'a' * 12}.part",       # a live process's
            f".f.bin.otherhost-{pid}.{'b' * 12}.part",              # another host's
            f".g.bin.{host}-{pid}.{'c' * 12}.part"]                 # another file's
    for name in keep:
        (tmp_path / name).write_bytes(b"")
    assert _atomic.write_bytes(path, b"newer", overwrite=True) == path
    assert path.read_bytes() == b"newer"
    assert sorted(os.listdir(tmp_path)) == sorted(["f.bin", *keep])


def test_an_output_that_is_a_loop_of_links_is_refused_before_sampling(data, tmp_path, capsys):
    """A loop of symbolic links as --out gave an uncaught RuntimeError; a link
    to a missing file passed the existence check and failed only after
    sampling, as if another program had made the file."""
    from bayes_subsample.cli import main

    loop_a, loop_b, dangling = tmp_path / "a.npz", tmp_path / "b.npz", tmp_path / "c.npz"
    loop_a.symlink_to(loop_b)
    loop_b.symlink_to(loop_a)
    dangling.symlink_to(tmp_path / "nowhere.npz")
    for out, said in ((loop_a, "is a loop of symbolic links"),
                      (dangling, "exists (a symbolic link to a missing file); use --force")):
        assert main(_fit_argv(data, out)) == 2
        err = capsys.readouterr().err
        assert f"{out} {said}" in err, err
        assert "Traceback" not in err and "sampling" not in err
