"""mhajax.krylov.extreme_eigs: thick-restart Lanczos against numpy eigvalsh.

Truths: numpy.linalg.eigvalsh of the same matrix; residuals recomputed here with
numpy from the returned Ritz pairs. Facts that hold whatever the convergence
(Courant–Fischer, and the residual theorem for symmetric matrices) are checked on
unconverged runs too.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import D, H, T, flat, make_refs, problems
from mhajax.curvature.krylov import extreme_eigs, krylov_rayleigh_ritz
from mhajax.errors import InputError

DIM = 40
STEPS = 12          # < DIM: restarts are needed
REL = 1e-8          # required agreement of λ_min / λ_max with numpy


def _solver(dim, steps, cycles):
    return jax.jit(lambda A, key: extreme_eigs(lambda v: A @ v, dim, key, num_steps=steps,
                                               max_cycles=cycles))


solve = _solver(DIM, STEPS, 200)


def _spd_with_gaps(seed, lo_gap, hi_gap, shift):
    """A = Q diag(λ) Qᵀ: interior eigenvalues in [-1, 1] + shift, the extremes separated by
    relative gaps lo_gap / hi_gap from the rest."""
    rng = np.random.default_rng(seed)
    lam = rng.uniform(-1.0, 1.0, DIM)
    lam[0] = -1.0 - lo_gap
    lam[1] = 1.0 + hi_gap
    lam = lam + shift
    Q, _ = np.linalg.qr(rng.standard_normal((DIM, DIM)))
    A = (Q * lam) @ Q.T
    return 0.5 * (A + A.T)


def snorm(x):
    """2-norm without underflow (numpy's squares entries below 1e-162 to zero too)."""
    m = np.abs(x).max()
    return 0.0 if m == 0 else m * np.linalg.norm(x / m)


def _check_ritz_facts(A, r, ev):
    """Facts independent of convergence, with rounding slack relative to ||A||."""
    nA = max(abs(ev[0]), abs(ev[-1]))
    tiny = 1e-13 * nA
    lmin, lmax = float(r.lambda_min), float(r.lambda_max)
    vmin, vmax = np.asarray(r.vec_min), np.asarray(r.vec_max)
    assert abs(np.linalg.norm(vmin) - 1) <= 1e-12 and abs(np.linalg.norm(vmax) - 1) <= 1e-12
    # Courant–Fischer: a Ritz λ_min over-estimates λ_min, a Ritz λ_max under-estimates λ_max
    assert lmin >= ev[0] - tiny
    assert lmax <= ev[-1] + tiny
    # reported residuals are the true ones
    res_min = snorm(A @ vmin - lmin * vmin)
    res_max = snorm(A @ vmax - lmax * vmax)
    assert abs(res_min - float(r.residual_min)) <= tiny
    assert abs(res_max - float(r.residual_max)) <= tiny
    # a Ritz value is the Rayleigh quotient of its vector ...
    assert abs(vmin @ A @ vmin - lmin) <= tiny and abs(vmax @ A @ vmax - lmax) <= tiny
    # ... and lies within its residual of an eigenvalue of A
    assert np.min(np.abs(ev - lmin)) <= res_min + tiny
    assert np.min(np.abs(ev - lmax)) <= res_max + tiny
    return res_min, res_max


@settings(max_examples=25)
@given(seed=st.integers(0, 2**32 - 1), lo_gap=st.floats(0.05, 1.0), hi_gap=st.floats(0.05, 1.0),
       shift=st.floats(-3.0, 3.0), scale=st.sampled_from([1e-160, 1e-6, 1.0, 1e4, 1e160]))
def test_random_symmetric_matrices_with_gaps(seed, lo_gap, hi_gap, shift, scale):
    """Scale-invariant down to ||A|| ~ 1e-160 (loss Hessians at L̂ ~ 1e-160) and up to 1e160:
    norms must not underflow/overflow (jnp.linalg.norm squares the entries)."""
    A = scale * _spd_with_gaps(seed, lo_gap, hi_gap, shift)
    ev = np.linalg.eigvalsh(A)
    r = solve(jnp.asarray(A), jax.random.PRNGKey(seed % 1000))
    _check_ritz_facts(A, r, ev)
    assert bool(r.converged)
    assert float(r.residual_min) <= float(r.tol) and float(r.residual_max) <= float(r.tol)
    assert float(r.tol) == pytest.approx(1e-10 * max(abs(float(r.lambda_min)), abs(float(r.lambda_max))))
    assert abs(float(r.lambda_min) - ev[0]) <= REL * abs(ev[0])
    assert abs(float(r.lambda_max) - ev[-1]) <= REL * abs(ev[-1])
    assert int(r.num_cycles) >= 1 and int(r.num_matvecs) >= STEPS


def test_full_basis_is_exact_in_one_cycle():
    A = _spd_with_gaps(3, 1e-3, 1e-3, 0.1)   # tiny gaps: hard for restarts, trivial for m = dim
    ev = np.linalg.eigvalsh(A)
    r = _solver(DIM, 64, 5)(jnp.asarray(A), jax.random.PRNGKey(0))
    assert int(r.num_cycles) == 1 and bool(r.converged)
    _check_ritz_facts(A, r, ev)
    assert abs(float(r.lambda_min) - ev[0]) <= 1e-12 * abs(ev).max()
    assert abs(float(r.lambda_max) - ev[-1]) <= 1e-12 * abs(ev).max()


solve1 = _solver(DIM, STEPS, 1)       # a single cycle


def test_unconverged_run_is_reported_honestly():
    """A hard matrix (15 eigenvalues within 1e-4 at each end: no gap) and a single 12-vector
    cycle: converged is False, the residuals exceed the tolerance and are the true ones,
    the cycle count is max_cycles, and the one-sided Ritz facts still hold."""
    rng = np.random.default_rng(0)
    lam = np.sort(np.concatenate([-1 + 1e-4 * rng.random(15), rng.uniform(-1, 1, DIM - 30),
                                  1 - 1e-4 * rng.random(15)]))
    Q, _ = np.linalg.qr(rng.standard_normal((DIM, DIM)))
    A = (Q * lam) @ Q.T
    A = 0.5 * (A + A.T)
    ev = np.linalg.eigvalsh(A)
    r = solve1(jnp.asarray(A), jax.random.PRNGKey(1))
    assert not bool(r.converged)
    assert int(r.num_cycles) == 1
    res_min, res_max = _check_ritz_facts(A, r, ev)
    assert max(res_min, res_max) > float(r.tol)


def test_converged_flag_follows_max_cycles():
    """The same gapped matrix: one 12-step cycle is not enough (False), more cycles are (True)."""
    A = _spd_with_gaps(81, 0.56, 0.875, 0.45)
    ev = np.linalg.eigvalsh(A)
    r1 = solve1(jnp.asarray(A), jax.random.PRNGKey(81))
    assert not bool(r1.converged) and int(r1.num_cycles) == 1
    _check_ritz_facts(A, r1, ev)
    r = solve(jnp.asarray(A), jax.random.PRNGKey(81))
    assert bool(r.converged) and 1 < int(r.num_cycles) < 200
    _check_ritz_facts(A, r, ev)


def test_restarts_converge_quickly_once_the_value_has_converged():
    """Regression: after the Ritz values converge to rounding, later cycles may return them
    an ulp 'worse' with much better vectors; those must be kept, or the residual never
    drops below the tolerance (seen: stuck for all 200 cycles at scale 1e-6)."""
    for scale in (1e-6, 1.0, 1e4):
        A = scale * _spd_with_gaps(81, 0.5648737955823755, 0.875, 0.453125)
        r = solve(jnp.asarray(A), jax.random.PRNGKey(81))
        assert bool(r.converged) and int(r.num_cycles) <= 10, (scale, int(r.num_cycles))


def test_zero_operator():
    A = np.zeros((DIM, DIM))
    r = solve(jnp.asarray(A), jax.random.PRNGKey(0))
    assert float(r.lambda_min) == 0.0 and float(r.lambda_max) == 0.0
    assert np.isfinite(np.asarray(r.vec_min)).all() and bool(r.converged)


def test_vmap_over_a_batch_of_matrices():
    As = np.stack([_spd_with_gaps(s, 0.3, 0.3, 0.0) for s in range(3)])
    keys = jax.random.split(jax.random.PRNGKey(0), 3)
    rs = jax.jit(jax.vmap(lambda A, k: extreme_eigs(lambda v: A @ v, DIM, k, num_steps=STEPS,
                                                    max_cycles=200)))(jnp.asarray(As), keys)
    for b in range(3):
        ev = np.linalg.eigvalsh(As[b])
        assert bool(rs.converged[b])
        assert abs(float(rs.lambda_min[b]) - ev[0]) <= REL * abs(ev[0])
        assert abs(float(rs.lambda_max[b]) - ev[-1]) <= REL * abs(ev[-1])


# ---------------------------------------------------------------------------
# actual loss Hessians (P = 56), matrix-free through an independent dense Hessian
# ---------------------------------------------------------------------------

REFS = make_refs(H, T, D)
P = H * (T * D + D * D)
solve_loss = _solver(P, 16, 400)


@settings(max_examples=20)
@given(problems(regimes=("generic", "large_w", "tiny_data", "large_u", "small_loss")))
def test_loss_hessians(case):
    th, X, y, _ = case
    A = np.asarray(REFS["hess"](flat(th), X, y))
    A = 0.5 * (A + A.T)
    ev = np.linalg.eigvalsh(A)
    r = solve_loss(jnp.asarray(A), jax.random.PRNGKey(0))
    _check_ritz_facts(A, r, ev)
    assert bool(r.converged)
    nA = max(abs(ev[0]), abs(ev[-1]))
    assert abs(float(r.lambda_max) - ev[-1]) <= REL * abs(ev[-1])
    # λ_min can be tiny next to ||A|| (loss Hessians have many eigenvalues near 0): the
    # residual criterion is relative to ||A||, so require 1e-8 relative to max(|λ_min|, 1e-2||A||)
    assert abs(float(r.lambda_min) - ev[0]) <= REL * abs(ev[0]), (ev[0], nA, float(r.lambda_min))


# ---------------------------------------------------------------------------
# the rare branches: float32 operators, and invariant subspaces (fresh random directions)
# ---------------------------------------------------------------------------

def test_float32_operator_stays_float32_with_its_own_tolerance():
    """A float32 operator (dtype=float32): every output is float32, the default rtol is
    1e-4 (docs/theory.md §8.4) and λ_min / λ_max agree with numpy's float64 eigvalsh to
    float32 accuracy. Tracing the float32 program also builds the invariant-subspace branch,
    whose random vector must be float32 too (lax.cond needs both branches of one dtype)."""
    A = _spd_with_gaps(5, 0.3, 0.3, 0.0)
    ev = np.linalg.eigvalsh(A)
    A32 = jnp.asarray(A, jnp.float32)
    r = jax.jit(lambda A, k: extreme_eigs(lambda v: A @ v, DIM, k, num_steps=STEPS, max_cycles=200,
                                          dtype=jnp.float32))(A32, jax.random.PRNGKey(5))
    for leaf in (r.lambda_min, r.lambda_max, r.residual_min, r.residual_max, r.vec_min, r.vec_max,
                 r.tol):
        assert leaf.dtype == jnp.float32
    assert bool(r.converged)
    lmin, lmax = float(r.lambda_min), float(r.lambda_max)
    assert float(r.tol) == pytest.approx(1e-4 * max(abs(lmin), abs(lmax)), rel=1e-6, abs=0)
    assert abs(lmin - ev[0]) <= 1e-3 * abs(ev[0]) and abs(lmax - ev[-1]) <= 1e-3 * abs(ev[-1])


@pytest.mark.parametrize("seed", range(4))
def test_invariant_subspace_is_completed_by_unit_orthogonal_directions(seed):
    """Two distinct eigenvalues (1 and 2, multiplicity 4 each) on R^8 and 7 Lanczos steps:
    the Krylov space of one start vector is invariant after 2 steps, and the other 5 basis
    vectors are random directions. They must be unit vectors orthogonal to the basis (T =
    Q A Qᵀ is then a Rayleigh–Ritz matrix): a zero or non-unit direction gives a Ritz value
    outside [1, 2]. Checked on the basis itself and on the result."""
    rng = np.random.default_rng(seed)
    dim, steps = 8, 7
    Qr, _ = np.linalg.qr(rng.standard_normal((dim, dim)))
    A = (Qr * np.repeat([1.0, 2.0], 4)) @ Qr.T
    A = 0.5 * (A + A.T)
    key = jax.random.PRNGKey(seed)
    start = jax.random.normal(key, (1, dim))
    Q, Tm, _ = jax.jit(lambda s, k: krylov_rayleigh_ritz(lambda v: jnp.asarray(A) @ v, s, steps, k))(
        start, key)
    Q, Tm = np.asarray(Q), np.asarray(Tm)
    assert np.abs(Q @ Q.T - np.eye(steps)).max() <= 1e-12
    assert np.abs(Tm - Q @ A @ Q.T).max() <= 1e-12
    r = extreme_eigs(lambda v: jnp.asarray(A) @ v, dim, key, num_steps=steps, max_cycles=5)
    _check_ritz_facts(A, r, np.linalg.eigvalsh(A))
    assert bool(r.converged)
    assert abs(float(r.lambda_min) - 1.0) <= 1e-12 and abs(float(r.lambda_max) - 2.0) <= 1e-12


def test_documented_defaults_num_steps_64_max_cycles_20():
    """docs/theory.md §8.3–8.4: ``num_steps`` defaults to 64 and ``max_cycles`` to 20, and
    each cycle costs m + 2 products. With an unreachable tolerance (rtol = 1e-300) on
    R^80 the solver runs all 20 cycles of 64 steps: 20 · 66 products."""
    A = np.random.default_rng(7).standard_normal((80, 80))
    A = jnp.asarray(0.5 * (A + A.T))
    r = jax.jit(lambda A, k: extreme_eigs(lambda v: A @ v, 80, k, rtol=1e-300))(A, jax.random.PRNGKey(7))
    assert not bool(r.converged)
    assert int(r.num_cycles) == 20 and int(r.num_matvecs) == 20 * (64 + 2)


@pytest.mark.slow
@pytest.mark.parametrize("m, keep", [(6, 1), (10, 2), (40, 8)])
def test_default_keep_is_the_documented_formula(m, keep):
    """docs/theory.md §8.3: keep = max(1, min(8, ⌊(m − 2)/4⌋)), here as literal values.
    Three cycles on R^(m+24) (restarts happen, so keep matters): the default gives bit for
    bit the run with the literal keep, and not the run with keep + 1 (the check has power)."""
    dim = m + 24
    A = np.random.default_rng(m).standard_normal((dim, dim))
    A = jnp.asarray(0.5 * (A + A.T))

    def run(k):
        r = jax.jit(lambda A, key: extreme_eigs(lambda v: A @ v, dim, key, num_steps=m, max_cycles=3,
                                                keep=k))(A, jax.random.PRNGKey(m))
        return np.concatenate([np.ravel(np.asarray(x, np.float64)) for x in r])

    default = run(None)
    assert np.array_equal(default, run(keep))
    assert not np.array_equal(default, run(keep + 1))


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_converged_needs_both_ends(sign):
    """One end isolated (eigenvalue 100, converged after one 12-step cycle), the other a
    cluster of 15 eigenvalues within 1e-4 (not converged): converged is False, and it is
    exactly 'both residuals <= tol' recomputed here from the returned residuals."""
    rng = np.random.default_rng(0)
    lam = np.sort(np.concatenate([-1 + 1e-4 * rng.random(15), rng.uniform(-1, 1, DIM - 16), [100.0]]))
    Q, _ = np.linalg.qr(rng.standard_normal((DIM, DIM)))
    A = sign * (Q * lam) @ Q.T
    A = 0.5 * (A + A.T)
    r = solve1(jnp.asarray(A), jax.random.PRNGKey(0))
    res_min, res_max = _check_ritz_facts(A, r, np.linalg.eigvalsh(A))
    tol = 1e-10 * max(abs(float(r.lambda_min)), abs(float(r.lambda_max)))
    isolated, cluster = (res_max, res_min) if sign > 0 else (res_min, res_max)
    assert isolated <= tol < cluster
    assert not bool(r.converged)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_a_non_finite_operator_is_reported_as_nan_never_as_converged(bad):
    """A NaN (or inf) operator gives NaN Ritz values and NaN residuals, and converged False:
    neither a 0 residual (a NaN vector's norm once read as 0) nor the ±inf start values with an
    inf tolerance (inf <= inf) may pass as an answer."""
    A = jnp.diag(jnp.arange(1.0, 11.0)).at[0, 3].set(bad).at[3, 0].set(bad)
    r = extreme_eigs(lambda v: A @ v, 10, jax.random.PRNGKey(0), num_steps=4, max_cycles=3)
    for x in (r.lambda_min, r.lambda_max, r.residual_min, r.residual_max):
        assert np.isnan(float(x))
    assert not bool(r.converged)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float64])
def test_a_new_direction_is_kept_above_eps_sqrt_p_scale_and_replaced_below(dtype):
    """``_unit_or_random`` keeps ``w/||w||`` when ``||w|| > eps·√P·scale`` (eps of w's own
    dtype) and otherwise draws a random unit vector orthogonal to Q from ``key``. Truth: the
    direction of w above the threshold, and the key's normal draw with Q's coordinates
    zeroed (Q's rows are unit coordinate vectors), normalized, below it."""
    from mhajax.curvature.krylov import _unit_or_random

    P, scale = 100, 3.0
    eps = float(jnp.finfo(dtype).eps)
    threshold = eps * np.sqrt(P) * scale
    Q = jnp.zeros((4, P), dtype).at[jnp.arange(2), jnp.arange(2)].set(1.0)   # e0, e1, two unused rows
    u = np.zeros(P)
    u[5], u[7] = 0.6, 0.8                                                   # unit, orthogonal to Q
    key = jax.random.PRNGKey(3)
    r = np.array(jax.random.normal(key, (P,), dtype), dtype=float)
    r[:2] = 0.0
    r /= np.linalg.norm(r)
    f = jax.jit(_unit_or_random)
    for factor, want in ((2.0, u), (0.5, r)):
        got = np.asarray(f(Q, jnp.asarray(factor * threshold * u, dtype), key, jnp.asarray(scale, dtype)))
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=0, atol=16 * eps)


def test_a_basis_that_spans_the_space_gets_the_zero_vector():
    """When Q's rows already span R^P there is no direction left: the zero vector (documented),
    not a vector of any other value."""
    from mhajax.curvature.krylov import _unit_or_random

    Q = jnp.eye(3)
    got = jax.jit(_unit_or_random)(Q, jnp.zeros(3), jax.random.PRNGKey(0), jnp.asarray(1.0))
    np.testing.assert_array_equal(np.asarray(got), np.zeros(3))


_A = jnp.diag(jnp.arange(1.0, 11.0))
#: an argument of extreme_eigs -> what the refusal says (the operator is A = diag(1..10) on R^10)
BAD = {
    "dim=0": (dict(dim=0), "dim must be an integer >= 1, got 0"),
    "num_steps=0": (dict(num_steps=0), "num_steps must be an integer >= 1, got 0"),
    "max_cycles=0": (dict(max_cycles=0), "max_cycles must be an integer >= 1, got 0"),
    "keep=0": (dict(keep=0), "keep must be an integer >= 1, got 0"),
    "rtol<0": (dict(rtol=-1.0), "rtol must be a finite number > 0, got -1.0"),
    "rtol=nan": (dict(rtol=float("nan")), "rtol must be a finite number > 0, got nan"),
    "key=3": (dict(key=3), "key must be a PRNG key (jax.random.key(seed) or jax.random.PRNGKey(seed)), got 3"),
    "int dtype": (dict(dtype=jnp.int32), "dtype must be a floating-point type, got int32"),
    "a matrix": (dict(matvec=_A), "matvec must be a function v [dim] -> A v [dim], got ArrayImpl"),
    "dim too small": (dict(dim=7), "matvec cannot take a vector of shape (7,): TypeError: dot_general requires"),
    "[dim] -> [2]": (dict(matvec=lambda v: (_A @ v)[:2]), "matvec maps a vector of shape (10,) to shape (2,)"),
}


@pytest.mark.parametrize("bad", sorted(BAD))
def test_a_bad_argument_is_refused_in_one_line_naming_it(bad):
    """max_cycles=0 returned NaN Ritz values, a negative or NaN rtol ran, dim=0 and a wrong-sized
    operator failed inside JAX: each is now one line naming extreme_eigs and the value."""
    kw, said = BAD[bad]
    args = dict(matvec=lambda v: _A @ v, dim=10, key=jax.random.PRNGKey(0)) | kw
    with pytest.raises(InputError) as e:
        extreme_eigs(args.pop("matvec"), args.pop("dim"), args.pop("key"), **args)
    assert str(e.value).startswith(f"extreme_eigs: {said}") and "\n" not in str(e.value), str(e.value)


def test_the_smallest_valid_arguments_give_numpys_extremes():
    """dim = num_steps = max_cycles = keep = 1 (a 1×1 operator), and a typed key."""
    r = extreme_eigs(lambda v: 3.0 * v, 1, jax.random.key(0), num_steps=1, max_cycles=1, keep=1)
    assert float(r.lambda_min) == float(r.lambda_max) == 3.0 and bool(r.converged)
    r = extreme_eigs(lambda v: _A @ v, 10, jax.random.key(1), num_steps=1, max_cycles=1)
    assert 1.0 <= float(r.lambda_min) <= float(r.lambda_max) <= 10.0        # one Ritz value: inside
