"""``python -m verify.bench``: :func:`mhajax.bench.suite.main` (speed, as ratios in one run)."""
import sys

from mhajax.bench.suite import main
from mhajax.cli.common import run_main

if __name__ == "__main__":
    sys.exit(run_main(main))
