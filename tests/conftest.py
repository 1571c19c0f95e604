"""Shared test setup: float64 everywhere, fast compiles, seeded keys, small problem builders."""
import os
import subprocess
import sys
from pathlib import Path

import jax
import pytest
from hypothesis import HealthCheck, settings

# importing mhajax starts no JAX backend, so the settings below still reach XLA
from mhajax.runtime.jaxsetup import (RUN_ONCE_OPTIONS, compilation_cache_state, compile_cache_dir,
                                     process_defaults, release_if_crowded, use_compilation_cache)

# The process defaults every command sets (one thread in XLA's CPU pool and in OpenBLAS; see
# mhajax.runtime.jaxsetup.PROCESS_DEFAULTS), before the backend starts: the suite runs as the
# commands do, and the commands it starts as subprocesses inherit them.
process_defaults()
jax.config.update("jax_enable_x64", True)

# The suite's own process compiles every program at LLVM -O0 with XLA:CPU's older emitters, the
# options the commands already give their run-once programs (mhajax.runtime.jaxsetup
# RUN_ONCE_OPTIONS, written here as XLA flags). Most of the suite's time is XLA compiling small
# programs, and these options compile them about a third faster (docs/testing.md). Only this
# process is affected: XLA reads XLA_FLAGS once, when the backend starts, so the variable is
# set, read and restored here, and the commands the suite starts as subprocesses compile as a
# user's do. A test that needs
# XLA's own defaults in this process passes them per program (``helpers.XLA_DEFAULT_OPTIONS``);
# MHAJAX_TEST_XLA_DEFAULTS=1 runs the whole suite with them. A flag this jaxlib does not know
# would abort the process, so the flags are first tried in a subprocess.
SUITE_XLA_FLAGS = tuple(f"--{name}={str(value).lower()}"
                        for name, value in RUN_ONCE_OPTIONS.items())


def _probe(flags) -> str | None:
    """The default backend of a process started with ``flags`` in XLA_FLAGS; None if it failed
    (an unknown flag kills the process that reads it)."""
    code = "import jax; print(jax.default_backend())"
    try:
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                           env=dict(os.environ, XLA_FLAGS=" ".join(flags)))
    except subprocess.TimeoutExpired:
        return None
    return r.stdout.strip() if r.returncode == 0 else None


def _suite_compile_options():
    """Read SUITE_XLA_FLAGS (those this jaxlib knows) into this process's XLA, on CPU only; the
    environment is left as it was. One subprocess (~1 s), or one per flag if one is unknown."""
    if os.environ.get("MHAJAX_TEST_XLA_DEFAULTS", "0").strip().lower() in ("1", "yes", "true", "on"):
        return
    flags = list(SUITE_XLA_FLAGS)
    backend = _probe(flags)
    if backend is None:
        flags = [f for f in flags if _probe([f]) is not None]
        backend = _probe(flags)
    if backend != "cpu":
        return
    saved = os.environ.get("XLA_FLAGS")
    os.environ["XLA_FLAGS"] = " ".join(([saved] if saved else []) + flags)
    try:
        jax.default_backend()   # starting the backend makes XLA parse XLA_FLAGS, once for the process
    finally:
        if saved is None:
            del os.environ["XLA_FLAGS"]
        else:
            os.environ["XLA_FLAGS"] = saved


_suite_compile_options()

# JAX's persistent compilation cache in this process: where the commands keep theirs
# (``$MHAJAX_CACHE_DIR``, else ~/.cache/mhajax/xla; ``MHAJAX_CACHE_DIR=off pytest`` runs the
# suite without one), from the first program on, and back there after any test that moved it
# (a CLI test's ``main()`` calls ``setup_jax``; many ask for the cache off, some for a temporary
# directory). So no test's programs depend on which test ran before it. A second run of the
# suite reads what the first wrote (docs/testing.md).
SUITE_COMPILATION_CACHE = use_compilation_cache(compile_cache_dir())
_SUITE_CACHE_STATE = compilation_cache_state()

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


@pytest.fixture(autouse=True)
def _suite_compilation_cache():
    """Put JAX's persistent compilation cache back where the suite keeps it, if a test moved it."""
    yield
    if compilation_cache_state() != _SUITE_CACHE_STATE:
        use_compilation_cache(SUITE_COMPILATION_CACHE)
