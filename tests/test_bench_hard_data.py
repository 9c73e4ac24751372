"""benchmarks/bench_hard_data.py's partial re-runs (``--samplers``): the rows
of the samplers named are measured again and merged into the stored section,
every row naming the commit it was measured at; what cannot be merged is
refused before anything runs."""
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    if not (BENCH / "bench_hard_data.py").exists():
        pytest.skip("benchmarks/ is not in this checkout")
    monkeypatch.syspath_prepend(str(BENCH))
    import bench_hard_data
    return bench_hard_data


def _row(problem, sampler, seed, **kw):
    return {"problem": problem, "sampler": sampler, "seed": seed, "exact": True,
            "time_s": 1.0, "warnings": [], "max_mean_err_sd": 0.01, "sd_ratio_min": 1.0,
            "sd_ratio_max": 1.0, "min_ess_bulk": 1000.0, "max_rhat": 1.0, "ok": True,
            "min_ess_per_s": 1000.0, **kw}


def _stored(quick=True, seeds=(0,)):
    """A stored separable section: NUTS and SGLD rows of both problems, measured
    at commit "old", against references of the problems' dimensions."""
    problems = {"iris setosa": 5, "separable 1e5 x 20": 21}
    return {"commit": "old", "date": "then", "command": "python benchmarks/...",
            "quick": quick, "seeds": list(seeds),
            "rows": [_row(p, s, seed, marker="stored") for p in problems
                     for s in ("sgld", "nuts") for seed in seeds],
            "references": {p: {"mean": [0.0] * d, "sd": [1.0] * d} for p, d in problems.items()},
            "criteria": {}}


def test_merge_rows_keeps_the_others_with_their_commit(bench):
    from _hard_every_sampler import merge_rows
    stored = _stored(seeds=(0, 1))
    new = [_row("iris setosa", "sgld", 1, commit="new"),
           _row("iris setosa", "sgld", 0, commit="new")]
    rows = merge_rows(stored, new, ("sgld",))
    assert [(r["problem"], r["sampler"], r["seed"], r["commit"]) for r in rows] == [
        ("iris setosa", "nuts", 0, "old"), ("iris setosa", "nuts", 1, "old"),
        ("iris setosa", "sgld", 0, "new"), ("iris setosa", "sgld", 1, "new"),
        ("separable 1e5 x 20", "nuts", 0, "old"), ("separable 1e5 x 20", "nuts", 1, "old")]
    # a row that already names its commit keeps it
    first_nuts = next(r for r in stored["rows"] if r["sampler"] == "nuts")
    first_nuts["commit"] = "older"
    assert merge_rows(stored, [], ("sgld",))[0]["commit"] == "older"


def test_partial_rerun_merges_into_the_stored_section(bench, tmp_path):
    out = tmp_path / "hard.json"
    out.write_text(json.dumps({"separable": _stored(), "other": {"kept": True}}))
    bench.main(["--sections", "separable", "--quick", "--seeds", "0",
                "--samplers", "sgld", "--out", str(out)])
    res = json.loads(out.read_text())
    assert res["other"] == {"kept": True}
    sec = res["separable"]
    assert sec["merged"]["samplers"] == ["sgld"]
    assert sec["merged"]["others_from"]["commit"] == "old"
    rows = {(r["problem"], r["sampler"]): r for r in sec["rows"]}
    assert len(rows) == len(sec["rows"]) == 4
    for p in ("iris setosa", "separable 1e5 x 20"):
        assert rows[p, "nuts"]["marker"] == "stored" and rows[p, "nuts"]["commit"] == "old"
        sgld = rows[p, "sgld"]
        assert "marker" not in sgld and sgld["commit"] == sec["commit"] != "old"
        # measured now: a comparison with the stored reference, or a clear error
        assert "error" in sgld or sgld["sd_ratio_min"] != 1.0
    assert sec["references"]["iris setosa"]["sd"] == [1.0] * 5
    assert "iris setosa: sgld within bounds or a clear error" in sec["criteria"]


@pytest.mark.parametrize("args, message", [
    (["--sections", "separable", "--samplers", "sgl"], "unknown samplers: sgl"),
    (["--sections", "covtype_binary", "--samplers", "sgld"], "runs no per-sampler rows"),
    (["--sections", "separable", "--samplers", "sgld"], "same seeds and --quick"),
    (["--sections", "separable", "--quick", "--seeds", "0", "1", "--samplers", "sgld"],
     "same seeds and --quick"),
])
def test_partial_rerun_refuses_what_it_cannot_merge(bench, tmp_path, capsys, args, message):
    out = tmp_path / "hard.json"
    out.write_text(json.dumps({"separable": _stored()}))
    with pytest.raises(SystemExit):
        bench.main([*args, "--out", str(out)])
    assert message in capsys.readouterr().err
    assert json.loads(out.read_text()) == {"separable": _stored()}
