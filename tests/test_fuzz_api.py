"""Input fuzzing of the public API: bad values raise InputError naming them.

Covered: every numeric option of every registered check's config, sub-configs included
(``*.validate()``),
``DataConfig`` names and paths, ``init_params`` / every ``HeadModel.init``, and the data
and parameter checks that guard ``mha`` and ``empirical_risk`` (``mhajax.validate.check_data``,
``check_params``: ``mha`` itself is pure and jit-able and does not validate). Never a bare
exception: anything other than :class:`InputError` fails the test.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mhajax.models.softmax.head import init_params
from mhajax.errors import InputError
from mhajax.experiments.configs import DataConfig
from mhajax.experiments import CHECKS
from mhajax.experiments.configs import options, updated
from mhajax.validate import check_data, check_params
from mhajax.models import MODELS
from mhajax.models.base import get_model

BAD_NUMBERS = [float("nan"), float("inf"), float("-inf"), -1, -1e300, "abc", None, [], "1,2"]


def _numeric_fields():
    """``(config class, dotted option path)`` of every numeric option of every check."""
    cases = []
    for entry in CHECKS.values():
        excluded = set(entry.config.EXCLUDE)   # options the check sets itself (e.g. data.n from ns)
        for path, _, default in options(entry.config()):
            if path in excluded:
                continue
            if isinstance(default, (int, float)) and not isinstance(default, bool):
                cases.append((entry.config, path))
    return cases


NUMERIC = _numeric_fields()


def _expect_input_error(fn, *needles):
    """``fn()`` must raise InputError whose message contains one of ``needles``."""
    try:
        fn()
    except InputError as e:
        msg = str(e)
        assert any(str(n) in msg for n in needles), f"{msg!r} names none of {needles}"
        return msg
    except Exception as e:  # a bare exception is a failure of the contract
        pytest.fail(f"{type(e).__name__} instead of InputError: {e}")
    pytest.fail(f"accepted (no InputError); wanted one naming {needles}")


@pytest.mark.parametrize("C,path", [
    pytest.param(C, f) for C, f in NUMERIC], ids=[f"{C.__name__}.{f}" for C, f in NUMERIC])
@settings(max_examples=len(BAD_NUMBERS))
@given(bad=st.sampled_from(BAD_NUMBERS))
def test_every_numeric_config_field_refuses_bad_values(C, path, bad):
    field = path.rsplit(".", 1)[-1]
    cfg = updated(C(), {path: bad})
    _expect_input_error(cfg.validate, field, field.replace("_", " "), repr(bad), str(bad))


def test_the_config_table_covers_the_experiments():
    names = {C.__name__ for C, _ in NUMERIC}
    paths = {p for _, p in NUMERIC}
    assert {"WeakConvexityConfig", "NTKMarginConfig", "OneStepConfig", "VariantsConfig"} <= names
    assert {"data.n", "gd.lr", "eig.lanczos_steps", "boot.level"} <= paths and len(NUMERIC) > 80


@pytest.mark.parametrize("field,value,needle", [
    ("dataset", "bogus", "bogus"), ("dataset", "", "''"), ("model", "bogus", "bogus"),
    ("model", None, "None"), ("loss", "hinge", "hinge"), ("loss", 3, "3"),
    ("data_path", "x.npz", "--data-path"), ("test_path", "x.npz", "--test-path"),
    ("dim", 3, "dim"), ("zeta", 1.5, "zeta"), ("num_clusters", 0, "num_clusters"),
    ("n", 1, "n"), ("n", 2.5, "2.5"), ("n", True, "True"),
])
def test_data_config_names_and_paths(field, value, needle):
    _expect_input_error(dataclasses.replace(DataConfig(), **{field: value}).validate, needle)


def test_npz_paths_missing_and_garbage(tmp_path):
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"\x00not a zip")
    for path in (str(tmp_path / "missing.npz"), str(junk)):
        _expect_input_error(DataConfig(dataset="npz", data_path=path).validate, path)
    _expect_input_error(DataConfig(dataset="npz").validate, "--data-path")


@pytest.mark.parametrize("name", MODELS)
@settings(max_examples=12)
@given(which=st.sampled_from(["heads", "tokens", "dim", "u_scale", "w_scale"]),
       bad=st.sampled_from([0, -1, 2.5, float("nan"), float("inf"), "x", None]))
def test_init_refuses_bad_sizes_and_scales(name, which, bad):
    if which in ("u_scale", "w_scale") and bad in (0, 2.5):
        bad = -bad - 1.0  # 0 and 2.5 are valid scales (W = 0 is the paper's start): use < 0
    kw = dict(heads=2, tokens=3, dim=4, u_scale=1.0, w_scale=0.5)
    kw[which] = bad
    model = get_model(name)
    _expect_input_error(lambda: model.init(jax.random.PRNGKey(0), kw["heads"], kw["tokens"], kw["dim"],
                                           u_scale=kw["u_scale"], w_scale=kw["w_scale"]),
                        which, repr(bad))
    if name == "softmax":
        _expect_input_error(lambda: init_params(jax.random.PRNGKey(0), kw["heads"], kw["tokens"],
                                                kw["dim"], u_scale=kw["u_scale"], w_scale=kw["w_scale"]),
                            which, repr(bad))


# --- the data checks in front of mha / empirical_risk ------------------------------------

N, T, D = 6, 3, 4


@settings(max_examples=30)
@given(i=st.integers(0, N - 1), t=st.integers(0, T - 1), k=st.integers(0, D - 1),
       bad=st.sampled_from([np.nan, np.inf, -np.inf]))
def test_non_finite_tokens_are_located(i, t, k, bad):
    X = np.random.default_rng(0).normal(size=(N, T, D))
    X[i, t, k] = bad
    y = np.ones(N)
    msg = _expect_input_error(lambda: check_data(X, y), "non-finite")
    assert f"X[{i}, {t}, {k}]" in msg


@settings(max_examples=30)
@given(i=st.integers(0, N - 1), label=st.sampled_from([0.0, 2.0, -0.5, np.nan, 1.0000001]))
def test_labels_other_than_pm1_are_named(i, label):
    X = np.zeros((N, T, D))
    y = np.ones(N)
    y[i] = label
    msg = _expect_input_error(lambda: check_data(X, y), "labels")
    assert f"y[{i}]" in msg


@pytest.mark.parametrize("X,y,needle", [
    (np.zeros((N, T)), None, None),                      # [T, d] alone is valid: no error
    (np.zeros((N, T, D, 1)), None, "shape"),
    (np.zeros((0, T, D)), None, "non-empty"),
    (np.zeros((N, T, D), dtype=np.int64), None, "floating"),
    ([[1.0]], None, "array"),
    (np.zeros((N, T, D)), np.ones(N + 1), "y has shape"),
    (np.zeros((N, T, D)), np.ones((N, 1)), "vector"),
    (np.zeros((T, D)), np.ones(N), "y has shape"),
])
def test_shapes_and_dtypes(X, y, needle):
    if needle is None:
        assert check_data(X, y) == (X, y)
        return
    _expect_input_error(lambda: check_data(X, y), needle)


def test_tokens_and_dim_must_fit_the_parameters():
    th = init_params(jax.random.PRNGKey(0), 2, T, D)
    _expect_input_error(lambda: check_params(th, jnp.zeros((N, T + 1, D))), f"T={T}")
    _expect_input_error(lambda: check_params(th, jnp.zeros((N, T, D + 2))), f"d={D}")
    bad = th._replace(W=th.W.at[1, 0, 0].set(jnp.nan))
    _expect_input_error(lambda: check_params(bad), "non-finite")
    _expect_input_error(lambda: check_params(th._replace(W=th.W[:1])), "leading")
    _expect_input_error(lambda: check_params(()), "no arrays")
