"""The guards in front of every command and public entry point (issue 16).

* Absurd sizes: the issue's three commands, held-out ones on every check and every size
  flag, and the same sizes through the Python API, are refused before anything is
  allocated or written: exit 2 (an ``InputError``), one line naming the flag (argument),
  the estimate and what is available; ``--force`` / ``force=True`` let them through.
  In-process runs replace ``run_and_save`` and every check's ``run`` by a tripwire, so a
  guard that lets an absurd size through fails the test instead of allocating.
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
def test_the_issues_three_absurd_commands(capsys, tmp_path, tripwire, flags, named):
    err = refused(capsys, tmp_path, ["weak-convexity", *flags, "--steps", "1", "--every", "1"])
    assert err.startswith("error: verify weak-convexity: ")
    for n in named:
        assert n in err
    assert "needs ~" in err and "available (" in err and err.endswith("or pass --force")


def test_force_lets_an_absurd_size_through(capsys, tmp_path, tripwire):
    with pytest.raises(ReachedCompute):
        main(["weak-convexity", "--heads", "2000000", "--steps", "1", "--every", "1", "--force",
              "--out", str(tmp_path / "o")])


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


def test_api_init_params_and_lambda_min_refuse_the_issues_sizes():
    msg = _api_refused(lambda: mj.init_params(KEY, 2_000_000_000, 6, 8), "H=2000000000")
    assert msg.startswith("init_params: ")
    p, X, y = _shapes(2_000_000, 64)
    assert _api_refused(lambda: mj.lambda_min(p, X, y), "H=2000000").startswith("lambda_min: ")
    assert _api_refused(lambda: mj.hessian_extremes(p, X, y)).startswith("hessian_extremes: ")


def test_api_held_out_entry_points():
    from mhajax.analysis.ntk import ntk_features, ntk_margin
    p, X, y = _shapes(64, 100_000_000)
    _api_refused(lambda: mj.tokenized_mixture(KEY, 1_000_000_000, 6, 8), "n=1000000000")
    _api_refused(lambda: mj.tokenized_mixture(KEY, 64, 100_000, 100_000), "T=100000", "d=100000")
    _api_refused(lambda: ntk_features(p, X), "n=100000000")
    _api_refused(lambda: ntk_margin(p, X, y), "n=100000000")
    _api_refused(lambda: mj.structured_parts(*_shapes(2_000_000, 64)), "H=2000000")
    _api_refused(lambda: mj.dense_hessian(*_shapes(20_000, 64)), "H=20000")
    pS = jax.eval_shape(lambda k: jax.vmap(lambda kk: mj.init_params(kk, 2_000_000, 6, 8, force=True))(
        jax.random.split(k, 2)), KEY)
    XS, yS = jax.ShapeDtypeStruct((2, 64, 6, 8), jnp.float64), jax.ShapeDtypeStruct((2, 64), jnp.float64)
    _api_refused(lambda: jax.eval_shape(partial(mj.train, steps=10, every=5), pS, XS, yS, 1.0), "H=2000000")


def test_api_force_and_checked_skip_the_guard():
    p, X, y = _shapes(2_000_000, 64)
    jax.eval_shape(partial(mj.structured_parts, force=True), p, X, y)  # traced, never run
    with M.checked():
        jax.eval_shape(mj.structured_parts, p, X, y)


def test_small_api_calls_are_not_refused():
    X, y = mj.tokenized_mixture(KEY, 16, 4, 6, num_clusters=2)
    p = mj.init_params(KEY, 2, 4, 6)
    assert isinstance(mj.lambda_min(p, X, y), float)


# -- the --out lock through the CLI ----------------------------------------------------------------

def _hold(d, seconds=60):
    w = subprocess.Popen([sys.executable, WORKER, str(d), str(seconds), "0"], stdout=subprocess.PIPE,
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
