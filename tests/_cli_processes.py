"""Run ``bayes-subsample`` commands as real processes and act on them at set
moments (tests/test_reliability_outputs.py): kill with SIGKILL while the
outputs are written, send a stop signal while the chains sample, fill the
disk while they sample, or start two at once.

It imports the package once and forks one child per run (each a real process
that runs ``cli.main``), so twenty runs cost seconds, not twenty interpreter
starts. Usage: ``python _cli_processes.py JOBS.json``; prints one JSON result
per job: its exit status (negative: the signal that ended it), its output and
what was done to it.

A job is ``{"argv": [...], "cwd": folder, "action": ...}`` with ``action``:

* ``{"kind": "none"}``: run to the end (``"seconds"`` reports how long the
  outputs took to write, from the first file seen open in ``"folder"`` to
  the exit);
* ``{"kind": "kill_in_write", "folder": F, "delay": f}``: SIGKILL ``f``
  times the ``"seconds"`` of the last job run to the end after the run is
  seen with a file open in folder ``F`` (after it printed that sampling was
  done);
* ``{"kind": "signal_in_sampling", "signal": "SIGTERM", "delay": s}``: the
  signal ``s`` seconds after the run printed that it is sampling;
* ``{"kind": "fill_in_sampling", "folder": F}``: when the run is sampling,
  fill the file system of ``F`` (a file ``F/filler``) until it is full;
* a list of jobs is run at once (``"together"``), for races.

``"list": F`` in a job reports the files left in folder ``F`` (``"files"``),
for folders that vanish with the process (a private mount).
"""
import json
import os
import signal
import sys
import time

from bayes_subsample.cli import main

# the runs start with SIGHUP at its default disposition, as under a terminal:
# started under nohup (SIGHUP ignored, inherited), the CLI rightly leaves it alone
if hasattr(signal, "SIGHUP"):
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def _start(job):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:                      # the child: one run of the command line
        os.close(r)
        os.dup2(w, 1)
        os.dup2(w, 2)
        os.chdir(job.get("cwd", "."))
        signal.signal(signal.SIGINT, signal.default_int_handler)
        rc = 99
        try:
            rc = main(job["argv"])
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(rc)
    os.close(w)
    return pid, r


def _read_until(fd, text, seen):
    while text not in seen[0]:
        chunk = os.read(fd, 4096)
        if not chunk:
            return False
        seen[0] += chunk.decode(errors="replace")
    return True


def _writing(pid, folder):
    """True once process ``pid`` has a file open in ``folder`` (an O_TMPFILE
    one, a hidden .part, or any other)."""
    fds = f"/proc/{pid}/fd"
    try:
        names = os.listdir(fds)
    except OSError:
        return False
    for name in names:
        try:
            target = os.readlink(f"{fds}/{name}")
        except OSError:
            continue
        if target.startswith(folder + "/"):
            return True
    return False


def _finish(pid, fd, seen, status=None):
    if status is None:
        _, status = os.waitpid(pid, 0)
    while True:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        seen[0] += chunk.decode(errors="replace")
    os.close(fd)
    return os.waitstatus_to_exitcode(status)


def _fill(folder):
    """Write ``folder/filler`` until the file system is full."""
    block = b"\0" * 65536
    fd = os.open(os.path.join(folder, "filler"), os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        while True:
            try:
                if os.write(fd, block) == 0:
                    break
            except OSError:
                if len(block) == 1:
                    break
                block = block[:len(block) // 2]
    finally:
        os.close(fd)


_last = {"seconds": 0.0}


def run(job):
    action = job.get("action", {"kind": "none"})
    kind = action["kind"]
    pid, fd = _start(job)
    seen = [""]
    result = {"acted": False}
    if kind in ("kill_in_write", "none") and "folder" in action:
        if _read_until(fd, " done in", seen):
            status = None
            while not _writing(pid, action["folder"]):
                done, st = os.waitpid(pid, os.WNOHANG)
                if done:
                    status = st
                    break
            t0 = time.perf_counter()
            if kind == "kill_in_write" and status is None:
                time.sleep(action["delay"] * _last["seconds"])
                os.kill(pid, signal.SIGKILL)
                result["acted"] = True
            rc = _finish(pid, fd, seen, status)
            result["seconds"] = _last["seconds"] = time.perf_counter() - t0
            return {"rc": rc, "out": seen[0], "pid": pid, **result}
    elif kind in ("signal_in_sampling", "fill_in_sampling"):
        if _read_until(fd, "sampling with", seen):
            if kind == "fill_in_sampling":
                _fill(action["folder"])
            else:
                time.sleep(action["delay"])
                result["sent"] = time.perf_counter()
                os.kill(pid, getattr(signal, action["signal"]))
            result["acted"] = True
    rc = _finish(pid, fd, seen)
    if "sent" in result:
        result["seconds"] = time.perf_counter() - result.pop("sent")
    if "list" in job:
        result["files"] = sorted(os.listdir(job["list"]))
    return {"rc": rc, "out": seen[0], **result}


def run_together(jobs):
    started = [_start(job) for job in jobs]
    results = []
    for pid, fd in started:
        seen = [""]
        rc = _finish(pid, fd, seen)
        results.append({"rc": rc, "out": seen[0]})
    return results


if __name__ == "__main__":
    with open(sys.argv[1]) as fh:
        jobs = json.load(fh)
    for job in jobs:
        res = run_together(job["together"]) if "together" in job else run(job)
        print(json.dumps(res), flush=True)
