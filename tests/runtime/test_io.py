"""mhajax.io: atomic JSON result files and provenance metadata."""
import json
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mhajax.runtime import io
from mhajax.errors import InputError


def _listing(d):
    return sorted(os.listdir(d))


def test_roundtrip_and_json_types(tmp_path):
    obj = {"a": 1, "b": [1.5, np.float64(2.5), np.float32(0.5), np.int64(3)], "c": (True, np.bool_(False)),
           "d": {"nested": jnp.asarray([1.0, 2.0]), 3: "int key"}, "e": np.arange(3), "f": None,
           "g": jnp.asarray(4.0)}
    p = io.write_json_atomic(tmp_path / "r.json", obj)
    assert p == tmp_path / "r.json"
    back = io.read_json(p)
    assert back == {"a": 1, "b": [1.5, 2.5, 0.5, 3], "c": [True, False],
                    "d": {"nested": [1.0, 2.0], "3": "int key"}, "e": [0, 1, 2], "f": None, "g": 4.0}
    assert _listing(tmp_path) == ["r.json"]                 # no temp file left behind


def test_nan_and_inf_become_null(tmp_path):
    obj = {"nan": float("nan"), "inf": float("inf"), "ninf": -np.inf, "arr": np.array([1.0, np.nan, np.inf]),
           "jax": jnp.asarray([jnp.nan, 1.0]), "np32": np.float32("nan"), "ok": 1e-300}
    p = io.write_json_atomic(tmp_path / "r.json", obj)
    text = p.read_text()
    assert "NaN" not in text and "Infinity" not in text
    back = json.loads(text)
    assert back == {"nan": None, "inf": None, "ninf": None, "arr": [1.0, None, None], "jax": [None, 1.0],
                    "np32": None, "ok": 1e-300}


def test_failed_serialization_leaves_old_file_untouched(tmp_path):
    """Serialization that fails inside the writer, after half the file is written (json.dump
    streams: the list goes out before it reaches the object it cannot encode), keeps the
    complete old file and leaves no temporary file. A writer that opened the target itself
    would leave the half-written text behind."""
    target = tmp_path / "summary.json"
    io.write_json_atomic(target, {"old": 1})
    before = target.read_bytes()
    reached = []

    def write(fh):
        reached.append(fh.name)
        json.dump({"first": list(range(5000)), "bad": object()}, fh)

    with pytest.raises(TypeError):
        io.write_atomic(target, write)
    assert reached and reached[0] != str(target)        # the writer ran, on another file
    assert target.read_bytes() == before
    assert _listing(tmp_path) == ["summary.json"]
    # the same through write_json_atomic (json.dumps fails before anything is opened)
    with pytest.raises(TypeError):
        io.write_json_atomic(target, {"bad": object()})
    assert target.read_bytes() == before and _listing(tmp_path) == ["summary.json"]


@pytest.mark.parametrize("where", ["fsync", "replace"])
def test_crash_mid_write_leaves_no_partial_file(tmp_path, monkeypatch, where):
    """A crash while writing (or before the rename) keeps the complete old file and removes
    the temporary one; a new file is never visible half-written."""
    target = tmp_path / "summary.json"
    io.write_json_atomic(target, {"old": list(range(100))})
    before = target.read_bytes()

    def boom(*a, **k):
        raise KeyboardInterrupt("simulated crash")

    monkeypatch.setattr(io.os, where, boom)
    with pytest.raises(KeyboardInterrupt):
        io.write_json_atomic(target, {"new": list(range(10_000))})
    monkeypatch.undo()
    assert target.read_bytes() == before
    assert _listing(tmp_path) == ["summary.json"]
    # and a fresh target is not created at all by a failed write
    with monkeypatch.context() as m:
        m.setattr(io.os, where, boom)
        with pytest.raises(KeyboardInterrupt):
            io.write_json_atomic(tmp_path / "fresh.json", {"x": 1})
    assert _listing(tmp_path) == ["summary.json"]


def test_replacement_is_complete(tmp_path):
    target = tmp_path / "s.json"
    io.write_json_atomic(target, {"v": 1})
    io.write_json_atomic(target, {"v": 2, "big": list(range(1000))})
    assert io.read_json(target)["v"] == 2
    assert _listing(tmp_path) == ["s.json"]


def test_run_metadata():
    cfg = {"heads": [1, 2], "lr": 1.0, "data": {"n": 8}}
    meta = io.run_metadata(cfg, [np.int64(0), 1])
    for k in ("config", "config_hash", "seeds", "versions", "dtype", "backend", "devices", "x64", "argv",
              "created", "platform"):
        assert k in meta, k
    assert meta["config"] == cfg
    assert meta["seeds"] == [0, 1] and all(type(s) is int for s in meta["seeds"])
    assert meta["dtype"] == "float64" and meta["x64"] is True
    assert meta["backend"] == jax.default_backend()
    v = meta["versions"]
    assert v["jax"] == jax.__version__ and v["numpy"] == np.__version__ and v["python"]
    assert "jaxlib" in v and "mhajax" in v and "optax" in v
    json.dumps(meta, allow_nan=False)
    assert io.run_metadata(cfg, [0], dtype=jnp.float32)["dtype"] == "float32"


def test_config_hash_is_stable_and_sensitive():
    a = {"x": 1, "y": [1, 2], "z": {"k": 0.5}}
    b = {"z": {"k": 0.5}, "y": [1, 2], "x": 1}
    assert io.config_hash(a) == io.config_hash(b)
    assert io.config_hash(a) != io.config_hash({**a, "x": 2})
    assert len(io.config_hash(a)) == 16


def test_prepare_out_dir(tmp_path):
    d = io.prepare_out_dir(tmp_path / "a" / "b")
    assert d.is_dir()
    (d / "summary.json").write_text("{}")
    assert io.prepare_out_dir(d) == d and (d / "summary.json").read_text() == "{}"   # kept
    f = tmp_path / "file.txt"
    f.write_text("precious")
    with pytest.raises(InputError, match="file.txt"):
        io.prepare_out_dir(f)
    with pytest.raises(InputError, match="file.txt"):
        io.prepare_out_dir(f / "sub")
    assert f.read_text() == "precious"
