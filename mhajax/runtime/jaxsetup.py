"""Process setup for checks: float64, the persistent compilation cache, one BLAS thread,
and the compiler options of the programs that run once per process.

:func:`setup_jax` runs once, before any array is created. Caching compiled XLA programs
changes compile time only, never a computed number.

:func:`fast_compile_jit` is ``jax.jit`` for programs whose compile time dwarfs their run
time (a command's data draw, its initialization, its curvature analysis): on CPU they are
compiled with LLVM's optimization level 0 (``xla_backend_optimization_level=0``). Issue 14
measured, in one window (load ~7 on 2 cores): the data draw's cold compile 3.4 s -> 0.8 s,
the initialization's 2.9 s -> 0.5 s, the κ-chain analysis at H = 16 7.3 s -> 4.7 s, with
run times unchanged within noise. The numbers change at the last bit only (LLVM's
floating-point contractions differ). They also use XLA:CPU's older loop emitters instead of
its MLIR fusion emitters (:data:`CPU_COMPILE_OPTIONS`): the analysis then compiles about 3x
faster, to the same bits. :func:`cached_jit` keeps XLA's default optimization (GD, whose run
time matters); the certified λ check (``hessian_extremes``) takes it with the older emitters,
which halve its compile time at the same run time (its last bits change).
``MHAJAX_FAST_COMPILE=0`` restores XLA's defaults everywhere. Accelerators always keep them
(their kernels are where run time goes).
"""
from __future__ import annotations

import concurrent.futures
import contextvars
import functools
import gc
import os
import time

import jax
import numpy as np

from mhajax.errors import InputError
from mhajax.linalg import CPU_EIGH_ENV, load_lapack, openblas_controls
from mhajax.runtime.program_cache import CachedProgram

try:
    from jax.experimental.compilation_cache.compilation_cache import reset_cache as _reset_compilation_cache
except ImportError:   # a jax without it: a process keeps the first cache directory it opened
    _reset_compilation_cache = None

DTYPES = ("float64", "float32")


def setup_jax(dtype: str = "float64"):
    """Enable float64 (the default for checks) or float32, single-threaded OpenBLAS, and
    JAX's persistent compilation cache in :func:`compile_cache_dir` (off when it is None),
    with the traced-program cache beside it (:func:`program_cache_dir`). A later call in the
    same process follows ``$MHAJAX_CACHE_DIR`` again (:func:`use_compilation_cache`)."""
    if dtype not in DTYPES:
        raise InputError(f"--dtype must be float64 or float32, got {dtype!r}")
    jax.config.update("jax_enable_x64", dtype == "float64")
    single_threaded_blas()
    global _PROGRAM_DIR
    cache = use_compilation_cache(compile_cache_dir())
    _PROGRAM_DIR = os.path.join(cache, "programs") if cache else None


def compilation_cache_state() -> tuple[bool, str | None]:
    """(enabled, directory) of JAX's persistent compilation cache, as its settings say."""
    return bool(jax.config.jax_enable_compilation_cache), jax.config.jax_compilation_cache_dir


def use_compilation_cache(path: str | None) -> str | None:
    """JAX's persistent compilation cache in ``path`` (every program written, however short
    its compile), or off for ``None`` or a directory that cannot be made (a read-only home);
    returns the directory in use. JAX opens its cache at the first compile after a directory
    is set and then keeps that one for the whole process, whatever the settings say later:
    measured on jaxlib 0.10.2, a process switched off went on writing into its first
    directory, and one switched to a second directory wrote into the first. So a change
    resets JAX's cache (``reset_cache``, public since jax 0.4), and the next compile opens
    the one asked for."""
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


def single_threaded_blas() -> bool:
    """Best effort: one OpenBLAS thread for this process (found through ``/proc/self/maps``,
    since ``OPENBLAS_NUM_THREADS`` is read only when NumPy loads). SciPy's LAPACK is loaded
    first (:func:`mhajax.linalg.load_lapack`): its bundled OpenBLAS is jaxlib's CPU LAPACK,
    and is not in the process before that — a
    setter run earlier misses it, and XLA's batched LAPACK kernels can then deadlock in its
    threaded GEMM (issue 14; :mod:`mhajax.linalg`). With every OpenBLAS on one thread the
    eigensolvers run inside XLA and the programs can be cached. Small eigenproblems gain
    nothing from threads and, on a shared 2-core machine, lose a lot (measured: 2048
    ``eigvalsh`` of 96×96 took 45 s with the default threads, 0.9 s with one). Returns
    whether a library was found."""
    load_lapack()   # scipy.libs/libscipy_openblas: jaxlib's LAPACK
    openblas_controls.cache_clear()
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


FAST_COMPILE_ENV = "MHAJAX_FAST_COMPILE"
FAST_COMPILE_OPTIONS = {"xla_backend_optimization_level": 0}
#: XLA:CPU options of :func:`fast_compile_jit` programs and of ``cached_jit(fusion_emitters=False)``
#: ones: XLA's older loop emitters instead of its MLIR fusion emitters. Issue 14 measured (2
#: cores, jaxlib 0.10.2): the κ-chain analysis at H = 16 compiled in 0.75–0.86 s instead of
#: 2.2–2.6 s at -O0, to the same bits; ``hessian_extremes`` at -O2 in 1.6–1.7 s instead of 3.2–3.3 s at H = 256 (2.9 s
#: instead of 4.0 s at H = 16), its numbers differing in the last bits (<= 7e-16 relative
#: measured; tests/runtime/test_compile_options.py). Run times: unchanged within noise at H = 16
#: and for the check at H = 256; the analysis at H = 128 (6 points) ran 3.46–3.71 s against
#: 2.99–3.45 s (up to ~10 % slower) while compiling 0.85–1.08 s instead of 2.48–2.83 s, so a
#: long analysis at large H can lose what the compile saves (``MHAJAX_FAST_COMPILE=0``).
CPU_COMPILE_OPTIONS = {"xla_cpu_use_fusion_emitters": False}


def _off(env: str) -> bool:
    return os.environ.get(env, "1").strip().lower() in ("0", "off", "no", "false")


@functools.lru_cache(maxsize=None)
def _cpu_option_supported(name: str, value) -> bool:
    """Whether this jaxlib's XLA:CPU knows the compile option (a one-line program compiled
    once per process; an unknown option is an error at compile time, so it is left out)."""
    try:
        jax.jit(lambda x: x, compiler_options={name: value}).lower(np.float32(0)).compile()
        return True
    except Exception:   # noqa: BLE001 - jaxlib raises its own error type for an unknown option
        return False


def cpu_compile_options() -> dict:
    """The options of :data:`CPU_COMPILE_OPTIONS` this jaxlib supports (empty off CPU or
    with ``MHAJAX_FAST_COMPILE=0``, which restores XLA's defaults everywhere)."""
    if _off(FAST_COMPILE_ENV) or jax.default_backend() != "cpu":
        return {}
    return {k: v for k, v in CPU_COMPILE_OPTIONS.items() if _cpu_option_supported(k, v)}


def fast_compile_options():
    """The compiler options of :func:`fast_compile_jit` programs: ``FAST_COMPILE_OPTIONS``
    and :func:`cpu_compile_options` on CPU, None (XLA's defaults) on an accelerator or with
    ``MHAJAX_FAST_COMPILE=0``."""
    if _off(FAST_COMPILE_ENV) or jax.default_backend() != "cpu":
        return None
    return dict(FAST_COMPILE_OPTIONS, **cpu_compile_options())


def default_compile_options():
    """The compiler options of ``cached_jit(fusion_emitters=False)`` programs: XLA's default
    optimization with :func:`cpu_compile_options`; None where those are empty."""
    return cpu_compile_options() or None


_PROGRAM_DIR = None


def program_cache_dir():
    """Where traced programs are kept between runs (:mod:`mhajax.runtime.program_cache`):
    ``programs/`` under the compilation cache that :func:`setup_jax` turned on; None before
    it (a library call in a notebook or a test writes nothing) or when that cache is off."""
    return _PROGRAM_DIR


def trace_context() -> tuple:
    """What a trace reads besides its arguments, for the program cache's key: the CPU
    eigensolver route (``$MHAJAX_CPU_EIGH``)."""
    return ((CPU_EIGH_ENV, os.environ.get(CPU_EIGH_ENV, "")),)


def _xla_defaults():
    return None


class FastCompileJit:
    """``jax.jit(fn, **jit_kw)`` with :func:`fast_compile_options` (``fast``; else XLA's default
    optimization, with :func:`cpu_compile_options` when ``fusion_emitters`` is False), decided
    at the first call or ``lower`` (after :func:`setup_jax`, when the backend is known), its
    traced program kept between runs by :class:`~mhajax.runtime.program_cache.CachedProgram` (a warm run skips
    tracing and lowering; the numbers are the same to the bit). Calls and ``lower`` behave as
    the jitted function's; ``__wrapped__`` is ``fn``."""

    def __init__(self, fn, *, fast: bool = True, fusion_emitters: bool = True, **jit_kw):
        functools.update_wrapper(self, fn)
        self._fn, self._jit_kw, self._jit = fn, jit_kw, None
        self._options = (fast_compile_options if fast else
                         _xla_defaults if fusion_emitters else default_compile_options)
        self.programs = CachedProgram(fn, self._jitted, static_argnames=jit_kw.get("static_argnames", ()),
                                      directory=program_cache_dir, compiler_options=self._options,
                                      context=trace_context)

    def _jitted(self):
        if self._jit is None:
            self._jit = jax.jit(self._fn, compiler_options=self._options(), **self._jit_kw)
        return self._jit

    def __call__(self, *args, **kwargs):
        """Run the program (compiling it, or reading it from the caches, on first use)."""
        return self.programs(*args, **kwargs)

    def lower(self, *args, **kwargs):
        """The lowered program (``.compile()`` it), as ``jax.jit(...).lower``."""
        return self.programs.lower(*args, **kwargs)

    def eval_shape(self, *args, **kwargs):
        """The outputs' ``jax.ShapeDtypeStruct`` s, as ``jax.jit(...).eval_shape`` (read from
        the traced-program cache on a warm run: nothing is traced)."""
        return self.programs.eval_shape(*args, **kwargs)


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


#: one background thread compiles programs ahead of their use (:func:`compile_ahead`)
_AHEAD = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="mhajax-compile")


def compile_ahead(lower) -> concurrent.futures.Future:
    """Run ``lower().compile()`` on a background thread and return its Future: its
    ``result()`` is ``(compiled program, seconds spent lowering and compiling it)``, or
    raises what lowering or compiling raised.

    ``lower`` is a callable returning a ``jax.stages.Lowered`` — e.g. a program lowered on
    ``jax.ShapeDtypeStruct`` s of arguments not computed yet. XLA compiles (or reads its
    persistent cache) without Python's GIL, so a command compiles its next program while
    the current one compiles or runs: on 2 cores the κ-chain analysis compiles while the
    data are drawn and GD compiles and runs (issue 14). The compiled program is the one the
    plain path builds (same lowered module, same options): the numbers do not change. The
    caller's context variables are copied to the thread. One
    thread: programs queue in call order; ``cancel()`` the Futures of those no longer wanted
    (a process waits at exit for every compile still queued)."""
    def job():
        t = time.perf_counter()
        compiled = lower().compile()
        return compiled, time.perf_counter() - t

    return _AHEAD.submit(contextvars.copy_context().run, job)


def fast_compile_jit(fn=None, **jit_kw):
    """Decorator: ``jax.jit`` (same keywords, e.g. ``static_argnames``) compiled with
    :func:`fast_compile_options` — for programs run once per process whose compile time
    dwarfs their run time (module docstring)."""
    if fn is None:
        return lambda f: FastCompileJit(f, **jit_kw)
    return FastCompileJit(fn, **jit_kw)


def cached_jit(fn=None, *, fusion_emitters: bool = True, **jit_kw):
    """Decorator: ``jax.jit`` (same keywords) with XLA's default optimization, its traced
    program kept between runs like :func:`fast_compile_jit`'s — for programs whose run time
    matters but whose tracing a warm run should not repeat. ``fusion_emitters=False`` adds
    :data:`CPU_COMPILE_OPTIONS` (XLA:CPU's older emitters: about half the compile time) for a
    program measured to run as fast with them (the certified λ check); GD keeps XLA's
    defaults (its H = 64, n = 256 segment ran 10–15 % slower with them)."""
    if fn is None:
        return lambda f: FastCompileJit(f, fast=False, fusion_emitters=fusion_emitters, **jit_kw)
    return FastCompileJit(fn, fast=False, fusion_emitters=fusion_emitters, **jit_kw)


__all__ = ["setup_jax", "use_compilation_cache", "compilation_cache_state", "release_compiled", "release_if_crowded", "mapped_regions", "single_threaded_blas", "compile_cache_dir", "DTYPES", "fast_compile_jit",
           "fast_compile_options", "FastCompileJit", "FAST_COMPILE_OPTIONS", "FAST_COMPILE_ENV",
           "CPU_COMPILE_OPTIONS", "cpu_compile_options", "default_compile_options",
           "program_cache_dir", "trace_context", "cached_jit", "compile_ahead"]
