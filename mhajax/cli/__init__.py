"""Command-line front end of the checks: one generic ``main`` for every registered check
(:mod:`~mhajax.cli.verify`), flags generated from configs (:mod:`~mhajax.cli.flags`) and
shared plumbing (:mod:`~mhajax.cli.common`)."""
