"""The performance figures of README.md and benchmarks/README.md come from the
benchmarks' JSON output.

``benchmarks/readme_figures.py`` builds the table from
``benchmarks/results/*.json``; this test fails when README.md holds anything
else (a hand-edited figure, or JSON updated without regenerating the table).
"""
import importlib.util
import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _generator():
    path = ROOT / "benchmarks" / "readme_figures.py"
    if not path.exists():
        pytest.skip("benchmarks/ is not in this checkout")
    spec = importlib.util.spec_from_file_location("readme_figures", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.parametrize("name", ["README.md", "benchmarks/README.md"])
def test_readme_table_is_generated_from_benchmark_json(name):
    gen = _generator()
    readme = (ROOT / name).read_text()
    table = gen.table(headline=gen.TARGETS[name])
    assert gen.replace_in_readme(readme, table) == readme, (
        f"{name}'s figures differ from benchmarks/results/*.json: run "
        "`python benchmarks/readme_figures.py --write`")
    # every item names the command that measured it
    items = "\n".join(table.splitlines()).split("\n- ")
    assert len(items) >= 5
    for item in items:
        assert "Measured by `python" in " ".join(item.split()), item


def test_readme_reads_in_short_lines_and_paragraphs():
    """No line over 160 characters, no paragraph of prose over 80 words (lists,
    tables and code blocks aside): a newcomer reads it in two minutes."""
    lines = (ROOT / "README.md").read_text().splitlines()
    assert [i + 1 for i, line in enumerate(lines) if len(line) > 160] == []
    paragraphs, current, code = [], [], False
    for line in lines + [""]:
        if line.startswith("```"):
            code = not code
        prose = not (code or line.startswith(("```", "|", "#", "- ", "  ", "<!--")))
        if prose and line.strip():
            current.append(line)
        elif current:
            paragraphs.append(" ".join(current))
            current = []
    assert [p[:60] for p in paragraphs if len(p.split()) > 80] == []


def test_replace_in_readme_needs_its_markers():
    gen = _generator()
    with pytest.raises(ValueError, match="markers"):
        gen.replace_in_readme("no markers here", "| a |")


#: the provenance keys every result carries (benchmarks/_provenance.py)
HEADER = ("command", "commit", "version", "machine", "python", "date",
          "load_average_before", "load_average_after")


def test_every_benchmark_result_carries_its_provenance():
    results = sorted((ROOT / "benchmarks" / "results").glob("*.json"))
    if not results:
        pytest.skip("benchmarks/ is not in this checkout")
    for path in results:
        head = json.loads(path.read_text())
        assert all(key in head for key in HEADER), (path.name, set(HEADER) - set(head))
        # first, in this order (the load after the run is written when it ends)
        assert list(head)[:len(HEADER) - 1] == list(HEADER[:-1]), path.name
        assert head["command"].startswith(("python benchmarks/", "PYTHONPATH=")), path.name
        assert re.fullmatch(r"[0-9a-f]{40}(\+dirty)?", head["commit"]), path.name
