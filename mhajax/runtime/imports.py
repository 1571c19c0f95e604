"""Objects a user names by import path (``package.module:NAME`` or ``path/to/file.py:NAME``),
and the identity of their source.

:func:`import_object` loads what ``--model`` and ``--loss`` name; :func:`source_digest`
hashes the source files that define an object's functions, so that a saved result made
with one version of a user's model is never taken for a result of another.
"""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import os
import sys
from pathlib import Path

from mhajax.errors import InputError


def is_reference(name) -> bool:
    """Whether ``name`` is an import reference ``MODULE:NAME`` (a registered name has no ``:``)."""
    return isinstance(name, str) and ":" in name


def _import_module(module: str, what: str, ref: str):
    """The module ``module``: a ``.py`` file path, or a dotted name found on ``sys.path`` or, as
    with ``python -m``, in the current directory."""
    if module.endswith(".py") or os.sep in module or "/" in module:
        path = Path(module).expanduser()
        if not path.is_file():
            raise InputError(f"{what} {ref!r}: file {str(path)!r} does not exist")
        name = "_mhajax_user_" + hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        try:
            spec.loader.exec_module(mod)
        except Exception as e:  # noqa: BLE001 — the user's module failed: one line naming it
            del sys.modules[name]
            raise InputError(f"{what} {ref!r}: importing {str(path)!r} failed: {type(e).__name__}: {e}") from None
        return mod
    cwd = os.getcwd()
    added = cwd not in sys.path and "" not in sys.path
    if added:   # as `python -m` does: a package in the current directory is found
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        raise InputError(f"{what} {ref!r}: module {module!r} is not importable ({e})") from None
    except Exception as e:  # noqa: BLE001
        raise InputError(f"{what} {ref!r}: importing {module!r} failed: {type(e).__name__}: {e}") from None
    finally:
        if added:
            sys.path.remove(cwd)


def import_object(ref: str, what: str = "object"):
    """The object named by ``ref = "MODULE:NAME"`` (``NAME`` may be dotted: an attribute of an
    attribute). ``MODULE`` is a dotted module name or a path to a ``.py`` file. Every failure is an
    :class:`InputError` of one line naming ``what`` and ``ref``."""
    module, _, attr = str(ref).rpartition(":")
    if not module or not attr:
        raise InputError(f"{what} {ref!r} must be MODULE:NAME (e.g. mypkg.heads:TEMP or heads.py:TEMP)")
    obj = _import_module(module, what, ref)
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise InputError(f"{what} {ref!r}: {module!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    return obj


def _source_files(obj) -> set:
    """The source files of ``obj``'s module and of every callable among its fields."""
    files = set()
    items = [obj] + [v for v in (obj if isinstance(obj, tuple) else ()) if callable(v)]
    for item in items:
        target = getattr(item, "__wrapped__", item)
        for get in (inspect.getsourcefile, lambda o: inspect.getsourcefile(inspect.getmodule(o))):
            try:
                path = get(target)
            except (TypeError, OSError):
                path = None
            if path:
                files.add(str(Path(path).resolve()))
    return files


def source_digest(obj) -> dict:
    """``{file: sha256 of its bytes}`` of the files that define ``obj`` and its callable fields
    (a model's ``head_fn``, closed forms and ``init``; a loss's three functions)."""
    out = {}
    for f in sorted(_source_files(obj)):
        try:
            out[f] = hashlib.sha256(Path(f).read_bytes()).hexdigest()
        except OSError:
            out[f] = None
    return out


def file_digest(path) -> str:
    """SHA-256 of a file's bytes (:class:`InputError` when it cannot be read)."""
    try:
        h = hashlib.sha256()
        with open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError as e:
        raise InputError(f"cannot read {str(path)!r}: {e.strerror or e}") from None


__all__ = ["is_reference", "import_object", "source_digest", "file_digest"]
