"""``python -m bayes_subsample``: the command line (see :mod:`bayes_subsample.cli`)."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
