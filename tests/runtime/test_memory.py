"""The memory guard (mhajax.runtime.memory): each term's bytes against the real array it
stands for (float64 8 bytes an entry, float32 4), the certified check's terms against XLA's
own buffer plan at a size that cannot run, the boundary (equal fits, one byte more does
not), the blamed sizes (alone, jointly, in order, never one that does not lower the
estimate), the one-line message, ``force`` and ``MHAJAX_FORCE``, the shapes read off a
function's arguments, and what is available (MemAvailable, cgroup v1/v2 trees, ulimit,
an accelerator's memory_stats)."""
import os
import resource
import subprocess
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from mhajax.errors import InputError
from mhajax.runtime import memory as M

GiB = 2 ** 30
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUDGET = M.Available(16 * GiB, "test budget")


@pytest.fixture(autouse=True)
def _guard_on(monkeypatch):
    monkeypatch.delenv("MHAJAX_FORCE", raising=False)


def nbytes(tree) -> int:
    return sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree_util.tree_leaves(tree))


# -- estimates and terms --------------------------------------------------------------------------

def test_estimate_counts_entries_times_itemsize_and_names_its_largest_term():
    terms = (("a", (2, 3)), ("b", (5, 7)), ("c", (4,)))
    assert M.entries(terms) == 6 + 35 + 4
    est = M.Estimate("x", terms, 4)
    assert est.nbytes == 45 * 4 and est.largest() == ("b", 140)
    assert M.Estimate("x", terms).itemsize == 8 and M.Estimate("x", terms).nbytes == 360
    assert M.Estimate("x", (("a", (9,)), ("b", (2, 2)))).largest() == ("a", 72)


def test_ints_reads_lists_strings_and_numbers():
    assert M.ints((1, 4, 16)) == (1, 4, 16) and M.ints([2, 3]) == (2, 3)
    assert M.ints("1, 4,,16") == (1, 4, 16) and M.ints("7") == (7,) and M.ints(16) == (16,)
    assert M.ints(("3",)) == (3,)


def test_term_shapes():
    assert M.data(2, 64, 6, 8) == ("data X [S, n, T, d]", (2, 64, 6, 8))
    step = [("GD step: scores, attention and cotangents [4, S, n, H, T, T]", (4, 2, 5, 4, 3, 3)),
            ("GD step: A·X and cotangent [2, S, n, H, T, d]", (2, 2, 5, 4, 3, 6))]
    assert M.step(2, 5, 3, 6, 4) == step
    assert M.gd(2, 5, 3, 6, 4, 10, 7, 30) == [("checkpoints θ_k [S, C, P]", (2, 7, 40)),
                                             ("losses L̂_k [S, steps + 1]", (2, 31))] + step
    J, B = ("per-sample Jacobian J [n, P]", (5, 40)), ("head blocks B [H, p, p]", (4, 10, 10))
    Q, Kt = ("eigenvectors Q of B [H, p, p]", (4, 10, 10)), ("K̃ = QᵀK [P, n]", (40, 5))
    assert M.analysis(5, 3, 4, 10, "block") == [J, B]
    assert M.analysis(5, 3, 4, 10, "inertia") == [J, B, Q, Kt]
    assert M.analysis(5, 3, 4, 10, "dense") == [J, B, Q, Kt, ("dense Hessian ∇²L̂ [P, P]", (40, 40))]
    assert M.analysis(5, 3, 4, 10, "lanczos", 16) == [J, B, Q, Kt, ("Lanczos basis [m, P]", (16, 40))]
    assert M.analysis(5, 3, 4, 10, "lanczos") == [J, B, Q, Kt, ("Lanczos basis [m, P]", (40, 40))]   # m = 64 > P
    assert M.analysis(5, 3, 5, 13, "lanczos")[-1] == ("Lanczos basis [m, P]", (64, 65))             # m = 64 < P
    assert M.analysis(5, 3, 4, 10, "lanczos", 40, coupled=True) == [
        ("Lanczos basis [m, P]", (40, 40)), ("attention weights [n, H, T, T]", (5, 4, 3, 3))]
    assert M.analysis(5, 3, 4, 10, "auto", coupled=True)[0] == ("Lanczos basis [m, P]", (40, 40))


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_gd_terms_are_the_bytes_of_trains_arrays(dtype):
    """train at S=2, n=5, T=3, d=4, H=3, 7 steps kept every 3 (C = 4): the checkpoints and the
    losses it returns; a step's attention weights softmax(X W Xᵀ) (four such arrays) and A·X (two)."""
    import mhajax as mj
    S, n, T, d, H, steps, every = 2, 5, 3, 4, 3, 7, 3
    keys = jax.random.split(jax.random.PRNGKey(0), S)
    th = jax.vmap(lambda k: mj.init_params(k, H, T, d, w_scale=1.0, dtype=dtype))(keys)
    X = jax.vmap(lambda k: mj.tokenized_mixture(k, n, T, d, num_clusters=2, dtype=dtype)[0])(keys)
    y = jnp.tile(jnp.asarray([1.0, -1.0, 1.0, -1.0, 1.0], dtype), (S, 1))
    traj = mj.train(th, X, y, 0.1, steps=steps, every=every)
    att = jax.nn.softmax(jnp.einsum("snti,shij,snuj->snhtu", X, th.W, X), axis=-1)
    ax = jnp.einsum("snhtu,snui->snhti", att, X)
    b = jnp.dtype(dtype).itemsize
    p = T * d + d * d
    C = traj.steps.shape[-1]
    assert C == 4 and b == (8 if dtype == jnp.float64 else 4)
    got = [M.Estimate("t", (t,), b).nbytes for t in M.gd(S, n, T, d, H, p, C, steps)]
    assert got == [nbytes(traj.params), traj.losses.nbytes, 4 * att.nbytes, 2 * ax.nbytes]
    assert M.Estimate("t", (M.data(S, n, T, d),), b).nbytes == X.nbytes


def test_a_gd_steps_terms_against_xlas_plan():
    """train's program at S=2, n=64, T=6, d=8, H=20 000 and at T=300, H=16 (compiled, never
    run): XLA's temporaries are within [0.5, 2] of :func:`step`'s terms."""
    from mhajax.losses import LOGISTIC
    from mhajax.models import SOFTMAX
    from mhajax.train import _train, opt_init
    for S, n, T, d, H in ((2, 64, 6, 8, 20_000), (2, 64, 300, 8, 16)):
        keys = jax.ShapeDtypeStruct((S, 2), jnp.uint32)
        th = jax.eval_shape(jax.vmap(lambda k: SOFTMAX.init(k, H, T, d)), keys)
        X, y = jax.ShapeDtypeStruct((S, n, T, d), jnp.float64), jax.ShapeDtypeStruct((S, n), jnp.float64)
        st = jax.eval_shape(jax.vmap(opt_init), th)
        lr = jax.ShapeDtypeStruct((S,), jnp.float64)
        ma = _train.lower(th, st, X, y, lr, steps=4, every=2, model=SOFTMAX, loss=LOGISTIC).compile().memory_analysis()
        est = M.Estimate("step", tuple(M.step(S, n, T, d, H)))
        assert 0.5 <= est.nbytes / ma.temp_size_in_bytes <= 2, (S, n, T, d, H, est.nbytes, ma.temp_size_in_bytes)


@pytest.mark.slow
@pytest.mark.parametrize("dtype", [jnp.float64, jnp.float32])
def test_analysis_terms_are_the_bytes_of_the_hessians_arrays(dtype):
    """At H=3, p=T·d+d²=32, n=6: J and B (hessian_parts), B's eigenvectors and K̃ = QᵀK
    (inertia.decompose), the dense Hessian (chunked_hessian), and a Lanczos basis of 8."""
    import mhajax as mj
    from mhajax.curvature import inertia
    from mhajax.curvature.operators import chunked_hessian, hessian_parts
    H, T, d, n = 3, 4, 4, 6
    th = mj.init_params(jax.random.PRNGKey(1), H, T, d, w_scale=1.0, dtype=dtype)
    X, y = mj.tokenized_mixture(jax.random.PRNGKey(2), n, T, d, num_clusters=2, dtype=dtype)
    S = hessian_parts(th, X, y)
    st = jax.eval_shape(inertia.decompose, S.B, S.J, S.w)
    Q = jax.eval_shape(jnp.linalg.eigh, S.B)[1]
    A = jax.eval_shape(chunked_hessian, th, X, y)
    b = jnp.dtype(dtype).itemsize
    got = [M.Estimate("t", (t,), b).nbytes for t in M.analysis(n, T, H, T * d + d * d, "dense")]
    assert got == [S.J.nbytes, S.B.nbytes, Q.size * b, st.Kt.size * b, A.size * b]
    basis = M.analysis(n, T, H, T * d + d * d, "lanczos", 8)[-1]
    assert basis[1] == (8, S.J.shape[1])     # krylov's Q = zeros((m, P)), m = min(num_steps, P)


def test_the_certified_checks_terms_against_xlas_plan_at_a_size_that_cannot_run():
    """``lambda_min``'s program (``auto``: the secular route) at H = 200 000, P = 22.4M,
    ~100 GB (compiled, never run): the estimate is within [0.5, 2] of XLA's buffer plan."""
    import mhajax as mj
    from mhajax.curvature.spectrum import extremes
    H, T, d, n = 200_000, 6, 8, 64
    params = jax.eval_shape(lambda k: mj.init_params(k, H, T, d, force=True), jax.random.PRNGKey(0))
    X, y = jax.ShapeDtypeStruct((n, T, d), jnp.float64), jax.ShapeDtypeStruct((n,), jnp.float64)
    fn = jax.jit(lambda p, X, y: extremes(p, X, y, jax.random.PRNGKey(0), method="auto", ends="min"))
    ma = fn.lower(params, X, y).compile().memory_analysis()
    xla = ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes
    est = M.Estimate("lambda_min", tuple(M.analysis(n, T, H, T * d + d * d, "inertia")))
    assert 0.5 <= est.nbytes / xla <= 2, (est.nbytes, xla)


# -- blame ----------------------------------------------------------------------------------------

def _cost(sizes):
    """A toy estimate: a·b·c bytes (c a list: its largest entry)."""
    return sizes["a"] * sizes["b"] * max(M.ints(sizes["c"]))


REF = {"a": 2, "b": 3, "c": (1, 4), "m": "auto"}


def test_size_reads_numbers_lists_and_list_strings_only():
    assert M._size(3) == 3 and M._size(2.5) == 2.5 and M._size((1, 9, 4)) == 9 and M._size("1,16,4") == 16
    assert M._size(True) is None and M._size("auto") is None and M._size(None) is None and M._size(()) is None


def test_show_writes_sizes_as_flags_take_them():
    assert M._show((1, 4, 16)) == "1,4,16" and M._show([2]) == "2" and M._show(2.0) == "2" and M._show(2.5) == "2.5"
    assert M._show(7) == "7" and M._show("1,x") == "1,x" and M._show(True) == "True"


def test_blame_every_size_whose_reset_alone_fits_in_order():
    sizes = {"a": 200, "b": 30, "c": (1, 4), "m": "lanczos"}             # 24 000 bytes
    assert M.blame(_cost, sizes, REF, 240) == (["a"], "or")          # a -> 2: 240 fits (equal)
    assert M.blame(_cost, sizes, REF, 2400) == (["a", "b"], "or")    # b -> 3: 2400 fits too
    assert M.blame(_cost, sizes, REF, 239) == (["a", "b"], "and")    # neither alone: a, then b


def test_blame_jointly_absurd_sizes_greedily_largest_reduction_first():
    sizes = {"a": 100, "b": 50, "c": "1,400", "m": "auto"}        # 2 000 000
    # no reset alone fits 100; greedy: c (/100) then a (/50): 2·50·4 = 400 > 100 -> b: 24 fits
    assert M.blame(_cost, sizes, REF, 100) == (["a", "b", "c"], "and")
    assert M.blame(_cost, sizes, REF, 1000) == (["a", "c"], "and")   # c then a: 800 fits, b stays
    assert M.blame(_cost, sizes, REF, 400) == (["a", "c"], "and")    # c then a: 400 fits (equal), b stays
    assert M.blame(_cost, sizes, REF, 20_000) == (["c"], "or")


def test_blame_never_names_a_size_that_does_not_lower_the_estimate():
    sizes = {"a": 1, "b": 3, "c": (1, 4), "m": "dense"}              # a below its reference
    assert M.blame(_cost, sizes, REF, 5) == ([], "and")
    sizes = {"a": 1, "b": 30, "c": (1, 4), "m": "auto"}              # 120; b -> 3: 12 > 5
    assert M.blame(_cost, sizes, REF, 5) == (["b"], "and")
    assert M.blame(_cost, dict(REF), REF, 5) == ([], "and")             # nothing changed
    cost = lambda s: _cost(s) * (1000 if s["m"] == "x" else 1)       # a non-size is never blamed
    assert M.blame(cost, {"a": 2, "b": 3, "c": (1, 4), "m": "x"}, {**REF, "m": 1}, 100) == ([], "and")


def test_blame_a_list_of_the_same_largest_size_but_more_entries():
    cost = lambda s: len(M.ints(s["h"])) * 10
    assert M.blame(cost, {"h": "1,2,3,4,5,6,7,8"}, {"h": (1, 2, 4, 8)}, 40) == (["h"], "or")


# -- the guard ------------------------------------------------------------------------------------

def _toy(what="verify toy", itemsize=8):
    return lambda s: M.Estimate(what, (("big [a, b]", (s["--a"], s["--b"])), ("small", (s["--a"],))), itemsize)


TOY_REF = {"--a": 10, "--b": 10}


def test_guard_boundary_equal_fits_one_byte_more_does_not():
    sizes = {"--a": 100, "--b": 100}                                  # (10 000 + 100)·8 = 80 800 bytes
    est = M.guard(_toy(), sizes, TOY_REF, budget=M.Available(80_800, "exact"))
    assert isinstance(est, M.Estimate) and est.nbytes == 80_800
    with pytest.raises(M.MemoryGuardError):
        M.guard(_toy(), sizes, TOY_REF, budget=M.Available(80_799, "one short"))
    est32 = M.guard(_toy(itemsize=4), sizes, TOY_REF, budget=M.Available(40_400, "exact"))
    assert est32.nbytes == 40_400


def test_guard_message_is_one_line_naming_the_flag_the_estimate_and_the_budget():
    with pytest.raises(M.MemoryGuardError) as e:
        M.guard(_toy(), {"--a": 10, "--b": 10 * 2 ** 27}, TOY_REF, budget=BUDGET)
    assert str(e.value) == ("verify toy: --b 1342177280: needs ~100 GiB (largest: big [a, b] = 100 GiB), "
                            "16 GiB available (test budget); lower --b, or pass --force")
    assert e.value.blamed == ("--b",) and e.value.available is BUDGET and e.value.estimate.nbytes > 100 * GiB
    assert isinstance(e.value, InputError) and issubclass(M.MemoryGuardError, InputError)


def test_guard_message_for_joint_alternative_and_raised_sizes():
    big = {"--a": 2 ** 20, "--b": 2 ** 20}
    with pytest.raises(M.MemoryGuardError, match=r"^verify toy: --a 1048576 --b 1048576: needs ~8 TiB .*; "
                                                 r"lower --a and --b, or pass --force$"):
        M.guard(_toy(), big, TOY_REF, budget=M.Available(2 ** 20, "b"))
    with pytest.raises(M.MemoryGuardError, match=r"; lower --a or --b, or pass --force$"):
        M.guard(_toy(), big, TOY_REF, budget=BUDGET)
    with pytest.raises(M.MemoryGuardError) as e:           # --a below its reference: raise it (toy)
        M.guard(lambda s: M.Estimate("t", (("x", (2 ** 40 // s["--a"],)),)), {"--a": 1}, {"--a": 64}, budget=BUDGET)
    assert str(e.value).endswith("; raise --a, or pass --force")
    with pytest.raises(M.MemoryGuardError) as e:
        M.guard(lambda s: M.Estimate("t", (("x", (2 ** 40 // s["--a"], s["--b"])),)), {"--a": 1, "--b": 2 ** 10},
                {"--a": 64, "--b": 1}, budget=M.Available(2 ** 10, "b"))
    assert str(e.value).endswith("; raise --a and lower --b, or pass --force")
    with pytest.raises(M.MemoryGuardError) as e:           # a flag whose default is None (off)
        M.guard(lambda s: M.Estimate("t", (("x", (s["--a"] or 0, 2 ** 37)),)), {"--a": 0.5}, {"--a": None},
                budget=BUDGET)
    assert str(e.value).endswith(": --a 0.5: needs ~512 GiB (largest: x = 512 GiB), 16 GiB available (test budget); "
                                 "lower --a, or pass --force")
    with pytest.raises(M.MemoryGuardError) as e:           # as many heads at most, but more of them
        M.guard(lambda s: M.Estimate("t", (("x", (len(M.ints(s["--h"])), 2 ** 30)),)), {"--h": (1, 2, 3, 4, 8)},
                {"--h": (1, 2, 4, 8)}, budget=M.Available(4 * 2 ** 33, "b"))
    assert str(e.value).endswith("; lower --h, or pass --force") and "--h 1,2,3,4,8: needs ~40 GiB" in str(e.value)
    with pytest.raises(M.MemoryGuardError) as e:           # nothing to blame: the defaults do not fit
        M.guard(_toy(), dict(TOY_REF), TOY_REF, budget=M.Available(10, "tiny"))
    assert str(e.value) == ("verify toy: needs ~880 B (largest: big [a, b] = 800 B), 10 B available (tiny); "
                            "pass --force") and e.value.blamed == ()


def test_guard_uses_what_is_available_by_default(monkeypatch):
    monkeypatch.setattr(M, "available", lambda: M.Available(80_800, "patched"))
    assert M.guard(_toy(), {"--a": 100, "--b": 100}, TOY_REF).nbytes == 80_800
    with pytest.raises(M.MemoryGuardError, match=r"available \(patched\)"):
        M.guard(_toy(), {"--a": 101, "--b": 100}, TOY_REF)


def test_force_and_the_environment_skip_the_guard_without_estimating(monkeypatch):
    def never(_):
        raise AssertionError("estimated")
    assert M.guard(never, {}, {}, force=True) is None
    for on in ("1", "yes", " 2 "):
        monkeypatch.setenv(M.FORCE_ENV, on)
        assert M.forced() and M.guard(never, {}, {}) is None
    for off in ("0", "", " 0 "):
        monkeypatch.setenv(M.FORCE_ENV, off)
        assert not M.forced() and M.forced(True)
    monkeypatch.delenv(M.FORCE_ENV)
    assert not M.forced() and M.FORCE_ENV == "MHAJAX_FORCE"


def test_guard_call_names_arguments_blames_against_1_and_offers_force_true(monkeypatch):
    monkeypatch.setattr(M, "available", lambda: BUDGET)
    terms = lambda H, n: [("G [n, H]", (n, H))]
    est = M.guard_call("f", terms, 4, H=3, n=5)
    assert est == M.Estimate("f", (("G [n, H]", (5, 3)),), 4)
    with pytest.raises(M.MemoryGuardError) as e:
        M.guard_call("f", terms, 8, H=2 ** 32, n=5)
    assert str(e.value) == ("f: H=4294967296: needs ~160 GiB (largest: G [n, H] = 160 GiB), 16 GiB available "
                            "(test budget); lower H, or pass force=True")
    with pytest.raises(M.MemoryGuardError, match=r"^f: H=65536 n=65536: .*; lower H or n, or pass force=True$"):
        M.guard_call("f", terms, 8, H=2 ** 16, n=2 ** 16)
    with pytest.raises(M.MemoryGuardError, match=r"^f: H=2147483648 n=2: .*; lower H or n, or pass force=True$"):
        M.guard_call("f", terms, 8, H=2 ** 31, n=2)                # n -> 1: 16 GiB, exactly the budget
    assert M.guard_call("f", terms, 8, force=True, H=2 ** 31, n=5) is None


def test_guard_args_reads_shapes_off_theta_and_x(monkeypatch):
    monkeypatch.setattr(M, "available", lambda: BUDGET)
    seen = []

    def terms(H, p, n, T, d):
        seen.append((H, p, n, T, d))
        return [("J [n, P]", (n, H * p))]
    th = {"U": jax.ShapeDtypeStruct((3, 4, 5), jnp.float32), "W": jnp.zeros((3, 5, 5))}
    X = jax.ShapeDtypeStruct((7, 4, 5), jnp.float32)
    est = M.guard_args("g", terms, th, X)
    assert seen == [(3, 45, 7, 4, 5)] and est == M.Estimate("g", (("J [n, P]", (7, 135)),), 4)
    assert M.guard_args("g", terms, th, jnp.zeros((7, 4, 5))).itemsize == 8
    big = {"U": jax.ShapeDtypeStruct((2 ** 24, 4, 5), jnp.float32)}
    with pytest.raises(M.MemoryGuardError) as e:     # p is θ's, never blamed; n is
        M.guard_args("g", terms, big, jax.ShapeDtypeStruct((2 ** 8, 4, 5), jnp.float64))
    assert e.value.blamed == ("H", "n") and str(e.value).startswith("g: H=16777216 n=256: needs ~")
    assert M.guard_args("g", terms, th, X, force=True) is None
    for bad_th, bad_X in ((th, jnp.zeros((7, 4))), (None, X), ({"U": 3.0}, X), (th, [[1.0]]), ({"U": jnp.zeros(())}, X)):
        assert M.guard_args("g", terms, bad_th, bad_X) is None


def test_fmt_bytes():
    assert M.fmt_bytes(512) == "512 B" and M.fmt_bytes(1023) == "1023 B" and M.fmt_bytes(1024) == "1 KiB"
    assert M.fmt_bytes(1536) == "1.5 KiB" and M.fmt_bytes(3 * 2 ** 20) == "3 MiB" and M.fmt_bytes(-2048) == "-2 KiB"
    assert M.fmt_bytes(100 * GiB) == "100 GiB" and M.fmt_bytes(99.5 * GiB) == "99.5 GiB"
    assert M.fmt_bytes(999 * GiB) == "999 GiB" and M.fmt_bytes(999.7 * GiB) == "1000 GiB" and M.fmt_bytes(2 ** 50) == "1 PiB"
    assert M.fmt_bytes(2.2e5 * 2 ** 60) == "220000 EiB" and M.fmt_bytes(12345 * 2 ** 60) == "12300 EiB"
    assert M.fmt_bytes(1234.5 * 2 ** 60) == "1230 EiB" and M.fmt_bytes(56.25 * 2 ** 60) == "56.2 EiB"


# -- what is available ----------------------------------------------------------------------------

def _tree(tmp_path, files):
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def _limits(tmp_path):
    return M.cgroup_limits(root=str(tmp_path / "cg"), proc_cgroup=str(tmp_path / "proc"))


def test_cgroup_v2_limit_and_ancestors(tmp_path):
    _tree(tmp_path, {"proc": "0::/job/step\n",
                     "cg/job/memory.max": str(8 * GiB), "cg/job/memory.current": str(3 * GiB),
                     "cg/job/memory.stat": f"anon 1\ninactive_file {GiB}\n",
                     "cg/job/step/memory.max": "max", "cg/job/step/memory.current": "0",
                     "cg/memory.max": str(5 * GiB), "cg/memory.current": str(6 * GiB)})
    assert _limits(tmp_path) == [(6 * GiB, f"cgroup memory.max of {tmp_path / 'cg' / 'job'}"),
                                 (0, f"cgroup memory.max of {tmp_path / 'cg'}")]   # 8 − (3 − 1); over: 0


def test_cgroup_v1_namespaced_root(tmp_path):
    _tree(tmp_path, {"proc": "bad line\n3:cpuset:/\n4:memory:/process_api/abc\n",
                     "cg/memory/memory.limit_in_bytes": str(4 * GiB),
                     "cg/memory/memory.usage_in_bytes": str(2 * GiB),
                     "cg/memory/memory.stat": f"total_inactive_file {GiB}\ninactive_file 999\n",
                     "cg/memory.max": "1"})
    assert _limits(tmp_path) == [(3 * GiB, f"cgroup memory.limit_in_bytes of {tmp_path / 'cg' / 'memory'}")]


def test_cgroup_limits_reads_this_processes_cgroup_by_default(monkeypatch):
    paths = []
    files = {"/proc/self/cgroup": "0::/a\n", "/sys/fs/cgroup/a/memory.max": "7", "/sys/fs/cgroup/a/memory.current": "2"}
    monkeypatch.setattr(M, "_read", lambda p: paths.append(p) or files.get(p, ""))
    assert M.cgroup_limits() == [(5, "cgroup memory.max of /sys/fs/cgroup/a")]
    assert paths[:3] == ["/proc/self/cgroup", "/sys/fs/cgroup/a/memory.max", "/sys/fs/cgroup/a/memory.current"]


def test_cgroup_path_with_a_colon(tmp_path):
    _tree(tmp_path, {"proc": "0::/job:x\n", "cg/job:x/memory.max": "100", "cg/job:x/memory.current": "40"})
    assert _limits(tmp_path) == [(60, f"cgroup memory.max of {tmp_path / 'cg' / 'job:x'}")]


def test_cgroup_v1_joint_controllers_inactive_files_and_unlimited(tmp_path):
    _tree(tmp_path, {"proc": "5:cpu,memory:/a/b\n",
                     "cg/memory/a/b/memory.limit_in_bytes": str(2 * GiB),                # no usage, no stat
                     "cg/memory/a/memory.limit_in_bytes": str(3 * GiB),
                     "cg/memory/a/memory.usage_in_bytes": str(GiB),
                     "cg/memory/a/memory.stat": f"total_inactive_file {2 * GiB}\n",     # more inactive than used
                     "cg/memory/memory.limit_in_bytes": "9223372036854771712",
                     "cg/memory/memory.usage_in_bytes": "5"})
    m = tmp_path / "cg" / "memory"
    assert _limits(tmp_path) == [(2 * GiB, f"cgroup memory.limit_in_bytes of {m / 'a' / 'b'}"),
                                 (3 * GiB, f"cgroup memory.limit_in_bytes of {m / 'a'}")]
    assert M.cgroup_limits(root=str(tmp_path / "none"), proc_cgroup=str(tmp_path / "missing")) == []


def test_limit_and_field_parsing():
    assert M._limit("123\n") == 123 and M._limit(str(2 ** 60 - 1)) == 2 ** 60 - 1
    assert M._limit(str(2 ** 60)) is None and M._limit("max") is None and M._limit("") is None
    assert M._limit("-1") is None
    text = "lonely\nMemTotal:  10 kB\nMemAvailable:   123 kB\nx 7\nweird: abc\n"
    assert M._field(text, "MemAvailable", 1024) == 123 * 1024 and M._field(text, "x") == 7
    assert M._field(text, "weird") == 0 and M._field(text, "Mem") == 0 and M._field("", "x") == 0
    assert M._field(text, "lonely") == 0 and M._field("a:b 5", "a") == 0 and M._field("boX: 3", "boX") == 3
    assert M._read("/nonexistent/file") == ""


def _fake_proc(monkeypatch, files, limits=(), rlimits=None):
    monkeypatch.setattr(M, "_read", lambda path: files.get(path, ""))
    monkeypatch.setattr(M, "cgroup_limits", lambda: list(limits))
    rl = rlimits or {}
    monkeypatch.setattr(M.resource, "getrlimit", lambda which: (rl.get(which, resource.RLIM_INFINITY),
                                                                resource.RLIM_INFINITY))   # (soft, hard)


def test_available_host_is_the_least_of_its_sources(monkeypatch):
    meminfo = {"/proc/meminfo": "MemTotal: 99 kB\nMemAvailable: 1000 kB\n",
               "/proc/self/status": "VmSize: 100 kB\nVmData: 50 kB\n"}
    _fake_proc(monkeypatch, meminfo)
    assert M.available_host() == M.Available(1000 * 1024, "host RAM, MemAvailable")
    _fake_proc(monkeypatch, meminfo, limits=[(900 * 1024, "cgroup x")])
    assert M.available_host() == M.Available(900 * 1024, "cgroup x")
    _fake_proc(monkeypatch, meminfo, rlimits={resource.RLIMIT_AS: 300 * 1024})
    assert M.available_host() == M.Available(200 * 1024, "ulimit -v")
    _fake_proc(monkeypatch, meminfo, rlimits={resource.RLIMIT_DATA: 120 * 1024, resource.RLIMIT_AS: 10 ** 9})
    assert M.available_host() == M.Available(70 * 1024, "ulimit -d")
    _fake_proc(monkeypatch, meminfo, rlimits={resource.RLIMIT_AS: 50 * 1024})
    assert M.available_host() == M.Available(0, "ulimit -v")
    _fake_proc(monkeypatch, {})
    assert M.available_host() == M.Available(2 ** 62, "unknown (no /proc)")


def test_available_host_here_is_positive_and_named():
    a = M.available_host()
    assert a.nbytes > 0 and a.source


def test_ulimit_v_is_read():
    code = "from mhajax.runtime import memory as M; a = M.available_host(); print(a.source, '|', a.nbytes)"
    out = subprocess.run(["bash", "-c", 'ulimit -v 3000000; exec "$PY" -c "$CODE"'], capture_output=True,
                         text=True, timeout=120, env=dict(os.environ, PY=sys.executable, CODE=code, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr
    src, n = out.stdout.rsplit("|", 1)
    assert src.strip() == "ulimit -v" and 0 < int(n) < 3000000 * 1024


class _Dev:
    def __init__(self, platform, stats):
        self.platform, self.id, self._stats = platform, 1, stats

    def memory_stats(self):
        return self._stats


def _fake_jax(monkeypatch, dev):
    monkeypatch.setitem(sys.modules, "jax", types.SimpleNamespace(devices=lambda: [dev]))


def test_available_device_reads_memory_stats_on_accelerators(monkeypatch):
    assert M.available_device() is None                                  # this machine: CPU
    _fake_jax(monkeypatch, _Dev("gpu", {"bytes_limit": 80 * GiB, "bytes_in_use": 30 * GiB}))
    assert M.available_device() == M.Available(50 * GiB, "gpu:1 memory")
    _fake_jax(monkeypatch, _Dev("tpu", {"bytes_limit": 16 * GiB}))
    assert M.available_device() == M.Available(16 * GiB, "tpu:1 memory")
    for dev in (_Dev("gpu", None), _Dev("gpu", {"bytes_in_use": 1}), _Dev("cpu", {"bytes_limit": 5})):
        _fake_jax(monkeypatch, dev)
        assert M.available_device() is None
    monkeypatch.delitem(sys.modules, "jax")
    assert M.available_device() is None


def test_available_is_the_less_of_host_and_device(monkeypatch):
    host, dev = M.Available(64 * GiB, "host"), M.Available(40 * GiB, "gpu:0 memory")
    monkeypatch.setattr(M, "available_host", lambda: host)
    monkeypatch.setattr(M, "available_device", lambda: dev)
    assert M.available() is dev
    monkeypatch.setattr(M, "available_device", lambda: M.Available(80 * GiB, "gpu"))
    assert M.available() is host
    monkeypatch.setattr(M, "available_device", lambda: None)
    assert M.available() is host
    assert np.isfinite(M.available_host().nbytes)
