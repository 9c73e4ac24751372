"""Run every examples/plot_*.py in quick mode and check that it writes a PNG."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import bayes_subsample

#: the folder holding the package these tests import: the examples run in a
#: temporary folder, where ``import bayes_subsample`` would otherwise find
#: whatever is installed (e.g. another checkout's editable install)
PACKAGE_PARENT = str(Path(bayes_subsample.__file__).resolve().parents[1])

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("plot_*.py"))

pytest.importorskip("matplotlib")


def test_examples_exist():
    assert len(EXAMPLES) >= 3


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs_in_quick_mode(script, tmp_path):
    env = dict(os.environ, BAYES_SUBSAMPLE_QUICK="1", MPLBACKEND="Agg",
               BAYES_SUBSAMPLE_EXAMPLES_OUT=str(tmp_path), OMP_NUM_THREADS="1",
               PYTHONPATH=os.pathsep.join(filter(None, [PACKAGE_PARENT,
                                                        os.environ.get("PYTHONPATH")])))
    res = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, f"{script.name} failed:\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
    pngs = list(tmp_path.glob("*.png"))
    assert pngs, f"{script.name} wrote no PNG into {tmp_path} (output:\n{res.stdout[-1000:]})"
    assert all(p.stat().st_size > 1000 for p in pngs)
