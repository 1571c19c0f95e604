"""Resumable sweeps: finished units of work are kept on disk until the run ends.

A sweep (e.g. one weak-convexity run: one unit per H) keeps, under
``OUT/.progress/``, a manifest with the hash of its key and one JSON file per
finished unit, each written atomically (temp file + rename). Rerunning the
same command with the same ``--out`` loads the finished units and computes
only the rest; since every unit is a deterministic function of the key (the
config, its seeds, the package version, the dtype, the models' sources and the
data files' contents), the final result equals an uninterrupted run's number for
number. Progress saved for another key is never reused: it is discarded and the
run starts afresh, saying so in one line; ``fresh=True`` (``--fresh``) discards
it explicitly.

Inside a unit, array state (e.g. the parameters of a GD trajectory cut into segments)
is kept with :meth:`ProgressStore.save_arrays` as ``.npz`` files, also written atomically:
``np.savez`` keeps every float bit for bit, so a trajectory resumed from a saved segment
continues from exactly the iterate where the killed run stopped.
"""
from __future__ import annotations

import re
import shutil
import sys
from pathlib import Path

import numpy as np

from mhajax.runtime.records import decode, encode
from mhajax.runtime.io import config_hash, read_json, to_jsonable, write_atomic, write_json_atomic

_SAFE = re.compile(r"^[A-Za-z0-9_.=-]+$")


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def _flat(obj, prefix: str = "") -> dict:
    """``{dotted path: leaf}`` of nested dicts."""
    if not isinstance(obj, dict):
        return {prefix: obj}
    out = {}
    for k, v in obj.items():
        out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
    return out


def differences(old: dict, new: dict, most: int = 3) -> str:
    """The dotted paths where two keys differ, at most ``most`` named (``"data.n, inputs.files.d.npz"``)."""
    a, b = _flat(old), _flat(new)
    paths = sorted(k for k in set(a) | set(b) if a.get(k, object()) != b.get(k, object()))
    return ", ".join(paths[:most]) + (f" and {len(paths) - most} more" if len(paths) > most else "")


class ProgressStore:
    """Finished units of one sweep under ``out_dir/.progress``, kept for one ``key``.

    ``key`` is everything the units depend on (the command, the resolved config, and its
    :meth:`~mhajax.experiments.configs.Config.inputs`: version, dtype, models' and data files'
    hashes); saved progress made for another key is discarded and the run starts afresh, saying
    so in one line through ``say`` (``fresh=True`` discards it silently)."""

    def __init__(self, out_dir, key: dict, fresh: bool = False, say=None):
        self.root = Path(out_dir) / ".progress"
        self.config = to_jsonable(key)
        self.hash = config_hash(self.config)
        manifest = self.root / "manifest.json"
        if fresh and self.root.exists():
            shutil.rmtree(self.root)
        if manifest.exists():
            try:
                old = read_json(manifest)
            except ValueError:
                old = {}
            if old.get("config_hash") != self.hash:
                what = differences(old.get("config", {}), self.config) or "an unreadable manifest"
                shutil.rmtree(self.root)
                (say or _stderr)(f"{out_dir}: saved progress was made with other inputs ({what}); starting afresh")
        self.root.mkdir(parents=True, exist_ok=True)
        write_json_atomic(manifest, dict(config_hash=self.hash, config=self.config))

    def _path(self, unit: str) -> Path:
        if not _SAFE.match(unit):
            raise ValueError(f"unit name {unit!r} must be letters, digits, '_', '.', '=', '-'")
        return self.root / f"{unit}.json"

    def has(self, unit: str) -> bool:
        """Whether ``unit`` finished earlier."""
        return self._path(unit).exists()

    def load(self, unit: str):
        """The saved result of ``unit``."""
        return read_json(self._path(unit))

    def save(self, unit: str, obj) -> None:
        """Keep ``unit``'s result (JSON, written atomically)."""
        write_json_atomic(self._path(unit), obj)

    def units(self) -> list[str]:
        """The finished units, sorted."""
        return sorted(p.stem for p in self.root.glob("*.json") if p.name != "manifest.json")

    # -- array state inside a unit (``.npz``) ------------------------------------------

    def _npz(self, unit: str) -> Path:
        return self._path(unit).with_suffix(".npz")

    def has_arrays(self, unit: str) -> bool:
        """Whether ``unit`` has saved array state."""
        return self._npz(unit).exists()

    def save_arrays(self, unit: str, arrays: dict) -> None:
        """Write ``{name: array}`` to ``unit.npz`` atomically (temp file, fsync, rename)."""
        write_atomic(self._npz(unit),
                     lambda fh: np.savez(fh, **{k: np.asarray(v) for k, v in arrays.items()}), binary=True)

    def load_arrays(self, unit: str) -> dict:
        """``{name: numpy array}`` as saved by :meth:`save_arrays`."""
        with np.load(self._npz(unit), allow_pickle=False) as z:
            return {k: z[k] for k in z.files}

    def array_units(self, prefix: str = "") -> list[str]:
        """The units with saved array state whose names start with ``prefix``."""
        return sorted(p.stem for p in self.root.glob(f"{prefix}*.npz"))

    def discard_arrays(self, prefix: str) -> None:
        """Remove the ``.npz`` state of every unit whose name starts with ``prefix`` (once
        the unit's final JSON is saved, its intermediate state is no longer needed)."""
        self._path(prefix)  # the same name check
        for p in self.root.glob(f"{prefix}*.npz"):
            p.unlink(missing_ok=True)


def load_or_run(store, unit: str, compute, resumed: list | None = None, tag=None, memo: dict | None = None,
                kind=None):
    """The unit's result: ``memo[unit]`` when this sweep already has it (a unit listed twice:
    the same numbers, computed once); else loaded from ``store`` when it finished before (then
    ``tag``, default ``unit``, is appended to ``resumed``); else ``compute()`` — saved to ``store``
    before it is returned. ``store=None``: just ``compute()``.

    ``kind``: the result's type (a NamedTuple class, :mod:`mhajax.runtime.records`); the result
    is then always the record as the file gives it back (:func:`~mhajax.runtime.records.roundtrip`,
    computed or loaded alike). Without ``kind``, ``compute`` must return what JSON keeps exactly
    (:func:`mhajax.runtime.io.to_jsonable` output). Either way a resumed run and an uninterrupted
    one end with the same numbers."""
    if memo is not None and unit in memo:
        return memo[unit]
    if store is not None and store.has(unit):
        if resumed is not None:
            resumed.append(unit if tag is None else tag)
        res = store.load(unit)
        if kind is not None:
            res = decode(kind, res, f"saved progress {unit!r} (--fresh discards it)")
    else:
        res = compute()
        if kind is not None:   # encoded once: saved as it is, and decoded into what a rerun loads
            data = encode(res)
            res = decode(kind, data, unit)
        if store is not None:
            store.save(unit, data if kind is not None else res)
    if memo is not None:
        memo[unit] = res
    return res
