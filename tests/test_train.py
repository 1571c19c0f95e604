"""mhajax.train: full-batch GD, one pure run (gd) and the jitted, vmapped entry point (train)."""
import importlib

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mhajax.errors import InputError
from mhajax.experiments.configs import DataConfig
from mhajax.experiments.base import batched_data, batched_init
from mhajax.losses import empirical_risk
from mhajax.models.base import MHAParams
from mhajax.train import checkpoint_steps, gd, train

# `mhajax.train` the attribute is the function (re-exported by mhajax/__init__), so
# `import mhajax.train as m` would give the function: fetch the module itself.
train_mod = importlib.import_module("mhajax.train")

CFG = DataConfig(n=8, tokens=3, dim=5, num_clusters=2)
SEEDS = [0, 1]
HEADS = 2


@pytest.fixture(scope="module")
def setup():
    X, y = batched_data(CFG, SEEDS)
    th0 = batched_init(CFG, SEEDS, HEADS)
    return th0, X, y


grad_step = jax.jit(lambda th, X, y, lr: jax.tree_util.tree_map(
    lambda p, g: p - lr * g, th, jax.grad(empirical_risk)(th, X, y)))
risk = jax.jit(empirical_risk)


def _hand_loop(th0, X, y, lr, steps):
    """θ_{k+1} = θ_k − η ∇L̂(θ_k), one run, every iterate and loss kept."""
    th, thetas, losses = th0, [th0], [float(risk(th0, X, y))]
    for _ in range(steps):
        th = grad_step(th, X, y, lr)
        thetas.append(th)
        losses.append(float(risk(th, X, y)))
    return thetas, np.array(losses)


STEPS, EVERY = 7, 3        # not a multiple: checkpoints [0, 3, 6, 7]; one compile shared below


def test_matches_hand_written_gd(setup):
    th0, X, y = setup
    lr, steps, every = 0.7, STEPS, EVERY
    traj = train(th0, X, y, lr, steps=steps, every=every)
    ck = checkpoint_steps(steps, every)
    assert ck == [0, 3, 6, 7]
    np.testing.assert_array_equal(np.asarray(traj.steps), np.broadcast_to(ck, (len(SEEDS), len(ck))))
    S, C = len(SEEDS), len(ck)
    chex.assert_shape(traj.params.U, (S, C, HEADS, CFG.tokens, CFG.dim))
    chex.assert_shape(traj.params.W, (S, C, HEADS, CFG.dim, CFG.dim))
    chex.assert_shape([traj.losses, traj.finite], (S, steps + 1))
    chex.assert_tree_all_finite(traj.params)
    for s in range(len(SEEDS)):
        one = jax.tree_util.tree_map(lambda a: a[s], th0)
        thetas, losses = _hand_loop(one, X[s], y[s], lr, steps)
        # rounding of a few dozen float64 operations per step, accumulated over ≤ 10 steps
        np.testing.assert_allclose(np.asarray(traj.losses[s]), losses, rtol=1e-12, atol=0)
        for c, k in enumerate(ck):
            for got, want in ((traj.params.U[s, c], thetas[k].U), (traj.params.W[s, c], thetas[k].W)):
                got, want = np.asarray(got), np.asarray(want)
                assert np.abs(got - want).max() <= 1e-12 * max(1.0, np.abs(want).max())
        assert np.asarray(traj.finite[s]).all()


def test_checkpoint_steps():
    assert checkpoint_steps(0, 5) == [0]
    assert checkpoint_steps(5, 5) == [0, 5]
    assert checkpoint_steps(4, 5) == [0, 4]
    assert checkpoint_steps(12, 5) == [0, 5, 10, 12]
    assert checkpoint_steps(200, 20) == list(range(0, 201, 20))


def test_zero_steps(setup):
    th0, X, y = setup
    traj = train(th0, X, y, 1.0, steps=0, every=3)
    np.testing.assert_array_equal(np.asarray(traj.steps[0]), [0])
    np.testing.assert_array_equal(np.asarray(traj.params.U[:, 0]), np.asarray(th0.U))
    for s in range(len(SEEDS)):
        assert float(traj.losses[s, 0]) == pytest.approx(float(risk(
            jax.tree_util.tree_map(lambda a: a[s], th0), X[s], y[s])), rel=1e-14, abs=0)


def test_loss_decreases_on_the_mixture(setup):
    """η = 1 on the (separable) mixture: monotone decrease, and a real one over 7 steps."""
    th0, X, y = setup
    traj = train(th0, X, y, 1.0, steps=STEPS, every=EVERY)
    L = np.asarray(traj.losses)
    assert np.all(np.diff(L, axis=1) < 0)
    assert np.all(L[:, -1] < 0.85 * L[:, 0])


def test_per_run_step_sizes(setup):
    """lr may be shared or one per run; run s with lr[s] equals a run with that scalar lr."""
    th0, X, y = setup
    both = train(th0, X, y, jnp.asarray([0.3, 1.1]), steps=STEPS, every=EVERY)
    for s, lr in enumerate((0.3, 1.1)):
        alone = train(th0, X, y, lr, steps=STEPS, every=EVERY)
        np.testing.assert_allclose(np.asarray(both.losses[s]), np.asarray(alone.losses[s]), rtol=1e-14)


def test_same_seed_same_numbers():
    X1, y1 = batched_data(CFG, SEEDS)
    X2, y2 = batched_data(CFG, SEEDS)
    a = train(batched_init(CFG, SEEDS, HEADS), X1, y1, 1.0, steps=STEPS, every=EVERY)
    b = train(batched_init(CFG, SEEDS, HEADS), X2, y2, 1.0, steps=STEPS, every=EVERY)
    chex.assert_trees_all_equal(a, b)          # bitwise: steps, params, losses, flags
    c = train(batched_init(CFG, [5, 6], HEADS), *batched_data(CFG, [5, 6]), 1.0, steps=STEPS, every=EVERY)
    assert not np.array_equal(np.asarray(a.losses), np.asarray(c.losses))


def test_finite_flags_a_diverging_run(setup):
    """Every sequence twice with opposite labels (not separable) and η = 1e308: the
    iterates overflow. `finite` marks exactly the non-finite iterates; a sane run is all True."""
    th0, X, y = setup
    X2, y2 = np.asarray(X).copy(), np.asarray(y).copy()
    X2[:, 4:], y2[:, 4:] = X2[:, :4], -y2[:, :4]
    traj = train(th0, jnp.asarray(X2), jnp.asarray(y2), 1e308, steps=STEPS, every=EVERY)
    fin = np.asarray(traj.finite)
    L = np.asarray(traj.losses)
    assert not fin.all()
    assert np.array_equal(fin[:, 0], [True, True])
    assert not fin[~np.isfinite(L)].any()                     # a non-finite L̂ is flagged
    for s in range(len(SEEDS)):
        for c, k in enumerate(checkpoint_steps(STEPS, EVERY)):
            ok = (np.isfinite(np.asarray(traj.params.U[s, c])).all()
                  and np.isfinite(np.asarray(traj.params.W[s, c])).all() and np.isfinite(L[s, k]))
            assert fin[s, k] == ok
    sane = train(th0, jnp.asarray(X2), jnp.asarray(y2), 1.0, steps=STEPS, every=EVERY)
    assert np.asarray(sane.finite).all()


def test_one_compile_per_shape(monkeypatch):
    """`train` traces (and compiles) once per distinct shape: new step sizes and new data
    of the same shapes reuse the program. Traces are counted with a side effect."""
    calls = []
    real = train_mod.gd

    def counting(*a, **k):
        calls.append(1)
        return real(*a, **k)

    monkeypatch.setattr(train_mod, "gd", counting)
    rng = np.random.default_rng(0)

    def problem(n):      # shapes no other test uses: [S=2, n, T=3, d=5], H = 3
        th = MHAParams(jnp.asarray(rng.standard_normal((2, 3, 3, 5))), jnp.zeros((2, 3, 5, 5)))
        return th, jnp.asarray(rng.standard_normal((2, n, 3, 5))), jnp.asarray(
            np.tile(np.where(np.arange(n) % 2 == 0, 1.0, -1.0), (2, 1)))

    th0, X, y = problem(5)
    before = train._cache_size() if hasattr(train, "_cache_size") else None
    train(th0, X, y, 0.5, steps=2, every=1)
    assert len(calls) == 1
    train(th0, X, y, 0.25, steps=2, every=1)                      # new η: no retrace
    train(*problem(5), 2.0, steps=2, every=1)                     # new data: no retrace
    assert len(calls) == 1
    train(th0, X, y, 0.5, steps=1, every=1)                       # new static config: retrace
    assert len(calls) == 2
    train(*problem(6), 0.5, steps=2, every=1)                     # new shape: retrace
    assert len(calls) == 3
    if before is not None:
        assert train._cache_size() == before + 3


def test_gd_is_pure_and_unbatched(setup):
    th0, X, y = setup
    one = jax.tree_util.tree_map(lambda a: a[0], th0)
    t = jax.jit(lambda th, X, y: gd(th, X, y, 0.7, steps=STEPS, every=EVERY))(one, X[0], y[0])
    np.testing.assert_array_equal(np.asarray(t.steps), [0, 3, 6, 7])
    assert isinstance(t.params, MHAParams) and t.params.U.shape == (4, HEADS, CFG.tokens, CFG.dim)
    batched = train(th0, X, y, 0.7, steps=STEPS, every=EVERY)
    np.testing.assert_allclose(np.asarray(t.losses), np.asarray(batched.losses[0]), rtol=1e-13)



def test_one_unbatched_run_is_a_batch_of_one(setup):
    """``train`` on ``X [n, T, d]`` (the README's example) is the run-axis slice of the batch."""
    th0, X, y = setup
    one = jax.tree_util.tree_map(lambda a: a[1], th0)
    t = train(one, X[1], y[1], 0.7, steps=STEPS, every=EVERY)
    batched = train(th0, X, y, 0.7, steps=STEPS, every=EVERY)
    assert t.params.U.shape == (4, HEADS, CFG.tokens, CFG.dim) and t.losses.shape == (STEPS + 1,)
    np.testing.assert_allclose(np.asarray(t.losses), np.asarray(batched.losses[1]), rtol=1e-13)
    np.testing.assert_allclose(np.asarray(t.params.W), np.asarray(batched.params.W[1]), rtol=1e-13)

# ---------------------------------------------------------------------------
# resumable segments: train from the optimizer state it returned, over segment_bounds
# ---------------------------------------------------------------------------

from hypothesis import given, settings, strategies as st  # noqa: E402

from mhajax.models.softmax import SOFTMAX
from mhajax.train import opt_init, segment_bounds  # noqa: E402


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 300), st.integers(1, 40), st.integers(0, 12))
def test_segment_bounds_cover_the_run_and_keep_every_checkpoint(steps, every, k):
    save_every = k * every
    bounds = segment_bounds(steps, every, save_every)
    assert bounds[0][0] == 0 and bounds[-1][1] == steps
    assert all(b0[1] == b1[0] for b0, b1 in zip(bounds, bounds[1:]))      # contiguous
    assert all(a % every == 0 for a, _ in bounds)
    if save_every and save_every < steps:
        assert all(b - a == save_every for a, b in bounds[:-1])
    else:
        assert bounds == [(0, steps)]
    # the segments' own checkpoints, shifted, are exactly the run's
    got = [0] + [a + c for a, b in bounds for c in checkpoint_steps(b - a, every)[1:]]
    assert got == checkpoint_steps(steps, every)


def test_segment_bounds_rejects_a_save_interval_off_the_checkpoint_grid():
    with pytest.raises(ValueError, match="save_every=7"):
        segment_bounds(20, 5, 7)


def _segmented(th0, X, y, lr, steps, every, save_every, model=SOFTMAX):
    """The segments of segment_bounds chained by hand, checkpoints concatenated."""
    th, state = th0, jax.vmap(opt_init)(th0)
    kept, fin = [jax.tree_util.tree_map(lambda a: a[:, None], th0)], []
    for a, b in segment_bounds(steps, every, save_every):
        traj = train(th, X, y, lr, steps=b - a, every=every, model=model, opt_state=state)
        state = traj.opt_state
        kept.append(jax.tree_util.tree_map(lambda p: p[:, 1:], traj.params))
        fin.append(traj.finite[:, :-1])
        th = jax.tree_util.tree_map(lambda p: p[:, -1], traj.params)
    fin.append(traj.finite[:, -1:])
    return (jax.tree_util.tree_map(lambda *p: jnp.concatenate(p, axis=1), *kept),
            jnp.concatenate(fin, axis=1))


def test_segments_continue_the_whole_trajectory(setup):
    """GD cut into 3 segments (lengths 6, 6, 3) at a step size large enough to move θ far
    from θ_0 reaches the same checkpoints as one uninterrupted run, to rounding."""
    th0, X, y = setup
    steps, every = 15, 3
    whole = train(th0, X, y, 2.0, steps=steps, every=every)
    params, finite = _segmented(th0, X, y, 2.0, steps, every, 6)
    chex.assert_trees_all_close(params, whole.params, rtol=1e-12, atol=0)
    np.testing.assert_array_equal(np.asarray(finite), np.asarray(whole.finite))
    assert not np.allclose(np.asarray(whole.params.U[:, -1]), np.asarray(th0.U))   # θ moved


def test_two_layer_segments_match_a_plain_gd_loop():
    """The coupled two-layer model trains through the same GD: segments against a plain
    Python loop θ ← θ − η∇L̂(θ) on a risk written here (softplus of −yΦ)."""
    from mhajax.data.seeds import stream_keys
    from mhajax.models.two_layer import TWO_LAYER, init_two_layer, two_layer_phi
    X, y = batched_data(CFG, SEEDS)
    th0 = jax.vmap(lambda k: init_two_layer(k, 2, CFG.tokens, CFG.dim, w_scale=1.0))(stream_keys(SEEDS, 1))
    params, finite = _segmented(th0, X, y, 0.5, 8, 2, 4, model=TWO_LAYER)

    def risk(th, Xs, ys):
        return jnp.mean(jnp.logaddexp(0.0, -ys * two_layer_phi(th, Xs)))

    grad = jax.jit(jax.grad(risk))
    for s in range(len(SEEDS)):
        th = jax.tree_util.tree_map(lambda a: a[s], th0)
        kept = [th]
        for k in range(8):
            g = grad(th, X[s], y[s])
            th = jax.tree_util.tree_map(lambda p, gi: p - 0.5 * gi, th, g)
            if (k + 1) % 2 == 0:
                kept.append(th)
        ref = jax.tree_util.tree_map(lambda *a: jnp.stack(a), *kept)
        got = jax.tree_util.tree_map(lambda a: a[s], params)
        chex.assert_trees_all_close(got, ref, rtol=1e-11, atol=1e-14)
    assert np.asarray(finite).all()

def test_num_checkpoints_is_the_length_of_checkpoint_steps():
    from mhajax.train import num_checkpoints
    for steps, every in [(200, 20), (7, 3), (1, 1), (0, 5), (10, 20), (2000, 20), (9, 9), (10, 9)]:
        assert num_checkpoints(steps, every) == len(checkpoint_steps(steps, every)), (steps, every)
    assert num_checkpoints(2 * 10 ** 9, 1) == 2 * 10 ** 9 + 1          # without building the list


def test_a_step_size_that_is_not_finite_and_positive_is_refused(setup):
    """GD's step η must be a finite number > 0 (as ``--lr`` must be), shared or one per run: 0 and
    negative steps (a standstill, gradient ascent) are refused like NaN or what is not a number,
    naming the value."""
    th0, X, y = setup
    for lr in (0.0, -0.5, float("nan"), jnp.array([0.5, -0.5]), "0.5", None):
        with pytest.raises(InputError) as e:
            train(th0, X, y, lr, steps=2, every=1)
        assert str(e.value) == f"train: lr must be a finite number > 0, or one per run [{len(SEEDS)}], got {lr!r}"
    assert train(th0, X, y, jnp.array([0.5, 0.25]), steps=2, every=1).losses.shape == (len(SEEDS), 3)
