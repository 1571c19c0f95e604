"""Typed records at the file's edge: a NamedTuple tree to JSON and back.

:func:`encode` turns a record (NamedTuples, dicts, lists, numpy/jax values) into JSON
types, a NamedTuple into an object with its fields in order, NaN and ±inf into ``null``
(:func:`mhajax.runtime.io.to_jsonable`). :func:`decode` is its inverse for a type
annotated with builtin generics: ``decode(T, json.loads(json.dumps(encode(x)))) == x``
for every record ``x`` of type ``T`` whose floats are finite. A field missing without a
default, or a value of the wrong kind, is an :class:`~mhajax.errors.InputError` naming its
path (``summary.by_heads.4.loss``): a stale or hand-edited file is refused, never read as ``None``.
"""
from __future__ import annotations

import types
import typing

from mhajax.errors import InputError
from mhajax.runtime.io import to_jsonable

encode = to_jsonable

_SCALARS = {bool: (bool,), int: (int,), float: (int, float), str: (str,)}


def _bad(where: str, tp, obj) -> InputError:
    name = getattr(tp, "__name__", str(tp))
    return InputError(f"{where}: expected {name}, got {type(obj).__name__} {str(obj)[:60]!r}")


def _key(tp, k, where: str):
    if tp is int:
        try:
            return int(k)
        except (TypeError, ValueError):
            raise _bad(where, int, k) from None
    return k


def is_record(tp) -> bool:
    """Whether ``tp`` is a NamedTuple class."""
    return isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields")


def decode(tp, obj, where: str = "record", *, exact: bool = False):
    """The value of type ``tp`` that :func:`encode` turned into ``obj`` (parsed JSON).

    ``tp``: a NamedTuple class (fields decoded by their annotations, a missing field takes
    its default), ``list[T]``, ``tuple[T, ...]``, ``tuple[A, B]``, ``dict[K, V]`` (JSON's
    string keys turned back into ``int`` for ``K = int``), ``T | None``, ``bool``, ``int``,
    ``float`` (``null`` where a NaN was), ``str``; anything else (``dict``, ``Any``) as it is.
    Keys a record does not name are ignored, except among the options of a union (``A | B``),
    which are tried in order and must name every key (``exact``): an object is never read as a
    record that would drop part of it."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if obj is None and type(None) in args:
            return None
        options = [a for a in args if a is not type(None)]
        for i, a in enumerate(options):
            try:
                return decode(a, obj, where, exact=True)
            except InputError:
                if i == len(options) - 1:
                    raise
    if is_record(tp):
        if not isinstance(obj, dict):
            raise _bad(where, tp, obj)
        extra = set(obj) - set(tp._fields)
        if exact and extra:
            raise InputError(f"{where}: {tp.__name__} has no field {sorted(extra)[0]!r}")
        hints = typing.get_type_hints(tp)
        kw = {}
        for f in tp._fields:
            if f in obj:
                kw[f] = decode(hints.get(f, typing.Any), obj[f], f"{where}.{f}")
            elif f not in tp._field_defaults:
                raise InputError(f"{where}: field {f!r} missing")
        return tp(**kw)
    if origin in (list, tuple):
        if not isinstance(obj, list):
            raise _bad(where, origin, obj)
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(obj):
                raise InputError(f"{where}: expected {len(args)} values, got {len(obj)}")
            return tuple(decode(a, v, f"{where}.{i}") for i, (a, v) in enumerate(zip(args, obj)))
        item = args[0] if args else typing.Any
        out = [decode(item, v, f"{where}.{i}") for i, v in enumerate(obj)]
        return tuple(out) if origin is tuple else out
    if origin is dict:
        if not isinstance(obj, dict):
            raise _bad(where, dict, obj)
        K, V = args or (typing.Any, typing.Any)
        return {_key(K, k, f"{where}.{k}"): decode(V, v, f"{where}.{k}") for k, v in obj.items()}
    if tp in _SCALARS:
        if obj is None and tp is float:
            return None
        if not isinstance(obj, _SCALARS[tp]) or (tp is not bool and isinstance(obj, bool)):
            raise _bad(where, tp, obj)
        return obj
    return obj


def fields(*groups) -> list:
    """The fields of a functional NamedTuple from ``(names, type)`` groups, ``names`` space-separated,
    or NamedTuple classes, each giving its own fields and types in order:
    ``NamedTuple("Fit", fields(("slope intercept", float | None), ("seeds", int)))``."""
    out = []
    for g in groups:
        if is_record(g):
            hints = typing.get_type_hints(g)
            out += [(f, hints[f]) for f in g._fields]
        else:
            out += [(f, g[1]) for f in g[0].split()]
    return out


def roundtrip(tp, record):
    """``decode(tp, encode(record))``: the record exactly as a file would give it back (NaN as
    ``None``, tuples as lists where ``tp`` says list), so that a computed unit and a resumed
    one carry the same values."""
    return decode(tp, encode(record), tp.__name__ if isinstance(tp, type) else "record")


__all__ = ["encode", "decode", "fields", "is_record", "roundtrip"]
