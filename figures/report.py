"""``python -m figures.report``: :func:`mhajax.figures.report.main` (REPORT.md only)."""
import sys

from mhajax.figures.report import main

if __name__ == "__main__":
    sys.exit(main())
