"""``python -m verify [SUBCOMMAND] ...``; with no subcommand, the default suite."""
from __future__ import annotations

import sys

from .cli import EXIT_BAD_INPUT, run_main

SUBCOMMANDS = {
    "weak-convexity": "verify.weak_convexity",
    "convergence": "verify.convergence",
    "generalization": "verify.generalization",
    "heads": "verify.heads",
    "ntk-margin": "verify.ntk_margin",
    "one-step": "verify.one_step",
    "quasi-convexity": "verify.quasi_convexity",
    "variants": "verify.variants",
    "all": "verify.all",
}
DEFAULT = ["all"]


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-") and argv[0] not in ("-h", "--help"):
        argv = DEFAULT + argv
    if argv[0] in ("-h", "--help"):
        print("usage: python -m verify [SUBCOMMAND] [FLAGS]\n\nsubcommands:\n  "
              + "\n  ".join(SUBCOMMANDS) + f"\n\nwith no subcommand: {' '.join(DEFAULT)}")
        return 0
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        print(f"error: unknown subcommand {name!r}; choose from {', '.join(SUBCOMMANDS)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    import importlib
    try:
        mod = importlib.import_module(SUBCOMMANDS[name])
    except ModuleNotFoundError as e:
        if e.name != SUBCOMMANDS[name]:
            raise
        print(f"error: subcommand {name!r} is not available in this version", file=sys.stderr)
        return EXIT_BAD_INPUT
    return run_main(mod.main, rest)


if __name__ == "__main__":
    sys.exit(main())
