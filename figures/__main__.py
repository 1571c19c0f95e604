"""``python -m figures``: :func:`mhajax.figures.main.main`."""
import sys

from mhajax.cli.common import run_main
from mhajax.figures.main import main

if __name__ == "__main__":
    sys.exit(run_main(main))
