"""The user-path matrix (slow tier): every documented command run as a user runs it.

Each command is a whole process started the README's way (``python -m verify ...``,
``python -m figures``, ``python -m verify.bench``) from a clean working directory, with the
terminal report on (no ``--quiet``), the default results directory and the default caches
(the compilation cache on; its location moved to a temporary directory), on one device and
on four (``XLA_FLAGS=--xla_force_host_platform_device_count=4``). Every run has a timeout,
so a hang fails the test instead of stalling CI. Each must end with a documented verdict
code (0, 1, 3, 4, 5 or 6; 2 is bad input, which none of these is) and no traceback. The main
job (``python -m verify`` on its defaults) runs on one device and on four, and every number
of every summary.json agrees to 1e-10 (``helpers.summary_differences``). The list of
commands is in docs/testing.md.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import summary_differences

from mhajax.experiments.configs import fit_to_data, updated
from mhajax.experiments.registry import CHECKS

ROOT = Path(__file__).resolve().parents[2]
VERDICT_CODES = {0, 1, 3, 4, 5, 6}
SMALL_DATA = ["--n", "16", "--tokens", "4", "--dim", "6"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One compilation cache for the module's processes, as a user's runs share theirs."""
    return tmp_path_factory.mktemp("xla-cache")


def run(args, cwd, cache, *, devices: int = 1, timeout: int = 600) -> subprocess.CompletedProcess:
    """``python -m ARGS`` in ``cwd`` as a user runs it; the test fails on a timeout (a hang)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "MHAJAX_"))}
    env.update(PYTHONPATH=str(ROOT), MHAJAX_CACHE_DIR=str(cache))
    env.pop("XLA_FLAGS", None)
    if devices > 1:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    try:
        return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"python -m {' '.join(args)} ({devices} device(s)) did not finish in {timeout} s (a hang?)\n"
                    f"{(e.stdout or b'')[-2000:]!r}")


def assert_user_ok(r, args):
    out = r.stdout + r.stderr
    assert "Traceback" not in out, f"python -m {' '.join(args)}:\n{out[-4000:]}"
    assert r.returncode in VERDICT_CODES, f"python -m {' '.join(args)}: exit {r.returncode}\n{out[-4000:]}"


CHECK_RUNS = {
    "weak-convexity": ["--heads", "1,4", "--seeds", "1", "--steps", "20", "--every", "10"],
    "convergence": ["--heads", "1,2", "--seeds", "2", "--steps", "100", "--n-test", "64", "--resamples", "100"],
    "generalization": ["--ns", "16,32,64", "--heads", "2", "--seeds", "2", "--n-test", "64", "--resamples", "100"],
    "heads": ["--ns", "16,32", "--heads", "1,2", "--seeds", "2", "--n-test", "64"],
    "ntk-margin": ["--heads", "1,2", "--seeds", "2"],
    "one-step": ["--ns", "16,32,64", "--seeds", "2", "--resamples", "100"],
    "quasi-convexity": ["--heads", "1,2", "--seeds", "1", "--steps", "20", "--every", "10", "--grid", "8"],
    "variants": ["--models", "softmax,qk,two-layer", "--heads", "1,2", "--steps", "20", "--every", "10"],
    "census": ["--heads", "1,2", "--seeds", "2", "--steps", "20", "--every", "10", "--probes", "2", "--lanczos", "16",
               "--resamples", "100"],
}


#: the checks that the main job (``verify all``, below, on one device and on four) does not run
NOT_IN_MAIN_JOB = ["census", "variants"]


def test_the_checks_outside_the_main_job_are_the_ones_run_at_small_sizes():
    assert sorted(n for n, e in CHECKS.items() if not e.in_all) == NOT_IN_MAIN_JOB
    assert sorted(CHECK_RUNS) == sorted(CHECKS)


@pytest.mark.parametrize("devices", [1, 4])
@pytest.mark.parametrize("check", NOT_IN_MAIN_JOB)
def test_every_check_at_small_sizes(check, devices, tmp_path, cache):
    """A check the main job does not run, at small sizes (the main job's runs cover the rest on
    their defaults, on one device and on four)."""
    args = ["verify", check, *CHECK_RUNS[check]]
    r = run(args, tmp_path, cache, devices=devices)
    assert_user_ok(r, args)
    s = json.loads((tmp_path / "results" / check / "summary.json").read_text())
    assert s["verdict"] in r.stdout.lower() or s["verdict"].upper() in r.stdout
    assert len(s["meta"]["devices"]) == devices


MODELS = ["softmax", "linear", "relu", "qk", "value", "causal", "cls", "two-layer"]
WC = ["verify", "weak-convexity", "--heads", "1,4", "--seeds", "1", "--steps", "20", "--every", "10"]


@pytest.mark.parametrize("devices", [1, 4])
@pytest.mark.parametrize("model", MODELS)
def test_weak_convexity_with_every_model(model, devices, tmp_path, cache):
    """The relu report crash, and the qk and cls hangs, were all on this command."""
    args = [*WC, "--model", model]
    assert_user_ok(run(args, tmp_path, cache, devices=devices, timeout=300), args)


@pytest.mark.parametrize("loss", ["logistic", "exponential", "squared_hinge"])
def test_weak_convexity_with_every_loss(loss, tmp_path, cache):
    args = [*WC, "--loss", loss]
    assert_user_ok(run(args, tmp_path, cache, timeout=300), args)


@pytest.mark.parametrize("data", ["mixture", "sparse", "npz", "digits"])
def test_weak_convexity_with_every_data_model(data, tmp_path, cache):
    if data == "digits":
        pytest.importorskip("sklearn")
    small = ["--n", "16"] if data == "digits" else SMALL_DATA        # the digits fix T = d = 8
    args = [*WC, "--data", data, *small, *(["--clusters", "2"] if data == "mixture" else [])]
    if data == "npz":
        rng = np.random.default_rng(0)
        X = rng.standard_normal((40, 4, 6)) / 3
        np.savez(tmp_path / "train.npz", X=X, y=np.where(X[:, 0, 0] > 0, 1.0, -1.0))
        args += ["--data-path", str(tmp_path / "train.npz")]
    assert_user_ok(run(args, tmp_path, cache, timeout=300), args)


USER_HEAD = """
from mhajax import HeadModel
from mhajax.models.softmax import softmax_head, softmax_init


def temp_head(theta, X):  # the softmax head at temperature 1/2, written as docs/extending.md shows
    return softmax_head(theta._replace(W=2.0 * theta.W), X)


TEMP = HeadModel("temp", temp_head, softmax_init)
"""


@pytest.fixture()
def user_dir(tmp_path):
    """A user's working directory: a package ``mypkg`` with a head model, and ``d.npz``."""
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "heads.py").write_text(USER_HEAD)
    rng = np.random.default_rng(0)
    X = rng.standard_normal((40, 4, 5)) / 3
    np.savez(tmp_path / "d.npz", X=X, y=np.where(X[:, 0, 0] > 0, 1.0, -1.0))
    return tmp_path


@pytest.mark.parametrize("check", ["weak-convexity", "census"])
def test_your_own_model_and_data_on_the_checks_defaults(check, user_dir, cache):
    """``mhajax verify CHECK --model mypkg.heads:TEMP --data npz --data-path d.npz`` from the user's
    directory (not the checkout): n, T and d come from the file, the model is checked at the door,
    and the run ends with a verdict that records what it loaded."""
    args = ["mhajax", "verify", check, "--model", "mypkg.heads:TEMP", "--data", "npz", "--data-path", "d.npz"]
    r = run(args, user_dir, cache, timeout=900)
    assert_user_ok(r, args)
    s = json.loads((user_dir / "results" / check / "summary.json").read_text())
    inputs = s["meta"]["inputs"]
    assert inputs["models"]["mypkg.heads:TEMP"]["builtin"] is False
    assert list(inputs["files"]) == ["d.npz"] and set(inputs["premises"]["mypkg.heads:TEMP"]) >= {"grad_fd"}
    assert "--data npz: tokens = 4, dim = 5, n = 40 from 'd.npz'" in r.stdout


#: the checks with a default size that the digits (1197 train, 600 test images) cannot supply
FITTED_ON_DIGITS = ["convergence", "generalization", "heads", "one-step"]


def test_the_checks_fitted_to_the_digits_are_the_ones_run_on_their_defaults():
    pytest.importorskip("sklearn")
    fitted = [n for n, e in sorted(CHECKS.items()) if fit_to_data(updated(e.config(), {"data.dataset": "digits"}))[1]]
    assert fitted == FITTED_ON_DIGITS


@pytest.mark.parametrize("check", FITTED_ON_DIGITS)
def test_every_check_on_digits_on_its_defaults(check, tmp_path, cache):
    """``mhajax verify CHECK --data digits`` where a default must be lowered to what the digits
    hold: each lowered size is one line of the run's output and of ``meta.fitted``. (The other
    checks take the digits' T = d = 8 with nothing to fit: weak-convexity runs them above.)"""
    pytest.importorskip("sklearn")
    args = ["mhajax", "verify", check, "--data", "digits"]
    r = run(args, tmp_path, cache, timeout=1200)
    assert_user_ok(r, args)
    s = json.loads((tmp_path / "results" / check / "summary.json").read_text())
    assert s["meta"]["fitted"] and all(line in r.stdout for line in s["meta"]["fitted"])


@pytest.fixture(scope="module")
def main_job(tmp_path_factory, cache):
    """The README's main command, ``python -m verify``, on one device and on four."""
    out = {}
    for devices in (1, 4):
        cwd = tmp_path_factory.mktemp(f"main{devices}")
        r = run(["verify"], cwd, cache, devices=devices, timeout=1200)
        out[devices] = (cwd, r)
    return out


def test_the_main_job_exits_0_with_no_traceback(main_job):
    for devices, (cwd, r) in main_job.items():
        assert "Traceback" not in r.stdout + r.stderr, r.stderr[-4000:]
        assert r.returncode == 0, (devices, (r.stdout + r.stderr)[-4000:])
        assert "INCONCLUSIVE" not in r.stdout and "FAILED" not in r.stdout


def test_the_main_job_on_four_devices_gives_the_numbers_of_one(main_job):
    one, four = main_job[1][0] / "results", main_job[4][0] / "results"
    names = sorted(p.parent.name for p in one.glob("*/summary.json"))
    assert names and names == sorted(p.parent.name for p in four.glob("*/summary.json"))
    for name in names:
        a = json.loads((one / name / "summary.json").read_text())
        b = json.loads((four / name / "summary.json").read_text())
        assert summary_differences(a, b, rtol=1e-10) == [], name


def test_figures_from_the_main_jobs_results(main_job, tmp_path, cache):
    cwd = main_job[1][0]
    args = ["figures", "--no-run", "--out", str(tmp_path / "figs"), "--report", str(tmp_path / "REPORT.md")]
    r = run(args, cwd, cache)
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr, (r.stdout + r.stderr)[-4000:]
    pngs = sorted(p.name for p in (tmp_path / "figs").glob("*.png"))
    assert len(pngs) >= 6 and (tmp_path / "REPORT.md").exists(), (pngs, (r.stdout + r.stderr)[-2000:])


@pytest.mark.parametrize("section,extra", [
    ("points", ["--heads", "4,16", "--repeat", "1", "--points", "1"]),
    ("growth", ["--heads", "4,16", "--repeat", "1", "--points", "1"]),
])
def test_bench_sections_at_small_sizes(section, extra, tmp_path, cache):
    args = ["verify.bench", "--sections", section, *extra, "--torch", "no", "--out", str(tmp_path / "bench")]
    r = run(args, tmp_path, cache)
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr, (r.stdout + r.stderr)[-4000:]
    assert (tmp_path / "bench" / "bench.json").exists()
