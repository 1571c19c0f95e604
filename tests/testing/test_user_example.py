"""The documented user test file (docs/examples/test_user_model.py) runs and passes in a
fresh pytest process, with the fixtures of mhajax.testing.plugin loaded by ``-p`` and by
the ``pytest11`` entry point (also together with ``pytest_plugins`` in a conftest)."""
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

ENTRY_POINT = "[pytest11]\nmhajax.testing.plugin = mhajax.testing.plugin\n"


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


def test_entry_point_and_conftest_together(tmp_path):
    site = tmp_path / "site"
    dist = site / "mhajax_ep_check-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mhajax-ep-check\nVersion: 0\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINT)
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text('pytest_plugins = ["mhajax.testing.plugin"]\n')
    (suite / "test_fixtures.py").write_text(FIXTURE_CHECKS.format(seed=7))
    r = _pytest(suite, "--mhajax-seed", "7", "test_fixtures.py", path=[site])
    assert r.returncode == 0, r.stdout + r.stderr
    assert "2 passed" in r.stdout, r.stdout
