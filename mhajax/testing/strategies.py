"""Hypothesis strategies for multi-head attention problems (docs/theory.md §1, §9).

Every strategy draws its *knobs* (shapes, scales, seeds) from hypothesis and
builds the arrays with NumPy from a drawn seed, so a draw is deterministic
under hypothesis (replayable from its database, shrinkable on the knobs).
Arrays come back as ``jnp`` float64 arrays, so float64 must be on when a
strategy is drawn from: request the ``x64`` fixture of
:mod:`mhajax.testing.plugin` (``@pytest.mark.usefixtures("x64")`` on a
``@given`` test) or call ``jax.config.update("jax_enable_x64", True)``.

Shapes are drawn from a small set (:data:`SHAPES`, :data:`SAMPLE_SIZES`):
JAX compiles once per shape, and compiling dominates the cost of a check on
CPU, so a property test over two shapes stays a few seconds per assertion.

The main entry point is :func:`problems`, which draws ``Problem(params, X, y,
regime)`` for any :class:`~mhajax.model.HeadModel`. Regimes (:data:`REGIMES`):

``typical``            ``U ~ N(0, u²)``, ``W ~ N(0, w²/d)``, u in [0.05, 2], w in [0, 3]
``uniform_attention``  ``W = 0`` (mean pooling, the paper's initialization)
``large_w``            ``W`` uniform in ``[-a, a]``, a in [5, 20] (entries up to 20)
``saturated``          ``W = c·I + noise``, c in [50, 200], token noise σ >= 0.1, W then
                       doubled until the mean largest softmax weight is >= 0.9 (for
                       ``MHAParams`` in :func:`problems`): nearly one-hot softmax rows
``near_underflow``     ``U`` rescaled and labels set to ``sign Φ`` so that the smallest
                       margin ``y_i Φ(θ; X_i)`` lies in [600, 665]: ``L̂ ~ 1e-270..1e-290``,
                       just above the floor ``tiny/eps ≈ 1e-292`` where ratios over ``L̂``
                       stop being defined (margins ~672)
``underflow``          (opt-in, not in :data:`REGIMES`) smallest margin in [680, 900]:
                       ``L̂`` below the floor (0 from ~745 on), every ratio undefined

For a model whose parameters are not :class:`~mhajax.model.MHAParams`, every
leaf is drawn ``N(0, s²)`` (``typical``: s in [0.05, 2]; ``large_w`` and
``saturated``: s in [2, 20]); the margin regimes rescale the leaf named by
``readout`` and need ``Φ`` to be linear in it.
"""
from __future__ import annotations

import math
from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from hypothesis import assume
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from mhajax.data.mixture import relevant_count
from mhajax.models.softmax import SOFTMAX
from mhajax.models.base import HeadModel, MHAParams, output
from mhajax.testing._x64 import x64_enabled

#: (H, T, d) shapes drawn by default: JAX compiles once per shape.
SHAPES: tuple = ((1, 3, 4), (2, 3, 4))
#: sample sizes n drawn by default.
SAMPLE_SIZES: tuple = (6,)
#: regimes drawn by default by :func:`problems`.
REGIMES: tuple = ("typical", "uniform_attention", "large_w", "saturated", "near_underflow")
#: every regime, including ``underflow`` (L̂ = 0: the ratio checks are undefined).
ALL_REGIMES: tuple = REGIMES + ("underflow",)
#: smallest margin drawn by ``near_underflow`` and ``underflow``.
#: Ratios over L̂ are defined down to L̂ = tiny/eps ≈ 1e-292 (mhajax.chain.finalize), i.e.
#: margins up to ~672: ``near_underflow`` stays just inside, ``underflow`` beyond (and
#: L̂ = 0 exactly from margins ~745 on).
NEAR_UNDERFLOW_MARGIN = (600.0, 665.0)
UNDERFLOW_MARGIN = (680.0, 900.0)
#: largest factor ``push_margins`` may scale the readout by (beyond it the draw is rejected).
MAX_READOUT_SCALE = 1e10

_SEEDS = st.integers(min_value=0, max_value=2**32 - 1)

try:
    from hypothesis import currently_in_test_context
except ImportError:  # pragma: no cover - hypothesis older than 6.6x
    def currently_in_test_context() -> bool:
        return True


class Problem(NamedTuple):
    """One drawn problem: parameters, data ``X [n, T, d]``, labels ``y [n]`` and the regime."""

    params: Any
    X: jax.Array
    y: jax.Array
    regime: str = "typical"

    def __repr__(self) -> str:  # hypothesis prints this for a falsifying example
        leaves = jax.tree_util.tree_leaves(self.params)
        n, T, d = self.X.shape
        H = leaves[0].shape[0]
        big = max(float(jnp.max(jnp.abs(l))) for l in leaves)
        R = float(jnp.max(jnp.linalg.norm(self.X, axis=-1)))
        return (f"Problem(regime={self.regime!r}, H={H}, T={T}, d={d}, n={n}, "
                f"max|θ|={big:.4g}, R={R:.4g}, y={np.asarray(self.y).astype(int).tolist()})")


def _require_x64() -> None:
    if not x64_enabled():
        raise InvalidArgument(
            "mhajax.testing strategies draw float64 arrays, but float64 is off: use the x64 "
            "fixture (@pytest.mark.usefixtures('x64') on a @given test, with the plugin "
            "mhajax.testing.plugin) or jax.config.update('jax_enable_x64', True)")


def _f64(a) -> jax.Array:
    return jnp.asarray(np.asarray(a, dtype=np.float64), dtype=jnp.float64)


def _check_shape(H: int, T: int, d: int) -> None:
    for name, v in (("H", H), ("T", T), ("d", d)):
        if not isinstance(v, (int, np.integer)) or v < 1:
            raise InvalidArgument(f"{name} must be a positive integer, got {v!r}")


# ---------------------------------------------------------------------------
# Shapes and labels
# ---------------------------------------------------------------------------

def shapes(choices: Sequence[tuple] = SHAPES) -> st.SearchStrategy:
    """``(H, T, d)`` from a small set of shapes (default :data:`SHAPES`)."""
    choices = tuple(tuple(int(v) for v in c) for c in choices)
    if not choices:
        raise InvalidArgument("shapes needs at least one (H, T, d)")
    for c in choices:
        if len(c) != 3:
            raise InvalidArgument(f"a shape is (H, T, d), got {c!r}")
        _check_shape(*c)
    return st.sampled_from(choices)


_shape_strategy = shapes


@st.composite
def labels(draw, n: int, *, balanced: bool = False) -> jax.Array:
    """Labels ``y [n]`` in {-1, +1} (float64). ``balanced``: ⌈n/2⌉ positives in
    random order, as in the tokenized mixture; otherwise any sign pattern."""
    _require_x64()
    if n < 1:
        raise InvalidArgument(f"n must be >= 1, got {n!r}")
    if balanced:
        base = [1.0] * ((n + 1) // 2) + [-1.0] * (n // 2)
        y = draw(st.permutations(base))
    else:
        y = draw(st.lists(st.sampled_from([-1.0, 1.0]), min_size=n, max_size=n))
    return _f64(y)


# ---------------------------------------------------------------------------
# Data: the tokenized mixture of docs/theory.md §9, in NumPy
# ---------------------------------------------------------------------------

def mixture_arrays(seed: int, n: int, tokens: int, dim: int, *, zeta: float = 0.25,
                   num_clusters: int = 2, signal: float = 1.0, sigma: float = 0.1,
                   antipodal: bool = False):
    """NumPy ``(X [n, T, d], y [n])`` from the tokenized mixture (same model as
    :func:`mhajax.data.tokenized_mixture`, drawn with ``numpy.random.default_rng(seed)``)."""
    if dim < num_clusters + 2:
        raise InvalidArgument(f"dim={dim} needs dim >= num_clusters + 2 = {num_clusters + 2}")
    rng = np.random.default_rng(seed)
    m = relevant_count(tokens, zeta)
    y = np.where(np.arange(n) < (n + 1) // 2, 1.0, -1.0)
    y = rng.permutation(y)
    eye = np.eye(dim)
    mu_pos = signal * eye[0]
    mu_neg = -mu_pos if antipodal else signal * eye[1]
    nus = eye[2:2 + num_clusters]
    ranks = np.argsort(np.argsort(rng.uniform(size=(n, tokens)), axis=1), axis=1)
    relevant = ranks < m
    clusters = rng.integers(0, num_clusters, size=(n, tokens))
    mu = np.where((y > 0)[:, None], mu_pos[None, :], mu_neg[None, :])
    means = np.where(relevant[..., None], mu[:, None, :], nus[clusters])
    X = means + sigma * rng.standard_normal((n, tokens, dim))
    return X, y


@st.composite
def tokenized_mixtures(draw, n: int, tokens: int, dim: int, *,
                       signal=(0.5, 2.0), sigma=(0.0, 0.5)):
    """``(X [n, T, d], y [n])`` from the tokenized mixture with drawn knobs: ζ in
    {1/4, 1/2, 1}, K in [1, d−2] clusters, signal s and noise σ in the given
    ranges, antipodal means or not, and the seed of the noise."""
    _require_x64()
    if dim < 3:
        raise InvalidArgument(f"the tokenized mixture needs dim >= 3 (one cluster), got {dim}")
    zeta = draw(st.sampled_from((0.25, 0.5, 1.0)))
    K = draw(st.integers(1, dim - 2))
    s = draw(st.floats(*signal, allow_nan=False))
    sg = draw(st.floats(*sigma, allow_nan=False))
    antipodal = draw(st.booleans())
    seed = draw(_SEEDS)
    X, y = mixture_arrays(seed, n, tokens, dim, zeta=zeta, num_clusters=K, signal=s,
                          sigma=sg, antipodal=antipodal)
    return _f64(X), _f64(y)


# ---------------------------------------------------------------------------
# Parameters
# ---------------------------------------------------------------------------

@st.composite
def mha_params(draw, heads: int, tokens: int, dim: int, regime: str = "typical") -> MHAParams:
    """``MHAParams(U [H, T, d], W [H, d, d])`` in one of the parameter regimes
    ``typical``, ``uniform_attention``, ``large_w``, ``saturated`` (see the module
    docstring); the margin regimes need data and are drawn by :func:`problems`."""
    _require_x64()
    _check_shape(heads, tokens, dim)
    seed = draw(_SEEDS)
    rng = np.random.default_rng(seed)
    u = draw(st.floats(0.05, 2.0))
    U = u * rng.standard_normal((heads, tokens, dim))
    if regime == "typical":
        w = draw(st.floats(0.0, 3.0))
        W = (w / math.sqrt(dim)) * rng.standard_normal((heads, dim, dim))
    elif regime == "uniform_attention":
        W = np.zeros((heads, dim, dim))
    elif regime == "large_w":
        a = draw(st.floats(5.0, 20.0))
        W = rng.uniform(-a, a, size=(heads, dim, dim))
    elif regime == "saturated":
        c = draw(st.floats(50.0, 200.0))
        W = c * np.eye(dim)[None] + rng.standard_normal((heads, dim, dim))
    else:
        raise InvalidArgument(
            f"mha_params draws regimes typical, uniform_attention, large_w, saturated; got "
            f"{regime!r} (the margin regimes need data: use problems())")
    return MHAParams(_f64(U), _f64(W))


def _template(model: HeadModel, heads: int, tokens: int, dim: int):
    return jax.eval_shape(lambda: model.init(jax.random.PRNGKey(0), heads, tokens, dim))


def _is_mha_layout(template, heads, tokens, dim) -> bool:
    return (isinstance(template, MHAParams)
            and tuple(template.U.shape) == (heads, tokens, dim)
            and tuple(template.W.shape) == (heads, dim, dim))


@st.composite
def head_params(draw, model: HeadModel, heads: int, tokens: int, dim: int,
                regime: str = "typical"):
    """Parameters for any :class:`HeadModel`, shaped like ``model.init(key, H, T, d)``.
    ``MHAParams`` get the regimes of :func:`mha_params`; any other pytree gets
    ``N(0, s²)`` leaves (``typical``: s in [0.05, 2]; ``large_w``/``saturated``:
    s in [2, 20]; ``uniform_attention``: as typical)."""
    _require_x64()
    _check_shape(heads, tokens, dim)
    template = _template(model, heads, tokens, dim)
    if _is_mha_layout(template, heads, tokens, dim):
        return draw(mha_params(heads, tokens, dim, regime))
    if regime in ("typical", "uniform_attention"):
        s = draw(st.floats(0.05, 2.0))
    elif regime in ("large_w", "saturated"):
        s = draw(st.floats(2.0, 20.0))
    else:
        raise InvalidArgument(f"unknown parameter regime {regime!r}")
    rng = np.random.default_rng(draw(_SEEDS))
    leaves, treedef = jax.tree_util.tree_flatten(template)
    for leaf in leaves:
        if not jnp.issubdtype(leaf.dtype, jnp.floating):
            raise InvalidArgument(f"head_params draws floating leaves only, got {leaf.dtype}")
        if not leaf.shape or leaf.shape[0] != heads:
            raise InvalidArgument(
                f"every parameter leaf needs the head axis H={heads} first, got shape {leaf.shape}")
    new = [_f64(s * rng.standard_normal(leaf.shape)) for leaf in leaves]
    return jax.tree_util.tree_unflatten(treedef, new)


# ---------------------------------------------------------------------------
# Problems: parameters + data + labels, including the margin regimes
# ---------------------------------------------------------------------------

_PHI_CACHE: dict = {}


def _phi(model: HeadModel):
    fn = _PHI_CACHE.get(model)
    if fn is None:
        fn = _PHI_CACHE[model] = jax.jit(lambda th, X: output(th, X, model))
    return fn


def _get_leaf(params, name):
    if isinstance(params, dict):
        return params.get(name)
    return getattr(params, name, None)


def _set_leaf(params, name, value):
    if isinstance(params, dict):
        return {**params, name: value}
    return params._replace(**{name: value})


def push_margins(params, X, model: HeadModel, target: float, readout: str = "U"):
    """Rescale the ``readout`` leaf (Φ must be linear in it) and relabel
    ``y = sign Φ`` so that ``min_i y_i Φ(θ; X_i) = target``. Returns
    ``(params, y)``. When some ``Φ_i`` is ~0 the draw is rejected (inside a test; outside,
    :class:`~hypothesis.errors.InvalidArgument` is raised)."""
    leaf = _get_leaf(params, readout)
    if leaf is None:
        raise InvalidArgument(
            f"the margin regimes rescale the readout leaf {readout!r}, which the parameters "
            f"({type(params).__name__}) lack; pass readout=<leaf name> or regimes without them")
    phi = np.asarray(_phi(model)(params, X))
    mag = np.abs(phi)
    if not (np.all(np.isfinite(phi)) and mag.min() > 1e-6 * max(mag.max(), 1e-300)):
        if currently_in_test_context():
            assume(False)  # reject this draw
        raise InvalidArgument(f"cannot push the margins: some Φ(θ; X_i) is ~0 or not finite ({phi})")
    y = np.where(phi >= 0, 1.0, -1.0)
    c = target / mag.min()
    if not c <= MAX_READOUT_SCALE:
        # Φ ~ 1e-300 (e.g. W ≈ 0 in a bilinear head): the rescaled θ (~1e303) would overflow
        # every Hessian-vector product; that is an overflow test, not a margin regime.
        if currently_in_test_context():
            assume(False)
        raise InvalidArgument(f"cannot push the margins: the readout would be scaled by {c:.3g} "
                              f"(> {MAX_READOUT_SCALE:g}) since min |Φ(θ; X_i)| = {mag.min():.3g}")
    params = _set_leaf(params, readout, leaf * c)
    z = y * np.asarray(_phi(model)(params, X))
    if not abs(z.min() - target) <= 1e-6 * target:
        raise InvalidArgument(
            f"rescaling {readout!r} by {c:.3g} moved the smallest margin to {z.min():.6g}, not "
            f"{target:.6g}: model {model.name!r} is not linear in {readout!r}; the margin regimes "
            "need a linear readout")
    return params, _f64(y)


#: ``saturated`` guarantees a mean largest attention weight of at least this (see _saturate).
SATURATION = 0.9


def _saturate(params: MHAParams, X) -> MHAParams:
    """Double ``W`` until the mean over (sample, head, query) of the largest softmax weight
    of ``softmax(X W Xᵀ)`` is >= :data:`SATURATION` (at most 2^12 times): ``c·I`` with c in
    [50, 200] alone leaves close tokens (small R, one cluster) only partly saturated."""
    W = np.asarray(params.W)
    Xn = np.asarray(X)
    for _ in range(13):
        S = np.einsum("nta,hab,njb->nhtj", Xn, W, Xn)
        S = S - S.max(axis=-1, keepdims=True)
        A = np.exp(S)
        if float(np.mean(A.max(axis=-1) / A.sum(axis=-1))) >= SATURATION:
            break
        W = 2.0 * W
    return MHAParams(params.U, _f64(W))


@st.composite
def problems(draw, model: HeadModel = SOFTMAX, *, shapes: Sequence[tuple] = SHAPES,
             sample_sizes: Sequence[int] = SAMPLE_SIZES, regimes: Sequence[str] = REGIMES,
             readout: str = "U") -> Problem:
    """A :class:`Problem` for ``model``: shape ``(H, T, d)`` from ``shapes``, ``n`` from
    ``sample_sizes``, tokenized-mixture data, and parameters in a regime from ``regimes``
    (see the module docstring; add ``"underflow"`` to test the undefined branch)."""
    _require_x64()
    unknown = set(regimes) - set(ALL_REGIMES)
    if unknown or not regimes:
        raise InvalidArgument(f"regimes must be a non-empty subset of {ALL_REGIMES}, got {regimes!r}")
    H, T, d = draw(_shape_strategy(shapes))
    n = draw(st.sampled_from(tuple(int(v) for v in sample_sizes)))
    if d < 3:
        raise InvalidArgument(f"the tokenized mixture needs d >= 3, got shape {(H, T, d)}")
    regime = draw(st.sampled_from(tuple(regimes)))
    # saturation needs distinct tokens (equal tokens tie, whatever the scale of W)
    X, y = draw(tokenized_mixtures(n, T, d, sigma=(0.1, 0.5) if regime == "saturated" else (0.0, 0.5)))
    base = "typical" if regime in ("near_underflow", "underflow") else regime
    params = draw(head_params(model, H, T, d, base))
    if regime == "saturated" and isinstance(params, MHAParams):
        params = _saturate(params, X)
    if regime in ("near_underflow", "underflow"):
        lo, hi = NEAR_UNDERFLOW_MARGIN if regime == "near_underflow" else UNDERFLOW_MARGIN
        target = draw(st.floats(lo, hi))
        params, y = push_margins(params, X, model, target, readout)
    return Problem(params, X, y, regime)


__all__ = ["SHAPES", "SAMPLE_SIZES", "REGIMES", "ALL_REGIMES", "Problem", "shapes", "labels",
           "mixture_arrays", "tokenized_mixtures", "mha_params", "head_params", "push_margins",
           "problems"]
