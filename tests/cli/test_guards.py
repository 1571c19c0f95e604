"""The guards in front of every command and public entry point.

* Absurd sizes: three absurd weak-convexity commands, held-out ones on every check and every size
  flag, and the same sizes through the Python API, are refused before anything is
  allocated or written: exit 2 (an ``InputError``), one line naming the flag (argument),
  the estimate and what is available; ``--force`` / ``force=True`` / ``MHAJAX_FORCE=1`` let
  them through. In-process runs replace ``run_and_save`` and every check's ``run`` by a
  tripwire, so a guard that lets an absurd size through fails the test instead of allocating.
* No false refusals: every check's defaults and presets are small; a flag is blamed against
  its config class's own default; no guard runs inside traced code.
* The ``--out`` lock through the CLI: a second process is refused with one line naming the
  holder, and ``--fresh`` cannot wipe a running run's progress.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import partial

import jax
import jax.numpy as jnp
import pytest

import mhajax as mj
import mhajax.cli.verify
from mhajax.cli.flags import option_flags
from mhajax.errors import InputError
from mhajax.experiments import CHECKS
from mhajax.runtime import memory as M
from mhajax.cli.verify import main

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GiB = 2 ** 30
WORKER = os.path.join(REPO, "tests", "runtime", "_lock_worker.py")


class ReachedCompute(AssertionError):
    pass


@pytest.fixture
def no_run(monkeypatch):
    """Every check's ``run`` raises (``run_and_save`` itself, with the lock, is real)."""
    def trip(*a, **kw):
        raise ReachedCompute("the run started")
    for name, entry in CHECKS.items():
        monkeypatch.setitem(CHECKS, name, entry._replace(run=trip))
    yield
    jax.config.update("jax_enable_x64", True)


@pytest.fixture
def tripwire(monkeypatch):
    """Nothing may run: ``run_and_save`` and every check's ``run`` raise."""
    def trip(*a, **kw):
        raise ReachedCompute("the guard let it through: the run started")
    monkeypatch.setattr(mhajax.cli.verify, "run_and_save", trip)
    for name, entry in CHECKS.items():
        monkeypatch.setitem(CHECKS, name, entry._replace(run=trip))
    monkeypatch.delenv(M.FORCE_ENV, raising=False)
    yield
    jax.config.update("jax_enable_x64", True)


def refused(capsys, tmp_path, argv):
    out = tmp_path / "never"
    capsys.readouterr()
    rc = main([*argv, "--out", str(out)])
    cap = capsys.readouterr()
    err = cap.err.strip()
    assert rc == 2, (argv, rc, cap.err)
    assert err.startswith("error:") and "\n" not in err and "Traceback" not in cap.err + cap.out, err
    assert not out.exists()          # nothing written: the guard runs before --out is created
    return err


ABSURD = [
    (["--heads", "2000000"], ["--heads 2000000"]),
    (["--n", "100000000"], ["--n 100000000"]),
    (["--tokens", "100000", "--dim", "100000"], ["--tokens 100000", "--dim 100000"]),
]


@pytest.mark.parametrize("flags,named", ABSURD, ids=["heads", "n", "tokens-dim"])
def test_three_absurd_commands(capsys, tmp_path, tripwire, flags, named):
    err = refused(capsys, tmp_path, ["weak-convexity", *flags, "--steps", "1", "--every", "1"])
    assert err.startswith("error: verify weak-convexity: ")
    for n in named:
        assert n in err
    assert "needs ~" in err and "available (" in err and err.endswith("or pass --force")


def test_force_lets_an_absurd_size_through(capsys, tmp_path, tripwire):
    with pytest.raises(ReachedCompute):
        main(["weak-convexity", "--heads", "2000000", "--steps", "1", "--every", "1", "--force",
              "--out", str(tmp_path / "o")])


@pytest.mark.slow
def test_subprocess_absurd_heads_under_a_ulimit_safety_net(tmp_path):
    """The real entry point under ``ulimit -v 8 GiB`` (were the guard to fail, the
    allocation would fail too): exit 2, one line, no traceback, nothing written."""
    out = tmp_path / "x"
    cmd = (f'ulimit -v 8388608; exec "{sys.executable}" -m verify weak-convexity --heads 2000000 '
           f'--steps 1 --every 1 --out "{out}"')
    env = dict(os.environ, MHAJAX_CACHE_DIR="off", PYTHONPATH=REPO)
    env.pop(M.FORCE_ENV, None)
    p = subprocess.run(["bash", "-c", cmd], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2, p.stderr
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr
    assert "--heads 2000000: needs ~" in p.stderr
    assert not out.exists()


# -- held out: every check, every flag that sizes an allocation ----------------------------------

#: an absurd but valid value per size flag (validation accepts it; only the memory guard can refuse)
ABSURD_VALUE = {"heads": "1,3000000", "n": "300000000", "ns": "32,64,300000000", "tokens": "60000",
                "dim": "60000", "seeds": "300000000", "n_test": "2000000000", "grid": "2000000000",
                "steps": "2000000000", "steps_per_n": "100000000000"}


def size_cases():
    out = []
    for name, entry in CHECKS.items():
        for flag, path, _, default in option_flags(entry):
            key = flag.lstrip("-").replace("-", "_")
            if key not in ABSURD_VALUE:
                continue
            value = ABSURD_VALUE[key]
            if key == "heads" and isinstance(default, int):
                value = "3000000"
            out.append((name, flag, value))
    return out


@pytest.mark.parametrize("name,flag,value", size_cases(), ids=[f"{n}:{f}" for n, f, _ in size_cases()])
def test_every_size_flag_of_every_check_is_guarded(capsys, tmp_path, tripwire, name, flag, value):
    err = refused(capsys, tmp_path, [name, flag, value])
    assert "needs ~" in err and flag in err, err


# -- the estimate of a check: its config's sizes, its defaults as reference ----------------------

def _cfg(name, **changes):
    from mhajax.experiments.configs import updated
    return updated(CHECKS[name].config(), changes).validate()


#: what a preset may estimate: 2 GiB (below any machine that runs it), the width preset 8 GiB
#: (H = 4096, P = 458,752: its stated peak-memory budget, docs/results.md)
PRESET_BUDGET = {"width": 8 * GiB}


@pytest.mark.parametrize("name,preset", [(n, p) for n, e in CHECKS.items() for p in e.presets])
def test_defaults_and_presets_are_never_refused(name, preset, monkeypatch):
    """Every check at every preset estimates under its budget (2 GiB; the width preset 8 GiB)."""
    from mhajax.experiments.configs import updated
    budget = PRESET_BUDGET.get(preset, 2 * GiB)
    monkeypatch.setattr(M, "available", lambda: M.Available(budget, "the budget"))
    entry = CHECKS[name]
    est = mhajax.cli.verify.memory_guard(entry, updated(entry.config(), entry.presets[preset]).validate())
    assert isinstance(est, M.Estimate) and 0 < est.nbytes < budget and est.what == f"verify {name}"


@pytest.mark.parametrize("name", ["weak-convexity", "census"])
def test_the_width_preset_beyond_memory_is_refused_naming_the_size(capsys, tmp_path, tripwire, monkeypatch, name):
    """``--preset width`` on a machine too small for it, and with a larger H on this one: exit 2,
    one line naming --heads, before anything is allocated or written."""
    err = refused(capsys, tmp_path, [name, "--preset", "width", "--heads", "1,4,16,64,256,1024,4096,1000000"])
    assert "--heads 1,4,16,64,256,1024,4096,1000000" in err and "lower --heads" in err, err
    monkeypatch.setattr(M, "available", lambda: M.Available(GiB, "1 GiB, a fake budget"))
    err = refused(capsys, tmp_path, [name, "--preset", "width"])
    assert "--heads 1,4,16,64,256,1024,4096" in err and "1 GiB, a fake budget" in err, err


def test_float32_halves_the_estimate():
    g = mhajax.cli.verify.memory_guard
    for name in CHECKS:
        e = CHECKS[name]
        cfg = e.config().validate()
        assert g(e, cfg, dtype="float32").nbytes * 2 == g(e, cfg).nbytes
        assert g(e, cfg, dtype="float32").itemsize == 4 and g(e, cfg).itemsize == 8


def test_flags_are_blamed_against_their_config_classes_own_defaults(monkeypatch):
    """variants' default n is 32 (its DataConfig(n=32)), not DataConfig's 64: with exactly the
    memory of its defaults, ``--n 64`` is refused and blamed; convergence's default steps is
    2000 (its GDConfig(steps=2000, every=0)): ``--steps 2000`` there is nobody's fault."""
    g, entry, conv = mhajax.cli.verify.memory_guard, CHECKS["variants"], CHECKS["convergence"]
    base, at = g(entry, entry.config().validate()).nbytes, g(conv, _cfg("convergence", n_test=10 ** 6)).nbytes
    monkeypatch.setattr(M, "available", lambda: M.Available(base, "exactly the defaults"))
    with pytest.raises(M.MemoryGuardError) as e:
        g(entry, _cfg("variants", **{"data.n": 64}))
    assert e.value.blamed == ("--n",) and "--n 64: needs ~" in str(e.value)
    monkeypatch.setattr(M, "available", lambda: M.Available(at - 1, "one byte short"))
    with pytest.raises(M.MemoryGuardError) as e:
        g(conv, _cfg("convergence", n_test=10 ** 6, **{"gd.steps": 2000}))
    assert e.value.blamed == ("--n-test",)


def test_either_of_two_flags_is_named_when_each_alone_would_fit(monkeypatch):
    monkeypatch.setattr(M, "available", lambda: M.Available(16 * GiB, "16 GiB"))
    with pytest.raises(M.MemoryGuardError) as e:
        mhajax.cli.verify.memory_guard(CHECKS["weak-convexity"], _cfg("weak-convexity", **{"gd.steps": 10 ** 6,
                                                                                          "gd.every": 1}))
    assert e.value.blamed == ("--steps", "--every")
    assert str(e.value).startswith("verify weak-convexity: --steps 1000000 --every 1: needs ~")
    assert str(e.value).endswith("lower --steps or raise --every, or pass --force")


def test_an_unreadable_value_is_left_to_validation_when_lenient():
    from mhajax.experiments.configs import updated
    entry = CHECKS["weak-convexity"]
    bad = updated(entry.config(), {"heads": "1,x"})
    assert mhajax.cli.verify.memory_guard(entry, bad, lenient=True) is None
    with pytest.raises(ValueError):
        mhajax.cli.verify.memory_guard(entry, bad)
    assert mhajax.cli.verify.memory_guard(entry, bad, force=True) is None


# -- the same sizes through the Python API --------------------------------------------------------

KEY = jax.random.PRNGKey(0)


def _api_refused(fn, *names):
    with pytest.raises(InputError) as e:
        fn()
    msg = str(e.value)
    assert "\n" not in msg and "needs ~" in msg and "force=True" in msg, msg
    for n in names:
        assert n in msg, msg
    return msg


def _shapes(H, n, T=6, d=8):
    params = jax.eval_shape(lambda k: mj.init_params(k, H, T, d, force=True), KEY)
    return params, jax.ShapeDtypeStruct((n, T, d), jnp.float64), jax.ShapeDtypeStruct((n,), jnp.float64)


def test_api_init_params_and_lambda_min_refuse_absurd_sizes():
    msg = _api_refused(lambda: mj.init_params(KEY, 2_000_000_000, 6, 8), "H=2000000000")
    assert msg.startswith("init_params: ")
    p, X, y = _shapes(2_000_000, 64)
    assert _api_refused(lambda: mj.lambda_min(p, X, y), "H=2000000").startswith("lambda_min: ")
    assert _api_refused(lambda: mj.hessian_extremes(p, X, y)).startswith("hessian_extremes: ")


def test_api_held_out_entry_points():
    p, X, y = _shapes(64, 100_000_000)
    _api_refused(lambda: mj.tokenized_mixture(KEY, 1_000_000_000, 6, 8), "n=1000000000")
    _api_refused(lambda: mj.tokenized_mixture(KEY, 64, 100_000, 100_000), "T=100000", "d=100000")
    _api_refused(lambda: mj.ntk_features(p, X), "n=100000000")
    _api_refused(lambda: mj.ntk_margin(p, X, y), "n=100000000")
    _api_refused(lambda: mj.structured_parts(*_shapes(2_000_000, 64)), "H=2000000")
    _api_refused(lambda: mj.dense_hessian(*_shapes(20_000, 64)), "H=20000")
    pS = jax.eval_shape(lambda k: jax.vmap(lambda kk: mj.init_params(kk, 2_000_000, 6, 8, force=True))(
        jax.random.split(k, 2)), KEY)
    XS, yS = jax.ShapeDtypeStruct((2, 64, 6, 8), jnp.float64), jax.ShapeDtypeStruct((2, 64), jnp.float64)
    _api_refused(lambda: jax.eval_shape(partial(mj.train, steps=10, every=5), pS, XS, yS, 1.0), "H=2000000")


def test_api_force_and_the_environment_skip_the_guard(monkeypatch):
    p, X, y = _shapes(2_000_000, 64)
    jax.eval_shape(partial(mj.structured_parts, force=True), p, X, y)  # traced, never run
    monkeypatch.setenv(M.FORCE_ENV, "1")
    jax.eval_shape(mj.structured_parts, p, X, y)
    jax.eval_shape(lambda k: mj.init_params(k, 2_000_000_000, 6, 8), KEY)


@pytest.mark.slow
def test_no_guard_runs_inside_traced_code(monkeypatch):
    """The programs a check runs (data, init, GD, the Hessian's factors and spectrum, the κ
    chain, NTK features, the step premise) trace without calling the guard: it runs only where
    a command or a public function starts."""
    from mhajax.analysis.chain import chain_raw
    from mhajax.analysis.step_premise import _smoothness_at
    from mhajax.curvature.spectrum import extremes
    from mhajax.experiments.base import batched_data, batched_init
    from mhajax.experiments.configs import DataConfig
    from mhajax.experiments.ntk_margin import features_batch
    from mhajax.experiments.one_step import step_features
    from mhajax.losses import LOGISTIC
    from mhajax.models import SOFTMAX
    from mhajax.train import _train, opt_init
    calls = []
    monkeypatch.setattr(M, "guard", lambda *a, **k: calls.append(a))
    cfg, seeds = DataConfig(n=8, tokens=4, dim=6), [0, 1]
    X, y = batched_data(cfg, seeds)
    th = batched_init(cfg, seeds, 3)
    jax.eval_shape(partial(_train, steps=2, every=1, model=SOFTMAX, loss=LOGISTIC), th, jax.vmap(opt_init)(th), X, y,
                   jnp.full((2,), 0.5))
    jax.eval_shape(partial(_smoothness_at, model=SOFTMAX, loss=LOGISTIC), th, X, y)
    jax.eval_shape(partial(features_batch, model=SOFTMAX, loss=LOGISTIC), th, X, y, 0.5)
    signs = jnp.ones((2, 3))
    jax.eval_shape(partial(step_features, model=SOFTMAX, loss=LOGISTIC, clean=True), th, X, X, y, 0.5, signs)
    one = jax.tree_util.tree_map(lambda a: a[0], th)
    for method in ("auto", "dense", "lanczos", "block"):
        jax.eval_shape(lambda p, X, y: extremes(p, X, y, KEY, method=method), one, X[0], y[0])
    jax.eval_shape(lambda p, X, y: chain_raw(p, X, y, KEY, links="all"), one, X[0], y[0])
    assert calls == []


@pytest.mark.slow
def test_small_api_calls_are_not_refused():
    X, y = mj.tokenized_mixture(KEY, 16, 4, 6, num_clusters=2)
    p = mj.init_params(KEY, 2, 4, 6)
    assert isinstance(mj.lambda_min(p, X, y), float)


# -- the --out lock through the CLI ----------------------------------------------------------------

def _hold(d, seconds=60):
    w = subprocess.Popen([sys.executable, WORKER, str(d), str(seconds)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    line = w.stdout.readline()
    assert line.startswith("ACQUIRED"), (line, w.stderr.read() if w.poll() is not None else "")
    return w, int(line.split()[1])


def test_second_run_on_a_locked_out_is_refused_and_fresh_keeps_its_progress(capsys, tmp_path, no_run):
    out = tmp_path / "out"
    (out / ".progress").mkdir(parents=True)
    sentinel = out / ".progress" / "manifest.json"
    sentinel.write_text('{"running": true}\n')
    w, pid = _hold(out)
    try:
        capsys.readouterr()
        rc = main(["weak-convexity", "--heads", "1", "--steps", "1", "--every", "1", "--fresh", "--out", str(out)])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and "\n" not in err and "Traceback" not in err
        assert f"pid {pid}" in err and "in use by" in err and "--out" in err
        assert sentinel.read_text() == '{"running": true}\n'     # --fresh did not wipe it
        assert not (out / "summary.json").exists()
    finally:
        w.kill()
        w.wait()


def test_verify_all_locks_its_parent_directory(capsys, tmp_path, no_run):
    out = tmp_path / "all"
    out.mkdir()
    w, pid = _hold(out)
    try:
        capsys.readouterr()
        rc = main(["all", "--only", "weak-convexity", "--out", str(out)])
        err = capsys.readouterr().err.strip()
        assert rc == 2 and f"pid {pid}" in err and "\n" not in err
        assert not (out / "summary.json").exists() and not (out / "weak-convexity").exists()
    finally:
        w.kill()
        w.wait()


def test_a_finished_run_leaves_the_lock_free(tmp_path):
    """After a run the lock file stays (never deleted) but is empty and free."""
    from mhajax.cli.common import run_and_save
    from mhajax.experiments.configs import Config
    from mhajax.runtime.lock import OutLock, read_holder

    class Cfg(Config):
        def to_dict(self):
            return {}
    _, path = run_and_save(lambda cfg: dict(seeds=[0], verdict="passed"), Cfg(), tmp_path / "r")
    assert json.loads(path.read_text())["verdict"] == "passed"
    assert read_holder(tmp_path / "r" / ".lock") == {}
    OutLock(tmp_path / "r").acquire().release()
