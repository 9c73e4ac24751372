"""The examples in the installed package's docstrings run and print what they
show (doctest, ELLIPSIS and NORMALIZE_WHITESPACE)."""
import doctest
import importlib
import io
import pkgutil

import pytest

import bayes_subsample

MODULES = sorted(m.name for m in pkgutil.walk_packages(bayes_subsample.__path__,
                                                       "bayes_subsample.")
                 if not m.name.endswith("__main__"))


def _examples(module):
    finder = doctest.DocTestFinder(exclude_empty=True)
    return [t for t in finder.find(module, module.__name__) if t.examples]


def test_modules_have_examples():
    # guards against the walk silently finding nothing (e.g. a wrong package path)
    n = sum(len(_examples(importlib.import_module(name))) for name in MODULES)
    assert len(MODULES) > 30 and n > 30


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)                  # examples that write files write here
    module = importlib.import_module(name)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    out = io.StringIO()
    for test in _examples(module):
        runner.run(test, out=out.write)
    assert runner.failures == 0, out.getvalue()
