"""The suite's own compile options (tests/conftest.py): this process compiles at -O0 with XLA:CPU's
older emitters; the commands it starts, and ``helpers.XLA_DEFAULT_OPTIONS``, get XLA's defaults."""
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import pytest
from helpers import XLA_DEFAULT_OPTIONS
from jax._src.lib import xla_client as xc

from mhajax.runtime.jaxsetup import RUN_ONCE_OPTIONS

HERE = os.path.dirname(os.path.abspath(__file__))
cpu = pytest.mark.skipif(jax.default_backend() != "cpu", reason="the suite changes CPU compiles only")
defaults_asked = os.environ.get("MHAJAX_TEST_XLA_DEFAULTS", "0").strip().lower() in ("1", "yes", "true", "on")


def optimized(*options) -> list:
    """XLA's optimized program text of a small function (an elementwise chain, a reversal and two
    reductions: XLA:CPU's two emitters fuse it differently), once per compile options given; all
    traced from one line, since the text records where the program was traced from."""
    f = lambda x: jnp.sum(jnp.tanh(x) * x[::-1]) + jnp.linalg.norm(x)  # noqa: E731
    return [jax.jit(f, compiler_options=o).lower(jnp.ones(100)).compile().as_text() for o in options]


def level() -> int:
    return xc.CompileOptions().executable_build_options.debug_options.xla_backend_optimization_level


@cpu
@pytest.mark.skipif(defaults_asked, reason="MHAJAX_TEST_XLA_DEFAULTS: the suite runs XLA's defaults")
def test_this_process_compiles_with_the_commands_fast_options_and_leaves_the_environment_alone():
    assert level() == 0
    plain, fast, xla = optimized(None, RUN_ONCE_OPTIONS, XLA_DEFAULT_OPTIONS)
    assert plain == fast                          # the default build is the commands' fast one here
    assert plain != xla                           # and XLA's own build can still be asked for
    assert "xla_backend_optimization_level" not in os.environ.get("XLA_FLAGS", "")   # subprocesses get defaults


@cpu
@pytest.mark.slow
def test_helpers_default_options_are_xla_defaults_in_a_clean_process():
    code = ("import sys; sys.path.insert(0, %r)\n"
            "from test_suite_setup import XLA_DEFAULT_OPTIONS, level, optimized\n"
            "plain, xla = optimized(None, XLA_DEFAULT_OPTIONS)\n"
            "print(level(), plain == xla)\n" % HERE)
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert r.stdout.strip() == f"{XLA_DEFAULT_OPTIONS['xla_backend_optimization_level']} True"
