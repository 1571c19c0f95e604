"""Verification scripts: ``python -m verify [SUBCOMMAND] [FLAGS]``.

Thin command-line wrappers around :mod:`mhajax`; each subcommand prints a
verdict table, writes ``DIR/summary.json`` and exits 0 (all claims held),
1 (a claim was violated or a run diverged) or 2 (bad input).
"""
