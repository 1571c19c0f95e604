"""mhajax.linalg: the CPU eigensolver route (issue 14).

With every OpenBLAS single-threaded (tests/conftest.py does what every command does), the
eigensolvers run inside XLA: the κ-chain analysis is then a program without host callbacks,
which JAX's persistent compilation cache can store (a second identical run compiles
nothing). ``MHAJAX_CPU_EIGH=callback`` forces the callback route. Both routes give NaN for
a non-finite matrix and numpy's eigenvalues otherwise; batched eigensolvers in one program
(the shape that deadlocked jaxlib 0.10 with a threaded OpenBLAS) finish. With
``MHAJAX_CPU_EIGH=loop`` every LAPACK call gets one matrix, with the batched call's bits, and
four independent batched calls (which hung on 2 quiet cores with OpenBLAS on one thread) finish.
``vmap`` keeps each call site one kernel on CPU, and ``batched_calls_in_flight`` (checked against
programs with known answers and a brute-force antichain on random programs) finds at most two
independent batched kernels in every mhajax program, vmapped or not. ``load_lapack`` gives jaxlib
SciPy's two LAPACK modules without ``scipy.linalg``'s package init (fresh interpreters: XLA's
``eigh`` against numpy, a later ``import scipy.linalg`` whole and holding the same modules, the
fallback to the plain import).

Truth: numpy.linalg.eigh; jnp.linalg.eigh's batched call (bit for bit); the compiled
program's text (no ``callback`` custom call; every eigensolver call's operand is one matrix)."""
import itertools
import re
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mhajax import linalg
from mhajax.bench.timing import problem
from mhajax.curvature.spectrum import _extremes_jit
from mhajax.experiments.base import _smoothness_at, analyse_batch, point_index
from mhajax.losses import LOGISTIC
from mhajax.models import ALL_MODELS, SOFTMAX, get_model
from mhajax.runtime.jaxsetup import cpu_compile_options, fast_compile_options

ROOT = Path(__file__).resolve().parents[1]


def _sym(rng, *shape):
    A = rng.standard_normal(shape)
    return A + np.swapaxes(A, -1, -2)


def test_the_test_process_takes_the_xla_route():
    assert linalg.lapack_single_threaded() is True
    assert all(get() == 1 for get, _ in linalg.openblas_controls())


def test_analysis_program_has_no_host_callback():
    """The weak-convexity analysis (analyse_batch, the program that was never cached) lowers
    without a host callback, so JAX writes it to the persistent cache."""
    params, X, y = problem(4, 3, 4, 8)
    P = jax.tree_util.tree_map(lambda a: a[None], params)
    text = analyse_batch.lower(P, jnp.zeros((1,), int), jax.random.split(jax.random.PRNGKey(0), 1),
                               X[None], y[None], method="auto", links="core", lanczos_steps=16,
                               max_cycles=2).as_text()
    assert "callback" not in text.lower()
    assert "eigh" in text.lower() or "syevd" in text.lower()   # the eigensolver is inside XLA


def test_callback_route_can_be_forced(monkeypatch):
    """MHAJAX_CPU_EIGH=callback: the same eigensolver lowers to a host callback (the safe
    route for processes whose OpenBLAS is threaded)."""
    monkeypatch.setenv(linalg.CPU_EIGH_ENV, "callback")
    linalg.lapack_single_threaded.cache_clear()
    try:
        assert linalg.lapack_single_threaded() is False
        text = jax.jit(lambda a: linalg.eigh(a)).lower(jnp.eye(3)).as_text()
        assert "callback" in text.lower()
    finally:
        monkeypatch.delenv(linalg.CPU_EIGH_ENV)
        linalg.lapack_single_threaded.cache_clear()
    assert linalg.lapack_single_threaded() is True


@pytest.mark.parametrize("route", ["xla", "callback"])
def test_both_routes_agree_with_numpy_and_give_nan_for_nonfinite(monkeypatch, route):
    rng = np.random.default_rng(0)
    A = _sym(rng, 3, 5, 5)
    A[1, 2, 3] = np.nan
    if route == "callback":
        monkeypatch.setenv(linalg.CPU_EIGH_ENV, "callback")
    linalg.lapack_single_threaded.cache_clear()
    try:
        w = np.asarray(jax.jit(linalg.eigvalsh)(A))
        w2, V = (np.asarray(a) for a in jax.jit(linalg.eigh)(A))
    finally:
        monkeypatch.delenv(linalg.CPU_EIGH_ENV, raising=False)
        linalg.lapack_single_threaded.cache_clear()
    ref = np.linalg.eigvalsh(A[[0, 2]])
    for got in (w, w2):
        assert np.all(np.isnan(got[1]))
        np.testing.assert_allclose(got[[0, 2]], ref, rtol=0, atol=1e-13 * np.abs(ref).max())
    assert np.all(np.isnan(V[1])) and np.all(np.isfinite(V[[0, 2]]))


def test_batched_eigensolvers_in_one_program_finish():
    """The deadlock of issue 14 (jaxlib 0.10, CPU): two batched eigvalsh of [64, 112, 112] in
    one jitted vmap hung forever with a threaded OpenBLAS. With the process set up as every
    command is, 10 calls finish (a fresh process, killed after 300 s if it hangs)."""
    code = textwrap.dedent("""
        import jax, jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)
        from mhajax.runtime.jaxsetup import single_threaded_blas
        assert single_threaded_blas()
        from mhajax import linalg
        assert linalg.lapack_single_threaded()
        X = jax.random.normal(jax.random.PRNGKey(0), (4, 64, 112, 112))
        X = X + jnp.swapaxes(X, -1, -2)
        f = jax.jit(jax.vmap(lambda a, b: (linalg.eigvalsh(a), linalg.eigh(b)[0])))
        for _ in range(10):
            jax.block_until_ready(f(X[:2], X[2:]))
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT), MHAJAX_CACHE_DIR="off")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env,
                          cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]


def test_fast_compile_options_on_cpu(monkeypatch):
    """Programs run once per process compile at LLVM -O0 on CPU, with the CPU options this jaxlib
    knows; MHAJAX_FAST_COMPILE=0 turns both off."""
    assert fast_compile_options() == {"xla_backend_optimization_level": 0, **cpu_compile_options()}
    monkeypatch.setenv("MHAJAX_FAST_COMPILE", "0")
    assert fast_compile_options() is None and cpu_compile_options() == {}


def _cache_run(tmp_path, cache, out, **env):
    """One whole ``verify weak-convexity`` process (tiny sizes) into the cache dir ``cache``;
    returns the set of file names in it afterwards."""
    cmd = [sys.executable, "-m", "verify", "weak-convexity", "--heads", "2", "--seeds", "1", "--steps", "4",
           "--every", "2", "--links", "core", "--n", "8", "--tokens", "3", "--dim", "6", "--quiet",
           "--out", str(tmp_path / out)]
    e = dict(os.environ, PYTHONPATH=str(ROOT), MHAJAX_CACHE_DIR=str(tmp_path / cache), MHAJAX_PROGRAM_CACHE="1", **env)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=e, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(os.listdir(tmp_path / cache))


@pytest.mark.slow
def test_second_identical_run_compiles_nothing_new(tmp_path):
    """Fast start (issue 14): a first ``verify weak-convexity`` run writes every program it
    compiles to the persistent cache — the κ-chain analysis ``analyse_batch`` included, which
    JAX refuses to write when it holds a host callback — and a second identical run (fresh
    ``--out``: a reused one resumes and compiles nothing anyway) writes no new entry, i.e. it
    had no cache miss on a cacheable program. Control: with the host-callback route forced
    (``MHAJAX_CPU_EIGH=callback``, the pre-issue-14 route) the analysis is *not* written, so
    this test fails if a callback comes back into the analysis."""
    first = _cache_run(tmp_path, "cache", "run1")
    assert any(f.startswith("jit_analyse_batch-") for f in first), sorted(first)
    second = _cache_run(tmp_path, "cache", "run2")
    assert second == first, sorted(second - first)
    control = _cache_run(tmp_path, "cache_cb", "run_cb", MHAJAX_CPU_EIGH="callback")
    assert control and not any(f.startswith("jit_analyse_batch-") for f in control), sorted(control)


# --- norm: the underflow/overflow-safe Euclidean norm --------------------------------------------

@pytest.mark.parametrize("scale", [1e-200, 1e-160, 1.0, 1e150, 1e200])
def test_norm_agrees_with_math_hypot_where_the_plain_formula_fails(scale):
    """Truth: math.hypot (correctly scaled, Python >= 3.8). At 1e-200 the plain sqrt(Σx²)
    underflows to 0 and at 1e200 overflows to inf; norm must not."""
    x = np.random.default_rng(0).standard_normal(257) * scale
    want = math.hypot(*x)
    assert float(linalg.norm(jnp.asarray(x))) == pytest.approx(want, rel=1e-14, abs=0)
    X = x.reshape(1, 257).repeat(3, 0) * np.array([[1.0], [2.0], [0.0]])
    got = np.asarray(linalg.norm(jnp.asarray(X), axis=1))
    np.testing.assert_allclose(got, [want, 2 * want, 0.0], rtol=1e-14, atol=0)


def test_norm_of_a_non_finite_vector_is_never_zero():
    """A NaN entry gives NaN and an inf entry inf (a NaN residual once read as 0, i.e. as
    converged); the zero vector gives exactly 0."""
    nan, inf = float("nan"), float("inf")
    cases = {(0.0, 0.0, 0.0): 0.0, (1.0, nan, 2.0): nan, (1.0, -inf, 2.0): inf, (nan, inf, 1.0): nan}
    for v, want in cases.items():
        got = float(linalg.norm(jnp.asarray(v)))
        assert (math.isnan(got) and math.isnan(want)) or got == want, (v, got)
    rows = np.asarray(linalg.norm(jnp.asarray([[3.0, 4.0], [nan, 1.0], [0.0, 0.0], [inf, 0.0]]), axis=1))
    assert rows[0] == 5.0 and math.isnan(rows[1]) and rows[2] == 0.0 and rows[3] == inf


def _lapack_operands(fn, *args):
    """The shape of the first result (the eigenvectors [..., m, m]) of every eigensolver
    custom call in the compiled program."""
    text = jax.jit(lambda *a: fn(*a)).lower(*args).compile().as_text()   # a fresh trace: the route is read then
    calls = [ln for ln in text.splitlines() if "custom-call(" in ln and "syevd" in ln.lower()]
    assert calls, "no LAPACK eigensolver call in the program"
    return [re.search(r"= \(?f64\[([0-9,]*)\]", ln).group(1) for ln in calls]


def test_the_default_cpu_route_is_the_batched_call():
    A = jnp.asarray(_sym(np.random.default_rng(1), 3, 4, 6, 6))
    assert linalg.one_matrix_per_call() is False
    assert _lapack_operands(linalg.eigh, A) == ["3,4,6,6"]


@pytest.mark.parametrize("case", ["batch", "vmap of a batch", "nested vmap", "eigvalsh"])
def test_every_lapack_call_gets_one_matrix_with_the_batched_calls_bits(case, monkeypatch):
    """``MHAJAX_CPU_EIGH=loop``: a batch is looped inside the program, under ``vmap`` too: each
    LAPACK call's result is one [m, m] matrix (so it never fans out and waits on XLA's pool),
    and the results equal jnp.linalg's batched call to the bit."""
    monkeypatch.setenv(linalg.CPU_EIGH_ENV, "loop")
    assert linalg.one_matrix_per_call() is True
    A = jnp.asarray(_sym(np.random.default_rng(1), 3, 4, 6, 6))
    if case == "batch":
        fn, ref = linalg.eigh, jnp.linalg.eigh(A)
    elif case == "vmap of a batch":
        fn, ref = jax.vmap(linalg.eigh), jnp.linalg.eigh(A)
    elif case == "nested vmap":
        fn, ref = jax.vmap(jax.vmap(linalg.eigh)), jnp.linalg.eigh(A)
    else:
        fn, ref = jax.vmap(linalg.eigvalsh), jnp.linalg.eigvalsh(A)
    assert set(_lapack_operands(fn, A)) == {"6,6"}
    got = jax.jit(lambda a: fn(a))(A)
    for g, r in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(ref)):
        assert g.shape == r.shape and bool(jnp.all(g == r))


@pytest.mark.parametrize("route", ["", "loop"])
def test_a_nan_matrix_inside_a_vmapped_batch_gets_nan_only_itself(route, monkeypatch):
    monkeypatch.setenv(linalg.CPU_EIGH_ENV, route)
    A = _sym(np.random.default_rng(2), 2, 3, 4, 4)
    A[1, 0, 2, 2] = np.inf
    w, V = jax.jit(jax.vmap(lambda a: linalg.eigh(a)))(jnp.asarray(A))
    bad = np.zeros((2, 3), bool)
    bad[1, 0] = True
    assert np.all(np.isnan(np.asarray(w)[bad])) and np.all(np.isnan(np.asarray(V)[bad]))
    np.testing.assert_array_equal(np.asarray(w)[~bad], np.asarray(jnp.linalg.eigvalsh(A[~bad])))


def test_many_independent_batched_eigensolvers_in_one_program_finish():
    """``MHAJAX_CPU_EIGH=loop`` and the program that hung: four independent eigensolver calls on
    batches [64, 112, 112] in one jitted function (with the batched kernels it hung on its first
    run here, 2 quiet cores, OpenBLAS on one thread), then the same with eigvalsh: 5 runs of
    each finish, in a fresh process killed after 150 s if it hangs."""
    code = textwrap.dedent("""
        import jax, jax.numpy as jnp, numpy as np
        jax.config.update("jax_enable_x64", True)
        from mhajax.runtime.jaxsetup import single_threaded_blas
        assert single_threaded_blas()
        from mhajax import linalg
        A = np.random.default_rng(0).standard_normal((256, 112, 112))
        A = jnp.asarray(A + A.transpose(0, 2, 1))
        for solve in (lambda a: linalg.eigh(a)[1], linalg.eigvalsh):
            f = jax.jit(lambda X: jnp.concatenate([solve(a) for a in jnp.split(X, 4)]))
            for _ in range(5):
                jax.block_until_ready(f(A))
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT), MHAJAX_CACHE_DIR="off", MHAJAX_CPU_EIGH="loop")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=150, env=env,
                          cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]


# ---------------------------------------------------------------------------
# How many batched eigensolver calls a program can have in flight at once
# ---------------------------------------------------------------------------

_in_flight_of = linalg.batched_calls_in_flight


def test_the_counter_of_calls_in_flight_on_known_programs():
    """The structural count below, on programs whose answer is known by construction: the
    four-way split that hung (4), a chain of dependent calls (1), a single matrix (0: no
    batched kernel), a loop beside an independent call (2), vmap of two independent calls
    (2: vmap keeps each call site one kernel, run once per mapped element)."""
    A = jnp.ones((8, 5, 5))
    solve = lambda a: linalg.eigh(a)[1]
    assert _in_flight_of(lambda X: jnp.concatenate([solve(a) for a in jnp.split(X, 4)]), A) == 4
    assert _in_flight_of(lambda X: solve(solve(X) + X), A) == 1
    assert _in_flight_of(lambda X: solve(X[0]), A) == 0
    assert _in_flight_of(lambda X: jax.lax.fori_loop(0, 3, lambda i, x: solve(x), X) + solve(X), A) == 2
    assert _in_flight_of(jax.vmap(lambda X: (solve(X), linalg.eigvalsh(X @ X))), A[None]) == 2
    assert _in_flight_of(jax.vmap(lambda X: solve(X[0]) + linalg.eigh(X[1])[1]), A[None]) == 0


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sets(st.integers(0, 6), max_size=3), st.booleans(), st.booleans()),
                min_size=1, max_size=7))
def test_the_counter_equals_a_brute_force_antichain_on_random_programs(spec):
    """Random programs of up to 7 eigensolver calls, call k reading the results of a random set
    of earlier calls, batched or a single matrix, some inside a ``fori_loop``: the count equals
    the heaviest set of batched calls no two of which are ordered (brute force over the known
    dependency graph, its transitive closure taken by hand)."""
    deps = [{j for j in d if j < k} for k, (d, _, _) in enumerate(spec)]
    batched = [b for _, b, _ in spec]
    closure = []
    for k, d in enumerate(deps):
        closure.append(set(d).union(*(closure[j] for j in d)) if d else set())

    def program(X):
        outs = []
        for k, (_, b, looped) in enumerate(spec):
            a = X + sum((o for o in (outs[j] for j in sorted(deps[k]))), jnp.zeros_like(X))
            solve = (lambda m: linalg.eigh(m)[1]) if b else (lambda m: X.at[0].set(linalg.eigh(m[0])[1]))
            outs.append(jax.lax.fori_loop(0, 2, lambda i, m: solve(m), a) if looped else solve(a))
        return outs

    best = 0
    for r in range(1, len(spec) + 1):
        for group in itertools.combinations([k for k in range(len(spec)) if batched[k]], r):
            if all(a not in closure[b] and b not in closure[a] for a, b in itertools.combinations(group, 2)):
                best = max(best, r)
    assert _in_flight_of(program, jnp.ones((3, 4, 4))) == best


def _analysis_args(points, model=SOFTMAX):
    params, X, y = problem(4, 4, 4, 16)
    if model is not SOFTMAX:
        params = model.init(jax.random.PRNGKey(1), 4, 4, 4)
    P = jax.tree_util.tree_map(lambda a: jnp.stack([a] * points), params)
    return P, point_index(1, points), jax.random.split(jax.random.PRNGKey(0), points), X[None], y[None]


@pytest.mark.parametrize("batch_size", [None, 3])
@pytest.mark.parametrize("links", ["all", "core"])
@pytest.mark.parametrize("method", ["auto", "lanczos", "dense"])
def test_the_chain_analysis_holds_at_most_two_batched_calls_in_flight(method, links, batch_size):
    """The κ-chain analysis (every method and link set, one point at a time or ``vmap``-ed over
    three): at most two batched eigensolver kernels that no dependency orders — the head
    blocks' and the per-sample norms' — where four hung (module docstring). Before ``vmap``
    looped over its axis, the vmapped analysis held five, and it hung (test below)."""
    fn = lambda *a: analyse_batch(*a, method=method, links=links, lanczos_steps=8, max_cycles=2,
                                  batch_size=batch_size)
    assert _in_flight_of(fn, *_analysis_args(3)) <= (2 if links == "all" else 1)


@pytest.mark.parametrize("name", [m for m in ALL_MODELS if m != "softmax"])
def test_every_variants_analysis_holds_at_most_two_batched_calls_in_flight(name):
    model = get_model(name)
    fn = lambda *a: analyse_batch(*a, method="auto", links="all", lanczos_steps=8, max_cycles=2,
                                  batch_size=2, model=model)
    assert _in_flight_of(fn, *_analysis_args(2, model)) <= 2


@pytest.mark.parametrize("ends", ["min", "both"])
def test_the_certified_check_and_the_step_premise_hold_one_batched_call(ends):
    params, X, y = problem(4, 4, 4, 16)
    kw = (("ends", ends), ("loss", LOGISTIC), ("model", SOFTMAX))
    check = lambda p, X, y, k: _extremes_jit.__wrapped__(p, X, y, k, "auto", kw)
    assert _in_flight_of(check, params, X, y, jax.random.PRNGKey(0)) == 1
    assert _in_flight_of(jax.vmap(check, in_axes=(0, None, None, None)),
                         jax.tree_util.tree_map(lambda a: a[None], params), X, y, jax.random.PRNGKey(0)) == 1
    S2 = lambda a: jnp.stack([a, a])
    assert _in_flight_of(lambda p, X, y: _smoothness_at(p, X, y, SOFTMAX, LOGISTIC),
                         jax.tree_util.tree_map(S2, params), S2(X), S2(y)) == 1


def test_vmap_loops_over_its_axis_with_the_batched_calls_bits():
    """Under ``vmap`` each call site keeps its own batch: a single-matrix call stays one matrix
    per LAPACK call, a batched one keeps its batch (the compiled program's operands), and the
    results equal jnp.linalg's, values and derivatives (reverse mode included)."""
    A = jnp.asarray(_sym(np.random.default_rng(3), 2, 3, 5, 5))
    assert set(_lapack_operands(jax.vmap(jax.vmap(linalg.eigh)), A)) == {"5,5"}
    assert set(_lapack_operands(jax.vmap(linalg.eigh), A)) == {"3,5,5"}
    for got, ref in ((jax.vmap(linalg.eigh)(A), jnp.linalg.eigh(A)),
                     (jax.vmap(jax.vmap(linalg.eigvalsh))(A), jnp.linalg.eigvalsh(A))):
        for g, r in zip(jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(ref)):
            assert g.shape == r.shape and bool(jnp.all(g == r))
    smallest = lambda solve: (lambda a: jnp.sum(solve(a)[..., 0] ** 2))
    np.testing.assert_array_equal(jax.grad(smallest(linalg.eigvalsh))(A), jax.grad(smallest(jnp.linalg.eigvalsh))(A))
    np.testing.assert_array_equal(jax.vmap(jax.grad(smallest(linalg.eigvalsh)))(A),
                                  jax.vmap(jax.grad(smallest(jnp.linalg.eigvalsh)))(A))


def test_a_vmapped_chain_analysis_finishes():
    """The program that hung before (2026-12-01, twice, 300 s and 60 s with 0 % CPU): the
    links-all analysis at H = 16, n = 64, T = 6, d = 8, ``vmap``-ed over 6 points, with
    OpenBLAS on one thread — it held five independent batched kernels then, and hung on its
    first run. One run in a fresh process, killed after 150 s if it hangs."""
    code = textwrap.dedent("""
        import jax, jax.numpy as jnp
        jax.config.update("jax_enable_x64", True)
        from mhajax.runtime.jaxsetup import single_threaded_blas
        assert single_threaded_blas()
        from mhajax.bench.timing import problem
        from mhajax.experiments.base import analyse_batch, point_index
        params, X, y = problem(16, 6, 8, 64)
        P = jax.tree_util.tree_map(lambda a: jnp.stack([a] * 6), params)
        keys = jax.random.split(jax.random.PRNGKey(0), 6)
        out = analyse_batch(P, point_index(1, 6), keys, X[None], y[None], method="auto", links="all",
                            lanczos_steps=16, max_cycles=5, batch_size=6)
        jax.block_until_ready(out)
        print("ok")
    """)
    env = dict(os.environ, PYTHONPATH=str(ROOT), MHAJAX_CACHE_DIR="off")
    env.pop(linalg.CPU_EIGH_ENV, None)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=150, env=env,
                          cwd=ROOT)
    assert proc.returncode == 0 and proc.stdout.strip().endswith("ok"), proc.stderr[-2000:]


# ---------------------------------------------------------------------------
# load_lapack: jaxlib's LAPACK without scipy.linalg's package init (start-up, issue 14)
# ---------------------------------------------------------------------------

def _fresh(*parts: str) -> str:
    """Run the code ``parts`` (each dedented) in a fresh interpreter (nothing loaded yet); its stdout."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), MHAJAX_CACHE_DIR="off")
    code = "\n".join(textwrap.dedent(c) for c in parts)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=150, env=env, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


_EIGH_AGAINST_NUMPY = """
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_enable_x64", True)
    A = np.random.default_rng(0).standard_normal((3, 40, 40)); A = A + np.swapaxes(A, 1, 2)
    w, V = jax.jit(jnp.linalg.eigh)(A)              # XLA's LAPACK kernel, i.e. SciPy's routines
    ref = np.linalg.eigvalsh(A)
    assert np.max(np.abs(np.asarray(w) - ref)) <= 1e-12 * np.abs(ref).max()
    R = np.einsum("bij,bjk->bik", A, np.asarray(V)) - np.asarray(V) * np.asarray(w)[:, None, :]
    assert np.abs(R).max() <= 1e-12 * np.abs(ref).max()
"""


def test_load_lapack_gives_jaxlib_its_lapack_without_the_scipy_linalg_package():
    out = _fresh("""
        import sys
        from mhajax import linalg
        assert linalg.load_lapack() is True
        print("package", "scipy.linalg" in sys.modules)
        print("modules", all(m in sys.modules for m in linalg.SCIPY_LAPACK_MODULES))
        print("openblas", len(linalg.openblas_controls()) > 0)
    """, _EIGH_AGAINST_NUMPY, """
        print("after eigh", "scipy.linalg" in sys.modules)
    """)
    assert out.split("\n")[:4] == ["package False", "modules True", "openblas True", "after eigh False"]


def test_scipy_linalg_imported_afterwards_is_whole_and_holds_the_same_modules():
    out = _fresh("""
        import sys
        import numpy as np
        from mhajax import linalg
        linalg.load_lapack()
        loaded = {m: sys.modules[m] for m in linalg.SCIPY_LAPACK_MODULES}
        import scipy.linalg
        import scipy.linalg.cython_lapack as cl
        print("bound", scipy.linalg.cython_lapack is loaded["scipy.linalg.cython_lapack"],
              scipy.linalg.cython_blas is loaded["scipy.linalg.cython_blas"], cl is scipy.linalg.cython_lapack)
        A = np.array([[2.0, 1.0], [1.0, 3.0]])
        print("eigvalsh", np.allclose(scipy.linalg.eigvalsh(A), [2.5 - 5 ** 0.5 / 2, 2.5 + 5 ** 0.5 / 2], rtol=0, atol=1e-14))
        print("solve", np.allclose(scipy.linalg.solve_triangular(np.tril(A), [2.0, 4.0], lower=True), [1.0, 1.0]))
        print("finder gone", not any(type(f).__name__ == "_BindOnImport" for f in sys.meta_path))
    """)
    assert out.split("\n")[:4] == ["bound True True True", "eigvalsh True", "solve True", "finder gone True"]


def test_load_lapack_falls_back_to_the_package_import_when_the_files_are_not_found():
    out = _fresh("""
        import importlib.machinery, sys
        importlib.machinery.EXTENSION_SUFFIXES[:] = [".no-such-suffix.so"]
        from mhajax import linalg
        assert linalg.load_lapack() is True
        print("package", "scipy.linalg" in sys.modules)
        print("finder", any(type(f).__name__ == "_BindOnImport" for f in sys.meta_path))
    """)
    assert out.split("\n")[:2] == ["package True", "finder False"]


def test_load_lapack_after_scipy_linalg_changes_nothing():
    out = _fresh("""
        import sys
        import scipy.linalg
        from mhajax import linalg
        n = len(sys.meta_path)
        assert linalg.load_lapack() is True
        print("finders", len(sys.meta_path) - n)
    """, _EIGH_AGAINST_NUMPY)
    assert out.split("\n")[0] == "finders 0"


def test_a_command_set_up_loads_no_scipy_linalg_and_runs_openblas_on_one_thread():
    out = _fresh("""
        import sys
        from mhajax.runtime.jaxsetup import single_threaded_blas
        from mhajax import linalg
        assert single_threaded_blas()
        print("threads", sorted({get() for get, _ in linalg.openblas_controls()}))
        print("in xla", linalg.lapack_single_threaded())
    """, _EIGH_AGAINST_NUMPY, """
        print("package", "scipy.linalg" in sys.modules)
    """)
    assert out.split("\n")[:3] == ["threads [1]", "in xla True", "package False"]
