"""The deadlock of batched LAPACK eigensolvers on XLA's CPU pool (docs/reliability.md), on the
program where users met it, ``_lapack_hang.py`` (the κ-chain analysis of the cls model): the
environment a command starts with (``process_defaults``: one pool thread) runs it to the end;
and since the analysis makes no batched LAPACK call any more (``mhajax.linalg.each``), so does
a two-thread pool, on which it used to deadlock."""
import os
import subprocess
import sys
from pathlib import Path
from unittest import mock

import pytest

from mhajax.runtime.jaxsetup import PROCESS_DEFAULTS, process_defaults

SCRIPT = Path(__file__).resolve().with_name("_lapack_hang.py")
ROOT = SCRIPT.parents[2]


def run_repro(env, timeout=300):
    env = dict(env, PYTHONPATH=str(ROOT))
    p = subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def without_defaults():
    """This environment without the variables process_defaults sets."""
    return {k: v for k, v in os.environ.items() if k not in PROCESS_DEFAULTS}


def cured_env():
    """The environment a command gets from process_defaults, starting from one without them."""
    with mock.patch.dict(os.environ, without_defaults(), clear=True):
        process_defaults()
        return dict(os.environ)


@pytest.mark.slow
def test_process_defaults_run_the_repro_to_the_end():
    """With process_defaults' environment every call finishes (exit 0); a hang fails the test
    through the watchdog (exit 3) or the timeout."""
    env = cured_env()
    assert env["PJRT_NPROC"] == "1"
    rc, out = run_repro(env)
    assert rc == 0 and "OK 2 calls" in out, out


@pytest.mark.slow
def test_on_a_two_thread_pool_the_analysis_finishes_too():
    """The same program on a two-thread XLA pool (PJRT_NPROC=2; OpenBLAS single-threaded, so
    only the pool differs) deadlocked while the analysis made batched LAPACK calls (each
    waiting on the pool for its chunks); with one matrix per call (``mhajax.linalg.each``:
    the decomposition, the counts, the head norms) every call finishes. A hang here means a
    batched LAPACK call came back into the analysis."""
    rc, out = run_repro(dict(without_defaults(), PJRT_NPROC="2", OPENBLAS_NUM_THREADS="1"))
    assert rc == 0 and "OK 2 calls" in out, out
