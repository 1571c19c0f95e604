"""The documented user test file (docs/examples/test_user_model.py) runs and passes in a
fresh pytest process, with the fixtures of mhajax.testing.plugin loaded by ``-p`` or by
``pytest_plugins`` in a conftest; a pytest run that asks for neither gets none of them
(installing mhajax adds no fixtures to every pytest run)."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "test_user_model.py"

FIXTURE_CHECKS = '''
import jax
import jax.numpy as jnp

SEED = {seed}


def test_a_x64_fixture_turns_float64_on(x64, key):
    assert jnp.zeros(()).dtype == jnp.float64
    assert bool(jnp.all(key == jax.random.PRNGKey(SEED)))


def test_b_x64_is_restored_afterwards():
    assert jnp.zeros(()).dtype == jnp.float32
'''

def _pytest(cwd, *args, path=()):
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTEST_CURRENT_TEST", "PYTEST_ADDOPTS", "PYTEST_PLUGINS",
                        "PYTEST_DISABLE_PLUGIN_AUTOLOAD", "JAX_ENABLE_X64")}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *map(str, path), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-rA", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.mark.slow
def test_documented_example_passes(tmp_path):
    (tmp_path / "test_user_model.py").write_text(EXAMPLE.read_text())
    (tmp_path / "test_fixtures.py").write_text(FIXTURE_CHECKS.format(seed=0))
    r = _pytest(tmp_path, "-p", "mhajax.testing.plugin", "test_user_model.py", "test_fixtures.py")
    out = r.stdout + r.stderr
    assert r.returncode == 0, out
    assert "3 passed" in out, out
    assert "SkippedLinkWarning" in out and "no closed-form κ or β₂" in out, out


@pytest.mark.slow
def test_fixtures_come_only_when_asked_for(tmp_path):
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "test_fixtures.py").write_text(FIXTURE_CHECKS.format(seed=0))
    r = _pytest(plain, "test_fixtures.py")
    assert r.returncode != 0 and "fixture 'x64' not found" in r.stdout, r.stdout + r.stderr
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text('pytest_plugins = ["mhajax.testing.plugin"]\n')
    (suite / "test_fixtures.py").write_text(FIXTURE_CHECKS.format(seed=7))
    r = _pytest(suite, "--mhajax-seed", "7", "test_fixtures.py")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 passed" in r.stdout, r.stdout
