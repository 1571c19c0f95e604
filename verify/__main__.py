"""``python -m verify``: :func:`mhajax.cli.verify.main`."""
import sys

from mhajax.cli.verify import main

if __name__ == "__main__":
    sys.exit(main())
