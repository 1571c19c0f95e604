"""float64 switches that work on jax 0.10–0.12.

``x64_enabled()`` reports the *effective* setting (a thread-local context
included); ``float64()`` turns float64 on for its body (the global flag, see
there) and restores the previous setting on exit.
"""
from __future__ import annotations

import contextlib

import jax
import numpy as np


def x64_enabled() -> bool:
    """Whether new JAX arrays default to float64 here and now."""
    try:
        return jax.dtypes.canonicalize_dtype(np.float64) == np.float64
    except AttributeError:  # pragma: no cover - API moved
        import jax.numpy as jnp
        return jnp.zeros(()).dtype == np.float64


def _read_global() -> bool:
    try:
        return bool(jax.config.read("jax_enable_x64"))
    except AttributeError:  # pragma: no cover
        return bool(jax.config.jax_enable_x64)


@contextlib.contextmanager
def float64():
    """Run the body with float64 enabled; restore the previous setting after.

    The *global* flag is switched, not jax's thread-local ``enable_x64`` context: a
    ``jax.pure_callback`` runs its Python callback on another thread, which would not
    see a thread-local setting and would hand the callback float32 arrays.
    """
    if x64_enabled():
        yield
        return
    with global_x64(True):
        yield


@contextlib.contextmanager
def global_x64(enabled: bool = True):
    """Set the *global* float64 flag for the body and restore it afterwards
    (what the ``x64`` pytest fixture does)."""
    prev = _read_global()
    jax.config.update("jax_enable_x64", bool(enabled))
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", prev)
