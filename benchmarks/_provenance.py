"""Where a benchmark result comes from: the header every ``results/*.json``
carries, written by :func:`stamp` in one place for all the scripts.

Keys: ``command`` (how to reproduce it), ``commit`` (the repository's HEAD,
with ``+dirty`` when the working tree had changes), ``version`` (the
package's), ``machine`` (architecture and cores), ``python``, ``date`` and the
load average before (``load_average_before``, when the script recorded it) and
after the run (``load_average_after``): wall-clock figures are only as good as
the machine was quiet.
"""
from __future__ import annotations

import os
import platform
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _git(cwd, *args):
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=cwd,
                              check=False).stdout.strip()
    except OSError:
        return ""


def commit():
    """HEAD of the checkout the measured package was imported from (the
    benchmarks' own when the package is installed), ``+dirty`` if its tree had
    changes; None outside a git checkout."""
    import bayes_subsample
    for where in (os.path.dirname(os.path.abspath(bayes_subsample.__file__)), HERE):
        head = _git(where, "rev-parse", "HEAD")
        if head and (where == HERE or "site-packages" not in where):
            dirty = _git(where, "status", "--porcelain", "--untracked-files=no")
            return head + ("+dirty" if dirty else "")
    return None


def command(argv=None):
    """The command that reproduces this run, from the repository root."""
    argv = sys.argv if argv is None else argv
    script = os.path.relpath(os.path.abspath(argv[0]), os.path.dirname(HERE))
    return " ".join(["python", script, *argv[1:]])


def header(cmd=None):
    """The provenance keys, taken at the start of a run."""
    import bayes_subsample
    return {"command": cmd or command(), "commit": commit(),
            "version": getattr(bayes_subsample, "__version__", None),
            "machine": f"{platform.machine()}, {os.cpu_count()} cores",
            "python": sys.version.split()[0], "date": time.strftime("%Y-%m-%d %H:%M"),
            "load_average_before": list(os.getloadavg())}


#: the header as the run started (scripts import this module first thing): the
#: commit measured and the load before, not as they are when the results are written
_STARTED = None


def started():
    """The header taken when this module was first imported."""
    global _STARTED
    if _STARTED is None:
        _STARTED = header()
    return _STARTED


def stamp(result, cmd=None):
    """``result`` with the provenance keys it lacks (the header taken at the
    start of the run, and ``load_average_after`` now); the keys come first in
    the JSON file."""
    start = dict(started(), **({"command": cmd} if cmd else {}))
    out = {k: result.get(k, v) for k, v in start.items()}
    out.update((k, v) for k, v in result.items() if k not in out)
    out.setdefault("load_average_after", list(os.getloadavg()))
    return out


started()
