"""The ``mhajax`` console script (and ``python -m mhajax``): ``mhajax verify …``, ``mhajax figures …``,
``mhajax report …``, ``mhajax bench …`` (the same as ``python -m verify …`` etc.)."""
from __future__ import annotations

import sys

from mhajax.bench import suite
from mhajax.cli import verify
from mhajax.cli.common import run_main
from mhajax.figures import main as figures_main
from mhajax.figures import report
from mhajax.verdict import EXIT_BAD_INPUT

COMMANDS = {"verify": verify.main, "figures": figures_main.main, "report": report.main,
            "bench": suite.main}


def main(argv=None) -> int:
    """Dispatch ``mhajax COMMAND [ARGS]``."""
    return run_main(_dispatch, list(sys.argv[1:] if argv is None else argv))


def _dispatch(argv) -> int:
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: mhajax {" + ",".join(COMMANDS) + "} [ARGS]\n\n"
              "  verify   run checks (python -m verify)\n  figures  figures and REPORT.md (python -m figures)\n"
              "  report   REPORT.md only\n  bench    speed benchmarks (python -m verify.bench)")
        return 0 if argv else EXIT_BAD_INPUT
    if argv[0] not in COMMANDS:
        print(f"error: unknown command {argv[0]!r}; choose from {', '.join(COMMANDS)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    return COMMANDS[argv[0]](argv[1:])


if __name__ == "__main__":
    sys.exit(main())
