"""A persistent cache of traced programs, so that a warm run skips Python tracing and lowering.

JAX's persistent compilation cache stores compiled executables, but its key is computed from
the lowered module, so every run still traces and lowers each program before it finds the
executable (issue 14 measured about 1 s of a 2.7 s warm ``verify weak-convexity`` run there).
This module stores the lowered program itself (``jax.export``: serialized StableHLO) under a
key that fixes everything tracing could depend on:

* the function (module and qualified name) and its static arguments, written out
  field by field (:func:`stable_repr`; a static argument that cannot be written out
  deterministically — an object identified only by its address, a function outside mhajax —
  turns the cache off for that call);
* the dynamic arguments' tree structure, shapes, dtypes and weak types;
* a fingerprint of every source file of the ``mhajax`` package (:func:`source_fingerprint`):
  editing any module invalidates every entry;
* the versions of jax and jaxlib, ``jax_enable_x64``, the backend, the compiler options, and
  the caller's ``context`` (environment switches read at trace time).

A cached program is called through ``jax.jit(exported.call)``: XLA compiles the same StableHLO
(its executable then comes from JAX's own cache), so the numbers are the same to the bit as the
plain ``jax.jit`` path (tests/runtime/test_program_cache.py). Any failure to export, write, read
or deserialize falls back to the plain path: the cache changes speed, never a result or an error.
Serialization needs the ``flatbuffers`` package (a jax.export requirement); without it the cache
is off.
"""
from __future__ import annotations

import dataclasses
import enum
import functools
import hashlib
import importlib.util
import inspect
import os
import sys
import types
from pathlib import Path
from typing import Callable, Optional

import jax
import jaxlib
import numpy as np
from jax import export as jax_export

from mhajax.errors import InputError

#: ``MHAJAX_PROGRAM_CACHE=0`` (or off, no, false) turns the program cache off.
ENV = "MHAJAX_PROGRAM_CACHE"
SUFFIX = ".jaxexport"
_TYPES_SEP = b"\n--\n"   # header (the pytree node types to register) / serialized program


class Unstable(TypeError):
    """A static argument has no deterministic text form: the call is not cached."""


@functools.lru_cache(maxsize=None)
def serializable() -> bool:
    """Whether jax.export can serialize here (it needs the ``flatbuffers`` package)."""
    return importlib.util.find_spec("flatbuffers") is not None


def enabled() -> bool:
    """Whether the cache is on: ``$MHAJAX_PROGRAM_CACHE`` allows it (default on) and
    :func:`serializable`."""
    env = os.environ.get(ENV, "1").strip().lower()
    return env not in ("0", "off", "no", "false", "") and serializable()


def _own(obj) -> bool:
    mod = getattr(obj, "__module__", None) or ""
    return mod == "mhajax" or mod.startswith("mhajax.")


def stable_repr(obj) -> str:
    """A text that names ``obj`` the same way in every process, or :class:`Unstable`.

    Scalars, strings, None, tuples, lists, dicts, frozensets, enums, numpy scalars,
    NamedTuples and dataclasses (field by field), and functions or classes defined in mhajax
    (by module and qualified name; their source is in :func:`source_fingerprint`).
    A function from elsewhere is Unstable: its source could change unseen."""
    if obj is None or isinstance(obj, (bool, int, float, complex, str, bytes)):
        return f"{type(obj).__name__}:{obj!r}"
    if isinstance(obj, enum.Enum):
        return f"{type(obj).__module__}.{type(obj).__qualname__}.{obj.name}"
    if isinstance(obj, np.generic):
        return f"np.{obj.dtype}:{obj.item()!r}"
    if isinstance(obj, tuple) and hasattr(obj, "_fields"):
        if not _own(type(obj)):
            raise Unstable(f"a NamedTuple from outside mhajax: {type(obj).__qualname__}")
        return (f"{type(obj).__module__}.{type(obj).__qualname__}("
                + ",".join(f"{f}={stable_repr(getattr(obj, f))}" for f in obj._fields) + ")")
    if isinstance(obj, (tuple, list)):
        return f"{type(obj).__name__}(" + ",".join(stable_repr(v) for v in obj) + ")"
    if isinstance(obj, frozenset):
        return "frozenset(" + ",".join(sorted(stable_repr(v) for v in obj)) + ")"
    if isinstance(obj, dict):
        return "dict(" + ",".join(sorted(f"{stable_repr(k)}:{stable_repr(v)}" for k, v in obj.items())) + ")"
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        if not _own(type(obj)):
            raise Unstable(f"a dataclass from outside mhajax: {type(obj).__qualname__}")
        return (f"{type(obj).__module__}.{type(obj).__qualname__}("
                + ",".join(f"{f.name}={stable_repr(getattr(obj, f.name))}"
                           for f in dataclasses.fields(obj)) + ")")
    if isinstance(obj, functools.partial):
        return (f"partial({stable_repr(obj.func)},{stable_repr(obj.args)},"
                f"{stable_repr(dict(obj.keywords))})")
    if isinstance(obj, (types.FunctionType, type)):
        if not _own(obj) or "<locals>" in obj.__qualname__ or "<lambda>" in obj.__qualname__:
            raise Unstable(f"a function or class not defined at mhajax module level: "
                           f"{getattr(obj, '__module__', '?')}.{obj.__qualname__}")
        return f"{obj.__module__}.{obj.__qualname__}"
    raise Unstable(f"no deterministic text for a {type(obj).__qualname__}")


@functools.lru_cache(maxsize=None)
def source_fingerprint(root: Optional[str] = None) -> str:
    """SHA-256 over the relative path and bytes of every ``*.py`` under ``root`` (default: the
    installed ``mhajax`` package), in sorted order."""
    base = Path(root) if root is not None else Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for path in sorted(base.rglob("*.py")):
        h.update(str(path.relative_to(base)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def split_static(fn: Callable, static_argnames, args: tuple, kwargs: dict):
    """``(static {name: value}, dynamic (args, kwargs))``: ``fn``'s arguments, the names in
    ``static_argnames`` taken out whether passed by position or by keyword (the calling
    convention of a program jitted with ``static_argnames``)."""
    names = list(inspect.signature(fn).parameters)
    static = set(static_argnames or ())
    st = {names[i]: a for i, a in enumerate(args) if i < len(names) and names[i] in static}
    st.update({k: v for k, v in kwargs.items() if k in static})
    dyn = (tuple(a for i, a in enumerate(args) if not (i < len(names) and names[i] in static)),
           {k: v for k, v in kwargs.items() if k not in static})
    return st, dyn


def _aval_text(leaf) -> str:
    shape = tuple(np.shape(leaf))
    dtype = getattr(leaf, "dtype", None)
    weak = getattr(leaf, "weak_type", not hasattr(leaf, "dtype"))
    return f"{shape}:{np.dtype(dtype) if dtype is not None else type(leaf).__name__}:{bool(weak)}"


def program_key(fn: Callable, static: dict, dynamic, *, compiler_options=None, context=()) -> str:
    """The cache key (hex SHA-256) of ``fn`` at these static and dynamic arguments (module
    docstring); :class:`Unstable` when a static argument has no deterministic text."""
    leaves, tree = jax.tree_util.tree_flatten(dynamic)
    parts = [
        f"{fn.__module__}.{fn.__qualname__}",
        stable_repr(dict(static)),
        str(tree),
        ";".join(_aval_text(leaf) for leaf in leaves),
        f"jax {jax.__version__} jaxlib {jaxlib.__version__}",
        f"x64 {bool(jax.config.jax_enable_x64)} backend {jax.default_backend()}",
        stable_repr(dict(compiler_options or {})),
        stable_repr(tuple(context)),
        source_fingerprint(),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _node_types(treedef) -> set:
    """The NamedTuple classes among the nodes of ``treedef`` (they must be registered for
    jax.export to serialize the tree)."""
    out, stack = set(), [treedef]
    while stack:
        t = stack.pop()
        data = t.node_data()
        if data is not None:
            cls = data[0]
            if isinstance(cls, type) and issubclass(cls, tuple) and hasattr(cls, "_fields"):
                out.add(cls)
        stack.extend(t.children())
    return out


_REGISTERED: dict = {}


def _register(cls) -> str:
    """Register NamedTuple ``cls`` for jax.export serialization (once); its serialized name."""
    name = f"{cls.__module__}:{cls.__qualname__}"
    if cls not in _REGISTERED:
        try:
            jax_export.register_namedtuple_serialization(cls, serialized_name=name)
        except ValueError:   # registered already under this name (by an earlier import)
            pass
        _REGISTERED[cls] = name
    return name


def _resolve(name: str):
    """The class that ``_register`` named ``module:qualname``, from modules already imported
    (a program's argument types are in the process before it is called); None if absent."""
    module, _, qual = name.partition(":")
    obj = sys.modules.get(module)
    for part in qual.split("."):
        obj = getattr(obj, part, None)
    return obj if isinstance(obj, type) else None


def store(path: str, exported) -> None:
    """Write ``exported`` (a ``jax.export.Exported``) to ``path`` atomically, with the names of
    the NamedTuple types its trees use."""
    names = sorted(_register(c) for c in _node_types(exported.in_tree) | _node_types(exported.out_tree))
    blob = "\n".join(names).encode() + _TYPES_SEP + bytes(exported.serialize())
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "wb") as fh:
            fh.write(blob)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)


def load(path: str):
    """The ``jax.export.Exported`` stored at ``path``, or None when it is absent, unreadable,
    or names a type that is not in this process."""
    try:
        with open(path, "rb") as fh:
            blob = fh.read()
    except OSError:
        return None
    head, sep, body = blob.partition(_TYPES_SEP)
    if not sep:
        return None
    for name in filter(None, head.decode(errors="replace").split("\n")):
        cls = _resolve(name)
        if cls is None:
            return None
        _register(cls)
    try:
        return jax_export.deserialize(bytearray(body))
    except Exception:   # noqa: BLE001 — a truncated or foreign file is a miss, not an error
        return None


def _named(call: Callable, fn: Callable) -> Callable:
    """``call`` under ``fn``'s name, so the compiled program keeps it (``jit_<name>`` in logs,
    profiles and the compilation cache's file names)."""
    def program(*args, **kwargs):
        return call(*args, **kwargs)
    program.__name__, program.__qualname__ = fn.__name__, fn.__qualname__
    return program


def _traced(args, kwargs) -> bool:
    return any(isinstance(leaf, jax.core.Tracer) for leaf in jax.tree_util.tree_leaves((args, kwargs)))


class CachedProgram:
    """``jax.jit(fn, static_argnames=..., compiler_options=...)`` whose traced program is kept in
    ``directory()`` between processes (module docstring). ``jitted()`` returns the plain jitted
    function, the fallback, used when the cache is off, ``fn`` is not defined in mhajax (its
    source is not fingerprinted), a static argument is :class:`Unstable`, or the program cannot
    be exported (tried once per key and process). Calls and ``lower`` behave as the jitted
    function's. ``hits``/``misses``/``fallbacks`` count files read, files written and failed
    exports."""

    def __init__(self, fn: Callable, jitted: Callable[[], Callable], *, static_argnames=(),
                 directory: Callable[[], Optional[str]], compiler_options: Callable[[], Optional[dict]],
                 context: Callable[[], tuple] = tuple):
        self._fn, self._plain, self._static = fn, jitted, tuple(static_argnames or ())
        self._directory, self._options, self._context = directory, compiler_options, context
        self._memo: dict = {}     # key -> jax.jit(exported.call) (JAX frees its executables),
        #                           or None: not exportable, the plain jit (export not retried)
        self.hits = self.misses = self.fallbacks = 0

    def _program(self, args, kwargs):
        """``(callable, dynamic)``: the jitted exported program and the dynamic arguments, or
        ``(None, None)`` when this call is not cached."""
        directory = self._directory()
        if directory is None or not enabled() or not _own(self._fn) or _traced(args, kwargs):
            return None, None   # off, or a function whose source the fingerprint does not cover
        static, dynamic = split_static(self._fn, self._static, args, kwargs)
        try:
            key = program_key(self._fn, static, dynamic, compiler_options=self._options(),
                              context=self._context())
        except Unstable:
            return None, None
        if key in self._memo:
            prog = self._memo[key]
            return (None, None) if prog is None else (prog, dynamic)
        path = os.path.join(directory, key + SUFFIX)
        exported = load(path)
        if exported is not None:
            self.hits += 1
        else:
            try:
                exported = jax_export.export(self._plain())(*args, **kwargs)
            except InputError:
                raise
            except Exception:   # noqa: BLE001 — not exportable (a host callback): plain jit
                self.fallbacks += 1
                self._memo[key] = None
                return None, None
            self.misses += 1
            try:
                os.makedirs(directory, exist_ok=True)
                store(path, exported)
            except Exception:   # noqa: BLE001 — unwritable cache or no flatbuffers: run uncached
                pass
        prog = jax.jit(_named(exported.call, self._fn), compiler_options=self._options())
        self._memo[key] = prog
        return prog, dynamic

    def __call__(self, *args, **kwargs):
        """Run the program (the cached one when this call can be cached). Called inside another
        trace, ``fn`` is traced inline: the outer program is the one compiled (and cached)."""
        if _traced(args, kwargs):
            return self._fn(*args, **kwargs)
        prog, dynamic = self._program(args, kwargs)
        if prog is None:
            return self._plain()(*args, **kwargs)
        return prog(*dynamic[0], **dynamic[1])

    def lower(self, *args, **kwargs):
        """The lowered program (``.compile()`` it; the compiled program takes the dynamic
        arguments only, as ``jax.jit(...).lower(...).compile()`` does)."""
        prog, dynamic = self._program(args, kwargs)
        if prog is None:
            return self._plain().lower(*args, **kwargs)
        return prog.lower(*dynamic[0], **dynamic[1])

    def eval_shape(self, *args, **kwargs):
        """The outputs' ``jax.ShapeDtypeStruct`` s, as ``jax.jit(...).eval_shape``: from the
        cached program where there is one (a warm run traces nothing), else by tracing ``fn``
        once — the trace the call then reuses."""
        prog, dynamic = self._program(args, kwargs)
        if prog is None:
            return self._plain().eval_shape(*args, **kwargs)
        return prog.eval_shape(*dynamic[0], **dynamic[1])

    def clear(self) -> None:
        """Forget this process's programs (the files stay)."""
        self._memo.clear()


__all__ = ["CachedProgram", "Unstable", "stable_repr", "source_fingerprint", "split_static",
           "program_key", "store", "load", "enabled", "serializable", "ENV", "SUFFIX"]
