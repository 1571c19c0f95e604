"""pytest plugin of :mod:`mhajax.testing`: the fixtures ``x64`` and ``key``.

Loaded only when asked for: ``pytest -p mhajax.testing.plugin``, or, in the *root*
``conftest.py`` of a test suite, ``pytest_plugins = ["mhajax.testing.plugin"]``.

* ``x64`` (function scope): float64 on for the test, the previous global setting
  restored afterwards. On a hypothesis ``@given`` test request it with
  ``@pytest.mark.usefixtures("x64")``: hypothesis's ``function_scoped_fixture``
  health check looks only at fixtures in the test's signature, and x64 needs no
  reset between examples (every example of the test runs in float64).
* ``key`` (session scope): ``jax.random.PRNGKey(seed)``, seed 0 unless set with
  ``--mhajax-seed N`` or the ini option ``mhajax_seed``. A key is immutable, so one
  per session is safe, and a ``@given`` test may take it as an argument.
"""
from __future__ import annotations

import jax
import pytest

from mhajax.testing._x64 import global_x64


def pytest_addoption(parser):
    """Add ``--mhajax-seed`` (the seed of the ``key`` fixture)."""
    group = parser.getgroup("mhajax", "mhajax.testing")
    group.addoption("--mhajax-seed", dest="mhajax_seed", type=int, default=None,
                    help="seed of the `key` fixture (default: ini mhajax_seed, else 0)")
    parser.addini("mhajax_seed", "seed of the `key` fixture of mhajax.testing", default="0")


def _seed(config) -> int:
    seed = config.getoption("mhajax_seed", default=None)
    if seed is None:
        try:
            seed = int(config.getini("mhajax_seed"))
        except (ValueError, KeyError):  # option registered too late (plugin loaded by a test module)
            seed = 0
    return int(seed)


@pytest.fixture
def x64():
    """float64 for the test (``jax_enable_x64``), restored afterwards."""
    with global_x64(True):
        yield


@pytest.fixture(scope="session")
def key(pytestconfig):
    """A seeded ``jax.random.PRNGKey`` (``--mhajax-seed``, default 0)."""
    return jax.random.PRNGKey(_seed(pytestconfig))
