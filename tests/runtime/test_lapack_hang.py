"""The deadlock of two batched LAPACK eigensolvers on XLA's CPU pool (docs/reliability.md):
the environment a command starts with (process_defaults) runs the repro to the end; without
it the repro hangs. The repro, _lapack_hang.py, imports no mhajax."""
import os
import subprocess
import sys
from unittest import mock

import pytest

from mhajax.runtime.jaxsetup import PROCESS_DEFAULTS, process_defaults

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_lapack_hang.py")
CALLS = 20


def run_repro(env, calls=CALLS, timeout=300):
    p = subprocess.run([sys.executable, SCRIPT, str(calls)], env=env, capture_output=True,
                       text=True, timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def uncured_env():
    """This environment without the variables process_defaults sets."""
    return {k: v for k, v in os.environ.items() if k not in PROCESS_DEFAULTS}


def cured_env():
    """The environment a command gets from process_defaults, starting from one without them."""
    with mock.patch.dict(os.environ, uncured_env(), clear=True):
        process_defaults()
        return dict(os.environ)


def test_process_defaults_run_the_repro_to_the_end():
    """With process_defaults' environment every call of the repro finishes (exit 0)."""
    env = cured_env()
    assert env["PJRT_NPROC"] == "1"
    rc, out = run_repro(env, calls=10, timeout=120)
    assert rc == 0 and "OK 10 calls" in out, out


@pytest.mark.slow
def test_without_process_defaults_the_repro_hangs():
    """Without process_defaults' variables the repro deadlocks (watchdog exit 3). If this
    fails because every call finished, jaxlib no longer deadlocks: remove the workaround
    (PJRT_NPROC in mhajax.runtime.jaxsetup.PROCESS_DEFAULTS) and this test."""
    rc, out = run_repro(uncured_env())
    assert rc == 3 and "HANG after" in out, out
