"""mhajax.runtime.program_cache: a traced program kept between processes gives the same numbers
to the bit as the plain jit, is keyed on everything its trace reads (so a change of shape,
static argument, compiler option, context or mhajax source is a miss, never a stale program),
and falls back to the plain path whenever it cannot be used, never changing an error."""
import dataclasses
import enum
import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mhajax.errors import InputError
from mhajax.experiments import base as xbase
from mhajax.experiments.configs import DataConfig
from mhajax.losses import LOGISTIC, empirical_risk
from mhajax.models.base import MHAParams
from mhajax.models.softmax import SOFTMAX
from mhajax.runtime import jaxsetup
from mhajax.runtime import program_cache as pc
from mhajax.linalg import CPU_EIGH_ENV
from mhajax.runtime.jaxsetup import FastCompileJit, cached_jit, fast_compile_jit, trace_context
from mhajax.train import opt_init, train_segment

pytestmark = pytest.mark.skipif(not pc.serializable(), reason="jax.export serialization needs flatbuffers")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A fresh program directory for this test, as :func:`setup_jax` would set it, cache on."""
    monkeypatch.setattr(jaxsetup, "_PROGRAM_DIR", str(tmp_path / "programs"))
    monkeypatch.setenv(pc.ENV, "1")
    return tmp_path / "programs"


def _files(d):
    return sorted(p.name for p in d.glob("*" + pc.SUFFIX)) if d.exists() else []


def _same_bits(a, b):
    la, lb = jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)
    assert jax.tree_util.tree_structure(a) == jax.tree_util.tree_structure(b)
    for x, y in zip(la, lb):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        assert x.tobytes() == y.tobytes()


def _problem(H=2, n=8, T=3, d=4, seed=0):
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(seed), 3)
    th = SOFTMAX.init(k1, H, T, d)
    X = jax.random.normal(k2, (n, T, d))
    y = jnp.where(jax.random.bernoulli(k3, 0.5, (n,)), 1.0, -1.0)
    return th, X, y


def _risk_program():
    return FastCompileJit(empirical_risk, static_argnames=("model", "loss"))


# -- stable_repr --------------------------------------------------------------------------

class _Colour(enum.Enum):
    RED = 1


def test_stable_repr_names_values_not_addresses():
    cfg = DataConfig()
    assert pc.stable_repr(cfg) == pc.stable_repr(DataConfig())       # a fresh equal object
    assert "0x" not in pc.stable_repr(SOFTMAX)                         # functions by name
    assert "mhajax.models.softmax" in pc.stable_repr(SOFTMAX)
    assert pc.stable_repr({"a": 1, "b": 2}) == pc.stable_repr({"b": 2, "a": 1})
    # values that compare equal in Python but trace differently are told apart
    texts = {pc.stable_repr(v) for v in (1, 1.0, True, "1", (1,), [1], np.float32(1), None)}
    assert len(texts) == 8
    assert pc.stable_repr(_Colour.RED).endswith("_Colour.RED")
    assert pc.stable_repr(functools.partial(empirical_risk, model=SOFTMAX)).startswith("partial(")
    assert pc.stable_repr(dataclasses.replace(cfg, n=cfg.n + 1)) != pc.stable_repr(cfg)


@pytest.mark.parametrize("value", [lambda x: x, np.sin, object(), jnp.ones(2),
                                   functools.partial(lambda x: x)])
def test_stable_repr_refuses_what_it_cannot_name(value):
    with pytest.raises(pc.Unstable):
        pc.stable_repr(value)


def test_stable_repr_refuses_functions_from_outside_mhajax():
    def local(x):
        return x
    with pytest.raises(pc.Unstable):
        pc.stable_repr(local)
    with pytest.raises(pc.Unstable):
        pc.stable_repr(SOFTMAX._replace(head_fn=local))      # one field is enough


# -- split_static and the key -------------------------------------------------------------

def test_split_static_by_position_and_keyword():
    def f(a, cfg, n, *, model=None, x=1):
        return a
    st, dyn = pc.split_static(f, ("cfg", "n", "model"), (1, "c", 3), {"model": "m", "x": 5})
    assert st == {"cfg": "c", "n": 3, "model": "m"}
    assert dyn == ((1,), {"x": 5})


def test_program_key_changes_with_everything_the_trace_reads(monkeypatch):
    th, X, y = _problem()
    dyn = ((th, X, y), {})
    base = pc.program_key(empirical_risk, {"model": SOFTMAX}, dyn)
    assert base == pc.program_key(empirical_risk, {"model": SOFTMAX}, dyn)      # deterministic
    others = [
        pc.program_key(empirical_risk, {"model": SOFTMAX}, ((th, X[:4], y[:4]), {})),        # shape
        pc.program_key(empirical_risk, {"model": SOFTMAX}, ((th, X.astype(jnp.float32), y), {})),  # dtype
        pc.program_key(empirical_risk, {"model": SOFTMAX, "loss": LOGISTIC}, dyn),            # static
        pc.program_key(empirical_risk, {"model": SOFTMAX}, ((th, X), {"y": y})),              # tree
        pc.program_key(empirical_risk, {"model": SOFTMAX}, ((th, X, 1.0), {})),               # weak scalar
        pc.program_key(empirical_risk, {"model": SOFTMAX}, dyn, compiler_options={"o": 0}),   # options
        pc.program_key(empirical_risk, {"model": SOFTMAX}, dyn, context=(("guards", True),)), # context
        pc.program_key(train_segment.__wrapped__, {"model": SOFTMAX}, dyn),                   # function
    ]
    assert len(set(others) | {base}) == len(others) + 1
    monkeypatch.setattr(pc, "source_fingerprint", lambda: "an edited mhajax")
    assert pc.program_key(empirical_risk, {"model": SOFTMAX}, dyn) != base                   # source


def test_source_fingerprint_follows_every_byte(tmp_path):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b.py").write_text("y = 2\n")
    fp = pc.source_fingerprint.__wrapped__
    first = fp(str(tmp_path))
    assert fp(str(tmp_path)) == first
    (tmp_path / "sub" / "b.py").write_text("y = 3\n")
    second = fp(str(tmp_path))
    assert second != first
    (tmp_path / "c.py").write_text("")
    assert fp(str(tmp_path)) not in (first, second)
    (tmp_path / "notes.txt").write_text("not source")
    assert fp(str(tmp_path)) == fp(str(tmp_path))


def test_the_installed_package_is_fingerprinted():
    fp = pc.source_fingerprint()
    assert len(fp) == 64 and fp == pc.source_fingerprint()


# -- the cache at work --------------------------------------------------------------------

def test_a_second_process_reads_the_program_and_gets_the_same_bits(cache):
    th, X, y = _problem()
    ref = _risk_program()._jitted()          # the plain jit, same compiler options (LLVM -O0 on CPU)
    plain = ref(th, X, y, model=SOFTMAX)
    first = _risk_program()
    a = first(th, X, y, model=SOFTMAX)
    assert (first.programs.misses, first.programs.hits) == (1, 0)
    assert len(_files(cache)) == 1
    second = _risk_program()                 # what a new process builds
    b = second(th, X, y, model=SOFTMAX)
    assert (second.programs.misses, second.programs.hits) == (0, 1)
    _same_bits(a, plain)
    _same_bits(b, plain)
    # the same program for other data of the same shapes; another shape is another file
    th2, X2, y2 = _problem(seed=1)
    _same_bits(second(th2, X2, y2, model=SOFTMAX), ref(th2, X2, y2, model=SOFTMAX))
    second(th, X[:5], y[:5], model=SOFTMAX)
    assert len(_files(cache)) == 2


def test_lower_compile_takes_the_dynamic_arguments(cache):
    th, X, y = _problem()
    prog = _risk_program()
    c1 = prog.lower(th, X, y, model=SOFTMAX).compile()
    c2 = _risk_program().lower(th, X, y, model=SOFTMAX).compile()      # read from the file
    ref = _risk_program()._jitted().lower(th, X, y, model=SOFTMAX).compile()
    _same_bits(c1(th, X, y), ref(th, X, y))
    _same_bits(c2(th, X, y), ref(th, X, y))


_BODY = []


def _counted_risk(th, X, y, model):
    _BODY.append(1)                  # runs once per trace of this function, never per call
    return empirical_risk(th, X, y, model)


_counted_risk.__module__ = "mhajax.losses"   # cached like the package's own functions


def _traces(thunk):
    """``(thunk(), how many times ``_counted_risk`` was traced meanwhile)``."""
    start = len(_BODY)
    out = thunk()
    return out, len(_BODY) - start


@pytest.mark.parametrize("on", [True, False])
def test_eval_shape_reads_the_cached_program_and_traces_nothing(cache, monkeypatch, on):
    """``eval_shape`` gives the plain jit's output shapes; cold it traces the function once and the
    call after it traces nothing more; warm (a new process's program, the file there) it traces
    nothing at all. Off, it is the plain jit's eval_shape, and the call reuses that trace."""
    th, X, y = _problem(n=8 if on else 9)   # JAX keeps traces per function and shapes: one each
    monkeypatch.setenv(pc.ENV, "1" if on else "0")
    program = lambda: FastCompileJit(_counted_risk, static_argnames=("model",))
    want = jax.eval_shape(lambda a, b, c: empirical_risk(a, b, c, SOFTMAX), th, X, y)
    first = program()
    got, n = _traces(lambda: first.eval_shape(th, X, y, model=SOFTMAX))
    assert (got.shape, got.dtype) == (want.shape, want.dtype) and n == 1
    value, n = _traces(lambda: first(th, X, y, model=SOFTMAX))
    assert n == 0
    _same_bits(value, _risk_program()._jitted()(th, X, y, model=SOFTMAX))
    jax.clear_caches()                       # what a new process starts with
    second = program()
    got, n = _traces(lambda: second.eval_shape(th, X, y, model=SOFTMAX))
    assert (got.shape, got.dtype) == (want.shape, want.dtype)
    assert (n, second.programs.hits, len(_files(cache))) == ((0, 1, 1) if on else (1, 0, 0))


def test_the_process_keeps_its_program_without_rereading(cache):
    th, X, y = _problem()
    prog = _risk_program()
    a = prog(th, X, y, model=SOFTMAX)
    for f in cache.glob("*" + pc.SUFFIX):
        f.unlink()
    _same_bits(prog(th, X, y, model=SOFTMAX), a)
    assert (prog.programs.misses, prog.programs.hits) == (1, 0) and not _files(cache)


@pytest.mark.parametrize("damage", ["truncate", "empty", "garbage", "unknown type"])
def test_a_damaged_file_is_a_miss_and_is_replaced(cache, damage):
    th, X, y = _problem()
    a = _risk_program()(th, X, y, model=SOFTMAX)
    (path,) = cache.glob("*" + pc.SUFFIX)
    blob = path.read_bytes()
    path.write_bytes({"truncate": blob[: len(blob) // 2], "empty": b"", "garbage": os.urandom(300),
                      "unknown type": b"nowhere.module:Ghost\n--\n" + blob.split(b"\n--\n", 1)[1]}[damage])
    prog = _risk_program()
    _same_bits(prog(th, X, y, model=SOFTMAX), a)
    assert (prog.programs.misses, prog.programs.hits) == (1, 0)
    assert pc.load(str(path)) is not None                     # rewritten whole


def test_namedtuple_trees_round_trip(cache):
    th, X, y = _problem()
    assert isinstance(th, MHAParams)
    st = opt_init(th)
    kw = dict(steps=3, every=1, model=SOFTMAX)
    S = lambda a: jax.tree_util.tree_map(lambda v: v[None], a)   # noqa: E731 — one run
    args = (S(th), S(st), X[None], y[None], 0.1)
    plain = jax.jit(train_segment.__wrapped__, static_argnames=("steps", "every", "model", "loss"))(*args, **kw)
    fresh = FastCompileJit(train_segment.__wrapped__, fast=False,
                           static_argnames=("steps", "every", "model", "loss"))
    out1 = fresh(*args, **kw)
    again = FastCompileJit(train_segment.__wrapped__, fast=False,
                           static_argnames=("steps", "every", "model", "loss"))
    out2 = again(*args, **kw)
    assert again.programs.hits == 1
    _same_bits(out1, plain)
    _same_bits(out2, plain)
    assert type(out2[0].params) is MHAParams


def test_the_experiment_programs_give_the_same_bits_cached_and_plain(cache):
    """_draw, _init and analyse_batch (the κ chain) through the cache, written then read, against
    the plain jit of the same function with the same compiler options."""
    cfg = DataConfig(n=16)
    keys = jax.random.split(jax.random.PRNGKey(3), 2)
    X, y = xbase._draw(keys, cfg, 16)
    th = xbase._init(keys, cfg, 2, SOFTMAX)
    static = dict(method="auto", links="core", lanczos_steps=16, max_cycles=2, batch_size=None,
                  model=SOFTMAX, loss=LOGISTIC)
    args = (th, jnp.arange(2), keys, X, y)
    for prog, a, kw in [(xbase._draw, (keys, cfg, 16), {}), (xbase._init, (keys, cfg, 2, SOFTMAX), {}),
                        (xbase.analyse_batch, args, static)]:
        plain = prog._jitted()(*a, **kw)
        prog.programs.clear()                      # forget this process's copy: export, write
        _same_bits(prog(*a, **kw), plain)
        prog.programs.clear()                      # and again: read the file
        hits = prog.programs.hits
        _same_bits(prog(*a, **kw), plain)
        assert prog.programs.hits == hits + 1
    assert len(_files(cache)) == 3


# -- where the cache steps aside ----------------------------------------------------------

def test_off_means_no_file_and_the_plain_path(tmp_path, monkeypatch):
    th, X, y = _problem()
    monkeypatch.setenv("MHAJAX_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(jaxsetup, "_PROGRAM_DIR", None)
    prog = _risk_program()
    prog(th, X, y, model=SOFTMAX)                     # before setup_jax: nothing written
    jaxsetup.setup_jax()
    try:
        assert jaxsetup.program_cache_dir() == str(tmp_path / "programs")
        monkeypatch.setenv(pc.ENV, "0")
        prog(th, X, y, model=SOFTMAX)                 # switched off
        monkeypatch.setenv(pc.ENV, "1")
        monkeypatch.setenv("MHAJAX_CACHE_DIR", "off")
        jaxsetup.setup_jax()                          # the compilation cache off: this one too
        assert jaxsetup.program_cache_dir() is None
        prog(th, X, y, model=SOFTMAX)
    finally:
        monkeypatch.setenv("MHAJAX_CACHE_DIR", "off")
        jaxsetup.setup_jax()                          # leave the test process as it was
    assert not any(tmp_path.rglob("*" + pc.SUFFIX))
    assert (prog.programs.hits, prog.programs.misses) == (0, 0)


def test_functions_and_static_arguments_from_outside_mhajax_are_not_cached(cache):
    th, X, y = _problem()

    def user_risk(th, X, y, model):
        return empirical_risk(th, X, y, model)
    p1 = fast_compile_jit(user_risk, static_argnames=("model",))
    np.testing.assert_allclose(p1(th, X, y, model=SOFTMAX), empirical_risk(th, X, y, SOFTMAX), rtol=1e-13)
    p2 = _risk_program()
    user_model = SOFTMAX._replace(head_fn=lambda *a, **k: SOFTMAX.head_fn(*a, **k))
    np.testing.assert_allclose(p2(th, X, y, model=user_model), empirical_risk(th, X, y, SOFTMAX), rtol=1e-13)
    assert not _files(cache)
    assert (p1.programs.misses, p2.programs.misses, p1.programs.hits, p2.programs.hits) == (0, 0, 0, 0)


def test_inside_another_trace_the_outer_program_is_what_counts(cache):
    th, X, y = _problem()
    prog = _risk_program()
    out = jax.jit(lambda a, b, c: prog(a, b, c, model=SOFTMAX))(th, X, y)
    np.testing.assert_allclose(out, empirical_risk(th, X, y, SOFTMAX), rtol=1e-13)
    assert not _files(cache) and prog.programs.misses == 0


def test_a_program_that_cannot_be_exported_is_tried_once(cache, monkeypatch):
    """An export failure (a host callback, say) sends the call to the plain jit, and the process
    does not trace the program for export again at the next call with the same key."""
    th, X, y = _problem()
    tries = []

    def fail(fn):
        tries.append(fn)
        raise RuntimeError("cannot export a host callback")
    monkeypatch.setattr(pc.jax_export, "export", fail)
    prog = _risk_program()
    first = prog(th, X, y, model=SOFTMAX)
    _same_bits(prog(th, X, y, model=SOFTMAX), first)
    _same_bits(first, prog._jitted()(th, X, y, model=SOFTMAX))
    assert len(tries) == 1 and prog.programs.fallbacks == 1 and not _files(cache)


def _refuses_wide(x):
    if x.shape[0] > 4:
        raise InputError("too wide")
    return 2 * x


def test_a_trace_time_input_error_is_raised_not_swallowed(cache):
    """A function that refuses its shapes when traced: through the cache the same InputError
    reaches the caller and nothing is written."""
    with pytest.raises(InputError, match="too wide"):
        cached_jit(_refuses_wide).lower(jax.ShapeDtypeStruct((5,), jnp.float64))
    assert not _files(cache)


def test_the_cpu_eigensolver_route_is_part_of_the_key(cache, monkeypatch):
    """A program traced with ``MHAJAX_CPU_EIGH=callback`` is not reused by a call without it."""
    monkeypatch.setenv(CPU_EIGH_ENV, "callback")
    routed = trace_context()
    monkeypatch.delenv(CPU_EIGH_ENV)
    assert trace_context() != routed
    th, X, y = _problem()
    _risk_program()(th, X, y, model=SOFTMAX)
    monkeypatch.setenv(CPU_EIGH_ENV, "callback")
    _risk_program()(th, X, y, model=SOFTMAX)
    assert len(_files(cache)) == 2


# -- whole processes ----------------------------------------------------------------------

def _verdict_fields(path):
    doc = json.loads(path.read_text())
    for volatile in ("meta", "timings", "wall_time_s"):
        doc.pop(volatile, None)
    return doc


@pytest.mark.slow
def test_a_warm_process_reads_every_program_and_writes_the_same_summary(tmp_path):
    """Three runs of one check: cold (programs written), warm (read, none written) and with both
    caches off give the same summary to the last digit."""
    argv = [sys.executable, "-m", "verify", "weak-convexity", "--heads", "2", "--seeds", "1",
            "--steps", "20", "--every", "10", "--links", "core", "--quiet", "--out"]
    root = Path(__file__).resolve().parents[2]
    on = dict(os.environ, MHAJAX_CACHE_DIR=str(tmp_path / "c"), **{pc.ENV: "1"})
    off = dict(os.environ, MHAJAX_CACHE_DIR="off", **{pc.ENV: "0"})
    progs = tmp_path / "c" / "programs"
    runs = [("cold", on), ("warm", on), ("off", off)]
    written = []
    for name, env in runs:
        p = subprocess.run(argv + [str(tmp_path / name)], env=env, cwd=root, capture_output=True,
                           text=True, timeout=600)
        assert p.returncode == 0, p.stderr
        written.append({f: os.stat(progs / f).st_mtime_ns for f in _files(progs)})
    assert len(written[0]) >= 4                     # draw, init, GD segment, analysis
    assert written[1] == written[0]                 # the warm run wrote nothing
    cold, warm, plain = (_verdict_fields(tmp_path / n / "summary.json") for n, _ in runs)
    assert cold == warm == plain
