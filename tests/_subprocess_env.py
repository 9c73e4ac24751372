"""The environment of the tests' subprocesses: they import the very package
these tests import (the installed one under CI, a checkout's build under
``PYTHONPATH``), never the source tree beside them, which has no compiled
modules. Run them with ``cwd`` outside the repository as well: ``python -c``
and ``python -m`` put the working folder first on ``sys.path`` (Python 3.11's
``PYTHONSAFEPATH``, set here, stops that; Python 3.10 ignores it)."""
import os
from pathlib import Path

import bayes_subsample

#: the folder holding the package these tests import
PACKAGE_PARENT = str(Path(bayes_subsample.__file__).resolve().parents[1])


def package_env(**extra):
    """``os.environ`` with ``PYTHONPATH`` led by :data:`PACKAGE_PARENT`, and ``extra``."""
    env = dict(os.environ, PYTHONSAFEPATH="1", **extra)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [PACKAGE_PARENT,
                                                      os.environ.get("PYTHONPATH")]))
    return env
