"""``python -m verify.bench_gpu``: :func:`mhajax.bench.gpu.main` (the prepared accelerator run)."""
import sys

from mhajax.bench.gpu import main
from mhajax.cli.common import run_main

if __name__ == "__main__":
    sys.exit(run_main(main))
