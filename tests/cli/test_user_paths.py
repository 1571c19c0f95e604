"""The user-path matrix (slow tier): every documented command run as a user runs it.

Each command is a whole process started the README's way (``python -m verify ...``,
``python -m figures``, ``python -m verify.bench``) from a clean working directory, with the
terminal report on (no ``--quiet``), the default results directory and the default caches
(the compilation cache on; its location moved to a temporary directory), on one device and
on four (``XLA_FLAGS=--xla_force_host_platform_device_count=4``). Every run has a timeout,
so a hang fails the test instead of stalling CI. Each must end with a documented verdict
code (0, 1, 3, 4, 5 or 6; 2 is bad input, which none of these is) and no traceback
(``helpers.run_as_user``, ``helpers.assert_user_ok``). The main job is in test_main_job.py. The
list of commands is in docs/testing.md.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
from helpers import assert_user_ok, run_as_user

from mhajax.experiments.configs import fit_to_data, updated
from mhajax.experiments.registry import CHECKS

SMALL_DATA = ["--n", "16", "--tokens", "4", "--dim", "6"]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One compilation cache for the module's processes, as a user's runs share theirs."""
    return tmp_path_factory.mktemp("xla-cache")


#: a small run of each check the main job (``verify all``, test_main_job.py, on one device and on
#: four) does not run; the main job runs the others on their defaults
CHECK_RUNS = {
    "variants": ["--models", "softmax,qk,two-layer", "--heads", "1,2", "--steps", "20", "--every", "10"],
    "census": ["--heads", "1,2", "--seeds", "2", "--steps", "20", "--every", "10", "--probes", "2", "--lanczos", "16",
               "--resamples", "100"],
}


def test_every_check_outside_the_main_job_has_a_small_run():
    assert sorted(n for n, e in CHECKS.items() if not e.in_all) == sorted(CHECK_RUNS)


@pytest.mark.parametrize("devices", [1, 4])
@pytest.mark.parametrize("check", sorted(CHECK_RUNS))
def test_every_check_at_small_sizes(check, devices, tmp_path, cache):
    """A check the main job does not run, at small sizes."""
    args = ["verify", check, *CHECK_RUNS[check]]
    r = run_as_user(args, tmp_path, cache, devices=devices)
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
    assert_user_ok(run_as_user(args, tmp_path, cache, devices=devices, timeout=300), args)


@pytest.mark.parametrize("loss", ["logistic", "exponential", "squared_hinge"])
def test_weak_convexity_with_every_loss(loss, tmp_path, cache):
    args = [*WC, "--loss", loss]
    assert_user_ok(run_as_user(args, tmp_path, cache, timeout=300), args)


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
    assert_user_ok(run_as_user(args, tmp_path, cache, timeout=300), args)


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
    r = run_as_user(args, user_dir, cache, timeout=900)
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
    r = run_as_user(args, tmp_path, cache, timeout=1200)
    assert_user_ok(r, args)
    s = json.loads((tmp_path / "results" / check / "summary.json").read_text())
    assert s["meta"]["fitted"] and all(line in r.stdout for line in s["meta"]["fitted"])


@pytest.mark.parametrize("section,extra", [
    ("points", ["--heads", "4,16", "--repeat", "1", "--points", "1"]),
    ("growth", ["--heads", "4,16", "--repeat", "1", "--points", "1"]),
])
def test_bench_sections_at_small_sizes(section, extra, tmp_path, cache):
    args = ["verify.bench", "--sections", section, *extra, "--torch", "no", "--out", str(tmp_path / "bench")]
    r = run_as_user(args, tmp_path, cache)
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr, (r.stdout + r.stderr)[-4000:]
    assert (tmp_path / "bench" / "bench.json").exists()
