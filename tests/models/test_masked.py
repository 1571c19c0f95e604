"""Head-masked padding (mhajax.masked) and the explicit NTK witness (mhajax.witness)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mhajax.errors import InputError
from mhajax.experiments.configs import DataConfig
from mhajax.experiments.base import batched_data, batched_init
from mhajax.losses import empirical_risk
from mhajax.models.masked import MASKED, head_scale, pad, unpad
from mhajax.models.softmax.head import init_params
from mhajax.models.base import mha
from mhajax.train import train
from mhajax.analysis.ntk import ntk_margin
from mhajax.analysis.witness import (class_direction, directional_margins, readout_direction,
                                     witness, witness_point)

CFG = DataConfig(n=16)


@pytest.mark.parametrize("H,Hmax", [(1, 4), (3, 4), (4, 4)])
def test_padded_trajectory_equals_unpadded(H, Hmax):
    """GD on H heads padded to Hmax with a frozen mask follows the unpadded
    H-head trajectory to rounding; the padding heads never move."""
    seeds = [0, 1]
    X, y = batched_data(CFG, seeds)
    th = batched_init(CFG, seeds, H)
    a = train(th, X, y, 1.0, steps=40, every=10)
    b = train(pad(th, Hmax), X, y, 1.0, steps=40, every=10, model=MASKED)
    assert np.max(np.abs(np.asarray(b.losses) - np.asarray(a.losses))) < 1e-12
    for name in ("U", "W"):
        pa, pb = np.asarray(getattr(a.params, name)), np.asarray(getattr(b.params.params, name))
        assert np.max(np.abs(pb[:, :, :H] - pa)) < 1e-12
        assert np.all(pb[:, :, H:] == 0.0)
    assert np.all(np.asarray(b.params.scale) == np.asarray(b.params.scale[:, :1]))  # never trained


@pytest.mark.slow
def test_masked_model_value_and_gradient():
    key = jax.random.PRNGKey(0)
    X = jax.random.normal(key, (5, 4, 6))
    y = jnp.array([1.0, -1, 1, -1, 1])
    th = init_params(jax.random.PRNGKey(1), 2, 4, 6, w_scale=1.0)
    pm = pad(th, 5)
    assert np.allclose(mha(pm, X, MASKED), mha(th, X), atol=1e-14)
    g = jax.grad(lambda p: empirical_risk(p, X, y, MASKED))(pm)
    g0 = jax.grad(lambda p: empirical_risk(p, X, y))(th)
    assert np.all(np.asarray(g.scale) == 0.0)
    gp = g.params
    assert np.all(np.asarray(gp.U[2:]) == 0.0) and np.all(np.asarray(gp.W[2:]) == 0.0)
    assert np.allclose(gp.U[:2], g0.U, atol=1e-14) and np.allclose(gp.W[:2], g0.W, atol=1e-14)
    back = unpad(pm, 2)
    assert np.array_equal(back.U, th.U) and np.array_equal(back.W, th.W)


def test_head_scale():
    c = np.asarray(head_scale(2, 8))
    assert np.allclose(c, [2.0, 2.0, 0, 0, 0, 0, 0, 0])
    for bad in (0, 9):
        with pytest.raises(InputError):
            head_scale(bad, 8)
    with pytest.raises(InputError):
        pad(init_params(jax.random.PRNGKey(0), 3, 2, 4), 2)


@pytest.mark.slow
@pytest.mark.parametrize("antipodal", [False, True])
def test_witness_margin_at_uniform_attention(antipodal):
    """At W = 0, <g_i, w> = √T e·x̄_i, and θ* = θ_0 + (log n/γ_w) w lifts every
    margin by at least log n (Φ is linear in U)."""
    cfg = DataConfig(n=32, antipodal=antipodal)
    X, y = batched_data(cfg, [0])
    X, y = X[0], y[0]
    th = batched_init(cfg, [0], 3)
    th = jax.tree_util.tree_map(lambda a: a[0], th)
    e = class_direction(cfg.dim, antipodal)
    assert abs(float(jnp.linalg.norm(e)) - 1) < 1e-15
    w = readout_direction(th, e)
    assert abs(float(jnp.sqrt(jnp.sum(w.U ** 2))) - 1) < 1e-14 and float(jnp.abs(w.W).max()) == 0
    m = directional_margins(th, X, y, w)
    expected = y * jnp.sqrt(cfg.tokens) * (X.mean(axis=1) @ e)
    assert np.allclose(m, expected, atol=1e-13)
    stats = witness(th, X, y, e)
    assert float(stats.gamma) > 0 and 0 < float(stats.gamma_bar) <= 1
    ts = witness_point(th, X, y, e)
    lift = y * mha(ts, X) - y * mha(th, X)
    assert float(jnp.min(lift)) >= np.log(32) - 1e-10
    assert abs(float(jnp.sqrt(sum(jnp.sum((a - b) ** 2) for a, b in zip(ts, th)))) - float(stats.radius)) < 1e-10


def test_witness_margin_is_below_the_ntk_margin():
    """γ_w (one explicit direction) never exceeds the max-margin γ of the NTK features."""
    cfg = DataConfig(n=16, tokens=4, dim=6, num_clusters=2)
    X, y = batched_data(cfg, [0, 1])
    th = batched_init(cfg, [0, 1], 2)
    e = class_direction(cfg.dim)
    for s in range(2):
        p = jax.tree_util.tree_map(lambda a: a[s], th)
        gw = float(witness(p, X[s], y[s], e).gamma)
        m = ntk_margin(p, X[s], y[s])
        assert m.separable and 0 < gw <= m.gamma * (1 + 1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["value", "cls", "qk"])
def test_masked_wraps_any_head_model(name):
    """masked(model) with H active heads padded to 3 follows the unpadded H-head GD
    trajectory of the same model (pytrees other than MHAParams; exponential loss); the
    padding never moves and unpad recovers the active heads."""
    from mhajax.losses import EXPONENTIAL
    from mhajax.models.masked import masked
    from mhajax.models.base import get_model
    model = get_model(name)
    cfg = DataConfig(n=8, tokens=4, dim=6, num_clusters=2, model=name, w_scale=0.5)
    seeds = [0, 1]
    X, y = batched_data(cfg, seeds)
    th = batched_init(cfg, seeds, 2)
    a = train(th, X, y, 0.5, steps=12, every=4, model=model, loss=EXPONENTIAL)
    mm = masked(model)
    assert masked(model) is mm and mm.name == f"{name}-masked"
    b = train(pad(th, 3, batched=True), X, y, 0.5, steps=12, every=4, model=mm, loss=EXPONENTIAL)
    assert np.max(np.abs(np.asarray(b.losses) - np.asarray(a.losses))) < 1e-12
    for la, lb in zip(jax.tree_util.tree_leaves(a.params), jax.tree_util.tree_leaves(b.params.params)):
        la, lb = np.asarray(la), np.asarray(lb)
        assert np.max(np.abs(lb[:, :, :2] - la)) < 1e-12
        assert np.all(lb[:, :, 2:] == 0.0)
    last = jax.tree_util.tree_map(lambda l: l[:, -1], b.params)
    back = unpad(last, 2)
    for la, lb in zip(jax.tree_util.tree_leaves(jax.tree_util.tree_map(lambda l: l[:, -1], a.params)),
                      jax.tree_util.tree_leaves(back)):
        assert np.max(np.abs(np.asarray(lb) - np.asarray(la))) < 1e-12


def test_pad_needs_batched_for_other_pytrees():
    from mhajax.models.base import get_model
    th = get_model("cls").init(jax.random.PRNGKey(0), 2, 4, 6)
    with pytest.raises(InputError, match="batched"):
        pad(th, 3)
    assert pad(th, 3, batched=False).params.U.shape == (3, 6)
