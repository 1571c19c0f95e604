"""One validation at every public entry that takes θ, X or y (mhajax.models.base.check_problem):
labels in {0, 1} and a token dimension that does not fit θ end in one line naming the function,
never in a traceback from inside JAX; JAX's float64 switched off is refused.

The front (``mhajax``): user-facing names only, the memory-checked ones from ``mhajax.api``. Each
entry of ``mhajax.api`` has the signature of the plain function it calls plus ``force``, asks
the memory guard before anything runs (refused in one line naming itself; ``force=True``: the
plain function's result), and the plain function asks nothing."""
import dataclasses
import inspect
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mhajax as mh
from mhajax import api
from mhajax import testing as mt
from mhajax.analysis import ntk
from mhajax.curvature import census, operators, spectrum
from mhajax.curvature.slq import slq_histogram
from mhajax.data import mixture
from mhajax.models.base import MHAParams
from mhajax.models.softmax import head
from mhajax.runtime import memory as mem
from mhajax.train import train as plain_train

N, T, D, H = 6, 3, 4, 2


def problem():
    kx, ku, kw = jax.random.split(jax.random.PRNGKey(0), 3)
    X = jax.random.normal(kx, (N, T, D)) / 2
    y = jnp.array([1.0, -1.0] * (N // 2))
    th = MHAParams(jax.random.normal(ku, (H, T, D)), jax.random.normal(kw, (H, D, D)) / D)
    return th, X, y


def _dict_head(theta, X):   # a user's head whose parameters are a dict (no U of shape [H, T, d] to compare)
    return jnp.sum(jnp.tanh(X @ theta["w"]) @ theta["v"])


DICT = mh.HeadModel("dict-head", _dict_head, lambda key, H, T, d, **kw: {
    "w": jax.random.normal(key, (H, d, 3)), "v": jnp.ones((H, 3))})

#: name -> call(θ, X, y); every public function that takes θ, X or y
ENTRIES = {
    "mha": lambda th, X, y, m: mh.mha(th, X, m),
    "empirical_risk": lambda th, X, y, m: mh.empirical_risk(th, X, y, m),
    "train": lambda th, X, y, m: mh.train(th, X, y, 1.0, steps=1, every=1, model=m),
    "hvp": lambda th, X, y, m: mh.hvp(th, X, y, th, m),
    "dense_hessian": lambda th, X, y, m: mh.dense_hessian(th, X, y, m),
    "structured_parts": lambda th, X, y, m: mh.structured_parts(th, X, y, m),
    "assemble_hessian": lambda th, X, y, m: mh.assemble_hessian(th, X, y, m),
    "head_blocks": lambda th, X, y, m: mh.head_blocks(th, X, y, m),
    "per_sample_head_hessian_norms": lambda th, X, y, m: mh.per_sample_head_hessian_norms(th, X, m),
    "lambda_min": lambda th, X, y, m: mh.lambda_min(th, X, y, model=m),
    "lambda_min_enclosure": lambda th, X, y, m: mh.lambda_min_enclosure(th, X, y, model=m),
    "hessian_extremes": lambda th, X, y, m: mh.hessian_extremes(th, X, y, model=m),
    "spectral_counts": lambda th, X, y, m: mh.spectral_counts(th, X, y, [0.0], model=m),
    "spectral_histogram": lambda th, X, y, m: mh.spectral_histogram(th, X, y, [-1.0, 0.0, 1.0], model=m),
    "slq_histogram": lambda th, X, y, m: slq_histogram(th, X, y, [-1.0, 0.0, 1.0], model=m),
    "chain": lambda th, X, y, m: mh.chain(th, X, y, model=m),
    "assert_derivatives": lambda th, X, y, m: mt.assert_derivatives(th, X, y, model=m),
    "assert_chain": lambda th, X, y, m: mt.assert_chain(th, X, y, model=m),
    "assert_weak_convexity": lambda th, X, y, m: mt.assert_weak_convexity(th, X, y, kappa=1.0, model=m),
    "assert_self_bounded_gradient": lambda th, X, y, m: mt.assert_self_bounded_gradient(th, X, y, beta2=1.0,
                                                                                        model=m),
    "assert_self_bounded_smoothness": lambda th, X, y, m: mt.assert_self_bounded_smoothness(
        th, X, y, kappa=1.0, beta2=1.0, model=m),
    "assert_head_block_diagonal": lambda th, X, y, m: mt.assert_head_block_diagonal(th, X, y, model=m),
    "ntk_features": lambda th, X, y, m: mh.ntk_features(th, X, m),
    "ntk_margin": lambda th, X, y, m: mh.ntk_margin(th, X, y, m),
}
NO_LABELS = {"mha", "per_sample_head_hessian_norms", "ntk_features"}


def one_line(e: Exception) -> str:
    msg = str(e)
    assert msg and "\n" not in msg, msg
    return msg


@pytest.mark.parametrize("name", sorted(set(ENTRIES) - NO_LABELS))
def test_labels_in_0_1_are_refused_in_one_line(name):
    th, X, y = problem()
    with pytest.raises(mh.InputError) as e:
        ENTRIES[name](th, X, (y + 1) / 2, mh.SOFTMAX)
    assert "labels must be -1 or +1, got y[" in one_line(e.value)


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_a_token_dimension_that_does_not_fit_theta_is_refused_in_one_line(name):
    th, X, y = problem()
    with pytest.raises(mh.InputError) as e:
        ENTRIES[name](th, X[..., :D - 1], y, mh.SOFTMAX)
    msg = one_line(e.value)
    assert f"token dimension {D - 1}" in msg and f"d={D}" in msg, msg


#: a malformed data set -> what the refusal says of it
MALFORMED = {
    "a NaN token": (lambda X: X.at[1, 2, 0].set(jnp.nan), "X contains 1 non-finite value(s), first X[1, 2, 0] = nan"),
    "integer tokens": (lambda X: X.astype(jnp.int32), "X must be a floating-point array, got dtype int32"),
    "no samples": (lambda X: X[:0], f"X must be non-empty, got shape (0, {T}, {D})"),
    "one sequence": (lambda X: X[0], f"X [S, n, T, d], got shape ({T}, {D})"),   # train: S runs or one
}


@pytest.mark.parametrize("bad", sorted(MALFORMED))
@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_a_malformed_data_set_is_refused_in_one_line_naming_the_entry(name, bad):
    """Refused before anything is computed, by every entry; ``mha`` alone takes one sequence."""
    th, X, y = problem()
    change, said = MALFORMED[bad]
    if name == "mha" and bad == "one sequence":
        assert np.shape(ENTRIES[name](th, change(X), None, mh.SOFTMAX)) == ()
        return
    with pytest.raises(mh.InputError) as e:
        ENTRIES[name](th, change(X), y if bad != "no samples" else y[:0], mh.SOFTMAX)
    msg = one_line(e.value)
    if bad == "one sequence" and name != "train":
        said = f"X must have shape [n, T, d], got shape ({T}, {D})"
    assert msg.startswith(f"{name}: ") and said in msg, msg


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_a_users_model_that_cannot_evaluate_theta_on_x_is_refused_in_one_line(name):
    th = DICT.init(jax.random.PRNGKey(1), H, T, D)
    _, X, y = problem()
    with pytest.raises(mh.InputError) as e:
        ENTRIES[name](th, X[..., :D - 1], y, DICT)
    msg = one_line(e.value)
    assert "model 'dict-head' cannot evaluate θ" in msg and f"({T}, {D - 1})" in msg, msg


#: the entries built on the head blocks B or a head model's closed forms: refused for a coupled model
NEEDS_HEADS = {"structured_parts", "assemble_hessian", "head_blocks", "per_sample_head_hessian_norms",
               "spectral_counts", "spectral_histogram", "slq_histogram", "assert_chain", "assert_weak_convexity",
               "assert_self_bounded_gradient", "assert_self_bounded_smoothness"}


@pytest.mark.parametrize("name", sorted(ENTRIES))
def test_a_coupled_model_is_computed_or_refused_in_one_line(name):
    """The documented coupled model (two-layer: no head blocks, no closed forms) is computed by
    every entry that needs neither, refused in one line naming the entry and the model by those
    that do, and found not block-diagonal by ``assert_head_block_diagonal`` (its heads interact)."""
    th = mh.TWO_LAYER.init(jax.random.PRNGKey(1), H, T, D)
    _, X, y = problem()
    if name == "assert_head_block_diagonal":
        with pytest.raises(mt.BoundViolation) as e:
            ENTRIES[name](th, X, y, mh.TWO_LAYER)
        assert [c.name for c in e.value.report.failures] == ["phi_block_diagonal", "loss_block_diagonal"]
        assert ("blocks_equal_B", "a coupled model has no mhajax head blocks B_h to compare") in e.value.report.skipped
    elif name in NEEDS_HEADS:
        with pytest.raises(mh.InputError) as e:
            ENTRIES[name](th, X, y, mh.TWO_LAYER)
        assert one_line(e.value) == (f"{name}: model 'two-layer' couples its heads (no head blocks); {name} needs "
                                     "a head model (a HeadModel)")
    elif name == "mha":
        with pytest.raises(mh.InputError, match="^mha: model 'two-layer' couples its heads; use mhajax.models.output$"):
            ENTRIES[name](th, X, y, mh.TWO_LAYER)
    else:   # computed: every number it returns is finite (a report: every check passed)
        out = ENTRIES[name](th, X, y, mh.TWO_LAYER)
        if isinstance(out, mt.Report):
            assert out.checks and not out.failures, out
            return
        leaves = dataclasses.asdict(out).values() if dataclasses.is_dataclass(out) else jax.tree_util.tree_leaves(out)
        nums = [np.asarray(v) for v in leaves if isinstance(v, (jax.Array, np.ndarray, float))]
        assert nums and all(np.all(np.isfinite(v)) for v in nums), (name, out)


def test_the_refusal_names_the_function():
    th, X, y = problem()
    with pytest.raises(mh.InputError, match=r"^empirical_risk: labels"):
        mh.empirical_risk(th, X, (y + 1) / 2)
    with pytest.raises(mh.InputError, match=r"^train: "):
        mh.train(th, X, (y + 1) / 2, 1.0, steps=1, every=1)


def test_a_batch_of_runs_is_checked_run_by_run():
    th, X, y = problem()
    batch = jax.tree_util.tree_map(lambda a: jnp.stack([a, a]), th)
    Xs, ys = jnp.stack([X, X]), jnp.stack([y, y.at[3].set(0.0)])
    with pytest.raises(mh.InputError, match="labels must be -1 or"):
        mh.train(batch, Xs, ys, 1.0, steps=1, every=1)
    with pytest.raises(mh.InputError, match="runs"):
        mh.train(batch, Xs[:1], ys[:1], 1.0, steps=1, every=1)


def test_a_model_that_returns_no_scalar_is_refused():
    wide = mh.HeadModel("vector-head", lambda t, X: jnp.sum(t.U * X, axis=-1), mh.init_params)
    th, X, y = problem()
    with pytest.raises(mh.InputError, match="must return a scalar"):
        mh.empirical_risk(th, X, y, wide)


def test_float64_switched_off_is_refused_with_how_to_turn_it_on():
    code = ("import numpy as np, mhajax as mh\n"          # numpy arrays: nothing for JAX to compile
            "X, y = np.zeros((8, 3, 6), np.float32), np.ones(8, np.float32)\n"
            "th = mh.MHAParams(np.zeros((2, 3, 6), np.float32), np.zeros((2, 6, 6), np.float32))\n"
            "try:\n    mh.lambda_min(th, X, y)\nexcept mh.InputError as e:\n    print('REFUSED', e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.startswith("REFUSED lambda_min: JAX's float64 is off"), r.stdout
    assert "jax.config.update('jax_enable_x64', True)" in r.stdout


# -- the front and the memory check at the door (mhajax.api) --------------------------------------

KEY = jax.random.PRNGKey(0)

#: public entry -> (the plain function it calls, a call on the small problem: fn(th, X, y, **kw))
DOOR = {
    "init_params": (head.init_params, lambda f, th, X, y, **kw: f(KEY, H, T, D, **kw)),
    "tokenized_mixture": (mixture.tokenized_mixture, lambda f, th, X, y, **kw: f(KEY, N, T, D, num_clusters=2, **kw)),
    "train": (plain_train, lambda f, th, X, y, **kw: f(th, X, y, 0.5, steps=2, every=1, **kw)),
    "dense_hessian": (operators.dense_hessian, lambda f, th, X, y, **kw: f(th, X, y, **kw)),
    "structured_parts": (operators.structured_parts, lambda f, th, X, y, **kw: f(th, X, y, **kw)),
    "hessian_extremes": (spectrum.hessian_extremes, lambda f, th, X, y, **kw: f(th, X, y, method="block", **kw)),
    "lambda_min": (spectrum.lambda_min, lambda f, th, X, y, **kw: f(th, X, y, **kw)),
    "lambda_min_enclosure": (spectrum.lambda_min_enclosure, lambda f, th, X, y, **kw: f(th, X, y, **kw)),
    "spectral_counts": (census.spectral_counts, lambda f, th, X, y, **kw: f(th, X, y, [-0.1, 0.0, 0.1], **kw)),
    "spectral_histogram": (census.spectral_histogram, lambda f, th, X, y, **kw: f(th, X, y, [-1.0, 0.0, 1.0], **kw)),
    "ntk_features": (ntk.ntk_features, lambda f, th, X, y, **kw: f(th, X, **kw)),
    "ntk_margin": (ntk.ntk_margin, lambda f, th, X, y, **kw: f(th, X, y, **kw)),
}


def test_the_front_exports_the_checked_entries_and_user_facing_names_only():
    assert sorted(api.__all__) == sorted(DOOR)
    for name in api.__all__:
        assert getattr(mh, name) is getattr(api, name) and name in mh.__all__, name
    for name in ("finalize", "chain_raw", "beta2", "beta3"):     # reachable by module path only
        assert name not in mh.__all__ and not hasattr(mh, name), name
    from mhajax.analysis.chain import chain_raw, finalize
    from mhajax.models.softmax import beta2, beta3
    assert all(callable(f) for f in (chain_raw, finalize, beta2, beta3))
    assert sorted(mh.__all__) == sorted(set(mh.__all__)) and all(hasattr(mh, n) for n in mh.__all__)


@pytest.mark.parametrize("name", sorted(DOOR))
def test_each_entry_has_the_plain_signature_and_force(name):
    """The same parameters (names, kinds, defaults) as the plain function, and ``force=False`` in
    the place where the plain function would take one more keyword."""
    plain = inspect.signature(DOOR[name][0]).parameters
    public = dict(inspect.signature(getattr(api, name)).parameters)
    force = public.pop("force")
    assert force.default is False and force.kind in (force.KEYWORD_ONLY, force.POSITIONAL_OR_KEYWORD)
    assert [(p.name, p.kind, p.default) for p in public.values()] == [(p.name, p.kind, p.default)
                                                                    for p in plain.values()]
    assert "force" not in plain


class Tripwire(Exception):
    pass


def _trip(*a, **k):
    raise Tripwire


@pytest.mark.parametrize("name", sorted(DOOR))
def test_each_entry_refuses_in_one_line_before_the_plain_function_runs(name, monkeypatch):
    """With 1 byte available the entry is refused (a MemoryGuardError naming itself and offering
    force=True) before the plain function is reached (a tripwire in its place)."""
    th, X, y = problem()
    plain, call = DOOR[name]
    monkeypatch.delenv(mem.FORCE_ENV, raising=False)
    monkeypatch.setattr(mem, "available", lambda: mem.Available(1, "test budget"))
    monkeypatch.setattr(sys.modules[plain.__module__], plain.__name__, _trip)
    monkeypatch.setattr(api, "gd_train", _trip)
    with pytest.raises(mem.MemoryGuardError) as e:
        call(getattr(api, name), th, X, y)
    msg = one_line(e.value)
    assert msg.startswith(f"{name}: ") and msg.endswith("pass force=True") and "1 B available (test budget)" in msg


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(DOOR))
def test_the_plain_function_asks_no_guard_and_force_gives_its_result(name, monkeypatch):
    """Every guard function a tripwire: the plain function runs on the small problem; the
    public entry trips it, and with force=True (the guard skipped, 1 byte available) returns the
    plain function's result, leaf for leaf."""
    th, X, y = problem()
    plain, call = DOOR[name]
    monkeypatch.delenv(mem.FORCE_ENV, raising=False)
    for fn in ("guard", "guard_call", "guard_args"):
        monkeypatch.setattr(mem, fn, _trip)
    want = call(plain, th, X, y)
    with pytest.raises(Tripwire):
        call(getattr(api, name), th, X, y)
    monkeypatch.undo()
    monkeypatch.delenv(mem.FORCE_ENV, raising=False)
    monkeypatch.setattr(mem, "available", lambda: mem.Available(1, "test budget"))
    got = call(getattr(api, name), th, X, y, force=True)
    a, b = _leaves(want), _leaves(got)
    assert len(a) == len(b) > 0
    for u, v in zip(a, b):
        u, v = np.asarray(u), np.asarray(v)
        assert np.array_equal(u, v, equal_nan=u.dtype.kind in "fc"), name


def _leaves(x) -> list:
    """The leaves of a result (a dataclass's fields, a pytree's leaves)."""
    if dataclasses.is_dataclass(x):
        x = [getattr(x, f.name) for f in dataclasses.fields(x)]
    return jax.tree_util.tree_leaves(x)


_P = T * D + D * D          # parameters per softmax head: U [T, d], W [d, d]

#: public entry -> the arrays its memory check sizes on the small problem (the module docstring's
#: list, written out by hand: the labels a refusal names and the shapes it counts)
ARRAYS = {
    "init_params": [("U [H, T, d]", (H, T, D)), ("W [H, d, d]", (H, D, D))],
    "tokenized_mixture": [("X [n, T, d]", (N, T, D))],
    "train": mem.gd(1, N, T, D, H, _P, 3, 2),                       # one run, steps=2, every=1: 3 kept
    "dense_hessian": [("∇²L̂ [P, P]", (H * _P, H * _P))],
    "structured_parts": mem.analysis(N, 0, H, _P, "block"),
    "hessian_extremes": mem.analysis(N, T, H, _P, "block", 64, False),
    "lambda_min": mem.analysis(N, T, H, _P, "inertia", 64, False),   # "auto" at P = 56
    "lambda_min_enclosure": mem.analysis(N, T, H, _P, "inertia", 64, False),
    "spectral_counts": mem.analysis(N, 0, H, _P, "inertia")
    + [("a batch of thresholds' row weights [4, k, P]", (4, census.batch_size(H * _P), H * _P))],
    "spectral_histogram": mem.analysis(N, 0, H, _P, "inertia")
    + [("a batch of thresholds' row weights [4, k, P]", (4, census.batch_size(H * _P), H * _P))],
    "ntk_features": [("NTK features G [n, P]", (N, H * _P))],
    "ntk_margin": [("NTK features G [n, P]", (N, H * _P)), ("y·G on the host [n, P]", (N, H * _P))],
}


@pytest.mark.parametrize("name", sorted(DOOR))
def test_each_entry_sizes_the_arrays_it_names(name, monkeypatch):
    """The estimate each entry hands the guard: its own name, 8 bytes per float64 entry, and the
    arrays above (a wrong label misleads the refusal, a wrong shape mis-sizes it); the plain
    function is a tripwire, so only the check runs."""
    th, X, y = problem()
    if name == "train":
        th, X, y = jax.tree_util.tree_map(lambda a: a[None], (th, X, y))
    plain, call = DOOR[name]
    seen = []
    monkeypatch.setattr(mem, "guard", lambda estimate, sizes, *a, **k: seen.append(estimate(sizes)))
    monkeypatch.setattr(sys.modules[plain.__module__], plain.__name__, _trip)
    monkeypatch.setattr(api, "gd_train", _trip)
    with pytest.raises(Tripwire):
        call(getattr(api, name), th, X, y)
    assert [(e.what, list(e.terms), e.itemsize) for e in seen] == [(name, ARRAYS[name], 8)]


@pytest.mark.parametrize("name", ["hessian_extremes", "lambda_min", "lambda_min_enclosure"])
def test_a_coupled_model_is_sized_as_its_lanczos_route(name, monkeypatch):
    """The coupled two-layer model has no head blocks: ``auto`` is Lanczos there, and its arrays
    (``num_steps`` Lanczos vectors of size P, no B) are the ones checked, not those of the
    certified route of a head model at the same P."""
    th = mh.TWO_LAYER.init(jax.random.PRNGKey(1), H, T, D)
    _, X, y = problem()
    p = sum(a.size for a in jax.tree_util.tree_leaves(th)) // H
    seen = []
    monkeypatch.setattr(mem, "guard", lambda estimate, sizes, *a, **k: seen.append(estimate(sizes)))
    monkeypatch.setattr(spectrum, name, _trip)
    with pytest.raises(Tripwire):
        getattr(api, name)(th, X, y, model=mh.TWO_LAYER, num_steps=12)
    want = mem.analysis(N, T, H, p, "lanczos", 12, True)
    assert want != mem.analysis(N, T, H, p, "inertia", 12, False)
    assert [(e.what, list(e.terms)) for e in seen] == [(name, want)]


def _other_args():
    """Every argument of every entry away from its default: another head model and loss, the
    dense route, other sizes and solver settings; ``(plain call, public call)`` per entry."""
    from mhajax.losses import EXPONENTIAL
    from mhajax.models.base import get_model
    m, lo = get_model("linear"), EXPONENTIAL
    th, X, y = problem()
    opt = plain_train(th, X, y, 0.1, steps=1, every=1).opt_state
    k = jax.random.PRNGKey(3)
    return {
        "init_params": lambda f, **kw: f(k, 3, 2, 5, u_scale=0.5, w_scale=0.3, dtype=jnp.float32, **kw),
        "tokenized_mixture": lambda f, **kw: f(k, 8, 5, 6, zeta=0.4, num_clusters=3, signal=2.0, sigma=0.3,
                                               antipodal=True, dtype=jnp.float32, **kw),
        "train": lambda f, **kw: f(th, X, y, 0.3, steps=3, every=2, model=m, loss=lo, opt_state=opt, **kw),
        "dense_hessian": lambda f, **kw: f(th, X, y, m, lo, 2, **kw),
        "structured_parts": lambda f, **kw: f(th, X, y, m, lo, **kw),
        "hessian_extremes": lambda f, **kw: f(th, X, y, "dense", k, model=m, loss=lo, **kw),
        "lambda_min": lambda f, **kw: f(th, X, y, "dense", m, lo, num_steps=20, **kw),
        "lambda_min_enclosure": lambda f, **kw: f(th, X, y, "block", m, lo, max_cycles=5, **kw),
        "spectral_counts": lambda f, **kw: f(th, X, y, [-0.2, 0.05], model=m, loss=lo, num_near=3, **kw),
        "spectral_histogram": lambda f, **kw: f(th, X, y, [-1.0, -0.1, 0.5, 2.0], model=m, loss=lo, rtol=0.2,
                                                max_counts=40, refine_batch=2, num_near=3, **kw),
        "ntk_features": lambda f, **kw: f(th, X, m, **kw),
        "ntk_margin": lambda f, **kw: f(th, X, y, m, max_iter=7, **kw),
    }


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(DOOR))
def test_each_entry_passes_every_argument_on(name, monkeypatch):
    """With every argument away from its default and ``force=True``, each entry returns exactly what
    the plain function returns for the same arguments: none is dropped or replaced on the way."""
    calls = _other_args()[name]
    monkeypatch.delenv(mem.FORCE_ENV, raising=False)
    want, got = calls(DOOR[name][0]), calls(getattr(api, name), force=True)
    assert type(got) is type(want)
    a, b = _leaves(want), _leaves(got)
    assert len(a) == len(b) > 0
    for u, v in zip(a, b):
        u, v = np.asarray(u), np.asarray(v)
        assert u.dtype == v.dtype and np.array_equal(u, v, equal_nan=u.dtype.kind in "fc"), name


def test_a_single_run_of_train_is_sized_as_one_run(monkeypatch):
    """``train`` on one run (``X [n, T, d]``, unbatched θ): the arrays of one GD run."""
    th, X, y = problem()
    seen = []
    monkeypatch.setattr(mem, "guard", lambda estimate, sizes, *a, **k: seen.append(estimate(sizes)))
    monkeypatch.setattr(api, "gd_train", _trip)
    with pytest.raises(Tripwire):
        api.train(th, X, y, 0.5, steps=2, every=1)
    assert [(e.what, list(e.terms), e.itemsize) for e in seen] == [("train", ARRAYS["train"], 8)]


def test_train_refuses_bad_steps_and_every_by_name_and_takes_zero_steps(monkeypatch):
    """``steps`` >= 0 and ``every`` >= 1 are checked before the sizes, in one line naming them; a
    float32 run is sized at 4 bytes an entry."""
    th, X, y = problem()
    with pytest.raises(mh.InputError, match=r"^steps must be an integer >= 0, got -1$"):
        api.train(th, X, y, 0.5, steps=-1, every=1)
    with pytest.raises(mh.InputError, match=r"^every must be an integer >= 1, got 0$"):
        api.train(th, X, y, 0.5, steps=2, every=0)
    assert api.train(th, X, y, 0.5, steps=0, every=1).losses.shape == (1,)
    seen = []
    monkeypatch.setattr(mem, "guard", lambda estimate, sizes, *a, **k: seen.append(estimate(sizes)))
    monkeypatch.setattr(api, "gd_train", _trip)
    with pytest.raises(Tripwire):
        api.train(*jax.tree_util.tree_map(lambda a: a.astype(jnp.float32), (th, X, y)), 0.5, steps=2, every=1)
    assert [(e.what, list(e.terms), e.itemsize) for e in seen] == [("train", ARRAYS["train"], 4)]


# -- what reaches the plain function, and what is checked before the sizes ------------------------

def _same(u, v) -> bool:
    """The same pytree, leaf for leaf: arrays equal in dtype and value, other leaves equal."""
    (a, sa), (b, sb) = jax.tree_util.tree_flatten(u), jax.tree_util.tree_flatten(v)
    if sa != sb:
        return False
    return all(np.asarray(x).dtype == np.asarray(z).dtype and np.array_equal(np.asarray(x), np.asarray(z))
               if hasattr(x, "shape") else x == z for x, z in zip(a, b))


@pytest.mark.parametrize("at", ["defaults", "other arguments"])
@pytest.mark.parametrize("name", sorted(DOOR))
def test_each_entry_hands_the_plain_function_exactly_the_arguments_it_was_given(name, at, monkeypatch):
    """The plain function, replaced by a recorder, is called once, with every argument the entry
    was given (bound to the plain signature, defaults applied) and nothing else: none dropped,
    replaced or defaulted differently, at the defaults and with every argument away from them."""
    plain = DOOR[name][0]
    if at == "defaults":
        th, X, y = problem()
        call = (lambda f, **kw: f(KEY, N, T, D + 2, **kw)) if name == "tokenized_mixture" else (
            lambda f, **kw: DOOR[name][1](f, th, X, y, **kw) if name != "hessian_extremes" else f(th, X, y, **kw))
    else:
        call = _other_args()[name]
    given, seen = [], []
    monkeypatch.setattr(sys.modules[plain.__module__], plain.__name__, lambda *a, **k: seen.append((a, k)))
    monkeypatch.setattr(api, "gd_train", lambda *a, **k: seen.append((a, k)))

    def entry(*a, **k):
        given.append((a, k))
        return getattr(api, name)(*a, **k)
    call(entry, force=True)
    sig = inspect.signature(plain)

    def bound(a, k):
        b = sig.bind(*a, **{key: v for key, v in k.items() if key != "force"})
        b.apply_defaults()
        return b.arguments
    assert len(seen) == 1
    want, got = bound(*given[0]), bound(*seen[0])
    assert list(want) == list(got)
    for k in want:
        assert _same(want[k], got[k]), (name, k, want[k], got[k])


def test_arguments_are_checked_before_the_sizes(monkeypatch):
    """With 1 byte available, a bad threshold, bin edge, refinement knob or method is still
    refused by its own name (the plain function's message), not as a memory refusal."""
    th, X, y = problem()
    monkeypatch.delenv(mem.FORCE_ENV, raising=False)
    monkeypatch.setattr(mem, "available", lambda: mem.Available(1, "test budget"))
    with pytest.raises(mh.InputError, match=r"^thresholds\[1\] = nan is not finite$"):
        api.spectral_counts(th, X, y, [0.0, float("nan")])
    with pytest.raises(mh.InputError, match=r"^bins must be strictly increasing: bins\[1\] = 1.0 >= bins\[2\] = 0.5$"):
        api.spectral_histogram(th, X, y, [-1.0, 1.0, 0.5])
    with pytest.raises(mh.InputError, match=r"^bins\[0\] = inf is not finite$"):
        api.spectral_histogram(th, X, y, [float("inf"), 1.0])
    with pytest.raises(mh.InputError, match=r"^max_counts must be an integer >= 0, got -1$"):
        api.spectral_histogram(th, X, y, [-1.0, 1.0], max_counts=-1)
    for name in ("hessian_extremes", "lambda_min", "lambda_min_enclosure"):
        with pytest.raises(mh.InputError, match=r"^method must be one of .*, got 'qr'$"):
            getattr(api, name)(th, X, y, "qr")
        with pytest.raises(mh.InputError, match=rf"^{name}: num_steps must be an integer >= 1, got -3$"):
            getattr(api, name)(th, X, y, "lanczos", num_steps=-3)
    with pytest.raises(mem.MemoryGuardError):   # the same calls with good arguments: the memory refusal
        api.spectral_histogram(th, X, y, [-1.0, 1.0], max_counts=0)


def _sizes(monkeypatch, fn, *a, **k) -> list:
    """The estimates ``fn(*a, **k)`` hands the guard (the plain functions are tripwires)."""
    seen = []
    monkeypatch.setattr(mem, "guard", lambda estimate, sizes, *_, **__: seen.append(estimate(sizes)))
    for plain, _ in DOOR.values():
        monkeypatch.setattr(sys.modules[plain.__module__], plain.__name__, _trip)
    monkeypatch.setattr(api, "gd_train", _trip)
    with pytest.raises(Tripwire):
        fn(*a, **k)
    return [(e.what, list(e.terms), e.itemsize) for e in seen]


def test_a_float32_request_is_sized_at_4_bytes_an_entry(monkeypatch):
    assert _sizes(monkeypatch, api.init_params, KEY, H, T, D, dtype=jnp.float32) == [
        ("init_params", ARRAYS["init_params"], 4)]
    assert _sizes(monkeypatch, api.tokenized_mixture, KEY, N, T, D + 2, dtype=jnp.float32) == [
        ("tokenized_mixture", [("X [n, T, d]", (N, T, D + 2))], 4)]
    assert _sizes(monkeypatch, api.init_params, KEY, H, T, D)[0][2] == 8


@pytest.mark.parametrize("name", ["hessian_extremes", "lambda_min", "lambda_min_enclosure"])
def test_a_coupled_model_without_num_steps_is_sized_at_the_plain_default(name, monkeypatch):
    """The Lanczos basis of a coupled model counts the plain function's default ``num_steps``."""
    m = inspect.signature(spectrum.extremes).parameters["num_steps"].default
    th = mh.TWO_LAYER.init(jax.random.PRNGKey(1), H, T, D)
    _, X, y = problem()
    p = sum(a.size for a in jax.tree_util.tree_leaves(th)) // H
    assert _sizes(monkeypatch, getattr(api, name), th, X, y, model=mh.TWO_LAYER) == [
        (name, mem.analysis(N, T, H, p, "lanczos", m, True), 8)]


@pytest.mark.parametrize("name", ["spectral_counts", "spectral_histogram"])
def test_a_census_at_large_p_sizes_fewer_thresholds_a_batch(name, monkeypatch):
    """At P = 2 · (3·256 + 256²) = 132,608 a batch holds 2**25 // P = 253 thresholds (not the cap
    of 256): the row weights ``[4, 253, P]`` are what is checked."""
    d = 256
    th = MHAParams(jnp.zeros((2, T, d)), jnp.zeros((2, d, d)))
    X, y = jnp.zeros((N, T, d)), jnp.array([1.0, -1.0] * (N // 2))
    P = 2 * (T * d + d * d)
    assert P == 132_608 and 2 ** 25 // P == 253
    (what, terms, b), = _sizes(monkeypatch, getattr(api, name), th, X, y, [-1.0, 0.0, 1.0])
    assert terms[-1] == ("a batch of thresholds' row weights [4, k, P]", (4, 253, P))


def _single_leaf_head(theta, X):   # a user's head with one parameter leaf: u [T, d]
    return jnp.sum(theta["u"] * X)


SINGLE = mh.HeadModel("single-leaf", _single_leaf_head,
                      lambda key, H, T, d, **kw: {"u": jax.random.normal(key, (H, T, d))})


def test_train_sizes_any_head_model_and_leaves_other_forms_to_the_plain_checks(monkeypatch):
    """``train`` sizes θ by its leaves whatever the model (one leaf; a leaf ``[H, 3]``), one run or a
    batch; X of another form is not sized but refused by the plain function's own check."""
    th, X, y = problem()
    one = SINGLE.init(KEY, H, T, D)
    batch = jax.tree_util.tree_map(lambda a: a[None], one)
    gd = mem.gd(1, N, T, D, H, T * D, 3, 2)
    for params, data in ((one, X), (batch, X[None])):
        assert _sizes(monkeypatch, api.train, params, data, y, 0.5, steps=2, every=1, model=SINGLE) == [
            ("train", gd, 8)]
    dict_theta = DICT.init(KEY, H, T, D)
    assert _sizes(monkeypatch, api.train, dict_theta, X, y, 0.5, steps=2, every=1, model=DICT) == [
        ("train", mem.gd(1, N, T, D, H, D * 3 + 3, 3, 2), 8)]
    monkeypatch.undo()
    args = (jax.tree_util.tree_map(lambda a: a[None], th), X.reshape(N, T * D), y, 0.5)
    with pytest.raises(mh.InputError) as plain_error:
        plain_train(*args, steps=2, every=1)
    with pytest.raises(mh.InputError) as e:
        api.train(*args, steps=2, every=1)
    assert str(e.value) == str(plain_error.value)


#: the entries that take a PRNG key (it seeds a Lanczos start or random probes)
KEYED = {
    "hessian_extremes": lambda th, X, y, key: mh.hessian_extremes(th, X, y, "lanczos", key),
    "chain": lambda th, X, y, key: mh.chain(th, X, y, method="lanczos", key=key),
    "slq_histogram": lambda th, X, y, key: slq_histogram(th, X, y, [-1.0, 0.0, 1.0], key=key),
    "assert_chain": lambda th, X, y, key: mt.assert_chain(th, X, y, method="lanczos", key=key),
    "assert_head_block_diagonal": lambda th, X, y, key: mt.assert_head_block_diagonal(th, X, y, key=key),
    "assert_derivatives": lambda th, X, y, key: mt.assert_derivatives(th, X, y, key=key),
    "init_params": lambda th, X, y, key: mh.init_params(key, H, T, D),
    "tokenized_mixture": lambda th, X, y, key: mh.tokenized_mixture(key, N, T, D, num_clusters=2),
    "extreme_eigs": lambda th, X, y, key: mh.extreme_eigs(lambda v: 2.0 * v, 3, key),
}


@pytest.mark.parametrize("name", sorted(KEYED))
def test_a_key_that_is_no_prng_key_is_refused_in_one_line(name):
    """An int, a float array or a batch of keys is refused naming the entry (an int used to run
    where the key went unused and fail inside ``jax.random`` where it did not)."""
    th, X, y = problem()
    for bad, shown in ((5, "got 5"), (jnp.zeros(2), "got an array of dtype float64 and shape (2,)"),
                       (jax.random.split(KEY), "got an array of dtype uint32 and shape (2, 2)")):
        with pytest.raises(mh.InputError) as e:
            KEYED[name](th, X, y, bad)
        assert one_line(e.value) == (f"{name}: key must be a PRNG key (jax.random.key(seed) or "
                                     f"jax.random.PRNGKey(seed)), {shown}")


@pytest.mark.slow
def test_a_typed_key_gives_the_numbers_of_the_raw_key_of_its_seed():
    th, X, y = problem()
    for name in ("hessian_extremes", "chain"):
        a, b = KEYED[name](th, X, y, jax.random.key(3)), KEYED[name](th, X, y, jax.random.PRNGKey(3))
        assert _same(tuple(a), tuple(b)), name
