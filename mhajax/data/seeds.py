"""Seeds and PRNG streams: one integer seed, independent streams for data, init and test.

A seed ``s`` gives the streams ``fold_in(PRNGKey(s), k)``: ``k = 0`` training data,
``1`` initialization, ``2`` held-out test data, ``3`` anything else a sweep needs (e.g.
head signs). For a fixed seed every H and every step size sees the same training data.
"""
from __future__ import annotations

import jax
import numpy as np

from mhajax.errors import InputError
from mhajax.runtime.jaxsetup import RUN_ONCE_OPTIONS, cpu_jit
from mhajax.validate import positive_int

STREAMS = {"data": 0, "init": 1, "test": 2, "extra": 3}


def seed_list(seeds: int, seed0: int = 0) -> list[int]:
    """``[seed0, ..., seed0 + seeds − 1]`` (PRNG seeds are uint32: the last must be < 2**32)."""
    positive_int("seeds", seeds)
    if isinstance(seed0, bool) or not isinstance(seed0, int) or seed0 < 0:
        raise InputError(f"seed0 must be an integer >= 0, got {seed0!r}")
    if seed0 + seeds > 2 ** 32:
        raise InputError(f"seed0 + seeds must be <= 2**32 (PRNG seeds are uint32), got seed0={seed0}, "
                         f"seeds={seeds}")
    return list(range(seed0, seed0 + seeds))


def stream_keys(seeds, stream: int):
    """``[S, 2]`` PRNG keys: stream ``stream`` of each seed (0 data, 1 init, 2 test, 3 extra)."""
    # host-side uint32 arrays: converting on the device would compile two more programs
    return _stream_keys(np.asarray(list(seeds), np.uint32), np.uint32(stream))


@cpu_jit(options=RUN_ONCE_OPTIONS)   # run once per process (integer hashing: the same bits)
def _stream_keys(seeds, stream):
    """One program for every stream (``stream`` is traced: a cold run compiles it once)."""
    return jax.vmap(lambda s: jax.random.fold_in(jax.random.PRNGKey(s), stream))(seeds)


def seed_keys(seed: int):
    """``(data_key, init_key, test_key)`` derived from one integer seed."""
    return tuple(stream_keys([seed], i)[0] for i in range(3))


def point_keys(seed: int, num: int, fold: int | None = None):
    """``[num, 2]`` keys ``split(PRNGKey(seed), num)``, or ``split(fold_in(PRNGKey(seed), fold),
    num)`` (the keys of a batch of analysed points). One jitted program with ``seed`` and
    ``fold`` traced, so every seed and fold share it; the same bits as the eager calls, which
    would compile three or four small programs per run."""
    seed = positive_int("seed", seed, minimum=0, maximum=2 ** 63 - 1)
    fold = None if fold is None else positive_int("fold", fold, minimum=0, maximum=2 ** 32 - 1)
    return _point_keys(seed, np.uint32(fold or 0), num=positive_int("num", num), folded=fold is not None)


@cpu_jit(options=RUN_ONCE_OPTIONS, static_argnames=("num", "folded"))
def _point_keys(seed, fold, *, num, folded):
    key = jax.random.PRNGKey(seed)
    return jax.random.split(jax.random.fold_in(key, fold) if folded else key, num)
