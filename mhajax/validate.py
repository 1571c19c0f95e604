"""Argument checks shared by the library and the CLI.

Value checks (finiteness, label set) run only on concrete arrays; under
``jit``/``vmap`` the arguments are tracers and only shapes are checked.
"""
from __future__ import annotations

import math

import jax
import numpy as np

from mhajax.errors import InputError


def _is_tracer(x) -> bool:
    return isinstance(x, jax.core.Tracer)


INT_MAX = 2 ** 31 - 1  # sizes and counts reach XLA as int32


def require_x64(what: str) -> None:
    """Refuse (:class:`InputError`) when JAX's float64 is off: every array would be float32
    without a word, and mhajax's guarantees (certificate widths, rounding slacks) are float64's.
    With ``jax_enable_x64`` on, float32 arrays are computed in float32, as asked."""
    if not jax.config.jax_enable_x64:
        raise InputError(f"{what}: JAX's float64 is off, so every array would be float32 without a word; "
                         "call jax.config.update('jax_enable_x64', True) before creating arrays")


def positive_int(name: str, value, minimum: int = 1, maximum: int = INT_MAX) -> int:
    """Return ``int(value)`` or raise if it is not an integer in ``[minimum, maximum]``
    (by default at most ``2**31 − 1``: shapes and counts are int32 in XLA)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        if isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)
        else:
            raise InputError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise InputError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value > maximum:
        raise InputError(f"{name} must be an integer <= {maximum}, got {value!r}")
    return int(value)


def checked_key(what: str, key):
    """``key`` when it is a PRNG key: a typed key (``jax.random.key(seed)``, shape ``()``) or raw
    key data (``jax.random.PRNGKey(seed)``: uint32 ``[2]``, or ``[4]`` for the rbg generators);
    ``jax.random.PRNGKey(0)`` for ``None``. Else an :class:`InputError` naming ``what`` and the value."""
    if key is None:
        return jax.random.PRNGKey(0)
    if _is_tracer(key):
        return key
    dtype, shape = getattr(key, "dtype", None), np.shape(key)
    if dtype is not None and jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key) and shape == ():
        return key
    if dtype == np.uint32 and shape in ((2,), (4,)):
        return key
    shown = repr(key) if dtype is None else f"an array of dtype {dtype} and shape {shape}"
    raise InputError(f"{what}: key must be a PRNG key (jax.random.key(seed) or jax.random.PRNGKey(seed)), got {shown}")


def positive_float(name: str, value, allow_zero: bool = False) -> float:
    """``float(value)`` for a real number: a Python or numpy integer or float, or a 0-d real array
    (not a bool, a string or a complex), finite and > 0 (>= 0 with ``allow_zero``)."""
    real = isinstance(value, (int, float, np.number, np.ndarray, jax.Array)) and not isinstance(value, bool)
    a = np.asarray(value) if real else None
    if a is None or a.shape != () or a.dtype.kind not in "iuf":
        raise InputError(f"{name} must be a number, got {value!r}")
    v = float(a)
    if not math.isfinite(v) or v < 0 or (v == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise InputError(f"{name} must be a finite number {bound}, got {value!r}")
    return v


def check_data(X, y=None, *, tokens: int | None = None, dim: int | None = None):
    """Check a data set ``X`` of shape [n, T, d] (or [T, d]) and labels ``y`` [n].

    Raises :class:`InputError` on wrong rank/shape, NaN/Inf in ``X`` and labels
    other than +-1. Returns ``(X, y)`` unchanged.
    """
    shape = getattr(X, "shape", None)
    if shape is None:
        raise InputError(f"X must be an array of shape [n, T, d], got {type(X).__name__}")
    if len(shape) not in (2, 3):
        raise InputError(f"X must have shape [n, T, d] or [T, d], got shape {tuple(shape)}")
    if any(s == 0 for s in shape):
        raise InputError(f"X must be non-empty, got shape {tuple(shape)}")
    if tokens is not None and shape[-2] != tokens:
        raise InputError(f"X has {shape[-2]} tokens but the parameters expect T={tokens} (X shape {tuple(shape)})")
    if dim is not None and shape[-1] != dim:
        raise InputError(f"X has token dimension {shape[-1]} but the parameters expect d={dim} (X shape {tuple(shape)})")
    if not _is_tracer(X):
        arr = np.asarray(X)
        if not np.issubdtype(arr.dtype, np.floating):
            raise InputError(f"X must be a floating-point array, got dtype {arr.dtype}")
        bad = ~np.isfinite(arr)
        if bad.any():
            idx = tuple(int(i) for i in np.argwhere(bad)[0])
            raise InputError(f"X contains {int(bad.sum())} non-finite value(s), first X{list(idx)} = {arr[idx]}")
    if y is None:
        return X, y
    yshape = getattr(y, "shape", None)
    if yshape is None or len(yshape) != 1:
        raise InputError(f"y must be a vector of shape [n], got shape {None if yshape is None else tuple(yshape)}")
    if len(shape) != 3 or yshape[0] != shape[0]:
        raise InputError(f"y has shape {tuple(yshape)} but X has shape {tuple(shape)}: need X [n, T, d] and y [n]")
    if not _is_tracer(y):
        yarr = np.asarray(y)
        badl = ~np.isin(yarr, (-1.0, 1.0))
        if badl.any():
            i = int(np.argwhere(badl)[0][0])
            raise InputError(f"labels must be -1 or +1, got y[{i}] = {yarr[i].item()!r}")
    return X, y


def check_params(params, X=None):
    """Check that every leaf of a per-head parameter pytree has the same leading
    head axis H >= 1 and finite values, and that it fits the data ``X``."""
    leaves = jax.tree_util.tree_leaves(params)
    if not leaves:
        raise InputError("params has no arrays")
    heads = {int(np.shape(l)[0]) if np.ndim(l) else -1 for l in leaves}
    if len(heads) != 1 or -1 in heads:
        raise InputError(f"every parameter array needs the same leading head axis H, got leading sizes {sorted(heads)}")
    H = heads.pop()
    if H < 1:
        raise InputError(f"number of heads H must be >= 1, got H={H}")
    for leaf in leaves:
        if not _is_tracer(leaf) and not np.all(np.isfinite(np.asarray(leaf))):
            raise InputError(f"params contain non-finite values (leaf of shape {np.shape(leaf)})")
    U = getattr(params, "U", None)
    if X is not None and U is not None and np.ndim(U) == 3:
        check_data(X, tokens=np.shape(U)[1], dim=np.shape(U)[2])
    return H


def parse_list(name: str, value, kind: str = "int", *, minimum=None, allow_zero: bool = False,
               choices=None, increasing: bool = False, min_len: int = 1) -> list:
    """Parse ``"1,4,16"`` (or a sequence) into a checked list; the one list parser.

    ``kind``: ``"int"`` (each an integer >= ``minimum``, default 1), ``"float"`` (finite,
    > 0, or >= 0 with ``allow_zero``) or ``"name"`` (one of ``choices``). ``increasing``
    requires strictly increasing values; ``min_len`` the least count. Every failure is an
    :class:`InputError` naming ``name`` and the value."""
    what = {"int": f"integers >= {1 if minimum is None else minimum}",
            "float": "numbers " + (">= 0" if allow_zero else "> 0"),
            "name": "names from " + ", ".join(map(str, choices or ()))}[kind]
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
        if not value.strip() or any(p == "" for p in parts):
            raise InputError(f"{name} must be a comma-separated list of {what}, got {value!r}")
    else:
        try:
            parts = list(value)
        except TypeError:
            raise InputError(f"{name} must be a list of {what}, got {value!r}") from None
        if not parts:
            raise InputError(f"{name} must be a non-empty list of {what}, got {value!r}")
    out = []
    for p in parts:
        if kind == "int":
            if isinstance(p, str):
                try:
                    p = int(p)
                except ValueError:
                    raise InputError(f"{name} must be a comma-separated list of {what}, got {value!r} "
                                     f"({p!r} is not an integer)") from None
            out.append(positive_int(name, p, minimum=1 if minimum is None else minimum))
        elif kind == "float":
            if isinstance(p, str):
                try:
                    p = float(p)
                except ValueError:
                    raise InputError(f"{name} must be a comma-separated list of {what}, got {value!r} "
                                     f"({p!r} is not a number)") from None
            out.append(positive_float(name, p, allow_zero=allow_zero))
        else:
            if p not in (choices or ()):
                raise InputError(f"{name}: unknown value {p!r}; choose from {', '.join(map(str, choices or ()))}")
            out.append(p)
    if len(out) < min_len:
        raise InputError(f"{name} needs at least {min_len} values, got {value!r}")
    if increasing and any(b <= a for a, b in zip(out, out[1:])):
        raise InputError(f"{name} must be strictly increasing, got {out!r}")
    return out


def heads_list(value) -> list[int]:
    """Parse ``"1,4,16"`` (or a sequence) into a list of H >= 1."""
    return parse_list("--heads", value, "int")
