"""Run every examples/plot_*.py in quick mode and check that it writes a PNG."""
import subprocess
import sys
from pathlib import Path

import pytest

from _subprocess_env import package_env

EXAMPLES = sorted((Path(__file__).resolve().parents[1] / "examples").glob("plot_*.py"))

pytest.importorskip("matplotlib")


def test_examples_exist():
    assert len(EXAMPLES) >= 3


@pytest.mark.parametrize("script", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_example_runs_in_quick_mode(script, tmp_path):
    env = package_env(BAYES_SUBSAMPLE_QUICK="1", MPLBACKEND="Agg",
                      BAYES_SUBSAMPLE_EXAMPLES_OUT=str(tmp_path), OMP_NUM_THREADS="1")
    res = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300, check=False)
    assert res.returncode == 0, f"{script.name} failed:\n{res.stdout[-2000:]}\n{res.stderr[-4000:]}"
    pngs = list(tmp_path.glob("*.png"))
    assert pngs, f"{script.name} wrote no PNG into {tmp_path} (output:\n{res.stdout[-1000:]})"
    assert all(p.stat().st_size > 1000 for p in pngs)
