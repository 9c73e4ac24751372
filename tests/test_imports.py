"""Lazy imports: ``import bayes_subsample`` and the command line's ``--help`` do not
load scikit-learn, scipy.stats or pandas, and every public name is still there."""
import ast
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from _subprocess_env import package_env

import bayes_subsample
from bayes_subsample import samplers

HEAVY = ("sklearn", "scipy.stats", "pandas")


def _loaded_after(code):
    """The modules of ``HEAVY`` that a fresh interpreter has loaded after ``code``."""
    probe = f"{code}\nimport sys\nprint(*[m for m in {HEAVY!r} if m in sys.modules])"
    with tempfile.TemporaryDirectory() as away:
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                             check=True, cwd=away, env=package_env()).stdout
    return out.splitlines()[-1].split() if out.strip() else []


def test_import_loads_no_heavy_module():
    assert _loaded_after("import bayes_subsample") == []


def test_cli_help_loads_no_heavy_module():
    code = ("import contextlib, io\nfrom bayes_subsample.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    codes = [main(a + ['--help']) for a in ([], ['demo'], ['fit'], ['compare'])]\n"
            "assert codes == [0, 0, 0, 0], codes")
    assert _loaded_after(code) == []


def test_the_probe_sees_heavy_modules():
    # the check above can fail: the estimators do load scikit-learn
    assert "sklearn" in _loaded_after("from bayes_subsample import BayesianLogisticRegression")


@pytest.mark.parametrize("module", [bayes_subsample, samplers])
def test_public_names_importable_and_listed(module):
    for name in module.__all__:
        assert getattr(module, name) is not None, name
        assert name in dir(module), name
    with pytest.raises(AttributeError, match="no attribute 'not_a_name'"):
        module.not_a_name  # noqa: B018


def test_from_import_and_submodules():
    from bayes_subsample import BayesianPoissonRegression, Trace, sample  # noqa: F401
    from bayes_subsample.linear_model import BayesianPoissonRegression as direct

    assert BayesianPoissonRegression is direct
    for name in ("datasets", "diagnostics", "exceptions", "models", "samplers", "mrf",
                 "linear_model", "control_variates"):
        assert getattr(bayes_subsample, name).__name__ == f"bayes_subsample.{name}"
    assert samplers.hmc.HMC is samplers.HMC


def test_registry_is_a_mapping_of_factories():
    reg = samplers.SAMPLERS
    assert "hmc_ecs_signed" in reg and len(reg) == len(list(reg))
    assert reg["mh"] is samplers.MH
    assert reg["hmc_ecs_signed"]().variant == "signed"
    with pytest.raises(KeyError):
        reg["gibbs"]
    reg["mine"] = samplers.MH
    try:
        assert type(samplers.resolve_sampler("mine")) is samplers.MH
    finally:
        del reg["mine"]
    assert "mine" not in reg


def _private_imports_across_packages(root):
    """``(file, line, target, name)`` of every import, in the package at ``root``,
    of an underscore name (not a module) from another of its subpackages (the
    top-level modules count as one)."""
    found = []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root.parent).with_suffix("").parts
        package = parts[:-1]
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.ImportFrom):
                continue
            if node.level:
                base = package[:len(package) - node.level + 1]
                target = (*base, *(node.module.split(".") if node.module else ()))
            else:
                target = tuple((node.module or "").split("."))
            if target[0] != root.name:
                continue

            def subpackage(mod):
                return mod[1] if len(mod) > 1 and (root / mod[1]).is_dir() else ""

            if subpackage(target) == subpackage(parts):
                continue
            where = root.parent.joinpath(*target)
            for alias in node.names:
                name = alias.name
                is_module = ((where / name).with_suffix(".py").exists() or (where / name).is_dir()
                             or any(where.glob(name + ".*")))
                if name.startswith("_") and not name.startswith("__") and not is_module:
                    found.append((str(path.relative_to(root.parent)), node.lineno,
                                  ".".join(target), name))
    return found


def test_no_private_name_is_imported_across_subpackages(tmp_path):
    root = Path(bayes_subsample.__file__).parent
    assert _private_imports_across_packages(root) == []
    # the scan sees one
    pkg = tmp_path / "pkg"
    (pkg / "a").mkdir(parents=True)
    (pkg / "b").mkdir()
    (pkg / "a" / "_m.py").write_text("_X = 1\n")
    (pkg / "b" / "m.py").write_text("from ..a._m import _X\nfrom ..a import _m\n")
    assert _private_imports_across_packages(pkg) == [("pkg/b/m.py", 1, "pkg.a._m", "_X")]


#: the most lines a module of the package may have (one concept per module)
MAX_MODULE_LINES = 800


def test_no_module_is_over_800_lines():
    source = Path(__file__).resolve().parent.parent / "bayes_subsample"
    if not source.is_dir():
        pytest.skip("the source tree is not beside the tests")
    files = [f for ext in ("*.py", "*.pyx", "*.pxd", "*.h") for f in source.rglob(ext)]
    assert len(files) > 50
    long = {str(f.relative_to(source)): n for f in files
            if (n := len(f.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}
