"""``python -m verify [CHECK] [FLAGS]`` from a checkout: the entry point the README names.

Thin: every check lives in :mod:`mhajax.experiments` and runs through
:func:`mhajax.cli.verify.main` (also installed as ``mhajax verify``). This folder is not
installed as a package.
"""
