"""Every data model by name, with one call signature::

    draw(key, n, tokens, dim, **knobs) -> (X [n, T, d], y [n])      labels in {-1, +1}

* ``mixture`` — the tokenized mixture of docs/theory.md §9 (:func:`~mhajax.data.mixture.draw_mixture`);
* ``sparse``  — sparse-token detection (:func:`~mhajax.data.sparse.sparse_tokens`);
* ``npz``     — a user file (:func:`~mhajax.data.npz.from_npz`);
* ``digits``  — scikit-learn's 8×8 digits, even vs odd, rows as tokens (:func:`~mhajax.data.digits.digits`;
  knob ``split``: ``train`` or the fixed held-out ``test``).

``mixture`` and ``sparse`` are pure and traceable in ``key``; ``npz`` and ``digits`` are
drawn per seed in a loop (:data:`TRACEABLE`).
"""
from __future__ import annotations

from mhajax.data.digits import digits
from mhajax.data.mixture import draw_mixture
from mhajax.data.npz import from_npz
from mhajax.data.sparse import sparse_tokens
from mhajax.errors import InputError

#: every data model, by name (same call signature).
DATASETS = {"mixture": draw_mixture, "sparse": sparse_tokens, "npz": from_npz, "digits": digits}
#: the data models that are pure functions of the key (``jit``/``vmap``-able).
TRACEABLE = frozenset({"mixture", "sparse"})
#: data models whose (tokens, dim) the data fix: the command line uses these unless given
FIXED_SHAPES = {"digits": (8, 8)}


def get_dataset(name: str):
    """The data model ``draw(key, n, tokens, dim, **knobs) -> (X, y)`` called ``name``
    (``mixture``, ``sparse``, ``npz``, ``digits``). Raises :class:`InputError` for an unknown name."""
    key = str(name).strip().lower()
    if key not in DATASETS:
        raise InputError(f"unknown data model {name!r}; choose from {', '.join(DATASETS)}")
    return DATASETS[key]
