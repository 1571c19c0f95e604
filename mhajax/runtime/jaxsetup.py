"""Process setup for checks: float64, one thread for XLA's CPU pool and for OpenBLAS, JAX's
persistent compilation cache, and the compile options of CPU programs that run once.

:func:`setup_jax` runs once where a command starts, before any array exists. Nothing here
changes a computed number except the compile options (last bits, below).
"""
from __future__ import annotations

import functools
import gc
import os

import jax

from mhajax.errors import InputError

try:
    from jax.experimental.compilation_cache.compilation_cache import reset_cache as _reset_compilation_cache
except ImportError:   # a jax without it: a process keeps the first cache directory it opened
    _reset_compilation_cache = None

DTYPES = ("float64", "float32")

#: Environment defaults a command sets for itself (a value the user set is kept). Both are read
#: once, when the library starts: ``PJRT_NPROC`` when JAX's CPU backend starts (its thread pool
#: size), ``OPENBLAS_NUM_THREADS`` when SciPy's OpenBLAS (jaxlib's CPU LAPACK) is loaded, at the
#: first eigensolver a process compiles. With one pool thread jaxlib never splits a batched
#: LAPACK call over the pool, which is what deadlocks when two such calls run at once
#: (docs/reliability.md); one OpenBLAS thread is also the faster setting for the many small
#: eigenproblems here.
PROCESS_DEFAULTS = {"PJRT_NPROC": "1", "OPENBLAS_NUM_THREADS": "1"}


def process_defaults() -> dict:
    """Set :data:`PROCESS_DEFAULTS` in this process's environment where unset; returns the
    values in force. Effective only before JAX's backend starts and SciPy's LAPACK loads."""
    for name, value in PROCESS_DEFAULTS.items():
        os.environ.setdefault(name, value)
    return {name: os.environ[name] for name in PROCESS_DEFAULTS}


def setup_jax(dtype: str = "float64"):
    """Prepare this process for a check: :func:`process_defaults`, float64 (the default) or
    float32, and JAX's persistent compilation cache in :func:`compile_cache_dir` (off when it
    is None). A later call follows ``$MHAJAX_CACHE_DIR`` again (:func:`use_compilation_cache`)."""
    if dtype not in DTYPES:
        raise InputError(f"--dtype must be float64 or float32, got {dtype!r}")
    process_defaults()
    jax.config.update("jax_enable_x64", dtype == "float64")
    use_compilation_cache(compile_cache_dir())


def compilation_cache_state() -> tuple[bool, str | None]:
    """(enabled, directory) of JAX's persistent compilation cache, as its settings say."""
    return bool(jax.config.jax_enable_compilation_cache), jax.config.jax_compilation_cache_dir


def use_compilation_cache(path: str | None) -> str | None:
    """JAX's persistent compilation cache in ``path`` (every program written, however short
    its compile), or off for ``None`` or a directory that cannot be made (a read-only home);
    returns the directory in use. JAX opens its cache at the first compile after a directory
    is set and then keeps that one for the whole process, whatever the settings say later
    (jaxlib 0.10: a process switched off went on writing into its first directory). So a
    change resets JAX's cache (``reset_cache``), and the next compile opens the one asked for."""
    if path:
        try:
            os.makedirs(path, exist_ok=True)
        except OSError:
            path = None
    path = path or None
    try:
        before = compilation_cache_state()
        jax.config.update("jax_enable_compilation_cache", path is not None)
        if path is not None:
            jax.config.update("jax_compilation_cache_dir", path)
            jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
            jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    except (AttributeError, KeyError):  # an older jax without these settings
        return None
    if compilation_cache_state() != before and _reset_compilation_cache is not None:
        _reset_compilation_cache()
    return path


def compile_cache_dir():
    """Where compiled XLA programs are cached between runs: ``$MHAJAX_CACHE_DIR``,
    else ``~/.cache/mhajax/xla``; ``MHAJAX_CACHE_DIR=off`` (or empty, 0, none) disables it."""
    env = os.environ.get("MHAJAX_CACHE_DIR")
    if env is not None:
        return None if env.strip().lower() in ("", "off", "0", "none") else env
    return os.path.join(os.path.expanduser("~"), ".cache", "mhajax", "xla")


#: XLA:CPU options of programs that run once per process (a command's data draw, its
#: initialization, its κ-chain analysis), whose compile time dwarfs their run time: LLVM at
#: -O0 and XLA:CPU's older loop emitters. Their numbers differ from XLA's defaults in the last
#: bits only (floating-point contraction), and they compile several times faster (the test
#: suite, compiled with them, takes about a third less time: docs/testing.md).
RUN_ONCE_OPTIONS = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}
#: XLA:CPU's older loop emitters alone: the certified λ check compiles in about half the time
#: and runs as fast (its last bits differ from the fusion emitters').
OLD_EMITTERS = {"xla_cpu_use_fusion_emitters": False}


def cpu_jit(fn=None, *, options: dict, **jit_kw):
    """``jax.jit(fn, **jit_kw)`` compiled with the XLA ``options`` when the default backend is
    the CPU, and with XLA's defaults on an accelerator (where kernels are what takes time).
    The backend is read at each call, so importing this starts no backend. Use as a
    decorator: ``@cpu_jit(options=RUN_ONCE_OPTIONS, static_argnames=...)``."""
    if fn is None:
        return functools.partial(cpu_jit, options=options, **jit_kw)
    on_cpu = jax.jit(fn, compiler_options=options, **jit_kw)
    elsewhere = jax.jit(fn, **jit_kw)

    def pick():
        return on_cpu if jax.default_backend() == "cpu" else elsewhere

    @functools.wraps(fn)
    def call(*args, **kwargs):
        return pick()(*args, **kwargs)

    call.lower = lambda *args, **kwargs: pick().lower(*args, **kwargs)
    return call


#: parameters per point from which :func:`sized_jit` compiles with optimizations: below it a
#: run-once analysis spends its time compiling (-O0 compiles several times faster), above it
#: running (at H = 256, P = 28,672, the κ chain of 6 points ran 98 s at -O0; at H = 1024 one
#: point 25 s against 10 s with XLA's defaults)
LARGE_P = 2 ** 12


def sized_jit(fn=None, *, size, small: dict = RUN_ONCE_OPTIONS, large: dict = OLD_EMITTERS,
              threshold: int = LARGE_P, **jit_kw):
    """:func:`cpu_jit` of ``fn`` with the options ``small`` for points of fewer than
    ``threshold`` parameters and ``large`` from it on; ``size(*args, **kwargs)`` is a call's
    parameter count (read from its arguments' shapes). Both compiled forms give the same
    numbers to the last bits (floating-point contraction). Use as a decorator."""
    if fn is None:
        return functools.partial(sized_jit, size=size, small=small, large=large, threshold=threshold, **jit_kw)
    lo = cpu_jit(fn, options=small, **jit_kw)
    hi = cpu_jit(fn, options=large, **jit_kw)

    def pick(*args, **kwargs):
        return lo if size(*args, **kwargs) < threshold else hi

    @functools.wraps(fn)
    def call(*args, **kwargs):
        return pick(*args, **kwargs)(*args, **kwargs)

    call.lower = lambda *args, **kwargs: pick(*args, **kwargs).lower(*args, **kwargs)
    return call


def release_compiled():
    """Drop every compiled program of this process (``jax.clear_caches`` + a GC pass).

    Each compiled XLA CPU program holds a few memory mappings until it is freed; a process
    that runs check after check (``verify all``, ``python -m figures``) would otherwise
    accumulate them past the kernel's ``vm.max_map_count`` (65530 by default), where LLVM
    fails with "Cannot allocate memory" and the process dies. Numbers are unaffected: a
    program needed again is recompiled (or read from the persistent cache)."""
    jax.clear_caches()
    gc.collect()


def mapped_regions():
    """``(count, limit)``: this process's memory mappings (``/proc/self/maps``) and the
    kernel's ``vm.max_map_count``; ``(None, None)`` where either cannot be read (not Linux)."""
    try:
        with open("/proc/self/maps", "rb") as fh:
            count = fh.read().count(b"\n")
        with open("/proc/sys/vm/max_map_count") as fh:
            limit = int(fh.read())
    except (OSError, ValueError):
        return None, None
    return count, limit


def release_if_crowded(fraction: float = 0.5) -> bool:
    """:func:`release_compiled` when the process holds more than ``fraction`` of the
    mappings the kernel allows (a long-lived process that compiles thousands of programs:
    a test session, a notebook sweeping sizes). Returns whether it released."""
    count, limit = mapped_regions()
    if count is None or count <= fraction * limit:
        return False
    release_compiled()
    return True


__all__ = ["setup_jax", "process_defaults", "PROCESS_DEFAULTS", "use_compilation_cache",
           "compilation_cache_state", "compile_cache_dir", "DTYPES", "RUN_ONCE_OPTIONS", "OLD_EMITTERS",
           "cpu_jit", "LARGE_P", "sized_jit", "release_compiled", "release_if_crowded", "mapped_regions"]
