"""``python -m figures`` from a checkout: the figure scripts live in :mod:`mhajax.figures`
(also installed as ``mhajax figures``); this folder holds their output. Not installed."""
