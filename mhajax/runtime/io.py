"""Result files: provenance metadata and atomic JSON writes.

Every result file records the config, seeds, package versions, dtype, backend
and devices that produced it (:func:`run_metadata`). Files are written to a
temporary file in the same directory and renamed into place, so a crash never
leaves a half-written file and an older result is replaced only by a complete
new one.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import os
import platform
import sys
import tempfile
from importlib import metadata as _md
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from mhajax._version import __version__
from mhajax.errors import InputError

PACKAGES = ("mhajax", "jax", "jaxlib", "numpy", "scipy", "optax", "matplotlib")


def versions() -> dict:
    """Installed versions of the packages that determine the numbers."""
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = _md.version(name)
        except _md.PackageNotFoundError:
            out[name] = None
    if out.get("mhajax") is None:  # running from a checkout that is not pip-installed
        out["mhajax"] = f"{__version__} (source tree)"
    return out


def run_metadata(config: dict, seeds, dtype=None) -> dict:
    """Provenance block: config (and its hash), seeds, versions, dtype, backend, devices, argv, time."""
    dtype = str(jnp.dtype(dtype or jnp.result_type(float)))
    return dict(
        config=config,
        config_hash=config_hash(config),
        seeds=list(int(s) for s in seeds),
        versions=versions(),
        dtype=dtype,
        x64=bool(jax.config.jax_enable_x64),
        backend=jax.default_backend(),
        devices=[str(d) for d in jax.devices()],
        argv=list(sys.argv),
        platform=platform.platform(),
        created=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    )


def config_hash(config: dict) -> str:
    """A stable short hash of a JSON-able config."""
    blob = json.dumps(config, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def to_jsonable(obj):
    """Recursively convert numpy/jax scalars and arrays to JSON types, a NamedTuple to an
    object with its fields in order; NaN and ±inf become ``None`` (JSON has no such numbers)."""
    if isinstance(obj, tuple) and hasattr(obj, "_asdict"):
        return {k: to_jsonable(v) for k, v in obj._asdict().items()}
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        f = float(obj)
        return f if math.isfinite(f) else None
    if hasattr(obj, "shape") and hasattr(obj, "dtype"):
        return to_jsonable(np.asarray(obj).tolist())
    return obj


def prepare_out_dir(path) -> Path:
    """Check that ``path`` can hold results (a directory, existing or not);
    raise :class:`InputError` if it is a file. Creates it."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(f"--out {str(path)!r} exists and is not a directory")
    for parent in p.parents:
        if parent.exists() and not parent.is_dir():
            raise InputError(f"--out {str(path)!r}: {str(parent)!r} is a file, not a directory")
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"--out {str(path)!r} cannot be created: {e.strerror}") from None
    return p


def write_atomic(path, write, binary: bool = False) -> Path:
    """Create ``path`` all at once: ``write(fh)`` fills a temp file in the same folder,
    which is flushed, fsynced and renamed over ``path`` (``os.replace``). A crash leaves
    the old file or the new one, never half of one; the temp file is removed on error."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a result file is ordinary (0644 under umask 022)
    try:
        with os.fdopen(fd, "wb" if binary else "w") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def write_json_atomic(path, obj) -> Path:
    """Write ``obj`` as JSON to ``path`` via a temp file + ``os.replace`` (:func:`write_atomic`)."""
    text = json.dumps(to_jsonable(obj), indent=2, allow_nan=False)
    return write_atomic(path, lambda fh: fh.write(text + "\n"))


def read_json(path):
    """The parsed JSON file at ``path``."""
    with open(path) as fh:
        return json.load(fh)
