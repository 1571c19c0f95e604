"""Shared test setup: float64 everywhere, seeded keys, small problem builders."""
import os
import sys
from pathlib import Path

import jax
import pytest
from hypothesis import HealthCheck, settings

jax.config.update("jax_enable_x64", True)

# Tests live in folders mirroring the package and are imported by path
# (--import-mode=importlib); the shared reference implementations in tests/helpers.py
# are imported as ``helpers``.
sys.path.insert(0, str(Path(__file__).resolve().parent))

# JAX compiles once per shape, so the first example of a property test is slow:
# no per-example deadline. Examples are few (10–30 per test) and small.
# The default profile is derandomized: the same examples on every run, so the suite (and CI)
# is reproducible and a failure reproduces by rerunning. MHAJAX_HYPOTHESIS_PROFILE=thorough
# runs 5x the examples from random seeds (a nightly / pre-release sweep that explores).
_common = dict(deadline=None, print_blob=True,
               suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("mhajax", max_examples=20, derandomize=True, **_common)
settings.register_profile("thorough", max_examples=100, **_common)
settings.load_profile(os.environ.get("MHAJAX_HYPOTHESIS_PROFILE", "mhajax"))


@pytest.fixture
def key():
    return jax.random.PRNGKey(0)
