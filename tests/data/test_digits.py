"""The digits data model: shapes, token norms, labels, the fixed split, determinism per seed,
and every refusal as one InputError line (too many samples, wrong T/d, scikit-learn absent)."""
import builtins
import math

import jax
import numpy as np
import pytest

pytest.importorskip("sklearn")

from mhajax.cli.flags import build_parser, config_from_args  # noqa: E402
from mhajax.cli.verify import main  # noqa: E402
from mhajax.data import digits as dg  # noqa: E402
from mhajax.data.registry import DATASETS  # noqa: E402
from mhajax.errors import InputError  # noqa: E402
from mhajax.experiments.base import batched_data  # noqa: E402
from mhajax.experiments.configs import DataConfig  # noqa: E402
from mhajax.experiments.registry import get_check  # noqa: E402

KEY = jax.random.PRNGKey(3)


def test_shapes_norms_and_labels():
    X, y = dg.digits(KEY, 500, 8, 8)
    X, y = np.asarray(X), np.asarray(y)
    assert X.shape == (500, 8, 8) and y.shape == (500,) and X.dtype == np.float64
    norms = np.linalg.norm(X, axis=-1)
    assert norms.max() <= 1.0 and norms.max() > 0.5          # scaled by 1/(16√8), not to a tiny box
    assert set(np.unique(y)) == {-1.0, 1.0}
    assert 0.4 < (y > 0).mean() < 0.6                        # even vs odd: balanced-ish
    # every pixel is a multiple of 1/(16√8) (the raw pixels are integers 0..16)
    raw = X * 16 * math.sqrt(8)
    np.testing.assert_allclose(raw, np.round(raw), atol=1e-12)


def test_split_is_fixed_and_disjoint():
    tr, te = dg._splits()["train"], dg._splits()["test"]
    assert dg.split_size("train") == 1797 - 600 and dg.split_size("test") == 600
    assert (te[1] > 0).sum() == 300 and (te[1] < 0).sum() == 300
    rows = {x.tobytes() for x in tr[0]}
    assert sum(x.tobytes() in rows for x in te[0]) < 5   # (the raw data hold a few duplicate images)
    Xa, _ = dg.digits(KEY, 600, 8, 8, split="test")
    assert sorted(x.tobytes() for x in np.asarray(Xa)) == sorted(x.tobytes() for x in te[0])


def test_deterministic_per_seed_and_different_across_seeds():
    a = dg.digits(jax.random.PRNGKey(1), 64, 8, 8)
    b = dg.digits(jax.random.PRNGKey(1), 64, 8, 8)
    c = dg.digits(jax.random.PRNGKey(2), 64, 8, 8)
    np.testing.assert_array_equal(np.asarray(a[0]), np.asarray(b[0]))
    assert not np.array_equal(np.asarray(a[0]), np.asarray(c[0]))


def test_batched_data_uses_the_test_split_for_stream_2():
    d = DataConfig(dataset="digits", n=16, tokens=8, dim=8).validate()
    assert "digits" in DATASETS
    X, y = batched_data(d, [0, 1])
    Xt, _ = batched_data(d, [0, 1], stream=2, n=600)
    assert X.shape == (2, 16, 8, 8) and Xt.shape == (2, 600, 8, 8)
    test = {x.tobytes() for x in np.asarray(dg._splits()["test"][0])}
    assert all(x.tobytes() in test for x in np.asarray(Xt[0]))
    assert not np.array_equal(np.asarray(X[0]), np.asarray(X[1]))


@pytest.mark.parametrize("kw, match", [
    (dict(n=1198), "n = 1198 train samples requested but the digits train split holds only 1197"),
    (dict(n=601, split="test"), "n = 601 test samples requested but the digits test split holds only 600"),
    (dict(n=8, tokens=6), "T = d = 8.*--tokens 6"),
    (dict(n=0), "n"),
])
def test_refusals(kw, match):
    args = dict(tokens=8, dim=8)
    args.update(kw)
    n = args.pop("n")
    with pytest.raises(InputError, match=match):
        dg.digits(KEY, n, **args)


def test_cli_takes_the_data_shape_and_refuses_too_many(capsys, tmp_path):
    entry = get_check("weak-convexity")
    cfg = config_from_args(entry, build_parser(entry).parse_args(["--data", "digits"]))
    assert (cfg.data.tokens, cfg.data.dim) == (8, 8)
    with pytest.raises(InputError, match="--tokens 6"):
        config_from_args(entry, build_parser(entry).parse_args(["--data", "digits", "--tokens", "6"]))
    out = tmp_path / "wc"
    assert main(["weak-convexity", "--data", "digits", "--n", "5000", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: n = 5000 train samples requested but the digits train split holds only 1197"]
    assert not out.exists()
    # a held-out size the user gives beyond the 600 held-out images is refused; the default is lowered
    assert main(["convergence", "--data", "digits", "--n-test", "1024", "--out", str(out), "--quiet"]) == 2
    assert "n_test = 1024" in capsys.readouterr().err and not out.exists()
    entry = get_check("convergence")
    notes = []
    cfg = config_from_args(entry, build_parser(entry).parse_args(["--data", "digits"]), notes)
    assert cfg.n_test == 600 and notes == ["--data digits holds 600 test samples: --n-test lowered from 1024 to 600"]


def test_missing_sklearn_names_the_extra(monkeypatch, capsys, tmp_path):
    real = builtins.__import__

    def no_sklearn(name, *a, **k):
        if name == "sklearn" or name.startswith("sklearn."):
            raise ImportError("No module named 'sklearn'")
        return real(name, *a, **k)
    monkeypatch.setattr(builtins, "__import__", no_sklearn)
    monkeypatch.setattr(dg, "_splits", dg._splits.__wrapped__)     # the cache would hide the import
    with pytest.raises(InputError) as e:
        dg.digits(KEY, 8, 8, 8)
    assert str(e.value) == dg.MISSING and "pip install 'mhajax[digits]'" in str(e.value)
    out = tmp_path / "wc"
    assert main(["weak-convexity", "--data", "digits", "--out", str(out), "--quiet"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"error: {dg.MISSING}"]
    assert not out.exists()
