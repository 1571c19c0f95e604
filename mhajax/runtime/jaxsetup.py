"""Process setup for checks: float64, the persistent compilation cache, one BLAS thread.

:func:`setup_jax` runs once, before any array is created. Caching compiled XLA programs
changes compile time only, never a computed number.
"""
from __future__ import annotations

import os

import jax

from mhajax.errors import InputError
from mhajax.linalg import openblas_controls

DTYPES = ("float64", "float32")


def setup_jax(dtype: str = "float64"):
    """Enable float64 (the default for checks) or float32, single-threaded OpenBLAS, and
    JAX's persistent compilation cache in :func:`compile_cache_dir` (off when it is None)."""
    if dtype not in DTYPES:
        raise InputError(f"--dtype must be float64 or float32, got {dtype!r}")
    jax.config.update("jax_enable_x64", dtype == "float64")
    single_threaded_blas()
    cache = compile_cache_dir()
    try:  # off means off, even if an earlier call in this process turned the cache on
        jax.config.update("jax_enable_compilation_cache", bool(cache))
    except (AttributeError, KeyError):  # an older jax without the switch
        pass
    if cache:
        try:
            os.makedirs(cache, exist_ok=True)
            jax.config.update("jax_compilation_cache_dir", cache)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
        except (OSError, AttributeError):  # read-only home, or an older jax: run without it
            pass


def single_threaded_blas() -> bool:
    """Best effort: one OpenBLAS thread for this process (found through ``/proc/self/maps``,
    since ``OPENBLAS_NUM_THREADS`` is read only when NumPy loads). The CPU eigensolvers of
    :mod:`mhajax.linalg` run batches of small matrices, where threads buy nothing and, on a
    shared 2-core machine, cost a lot (measured: 2048 ``eigvalsh`` of 96×96 took 45 s with
    the default threads, 0.9 s with one). Returns whether a library was found."""
    controls = openblas_controls()
    for _, put in controls:
        put(1)
    return bool(controls)


def compile_cache_dir():
    """Where compiled XLA programs are cached between runs: ``$MHAJAX_CACHE_DIR``,
    else ``~/.cache/mhajax/xla``; ``MHAJAX_CACHE_DIR=off`` (or empty, 0, none) disables it."""
    env = os.environ.get("MHAJAX_CACHE_DIR")
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "none") else env
    return os.path.join(os.path.expanduser("~"), ".cache", "mhajax", "xla")


__all__ = ["setup_jax", "single_threaded_blas", "compile_cache_dir", "DTYPES"]
