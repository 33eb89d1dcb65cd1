"""`python -m automl_refengine`: the same CLI as the `automl-refengine` script."""

import sys

from automl_refengine.cli import main

if __name__ == "__main__":
    sys.exit(main())
