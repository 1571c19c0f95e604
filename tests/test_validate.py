"""mhajax.validate (and the config validators built on it): every bad input raises
InputError whose message names the offending argument and value."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mhajax.experiments.configs import make
from mhajax.errors import InputError
from mhajax.experiments.configs import DataConfig
from mhajax.validate import heads_list
from mhajax.data.seeds import seed_list
from mhajax.models.base import MHAParams
from mhajax.validate import check_data, check_params, parse_list, positive_float, positive_int
from mhajax.experiments.weak_convexity import WeakConvexityConfig

N, T, D, H = 4, 3, 5, 2
rng = np.random.default_rng(0)
X = rng.standard_normal((N, T, D))
Y = np.array([1.0, -1.0, 1.0, -1.0])
TH = MHAParams(jnp.asarray(rng.standard_normal((H, T, D))), jnp.zeros((H, D, D)))


def test_valid_inputs_pass_unchanged():
    Xo, yo = check_data(X, Y)
    assert Xo is X and yo is Y
    x0, none = check_data(X[0])                          # a single sequence [T, d]
    assert x0 is X[0] or np.array_equal(x0, X[0])
    assert none is None
    assert check_params(TH, X) == H


@pytest.mark.parametrize("Xbad, needle", [
    ([[1.0]], "list"),
    (np.zeros(5), "(5,)"),
    (np.zeros((2, 2, 2, 2)), "(2, 2, 2, 2)"),
    (np.zeros((0, T, D)), "non-empty"),
    (np.ones((N, T, D), dtype=np.int32), "int32"),
])
def test_bad_X(Xbad, needle):
    with pytest.raises(InputError) as e:
        check_data(Xbad)
    assert needle in str(e.value)


@pytest.mark.parametrize("value", [np.nan, np.inf, -np.inf])
def test_non_finite_X_names_the_entry(value):
    Xb = X.copy()
    Xb[2, 1, 3] = value
    with pytest.raises(InputError) as e:
        check_data(Xb, Y)
    msg = str(e.value)
    assert "non-finite" in msg and "[2, 1, 3]" in msg and str(value) in msg


@pytest.mark.parametrize("ybad, needle", [
    (np.array([1.0, -1.0, 0.0, 1.0]), "y[2] = "),
    (np.array([1.0, 2.0, -1.0, 1.0]), "2.0"),
    (np.array([1.0, -1.0, 1.0]), "(3,)"),                  # wrong length
    (np.ones((N, 1)), "(4, 1)"),                            # not a vector
    (np.array([1, -1, 1, np.nan]), "nan"),
])
def test_bad_labels(ybad, needle):
    with pytest.raises(InputError) as e:
        check_data(X, ybad)
    assert needle in str(e.value)


def test_2d_X_with_labels_is_rejected():
    with pytest.raises(InputError, match=r"X has shape \(3, 5\)"):
        check_data(X[0], Y[:3])


def test_integer_labels_are_accepted():
    check_data(X, np.array([1, -1, 1, -1]))


def test_params_must_match_X():
    with pytest.raises(InputError, match="T=3"):
        check_params(TH, X[:, :2])
    with pytest.raises(InputError, match="d=5"):
        check_params(TH, X[..., :4])
    with pytest.raises(InputError, match="leading"):
        check_params(MHAParams(TH.U, jnp.zeros((H + 1, D, D))), X)
    with pytest.raises(InputError, match="H=0"):
        check_params(MHAParams(jnp.zeros((0, T, D)), jnp.zeros((0, D, D))), X)
    with pytest.raises(InputError, match="no arrays"):
        check_params(())
    bad = MHAParams(TH.U.at[0, 0, 0].set(jnp.nan), TH.W)
    with pytest.raises(InputError, match="non-finite"):
        check_params(bad, X)


def test_under_jit_only_shapes_are_checked():
    @jax.jit
    def f(X, y):
        check_data(X, y)          # tracers: values unknown, shapes known
        return X.sum()

    Xb = X.copy()
    Xb[0, 0, 0] = np.nan
    assert math.isnan(float(f(Xb, Y)))
    with pytest.raises(InputError):
        f(X, Y[:3])


@pytest.mark.parametrize("value", [0, -1, 1.5, "3", True, None])
def test_positive_int_rejects(value):
    with pytest.raises(InputError) as e:
        positive_int("steps", value)
    assert "steps" in str(e.value) and repr(value) in str(e.value)


def test_positive_int_accepts():
    assert positive_int("n", 3) == 3
    assert positive_int("n", np.int64(3)) == 3
    assert positive_int("n", 4.0) == 4
    assert positive_int("steps", 0, minimum=0) == 0


@pytest.mark.parametrize("value, allow_zero", [(0.0, False), (-1e-9, True), (float("nan"), False),
                                               (float("inf"), True), ("abc", False), (None, False),
                                               ("0.5", False), (True, True), (1 + 0j, False), (np.ones(2), False)])
def test_positive_float_rejects(value, allow_zero):
    with pytest.raises(InputError) as e:
        positive_float("lr", value, allow_zero=allow_zero)
    assert "lr" in str(e.value) and repr(value) in str(e.value)


def test_positive_float_accepts():
    assert positive_float("lr", 1) == 1.0
    assert positive_float("sigma", 0.0, allow_zero=True) == 0.0
    assert positive_float("lr", np.float32(0.5)) == 0.5 and positive_float("lr", np.asarray(2)) == 2.0


@pytest.mark.parametrize("value", ["", " ", "1,,2", "a", "0", "-1", "1,2,", "1.5", [], [0], [2, -3]])
def test_heads_list_rejects(value):
    with pytest.raises(InputError) as e:
        heads_list(value)
    msg = str(e.value)
    assert "heads" in msg
    if isinstance(value, str):
        assert repr(value) in msg or repr(value.strip()) in msg or value in msg


def test_heads_list_accepts():
    assert heads_list("1,4,16") == [1, 4, 16]
    assert heads_list(" 2 , 3 ") == [2, 3]
    assert heads_list((1, 2)) == [1, 2]


def test_seed_list():
    assert seed_list(3, 5) == [5, 6, 7]
    for bad in (dict(seeds=0), dict(seeds=2, seed0=-1), dict(seeds=2, seed0=1.5)):
        with pytest.raises(InputError):
            seed_list(**bad)


@pytest.mark.parametrize("kw, needle", [
    (dict(n=1), "n must be an integer >= 2, got 1"),
    (dict(n=0), "got 0"),
    (dict(dim=5, num_clusters=4), "dim=5"),
    (dict(tokens=0), "tokens"),
    (dict(zeta=0.0), "zeta"),
    (dict(sigma=float("nan")), "sigma"),
    (dict(u_scale=-1.0), "u_scale"),
])
def test_data_config_validate(kw, needle):
    with pytest.raises(InputError) as e:
        DataConfig(**kw).validate()
    assert needle in str(e.value)


@pytest.mark.parametrize("kw, needle", [
    (dict(heads=(0,)), "got 0"),
    (dict(heads=()), "heads"),
    (dict(heads="1,,2"), "'1,,2'"),
    (dict(steps=-1), "steps must be an integer >= 0, got -1"),
    (dict(every=0), "every must be an integer >= 1, got 0"),
    (dict(lr=0.0), "lr must be a finite number > 0, got 0.0"),
    (dict(lr=-1.0), "got -1.0"),
    (dict(lr=float("nan")), "got nan"),
    (dict(lr=float("inf")), "got inf"),
    (dict(method="eig"), "'eig'"),
    (dict(links="some"), "'some'"),
    (dict(seeds=0), "seeds"),
    (dict(lanczos_steps=1), "lanczos_steps"),
    (dict(max_cycles=0), "max_cycles"),
    (dict(data=DataConfig(n=1)), "n must be an integer >= 2"),
    (dict(data=DataConfig(dim=3, num_clusters=2)), "dim=3"),
])
def test_weak_convexity_config_validate(kw, needle):
    with pytest.raises(InputError) as e:
        make(WeakConvexityConfig, **kw).validate()
    assert needle in str(e.value)


def test_weak_convexity_config_valid():
    cfg = make(WeakConvexityConfig, heads="1, 2", steps=0).validate()
    assert cfg.heads == (1, 2)


# --- exact contracts: boundaries, every refusal's message, parse_list (mutation survivors) -------

def _msg(fn, *a, **k):
    with pytest.raises(InputError) as e:
        fn(*a, **k)
    return str(e.value)


def test_positive_int_bounds_are_inclusive():
    """Sizes reach XLA as int32: the default maximum is 2**31 − 1 (a literal here), accepted."""
    assert positive_int("n", 2**31 - 1) == 2**31 - 1
    assert _msg(positive_int, "n", 2**31) == f"n must be an integer <= {2**31 - 1}, got {2**31}"
    assert positive_int("n", 7, maximum=7) == 7 and positive_int("n", 3, minimum=3) == 3
    assert _msg(positive_int, "n", 8, maximum=7) == "n must be an integer <= 7, got 8"
    assert _msg(positive_int, "n", 2, minimum=3) == "n must be an integer >= 3, got 2"
    assert _msg(positive_int, "n", 1.5) == "n must be an integer >= 1, got 1.5"
    assert type(positive_int("n", np.float64(4.0))) is int


def test_positive_float_messages():
    assert _msg(positive_float, "lr", 0.0) == "lr must be a finite number > 0, got 0.0"
    assert _msg(positive_float, "s", -1.0, allow_zero=True) == "s must be a finite number >= 0, got -1.0"
    assert _msg(positive_float, "lr", "abc") == "lr must be a number, got 'abc'"
    assert positive_float("lr", np.float32(0.5)) == 0.5


def test_check_data_messages_name_the_right_axis():
    assert _msg(check_data, X, tokens=T + 1) == \
        f"X has {T} tokens but the parameters expect T={T + 1} (X shape {(N, T, D)})"
    assert _msg(check_data, X[:, :2], tokens=T) == \
        f"X has 2 tokens but the parameters expect T={T} (X shape {(N, 2, D)})"
    assert _msg(check_data, X, dim=D - 1) == \
        f"X has token dimension {D} but the parameters expect d={D - 1} (X shape {(N, T, D)})"
    assert _msg(check_data, X[0], dim=D + 1) == \
        f"X has token dimension {D} but the parameters expect d={D + 1} (X shape {(T, D)})"
    assert _msg(check_data, [[1.0]]) == "X must be an array of shape [n, T, d], got list"
    assert _msg(check_data, np.zeros((2, 0, 3))) == "X must be non-empty, got shape (2, 0, 3)"
    assert check_data(X, tokens=T, dim=D)[0] is X


def test_check_data_accepts_float32_and_refuses_shapeless_or_scalar_labels():
    X32 = X.astype(np.float32)
    assert check_data(X32, Y)[0] is X32
    assert _msg(check_data, X, [1.0, -1.0, 1.0, -1.0]) == "y must be a vector of shape [n], got shape None"
    assert _msg(check_data, X, np.float64(1.0)) == "y must be a vector of shape [n], got shape ()"
    assert _msg(check_data, X, Y[:3]) == \
        f"y has shape (3,) but X has shape {(N, T, D)}: need X [n, T, d] and y [n]"


def test_check_params_one_head_no_data_and_scalar_leaves():
    one = MHAParams(TH.U[:1], TH.W[:1])
    assert check_params(one) == 1 and check_params(one, X) == 1
    assert check_params(TH) == H                          # without X: nothing to match
    assert check_params({"a": jnp.zeros((3, 2))}, X) == 3  # no U: the data is not matched
    assert check_params(MHAParams(TH.U[0], TH.W[0, :T]), X[:, :2]) == T   # U [T, d] is not 3-D: X unmatched
    assert _msg(check_params, {"a": jnp.zeros((2, 3)), "b": jnp.float64(1.0)}) == \
        "every parameter array needs the same leading head axis H, got leading sizes [-1, 2]"
    assert _msg(check_params, {"a": jnp.zeros((1, 3)), "b": jnp.float64(1.0)}) == \
        "every parameter array needs the same leading head axis H, got leading sizes [-1, 1]"
    assert _msg(check_params, {"a": jnp.zeros((2, 3)), "b": jnp.zeros((3,))}) == \
        "every parameter array needs the same leading head axis H, got leading sizes [2, 3]"
    assert _msg(check_params, ()) == "params has no arrays"
    assert _msg(check_params, {"b": jnp.float64(1.0)}) == \
        "every parameter array needs the same leading head axis H, got leading sizes [-1]"
    assert _msg(check_params, MHAParams(jnp.zeros((0, T, D)), jnp.zeros((0, D, D)))) == \
        "number of heads H must be >= 1, got H=0"
    bad = MHAParams(TH.U, TH.W.at[1, 0, 0].set(jnp.inf))
    assert _msg(check_params, bad) == f"params contain non-finite values (leaf of shape {(H, D, D)})"


def test_check_params_under_jit_checks_shapes_only():
    @jax.jit
    def f(params, X):
        return check_params(params, X) + 0 * X.sum()

    bad = MHAParams(TH.U.at[0, 0, 0].set(jnp.nan), TH.W)
    assert int(f(bad, jnp.asarray(X))) == H               # tracers: values unknown, not checked
    with pytest.raises(InputError, match="T=3"):
        f(TH, jnp.asarray(X[:, :2]))


@pytest.mark.parametrize("value,kw,out", [
    ("1,4,16", {}, [1, 4, 16]),
    ("0, 2", dict(minimum=0), [0, 2]),
    ((3, 1), {}, [3, 1]),
    ("0.5, 2", dict(kind="float"), [0.5, 2.0]),
    ("0,1e-3", dict(kind="float", allow_zero=True), [0.0, 1e-3]),
    ([0.25], dict(kind="float"), [0.25]),
    ("dense,block", dict(kind="name", choices=("dense", "block", "lanczos")), ["dense", "block"]),
    ("1,2", dict(increasing=True, min_len=2), [1, 2]),
    ("5", {}, [5]),
])
def test_parse_list_accepts(value, kw, out):
    got = parse_list("--xs", value, **kw)
    assert got == out and all(type(a) is type(b) for a, b in zip(got, out))


@pytest.mark.parametrize("value,kw,msg", [
    ("", {}, "--xs must be a comma-separated list of integers >= 1, got ''"),
    ("1,,2", {}, "--xs must be a comma-separated list of integers >= 1, got '1,,2'"),
    ("1,", {}, "--xs must be a comma-separated list of integers >= 1, got '1,'"),
    ("1,a", {}, "--xs must be a comma-separated list of integers >= 1, got '1,a' ('a' is not an integer)"),
    ("0", {}, "--xs must be an integer >= 1, got 0"),
    ("2,1", dict(minimum=2), "--xs must be an integer >= 2, got 1"),
    ("x", dict(minimum=0), "--xs must be a comma-separated list of integers >= 0, got 'x' ('x' is not an integer)"),
    (5, {}, "--xs must be a list of integers >= 1, got 5"),
    ([], {}, "--xs must be a non-empty list of integers >= 1, got []"),
    ("1,b", dict(kind="float"), "--xs must be a comma-separated list of numbers > 0, got '1,b' ('b' is not a number)"),
    ("a", dict(kind="float", allow_zero=True),
     "--xs must be a comma-separated list of numbers >= 0, got 'a' ('a' is not a number)"),
    ("0", dict(kind="float"), "--xs must be a finite number > 0, got 0.0"),
    ("-1", dict(kind="float", allow_zero=True), "--xs must be a finite number >= 0, got -1.0"),
    ([None], dict(kind="float"), "--xs must be a number, got None"),
    ("", dict(kind="name", choices=("a", "b")), "--xs must be a comma-separated list of names from a, b, got ''"),
    ("a,c", dict(kind="name", choices=("a", "b")), "--xs: unknown value 'c'; choose from a, b"),
    ("a", dict(kind="name", choices=(1, 2)), "--xs: unknown value 'a'; choose from 1, 2"),
    ("a", dict(kind="name"), "--xs: unknown value 'a'; choose from "),
    ("1", dict(min_len=2), "--xs needs at least 2 values, got '1'"),
    ("1,2", dict(min_len=3), "--xs needs at least 3 values, got '1,2'"),
    ("1,1", dict(increasing=True), "--xs must be strictly increasing, got [1, 1]"),
    ("1,3,2", dict(increasing=True), "--xs must be strictly increasing, got [1, 3, 2]"),
])
def test_parse_list_refuses_with_one_exact_message(value, kw, msg):
    assert _msg(parse_list, "--xs", value, **kw) == msg


def test_parse_list_defaults_and_heads_list():
    """Defaults: kind int, minimum 1, zero not allowed, one value suffices, order free."""
    assert parse_list("--xs", "3,1,2") == [3, 1, 2]
    assert parse_list("--xs", "7") == [7]
    assert heads_list("2, 8") == [2, 8]
    assert _msg(heads_list, "0") == "--heads must be an integer >= 1, got 0"
    assert _msg(heads_list, "1.5") == \
        "--heads must be a comma-separated list of integers >= 1, got '1.5' ('1.5' is not an integer)"


def test_checked_key_takes_raw_and_typed_keys_and_names_anything_else():
    from mhajax.validate import checked_key
    assert np.array_equal(checked_key("f", None), jax.random.PRNGKey(0))
    raw, typed = jax.random.PRNGKey(7), jax.random.key(7)
    assert checked_key("f", raw) is raw and checked_key("f", typed) is typed
    assert checked_key("f", np.zeros(4, np.uint32)) is not None       # rbg key data
    for bad, shown in ((7, "got 7"), ("k", "got 'k'"), (np.zeros(2), "got an array of dtype float64 and shape (2,)"),
                       (np.zeros(3, np.uint32), "got an array of dtype uint32 and shape (3,)"),
                       (jax.random.split(typed), "got an array of dtype key<fry> and shape (2,)")):
        with pytest.raises(InputError) as e:
            checked_key("f", bad)
        assert str(e.value) == f"f: key must be a PRNG key (jax.random.key(seed) or jax.random.PRNGKey(seed)), {shown}"
    jax.jit(lambda k: checked_key("f", k))(raw)                        # a traced key passes unchecked
