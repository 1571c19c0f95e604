"""Independent reference implementations and hypothesis strategies for the tests.

Everything here is written from docs/theory.md §1–§6 without calling the code under test
(except ``MHAParams``, the container, and the probe of a compile option below): the
model, the loss and the Hessians are re-derived with plain ``jnp`` ops and
``jax.hessian`` on a hand-made flat layout, and spectra come from ``numpy.linalg``
(the independent truth).

Shapes are fixed per test module (JAX compiles once per shape; hypothesis
varies values, not shapes). The standard problem is ``N = 6`` sequences of
``T = 3`` tokens in ``D = 4`` dimensions with ``H = 2`` heads:
``p = T·D + D² = 28`` parameters per head, ``P = 56`` in all.
"""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import assume, strategies as st

from mhajax.models.base import MHAParams

# ---------------------------------------------------------------------------
# XLA's own compile options, for the tests that need them: the suite's process compiles at
# -O0 with the older emitters (tests/conftest.py), so a program that must be XLA's default build
# asks for it (tests/test_suite_setup.py checks that these are the defaults).
# ---------------------------------------------------------------------------

XLA_DEFAULT_OPTIONS = {"xla_backend_optimization_level": 3, "xla_cpu_use_fusion_emitters": True}

N, T, D, H = 6, 3, 4, 2
EPS = float(np.finfo(np.float64).eps)


def p_head(T=T, D=D):
    return T * D + D * D


# ---------------------------------------------------------------------------
# Reference model in an explicit flat layout: per head [vec U_h (T·D), vec W_h (D·D)]
# ---------------------------------------------------------------------------

def ref_head(U, W, X):
    """``f = <U, softmax(X W Xᵀ) X>`` with a hand-written, max-shifted softmax."""
    S = X @ W @ X.T
    S = S - jnp.max(S, axis=1, keepdims=True)
    E = jnp.exp(S)
    A = E / jnp.sum(E, axis=1, keepdims=True)
    return jnp.sum(U * (A @ X))


def split_head(zh, T, D):
    return zh[: T * D].reshape(T, D), zh[T * D:].reshape(D, D)


def flat(params) -> np.ndarray:
    """``[H·p]`` vector, head-major, U before W (numpy, independent of ravel_heads)."""
    U, W = np.asarray(params.U), np.asarray(params.W)
    Hh = U.shape[0]
    return np.concatenate([np.concatenate([U[h].ravel(), W[h].ravel()]) for h in range(Hh)])


def ref_phi(z, X, Hh, T, D):
    """``Φ(z; X)`` for one ``X [T, D]``."""
    Z = z.reshape(Hh, -1)
    return sum(ref_head(*split_head(Z[h], T, D), X) for h in range(Hh)) / math.sqrt(Hh)


def ref_risk(z, X, y, Hh, T, D):
    """``L̂`` with ``ℓ(m) = logaddexp(0, −m)`` (a different formula from softplus)."""
    phi = jax.vmap(lambda x: ref_phi(z, x, Hh, T, D))(X)
    return jnp.mean(jnp.logaddexp(0.0, -y * phi))


def make_refs(Hh, T, D):
    """Jitted references for one shape: Φ [n], L̂, ∇L̂, ∇²L̂, per-sample Hessians, Jacobian."""
    phi = jax.jit(lambda z, X: jax.vmap(lambda x: ref_phi(z, x, Hh, T, D))(X))
    risk = jax.jit(lambda z, X, y: ref_risk(z, X, y, Hh, T, D))
    grad = jax.jit(jax.grad(lambda z, X, y: ref_risk(z, X, y, Hh, T, D)))
    hess = jax.jit(jax.hessian(lambda z, X, y: ref_risk(z, X, y, Hh, T, D)))
    jac = jax.jit(lambda z, X: jax.vmap(jax.grad(lambda zz, x: ref_phi(zz, x, Hh, T, D)),
                                        in_axes=(None, 0))(z, X))

    def head_hess_one(zh, x):
        return jax.hessian(lambda v: ref_head(*split_head(v, T, D), x))(zh)

    # [n, H, p, p]: ∇²_{θ_h} f(θ_h; X_i)
    head_hess = jax.jit(lambda z, X: jax.vmap(
        lambda x: jax.vmap(lambda zh: head_hess_one(zh, x))(z.reshape(Hh, -1)))(X))
    # [n, P, P]: ∇²_θ Φ(θ; X_i), no block structure assumed
    phi_hess = jax.jit(lambda z, X: jax.vmap(
        lambda x: jax.hessian(lambda v: ref_phi(v, x, Hh, T, D))(z))(X))
    return dict(phi=phi, risk=risk, grad=grad, hess=hess, jac=jac, head_hess=head_hess,
                phi_hess=phi_hess)


def scaled_hessian(J, F, z, y, Hh):
    """``∇²L̂ / L̂`` assembled in numpy from docs/theory.md §3,
    ``(1/n) Σ_i (ℓ''_i/L̂) J_i J_iᵀ + blockdiag_h((1/(n√H)) Σ_i y_i (ℓ'_i/L̂) ∇²f_ih)``,
    with the loss weights in numpy (gradual underflow: accurate even where XLA
    would flush ℓ', ℓ'' ~ e^{-700} products to zero). ``J [n, P]`` per-sample
    gradients of Φ, ``F [n, H, p, p]`` per-sample head Hessians, ``z`` margins [n].
    Returns ``(A, g, L)``: the matrix, ``∇L̂/L̂`` [P] and ``L̂``."""
    J, F, z, y = (np.asarray(a, np.float64) for a in (J, F, z, y))
    n = z.shape[0]
    L = np.mean(softplus_np(-z))
    a1 = sigmoid_np(-z) / L             # |ℓ'_i| / L̂   (<= n)
    a2 = sigmoid_np(z) * a1             # ℓ''_i / L̂
    A = (J.T * (a2 / n)) @ J
    c = -y * a1 / (n * math.sqrt(Hh))   # y_i ℓ'_i / (n √H L̂)
    Bh = np.einsum("i,ihab->hab", c, F)
    p = F.shape[-1]
    for h in range(Hh):
        A[h * p:(h + 1) * p, h * p:(h + 1) * p] += Bh[h]
    g = J.T @ (-y * a1 / n)
    return 0.5 * (A + A.T), g, L, Bh


def weight_rtol(th, X) -> float:
    """Relative rounding error of the loss weights ℓ'_i, ℓ''_i ~ e^{-m_i}.

    A margin m = yΦ is a sum of terms as large as the output bound
    OB = (R/√H) Σ_h ||U_h||_{2,1}, so it carries an absolute rounding error
    δm ~ eps·OB (1e-13·OB allows ~450 ulps), and e^{-m} a *relative* error δm.
    With large U and large margins (late GD) this, not eps, is the rounding
    level of ∇²L̂; two correct implementations differ by that much."""
    R = float(np.linalg.norm(np.asarray(X), axis=-1).max())
    ob = R * float(np.linalg.norm(np.asarray(th.U), axis=-1).sum()) / math.sqrt(th.U.shape[0])
    return 1e-13 * ob


def opnorm_sym(A) -> np.ndarray:
    """Spectral norm of symmetric matrices ``[..., m, m]`` with numpy (the truth)."""
    A = np.asarray(A)
    ev = np.linalg.eigvalsh(0.5 * (A + np.swapaxes(A, -1, -2)))
    return np.maximum(-ev[..., 0], ev[..., -1])


def softplus_np(z):
    return np.logaddexp(0.0, z)


def sigmoid_np(z):
    """Numerically stable logistic σ(z) in numpy (relative accuracy ~2 ulps)."""
    z = np.asarray(z, np.float64)
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


# ---------------------------------------------------------------------------
# Hypothesis: parameters and data, adversarial regimes included
# ---------------------------------------------------------------------------

REGIMES = ("generic", "large_w", "tiny_data", "large_u", "small_loss", "near_underflow")


def np_head_outputs(U, W, X):
    """``f(θ_h; X_i)`` [n, H] in numpy (for building test cases)."""
    S = np.einsum("ita,hab,ijb->hitj", X, W, X)
    S = S - S.max(-1, keepdims=True)
    A = np.exp(S)
    A /= A.sum(-1, keepdims=True)
    return np.einsum("htd,hitj,ijd->ih", U, A, X)


def _margins(U, W, X, y):
    return y * np_head_outputs(U, W, X).sum(1) / math.sqrt(U.shape[0])


@st.composite
def problems(draw, n=N, T=T, D=D, Hh=H, regimes=REGIMES):
    """``(params, X, y, regime)`` with numpy float64 arrays.

    * ``generic``: U ~ N(0, s_u²), s_u ∈ [1e-2, 3]; W ~ N(0, s_w²), s_w ∈ [0, 3];
      tokens ~ N(0, s_x²), s_x ∈ [0.3, 2]; random labels (both signs present);
    * ``large_w``: W uniform in [−20, 20] (saturated softmax rows);
    * ``tiny_data``: token entries ~ 1e-3 … 1e-2;
    * ``large_u``: U entries up to ~30 (large |Φ|, margins of both signs);
    * ``small_loss``: labels = sign Φ and U rescaled so that the smallest margin lies
      in [20, 600] (L̂ from ~1e-9 down to ~1e-261: late GD, still full precision);
    * ``near_underflow``: labels = sign Φ and U rescaled so that the smallest
      margin lies in [690, 705] — L̂ ≈ e^{-700} is tiny but still a normal float.
    """
    regime = draw(st.sampled_from(regimes))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    su = draw(st.floats(1e-2, 3.0))
    sw = draw(st.floats(0.0, 3.0))
    sx = draw(st.floats(0.3, 2.0))
    U = su * rng.standard_normal((Hh, T, D))
    W = sw * rng.standard_normal((Hh, D, D))
    X = sx * rng.standard_normal((n, T, D))
    y = np.where(np.arange(n) % 2 == 0, 1.0, -1.0)
    rng.shuffle(y)
    if regime == "large_w":
        W = rng.uniform(-20.0, 20.0, (Hh, D, D))
        X = rng.standard_normal((n, T, D))
    elif regime == "tiny_data":
        X = draw(st.floats(1e-3, 1e-2)) * rng.standard_normal((n, T, D))
    elif regime == "large_u":
        U = draw(st.floats(5.0, 30.0)) * rng.uniform(-1.0, 1.0, (Hh, T, D))
    elif regime in ("small_loss", "near_underflow"):
        X = rng.standard_normal((n, T, D))
        z = _margins(U, W, X, np.ones(n))
        assume(np.min(np.abs(z)) > 1e-6)
        y = np.sign(z)
        lo, hi = (20.0, 600.0) if regime == "small_loss" else (690.0, 705.0)
        U = U * (draw(st.floats(lo, hi)) / np.min(np.abs(z)))
    return MHAParams(jnp.asarray(U), jnp.asarray(W)), jnp.asarray(X), jnp.asarray(y), regime


@st.composite
def underflow_problems(draw, n=N, T=T, D=D, Hh=H):
    """Labels = sign Φ and every margin >= 800: L̂ underflows to exactly 0 in float64."""
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((Hh, T, D))
    W = draw(st.floats(0.0, 2.0)) * rng.standard_normal((Hh, D, D))
    X = rng.standard_normal((n, T, D))
    z = _margins(U, W, X, np.ones(n))
    assume(np.min(np.abs(z)) > 1e-6)
    y = np.sign(z)
    U = U * (draw(st.floats(800.0, 5000.0)) / np.min(np.abs(z)))
    return MHAParams(jnp.asarray(U), jnp.asarray(W)), jnp.asarray(X), jnp.asarray(y)


def all_finite_or_none(obj) -> bool:
    """True when every number in a nested dict/list is finite or None (JSON-safe)."""
    if isinstance(obj, dict):
        return all(all_finite_or_none(v) for v in obj.values())
    if isinstance(obj, (list, tuple)):
        return all(all_finite_or_none(v) for v in obj)
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return True
    if isinstance(obj, (int, float, np.integer, np.floating)):
        return math.isfinite(float(obj))
    return False



def per_regime(regimes=REGIMES, examples=6, **shape):
    """Decorator: run a property test for every regime, ``examples`` each, so every
    regime is covered whatever hypothesis prefers. The test takes ``case``."""
    import pytest
    from hypothesis import given, settings

    examples = max(examples, round(examples * settings.default.max_examples / 20))

    def deco(fn):
        def wrapper(regime, data):
            return fn(data.draw(problems(regimes=(regime,), **shape), label="case"))

        wrapper.__name__, wrapper.__qualname__ = fn.__name__, fn.__qualname__
        wrapper.__doc__, wrapper.__module__ = fn.__doc__, fn.__module__
        return pytest.mark.parametrize("regime", regimes)(
            settings(max_examples=examples)(given(data=st.data())(wrapper)))

    return deco


# ---------------------------------------------------------------------------
# Comparing two summary.json files number by number
# ---------------------------------------------------------------------------

#: keys that describe a run, not its results: timings, provenance, and what a search spent
#: (counts, matvecs), which may differ by one step when two runs round differently
NOT_RESULTS = ("wall_time_s", "timings", "timings_s", "meta", "seconds", "eig_counts", "eig_ties", "num_matvecs",
               "counts", "ties", "iterations", "summary", "resumed", "resumed_heads", "resumed_ns")


def summary_differences(a, b, *, rtol: float, path=()) -> list:
    """Every leaf where two JSON trees differ: numbers beyond ``|x − y| <= rtol·max(1, |x|, |y|)``
    (relative for values above 1, absolute below: a rounding-level width of 1e-11 compares
    absolutely), anything else when not equal; keys of :data:`NOT_RESULTS` are skipped.
    Returns ``[(path, x, y)]``."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            if k in NOT_RESULTS:
                continue
            if k not in a or k not in b:
                out.append((path + (k,), a.get(k, "<missing>"), b.get(k, "<missing>")))
            else:
                out += summary_differences(a[k], b[k], rtol=rtol, path=path + (k,))
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [(path, f"len {len(a)}", f"len {len(b)}")]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in summary_differences(x, y, rtol=rtol, path=path + (i,))]
    num = (int, float)
    if isinstance(a, num) and isinstance(b, num) and not isinstance(a, bool) and not isinstance(b, bool):
        if math.isnan(a) and math.isnan(b):
            return []
        return [] if abs(a - b) <= rtol * max(1.0, abs(a), abs(b)) else [(path, a, b)]
    return [] if a == b and type(a) is type(b) else [(path, a, b)]


def verdict_reason(j) -> tuple:
    """``(verdict, reason)`` of a :class:`mhajax.verdict.Judgement`, after checking that its
    summary fields say the same (``passed`` True for PASSED, False for FAILED, else None).
    The verdict is a :class:`~mhajax.verdict.Verdict`, equal to its string value too."""
    from mhajax.verdict import Verdict
    v = Verdict(j.verdict)
    passed = {Verdict.PASSED: True, Verdict.FAILED: False}.get(v)
    assert j.fields() == dict(verdict=v.value, verdict_reason=j.reason, passed=passed)
    return v, j.reason


# ---------------------------------------------------------------------------
# Whole processes as a user starts them (tests/cli/test_user_paths.py, test_main_job.py)
# ---------------------------------------------------------------------------

#: the exit codes of a verdict (docs/reliability.md); 2 is bad input
VERDICT_CODES = {0, 1, 3, 4, 5, 6}
ROOT = Path(__file__).resolve().parents[1]


def run_as_user(args, cwd, cache, *, devices: int = 1, timeout: int = 600) -> subprocess.CompletedProcess:
    """``python -m ARGS`` in ``cwd`` as a user runs it (no test or mhajax variables, the
    compilation cache ``cache``, ``devices`` CPU devices); the test fails on a timeout (a hang)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST", "MHAJAX_"))}
    env.update(PYTHONPATH=str(ROOT), MHAJAX_CACHE_DIR=str(cache))
    env.pop("XLA_FLAGS", None)
    if devices > 1:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    try:
        return subprocess.run([sys.executable, "-m", *args], cwd=cwd, env=env, capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"python -m {' '.join(args)} ({devices} device(s)) did not finish in {timeout} s (a hang?)\n"
                    f"{(e.stdout or b'')[-2000:]!r}")


def assert_user_ok(r, args):
    """No traceback, and the exit code of a verdict."""
    out = r.stdout + r.stderr
    assert "Traceback" not in out, f"python -m {' '.join(args)}:\n{out[-4000:]}"
    assert r.returncode in VERDICT_CODES, f"python -m {' '.join(args)}: exit {r.returncode}\n{out[-4000:]}"
