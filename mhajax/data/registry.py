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

from typing import NamedTuple

from mhajax.data.digits import SHAPE as DIGITS_SHAPE
from mhajax.data.digits import digits, split_size
from mhajax.data.mixture import draw_mixture
from mhajax.data.npz import from_npz, npz_shape
from mhajax.data.sparse import sparse_tokens
from mhajax.errors import InputError

#: every data model, by name (same call signature).
DATASETS = {"mixture": draw_mixture, "sparse": sparse_tokens, "npz": from_npz, "digits": digits}
#: the data models that are pure functions of the key (``jit``/``vmap``-able).
TRACEABLE = frozenset({"mixture", "sparse"})


class Capacity(NamedTuple):
    """What a data set of fixed size holds: ``train``/``test`` samples (``None``: a generator draws
    any number, or no held-out file), and the ``shape`` ``(T, d)`` its data fix (``None``: free)."""

    train: int | None = None
    test: int | None = None
    shape: tuple | None = None


def capacity(name: str, data_path=None, test_path=None) -> Capacity:
    """The :class:`Capacity` of data model ``name``: ``digits`` (1197 training and 600 held-out
    8×8 images), ``npz`` (the files' own n, T, d), the generators (unbounded, any shape)."""
    key = str(name).strip().lower()
    if key == "digits":
        return Capacity(split_size("train"), split_size("test"), DIGITS_SHAPE)
    if key == "npz" and data_path:
        n, T, d = npz_shape(data_path)
        return Capacity(n, npz_shape(test_path)[0] if test_path else None, (T, d))
    return Capacity()


def get_dataset(name: str):
    """The data model ``draw(key, n, tokens, dim, **knobs) -> (X, y)`` called ``name``
    (``mixture``, ``sparse``, ``npz``, ``digits``). Raises :class:`InputError` for an unknown name."""
    key = str(name).strip().lower()
    if key not in DATASETS:
        raise InputError(f"unknown data model {name!r}; choose from {', '.join(DATASETS)}")
    return DATASETS[key]
