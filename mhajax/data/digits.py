"""Handwritten digits (scikit-learn's bundled ``load_digits``) as a data model: real images.

Each 8×8 image (pixels 0..16) is a sequence of T = 8 tokens, its rows, of d = 8 pixels;
pixels are scaled by 1/(16·√8), so every token has norm <= 1 (a full row of 16s has norm
exactly 1). The task is binary: even digits y = +1, odd digits y = −1.

**Split.** The 1797 images are split once, independently of any seed: 300 images of each
class (even, odd) are held out as the test split (:data:`TEST_PER_CLASS`, 600 in all), the
other 1197 form the training split. The held-out images are chosen by a fixed
``numpy.random.Generator(PCG64(0))`` permutation of each class, so every run and every seed
sees the same split. A draw takes ``n`` images of one split without replacement, in an
order given by ``key`` (the run's seed): ``split="train"`` (stream 0) or ``"test"``
(stream 2, the held-out images). Labels are as in the images (about half even:
891 of 1797), not rebalanced.

scikit-learn is the optional extra ``digits`` (``pip install 'mhajax[digits]'``); without it
every entry point raises an :class:`~mhajax.errors.InputError` naming the extra. Not
traceable in ``key`` through :func:`mhajax.experiments.base.batched_data` (which draws per
seed in a loop), though the draw itself is a permutation of constants.
"""
from __future__ import annotations

import math
from functools import lru_cache

import jax
import jax.numpy as jnp
import numpy as np

from mhajax.errors import InputError
from mhajax.validate import positive_int

#: tokens T and token dimension d of the digits data model (rows of an 8×8 image)
SHAPE = (8, 8)
#: held-out images per class (even, odd): the test split holds 2·TEST_PER_CLASS
TEST_PER_CLASS = 300
#: the seed of the fixed split (not a run's seed)
SPLIT_SEED = 0
#: the one line printed when scikit-learn is missing
MISSING = "--data digits needs scikit-learn: pip install 'mhajax[digits]'"
SPLITS = ("train", "test")


def _load_digits():
    """scikit-learn's ``load_digits`` (``(images [1797, 8, 8], target [1797])``), or an
    InputError naming the extra when scikit-learn is absent."""
    try:
        from sklearn.datasets import load_digits
    except ImportError:
        raise InputError(MISSING) from None
    d = load_digits()
    return np.asarray(d.images, np.float64), np.asarray(d.target)


@lru_cache(maxsize=1)
def _splits():
    """``{"train": (X, y), "test": (X, y)}`` as float64 numpy arrays (module docstring)."""
    images, target = _load_digits()
    X = images / (16.0 * math.sqrt(8.0))
    y = np.where(target % 2 == 0, 1.0, -1.0)
    rng = np.random.Generator(np.random.PCG64(SPLIT_SEED))
    test = np.zeros(y.shape, bool)
    for label in (1.0, -1.0):
        idx = np.flatnonzero(y == label)
        test[rng.permutation(idx)[:TEST_PER_CLASS]] = True
    return {"train": (X[~test], y[~test]), "test": (X[test], y[test])}


def split_size(split: str = "train") -> int:
    """Images in ``split`` (``train``: 1197, ``test``: 600)."""
    if split not in SPLITS:
        raise InputError(f"digits split must be one of {', '.join(SPLITS)}, got {split!r}")
    return int(_splits()[split][1].shape[0])


def check_digits_args(n, tokens, dim, split: str = "train", what: str = "n"):
    """Validate a digits draw: scikit-learn present, T = d = 8, ``n`` (named ``what`` in the
    message) at most the split's size. Raises :class:`InputError` with one line."""
    positive_int(what, n)
    if (int(tokens), int(dim)) != SHAPE:
        raise InputError(f"--data digits has T = d = 8 (rows of an 8x8 image): got --tokens {tokens} "
                         f"--dim {dim}")
    N = split_size(split)
    if int(n) > N:
        raise InputError(f"{what} = {n} {split} samples requested but the digits {split} split holds only {N}")


def digits(key, n: int, tokens: int = 8, dim: int = 8, *, split: str = "train", dtype=None):
    """The ``digits`` data model: ``(X [n, 8, 8], y [n])``, ``n`` images of ``split`` drawn
    without replacement in the order of ``jax.random.permutation(key, N)`` (module docstring).
    ``tokens`` and ``dim`` must be 8."""
    check_digits_args(n, tokens, dim, split)
    X, y = _splits()[split]
    dtype = dtype or jnp.result_type(float)
    idx = jax.random.permutation(key, X.shape[0])[:int(n)]
    return jnp.asarray(X, dtype)[idx], jnp.asarray(y, dtype)[idx]


__all__ = ["MISSING", "SHAPE", "SPLITS", "TEST_PER_CLASS", "check_digits_args", "digits", "split_size"]
