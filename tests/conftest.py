"""Shared test setup: float64 everywhere, seeded keys, small problem builders."""
import os
import sys
from pathlib import Path

import jax
import pytest
from hypothesis import HealthCheck, settings

jax.config.update("jax_enable_x64", True)

# The traced-program cache (mhajax.runtime.program_cache) stays off in the suite and in the
# commands it starts: a cold cache exports every program once, which thousands of test shapes
# would pay for nothing. Its own tests turn it on (tests/runtime/test_program_cache.py, one of
# them a whole-process cold/warm/off comparison) and prove the same numbers to the bit.
os.environ.setdefault("MHAJAX_PROGRAM_CACHE", "0")

# One OpenBLAS thread, SciPy's (jaxlib's CPU LAPACK) included, exactly as every command does
# (mhajax.runtime.jaxsetup.setup_jax): the CPU eigensolvers then run inside XLA, the route
# the commands take (mhajax.linalg; issue 14). MHAJAX_CPU_EIGH=callback tests the other route.
from mhajax.runtime.jaxsetup import release_if_crowded, single_threaded_blas  # noqa: E402

single_threaded_blas()

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


@pytest.fixture(autouse=True)
def _release_compiled_programs_when_crowded():
    """One process runs the whole suite and compiles thousands of XLA programs, each holding
    memory mappings: past vm.max_map_count (65530 by default) LLVM fails and the process
    dies. Free them once half the limit is used (numbers unaffected: programs recompile)."""
    yield
    release_if_crowded(0.5)
