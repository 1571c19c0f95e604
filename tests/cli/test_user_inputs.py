"""A user's own model and data on the command line, as whole processes (slow tier): a rewritten
data file or an edited model source makes the next identical command start afresh (never resume
onto the old results), and a model that does not import, is not a model, or whose closed forms
disagree with autodiff ends with exit 2, one line, and nothing written."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

HEADS = """
from mhajax import HeadModel
from mhajax.models.softmax import softmax_head, softmax_init, weighted_head_hessian


def temp_head(theta, X):
    return softmax_head(theta._replace(W={factor} * theta.W), X)


TEMP = HeadModel("temp", temp_head, softmax_init)
HALF = HeadModel("half", softmax_head, softmax_init,
                 weighted_hessian=lambda t, X, c: 0.5 * weighted_head_hessian(t, X, c))
NOT_A_MODEL = 3
"""
RUN = ["weak-convexity", "--data", "npz", "--data-path", "d.npz", "--heads", "1,2", "--seeds", "1", "--steps", "20",
       "--every", "10", "--w-scale", "1"]


def write_npz(path, scale=1.0, flip=False):
    rng = np.random.default_rng(0)
    X = scale * rng.standard_normal((40, 4, 5)) / 3
    y = np.where(rng.standard_normal(40) > 0, 1.0, -1.0)
    np.savez(path, X=X, y=-y if flip else y)


@pytest.fixture()
def user_dir(tmp_path):
    (tmp_path / "mypkg").mkdir()
    (tmp_path / "mypkg" / "__init__.py").write_text("")
    (tmp_path / "mypkg" / "heads.py").write_text(HEADS.format(factor=2.0))
    write_npz(tmp_path / "d.npz")
    return tmp_path


def mhajax(cwd, *args, timeout=600):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "MHAJAX_"))}
    env.update(PYTHONPATH=str(ROOT), MHAJAX_CACHE_DIR="off")
    return subprocess.run([sys.executable, "-m", "mhajax", "verify", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)


def losses(path):
    s = json.loads(Path(path).read_text())
    return [r["loss"] for r in s["records"]] if "records" in s else s


def test_a_rewritten_data_file_or_an_edited_model_starts_afresh(user_dir):
    args = [*RUN, "--model", "mypkg.heads:TEMP", "--out", "out"]
    first = mhajax(user_dir, *args)
    assert first.returncode == 0, first.stderr[-3000:]
    summary = user_dir / "out" / "summary.json"
    a = json.loads(summary.read_text())
    write_npz(user_dir / "d.npz", scale=3.0, flip=True)               # same path, other content
    second = mhajax(user_dir, *args)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "saved progress was made with other inputs (inputs.files.d.npz); starting afresh" in second.stderr
    b = json.loads(summary.read_text())
    assert b["meta"]["inputs"]["files"]["d.npz"] != a["meta"]["inputs"]["files"]["d.npz"]
    assert b != a and json.dumps(b["records"]) != json.dumps(a["records"])
    (user_dir / "mypkg" / "heads.py").write_text(HEADS.format(factor=3.0))   # the model's source edited
    third = mhajax(user_dir, *args)
    assert third.returncode == 0, third.stderr[-3000:]
    assert "starting afresh" in third.stderr and "inputs.models.mypkg.heads:TEMP.source" in third.stderr
    assert json.dumps(json.loads(summary.read_text())["records"]) != json.dumps(b["records"])
    fourth = mhajax(user_dir, *args)                                  # nothing changed: no word
    assert fourth.returncode == 0 and "starting afresh" not in fourth.stderr


@pytest.mark.parametrize("model,expected", [
    ("mypkg.heads:HALF", "model 'half': weighted_hessian (W_h(c) v vs jax.jvp of jax.grad) fails at θ₀"),
    ("mypkg.heads:NOT_A_MODEL", "model 'mypkg.heads:NOT_A_MODEL' is a int, not a mhajax.HeadModel"),
    ("mypkg.nothere:TEMP", "module 'mypkg.nothere' is not importable"),
    ("mypkg.heads:MISSING", "has no attribute 'MISSING'"),
])
def test_a_bad_model_is_refused_at_the_door_and_nothing_is_written(model, expected, user_dir):
    r = mhajax(user_dir, *RUN, "--model", model, "--out", "out")
    assert r.returncode == 2, (r.stdout + r.stderr)[-3000:]
    lines = [line for line in r.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and expected in lines[0] and "Traceback" not in r.stderr, r.stderr
    assert not (user_dir / "out").exists()


def test_a_closed_pipe_ends_the_cli_quietly(tmp_path):
    """``mhajax verify --help | head -1``, with enough output to outlast the pipe's buffer: the
    reader leaves, and the command ends with exit 141 and nothing on stderr."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "MHAJAX_"))}
    env.update(PYTHONPATH=str(ROOT))
    code = ("import sys\nfrom mhajax.__main__ import main\n"
            "sys.exit(max(main(['verify', '--help']) for _ in range(500)))\n")
    p = subprocess.Popen([sys.executable, "-c", code], cwd=tmp_path, env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    first = p.stdout.readline()
    p.stdout.close()                                                   # the reader is gone
    err = p.stderr.read()
    assert p.wait(timeout=300) == 141 and first.startswith("usage: mhajax verify") and err == "", err[-2000:]
