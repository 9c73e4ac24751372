"""Helpers shared by the benchmark scripts: memory readings from Linux's /proc,
fresh-subprocess runs, and the JSON header and file every script writes.

A child script (run by :func:`run_child`) imports this module too: the
benchmarks folder is put on its ``PYTHONPATH``.
"""
from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from _provenance import stamp  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def proc_status(keys=("VmRSS", "VmHWM", "RssAnon")):
    """The entries ``keys`` of ``/proc/self/status``, in bytes."""
    out = {}
    with open("/proc/self/status") as fh:
        for line in fh:
            key, value = line.split(":", 1)
            if key in keys:
                out[key] = int(value.split()[0]) * 1024
    return out


def reset_peak_rss():
    """Reset the kernel's peak-RSS counter (VmHWM) to the current RSS."""
    with open("/proc/self/clear_refs", "w") as fh:
        fh.write("5")


def run_child(code, *args):
    """Run ``code`` in a fresh Python process with ``args`` as ``sys.argv[1:]``;
    returns the JSON object its last line of output prints."""
    env = dict(os.environ)
    env["PYTHONPATH"] = HERE + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH")
                                else "")
    res = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                         text=True, check=True, env=env)
    return json.loads(res.stdout.strip().splitlines()[-1])


def rss_ratios(r, nbytes, name):
    """Add ``peak_over_<name>``, ``before_over_<name>`` and ``added_over_<name>``
    (the child's peak RSS, its RSS before the fit, and what the fit added, over
    ``nbytes``) to the child's result ``r``; returns ``r``."""
    r[f"peak_over_{name}"] = r["peak_rss"] / nbytes
    r[f"before_over_{name}"] = r["rss_before"] / nbytes
    r[f"added_over_{name}"] = (r["peak_rss"] - r["rss_before"]) / nbytes
    return r


def run_info(script, argv):
    """The header of a result file: the command, the platform, the load."""
    return {"command": f"python benchmarks/{script} " + " ".join(argv or sys.argv[1:]),
            "platform": platform.platform(), "cpu_count": os.cpu_count(),
            "load_average": os.getloadavg()}


def write_result(result, path):
    """Write ``result`` as JSON to ``path`` (folders created) and say so."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w") as fh:
        json.dump(stamp(result), fh, indent=2)
    print(f"\nwrote {path}")
