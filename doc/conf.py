"""Sphinx configuration of the bayes_subsample documentation.

Build with warnings as errors::

    python -m sphinx -W --keep-going -b html doc doc/_build/html

The examples are not executed during the build; ``examples.rst`` includes their
source.
"""
import os
import sys

# Document the *installed* package: the source tree has no compiled modules, so
# drop the repository root (which ``python -m sphinx`` run from it puts on
# sys.path) before importing.
_root = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != _root]
import bayes_subsample  # noqa: E402

project = "bayes_subsample"
author = "the bayes_subsample developers"
copyright = "the bayes_subsample developers, BSD-3-Clause"
release = bayes_subsample.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
]

# numpydoc: parse the docstrings, do not generate member tables (the API page
# lists what it documents), do not validate style during the build
numpydoc_show_class_members = False
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False
numpydoc_attributes_as_param_list = True


autodoc_typehints = "none"
autodoc_member_order = "bysource"

templates_path = []
exclude_patterns = ["_build"]
root_doc = "index"
default_role = "literal"
nitpicky = False

html_theme = "alabaster"
html_title = f"bayes_subsample {release}"
html_static_path = []
html_theme_options = {"description": "Subsampling MCMC for tall data", "fixed_sidebar": True}
