"""What a run depends on beyond its config (Config.inputs), the resume key built from it, and a
config fitted to a data set of fixed size (fit_to_data)."""
import textwrap

import numpy as np
import pytest

from mhajax import InputError
from mhajax.cli.flags import build_parser, config_from_args
from mhajax.experiments import get_check
from mhajax.experiments.configs import make
from mhajax.experiments.weak_convexity import WeakConvexityConfig
from mhajax.runtime.resume import ProgressStore, differences


def write_npz(path, n=40, T=4, d=5, seed=0, scale=1.0, flip=False):
    rng = np.random.default_rng(seed)
    X = scale * rng.standard_normal((n, T, d)) / 3
    y = np.where(rng.standard_normal(n) > 0, 1.0, -1.0)
    np.savez(path, X=X, y=-y if flip else y)


HEAD = textwrap.dedent("""
    from mhajax import HeadModel
    from mhajax.models.softmax import softmax_head, softmax_init

    def temp_head(theta, X):
        return softmax_head(theta._replace(W={factor} * theta.W), X)

    TEMP = HeadModel("temp", temp_head, softmax_init)
""")


def test_inputs_follow_the_data_files_contents(tmp_path):
    write_npz(tmp_path / "d.npz")
    cfg = make(WeakConvexityConfig, dataset="npz", data_path=str(tmp_path / "d.npz"), tokens=4, dim=5, n=40)
    before = cfg.inputs()
    assert cfg.inputs() == before                                 # a pure function of the inputs
    write_npz(tmp_path / "d.npz", scale=3.0, flip=True)           # same path, other content
    after = cfg.inputs()
    assert after != before and differences(before, after) == f"files.{tmp_path / 'd.npz'}"


def test_inputs_follow_a_users_model_source(tmp_path):
    src = tmp_path / "heads.py"
    src.write_text(HEAD.format(factor=2.0))
    ref = f"{src}:TEMP"
    cfg = make(WeakConvexityConfig, model=ref)
    before = cfg.inputs()
    assert before["models"][ref]["builtin"] is False and str(src.resolve()) in before["models"][ref]["source"]
    src.write_text(HEAD.format(factor=3.0))
    assert cfg.inputs() != before
    assert make(WeakConvexityConfig).inputs()["models"] == {"softmax": {"name": "softmax", "builtin": True}}


def test_inputs_record_dtype_and_version():
    cfg = make(WeakConvexityConfig)
    a, b = cfg.inputs("float64"), cfg.inputs("float32")
    assert a["dtype"] == "float64" and b["dtype"] == "float32" and differences(a, b) == "dtype"
    assert a["version"]


def test_progress_for_another_key_is_discarded_with_one_line(tmp_path):
    said = []
    store = ProgressStore(tmp_path, {"config": {"n": 1}, "inputs": {"files": {"d.npz": "aa"}}}, say=said.append)
    store.save("heads=1", {"x": 1})
    again = ProgressStore(tmp_path, {"config": {"n": 1}, "inputs": {"files": {"d.npz": "aa"}}}, say=said.append)
    assert again.has("heads=1") and said == []                     # the same key: resumed
    other = ProgressStore(tmp_path, {"config": {"n": 1}, "inputs": {"files": {"d.npz": "bb"}}}, say=said.append)
    assert not other.has("heads=1") and other.units() == []
    assert len(said) == 1 and "inputs.files.d.npz" in said[0] and "starting afresh" in said[0]
    assert "\n" not in said[0]


def test_differences_names_at_most_three_paths():
    a = {"x": 1, "y": {"a": 1, "b": 2}, "z": 3, "w": 4}
    b = {"x": 2, "y": {"a": 1, "b": 3}, "z": 4, "w": 5}
    assert differences(a, b) == "w, x, y.b and 1 more"
    assert differences(a, a) == ""


def fitted(check, argv):
    entry = get_check(check)
    notes = []
    return config_from_args(entry, build_parser(entry).parse_args(argv), notes), notes


def test_an_npz_file_gives_n_t_and_d_unless_given(tmp_path):
    write_npz(tmp_path / "d.npz", n=40, T=4, d=5)
    cfg, notes = fitted("weak-convexity", ["--data", "npz", "--data-path", str(tmp_path / "d.npz")])
    assert (cfg.data.n, cfg.data.tokens, cfg.data.dim) == (40, 4, 5)
    assert notes == [f"--data npz: tokens = 4, dim = 5, n = 40 from {str(tmp_path / 'd.npz')!r}"]
    cfg, notes = fitted("weak-convexity", ["--data", "npz", "--data-path", str(tmp_path / "d.npz"), "--n", "20"])
    assert cfg.data.n == 20 and "n = 40" not in notes[0]
    with pytest.raises(InputError, match="tokens T = 4, but 6 was requested"):
        fitted("weak-convexity", ["--data", "npz", "--data-path", str(tmp_path / "d.npz"), "--tokens", "6"])
    with pytest.raises(InputError, match="n = 41 samples requested but"):
        fitted("weak-convexity", ["--data", "npz", "--data-path", str(tmp_path / "d.npz"), "--n", "41"])


def test_a_test_file_lowers_a_default_held_out_size_and_keeps_a_given_one(tmp_path):
    write_npz(tmp_path / "d.npz", n=40)
    write_npz(tmp_path / "t.npz", n=30, seed=1)
    base = ["--data", "npz", "--data-path", str(tmp_path / "d.npz"), "--test-path", str(tmp_path / "t.npz")]
    cfg, notes = fitted("convergence", base)
    assert cfg.n_test == 30 and "--n-test lowered from 1024 to 30" in notes[-1]
    cfg, notes = fitted("convergence", base + ["--n-test", "20"])
    assert cfg.n_test == 20 and not any("n-test" in line for line in notes)


def test_digits_on_defaults_lowers_what_it_cannot_supply():
    pytest.importorskip("sklearn")
    cfg, notes = fitted("one-step", ["--data", "digits"])
    assert cfg.ns == (64, 128, 256, 512, 1024, 1197)
    assert notes == ["--data digits holds 1197 train samples: --ns lowered from 64,128,256,512,1024,2048,4096 "
                     "to 64,128,256,512,1024,1197"]
    cfg, notes = fitted("generalization", ["--data", "digits"])
    assert cfg.n_test == 600 and notes == ["--data digits holds 600 test samples: --n-test lowered from 32768 to 600"]
    with pytest.raises(InputError, match="n_test = 1024 test samples requested"):
        fitted("convergence", ["--data", "digits", "--n-test", "1024"])
