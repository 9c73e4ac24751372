"""``python -m bayes_subsample.cli``: the same as ``python -m bayes_subsample``."""
import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
