"""The memory model (mhajax.runtime.memory): the issue's three absurd commands are refused
with one line blaming the right flags; defaults fit; the model's size rules equal the
package's; every check registers an estimator whose arguments are its flags with its
config's defaults; the run-time budget readers (cgroup v1/v2 trees, ulimit -v) work; the
estimate agrees with XLA's own buffer plan at a size that cannot run, and with measured
peaks at small sizes within the stated factor."""
import inspect
import math
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import pytest

from mhajax.errors import InputError
from mhajax.runtime import memory as M

GiB = 2 ** 30
SMALL = M.Available(16 * GiB, "test budget")
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def refuse(est, **kw):
    with pytest.raises(M.MemoryGuardError) as e:
        M.check_fits(est, available=kw.pop("available", SMALL), **kw)
    msg = str(e.value)
    assert "\n" not in msg
    return e.value, msg


# -- the three absurd commands, and held-out ones of the same kinds --------------------

def test_absurd_heads_blames_heads():
    err, msg = refuse(M.weak_convexity(heads=(2_000_000,), steps=1, every=1))
    assert err.blamed == ("heads",)
    assert msg.startswith("verify weak-convexity: --heads 2000000: needs ~")
    assert "16 GiB available (test budget)" in msg and msg.endswith("lower --heads, or pass --force")


def test_absurd_n_blames_n():
    err, msg = refuse(M.weak_convexity(n=100_000_000, steps=1, every=1))
    assert err.blamed == ("n",) and "--n 100000000" in msg


def test_absurd_tokens_and_dim_blames_both():
    err, msg = refuse(M.weak_convexity(tokens=100_000, dim=100_000, steps=1, every=1))
    assert set(err.blamed) == {"tokens", "dim"}
    assert "--tokens 100000" in msg and "--dim 100000" in msg


@pytest.mark.parametrize("est,blamed", [
    (lambda: M.convergence(n_test=2_000_000_000), {"n_test"}),
    (lambda: M.quasi_convexity(grid=50_000_000), {"grid"}),
    (lambda: M.generalization(ns=(32, 64, 300_000_000)), {"ns"}),
    (lambda: M.heads_check(heads=(1, 2, 3_000_000)), {"heads"}),
    (lambda: M.ntk_margin(n=3_000_000), {"n"}),
    (lambda: M.one_step(heads=(1, 500_000)), {"heads"}),
    (lambda: M.one_step(ns=(64, 128, 300_000_000)), {"ns"}),
    (lambda: M.variants(heads=(1, 700_000)), {"heads"}),
    (lambda: M.weak_convexity(seeds=30_000_000), {"seeds"}),
])
def test_held_out_absurd_sizes_blame_their_flag(est, blamed):
    err, msg = refuse(est())
    assert set(err.blamed) == blamed, msg


def test_absurd_steps_blames_steps_and_advises_raising_every():
    err, msg = refuse(M.weak_convexity(steps=10 ** 9, every=1))
    assert "steps" in err.blamed and "lower --steps" in msg
    assert "raise --every" in msg          # every is below its default: the advice is to raise it


def test_force_overrides_and_a_fitting_estimate_is_returned():
    est = M.weak_convexity(heads=(2_000_000,))
    assert M.check_fits(est, force=True, available=SMALL) is est
    small = M.weak_convexity()
    assert M.check_fits(small, available=SMALL) is small


def test_api_message_names_arguments_and_force_true():
    _, msg = refuse(M.api_hessian_extremes(heads=2_000_000, n=64), api=True)
    assert "H=2000000" in msg and msg.endswith("or pass force=True")
    _, msg = refuse(M.api_init_params(heads=2 * 10 ** 9), api=True)
    assert msg.startswith("init_params: H=2000000000: needs ~")


def test_guard_error_is_an_input_error():
    assert issubclass(M.MemoryGuardError, InputError)


def test_guard_skips_inside_checked_and_with_the_environment(monkeypatch):
    huge = dict(heads=2 * 10 ** 9)
    with pytest.raises(M.MemoryGuardError):
        M.guard(M.api_init_params, **huge)
    assert M.guard(M.api_init_params, force=True, **huge) is None
    with M.checked():
        assert M.guard(M.api_init_params, **huge) is None
    with pytest.raises(M.MemoryGuardError):
        M.guard(M.api_init_params, **huge)      # the context is over
    monkeypatch.setenv(M.FORCE_ENV, "1")
    assert M.guard(M.api_init_params, **huge) is None


# -- no false refusals: every command's defaults are small --------------------------------------

@pytest.mark.parametrize("name", sorted(M.COMMANDS))
def test_defaults_fit_in_2_gib(name):
    assert M.COMMANDS[name]().peak() < 2 * GiB


@pytest.mark.parametrize("flag,big", [("heads", (64,)), ("n", 256), ("tokens", 12), ("dim", 16),
                                      ("seeds", 8), ("steps", 2000)])
def test_monotone_in_each_size(flag, big):
    assert M.weak_convexity(**{flag: big}).peak() > M.weak_convexity().peak()


def test_every_term_names_flags():
    for name, fn in M.COMMANDS.items():
        for st in fn().stages:
            for t in st.terms:
                assert t.flags and all(isinstance(f, str) for f in t.flags), (name, t)


def test_host_terms_checked_apart_on_accelerators():
    est = M.weak_convexity(heads=(4096,), links="core", backend="gpu")
    assert est.split and est.peak("host") < est.peak("device") <= est.peak()
    with pytest.raises(M.MemoryGuardError, match="gpu:0 memory"):
        M.check_fits(est, available=M.Available(64 * GiB, "host"),
                     device_available=M.Available(2 ** 20, "gpu:0 memory", "device"))


# -- every check has an estimator: its arguments are the check's flags, its defaults the config's

NOT_SIZES = {"dtype", "backend", "model", "models", "references", "method", "links", "what"}


def _flags_and_defaults(entry):
    from mhajax.cli.flags import option_flags
    return {flag.lstrip("-").replace("-", "_"): default for flag, _, _, default in option_flags(entry)}


def test_every_check_registers_a_memory_estimator():
    from mhajax.experiments import CHECKS
    for name, entry in CHECKS.items():
        assert entry.memory is not None, name
        est = entry.memory(entry.config().validate(), dtype="float64", backend="cpu")
        assert isinstance(est, M.Estimate) and 0 < est.peak() < 2 * GiB, name


@pytest.mark.parametrize("name", sorted(M.COMMANDS))
def test_estimator_arguments_are_flags_with_the_config_defaults(name):
    """Blame resets a flag to the estimator's default: it must be the config's default, and
    every size argument must be a flag of the check (else the message names a non-flag)."""
    from mhajax.experiments import get_check
    flags = _flags_and_defaults(get_check(name))
    for arg, p in inspect.signature(M.COMMANDS[name]).parameters.items():
        if arg in NOT_SIZES:
            continue
        assert arg in flags, f"{name}: estimator argument {arg!r} is not a flag"
        d = flags[arg]
        assert (tuple(d) if isinstance(d, (list, tuple)) else d) == p.default, (name, arg, d, p.default)


def test_check_estimate_equals_the_keyword_estimator():
    from mhajax.experiments import get_check
    from mhajax.experiments.configs import make
    from mhajax.experiments.weak_convexity import WeakConvexityConfig
    cfg = make(WeakConvexityConfig, heads=(1, 64), seeds=3, steps=40, every=10, n=128).validate()
    a = get_check("weak-convexity").memory(cfg, dtype="float64", backend="cpu")
    b = M.weak_convexity(heads=(1, 64), seeds=3, n=128, steps=40, every=10)
    assert a.peak() == b.peak()


# -- the model's rules equal the package's --------------------------------------------------------

def test_sizes_match_the_package():
    from mhajax.curvature.operators import head_batch_size
    from mhajax.train import checkpoint_steps
    for steps, every in [(200, 20), (7, 3), (1, 1), (0, 5), (10, 20)]:
        assert M.checkpoints(steps, every) == len(checkpoint_steps(steps, every))
    for H, n, T, p in [(1, 64, 6, 112), (256, 64, 6, 112), (4096, 1024, 16, 1536)]:
        assert M.head_batch_size(H, n, T, p, "cpu") == head_batch_size(H, n, T, p, budget=2 ** 18)
        assert M.head_batch_size(H, n, T, p, "gpu") == head_batch_size(H, n, T, p, budget=2 ** 28)


@pytest.mark.parametrize("model", ["softmax", "linear", "relu", "qk", "value", "causal", "cls", "two-layer"])
def test_params_per_head_matches_models(model):
    from mhajax.models.base import get_model
    m = get_model(model)
    shapes = jax.eval_shape(lambda k: m.init(k, 3, 5, 7), jax.random.PRNGKey(0))
    assert M.tree_sizes(shapes) == (3, M.per_head_params(model, 5, 7))


def test_analysis_batch_counts_the_jacobian_temporaries():
    """The accelerator batch of the κ-chain analysis (weak_convexity._batch_size) includes
    J's build temporaries n·H·(p+4T²): with them, a point's arrays are larger, so fewer fit."""
    assert M.analysis_batch(64, 16, 112, 6, method="dense", links="all", lanczos_steps=64, backend="cpu") is None
    b = M.analysis_batch(64, 16, 112, 6, method="dense", links="all", lanczos_steps=64, backend="gpu")
    P = 16 * 112
    per = 64 * P + 64 * 16 * (112 + 4 * 36) + 16 * 112 ** 2 + 3 * P * P + 64 * 16 * 112 ** 2
    decomposition = 2 * 16 * 112 ** 2 + 2 * 64 * P        # Q, the residual check's product, K, QᵀK
    assert b == int(1.5e9 // (8 * (per + decomposition)))
    block = M.analysis_batch(64, 16, 112, 6, method="block", links="all", lanczos_steps=64, backend="gpu")
    assert block == int(1.5e9 // (8 * (per - 3 * P * P)))   # the bound alone: no decomposition


def test_xla_buffer_assignment_agrees_at_absurd_size():
    """At a size that cannot run here, XLA's own plan for the per-sample Jacobian (compiled,
    never executed) is within the stated factor of the model."""
    import mhajax as mj
    from mhajax.curvature.operators import per_sample_jacobian
    H, T, d, n = 2_000_000, 6, 8, 64
    params = jax.eval_shape(lambda k: mj.init_params(k, H, T, d, force=True), jax.random.PRNGKey(0))
    X = jax.ShapeDtypeStruct((n, T, d), jnp.float64)
    ma = jax.jit(per_sample_jacobian).lower(params, X).compile().memory_analysis()
    xla = ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes
    est = M.api_ntk_features(heads=H, n=n).peak()
    assert M.FACTOR[0] <= est / xla <= M.FACTOR[1], (est, xla)


def test_xla_buffer_assignment_of_the_certified_check_agrees_at_absurd_size():
    """``lambda_min``'s program (``auto``: the secular route, λ_min end) at P = 22.4M, ~100 GB
    (compiled, never executed): XLA's plan is within the stated factor of the estimate that
    guards it — whose solve stage holds J, B, Q, K and QᵀK, not a Lanczos basis."""
    import mhajax as mj
    from mhajax.curvature.spectrum import extremes
    H, T, d, n = 200_000, 6, 8, 64
    params = jax.eval_shape(lambda k: mj.init_params(k, H, T, d, force=True), jax.random.PRNGKey(0))
    X = jax.ShapeDtypeStruct((n, T, d), jnp.float64)
    y = jax.ShapeDtypeStruct((n,), jnp.float64)
    fn = jax.jit(lambda p, X, y: extremes(p, X, y, jax.random.PRNGKey(0), method="auto", ends="min"))
    with M.checked():
        ma = fn.lower(params, X, y).compile().memory_analysis()
    xla = ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes
    est = M.api_hessian_extremes(heads=H, n=n)
    assert M.FACTOR[0] <= est.peak() / xla <= M.FACTOR[1], (est.peak(), xla)
    assert any("secular route" in t.label for s in est.stages for t in s.terms)
    assert not any("Lanczos" in t.label for s in est.stages for t in s.terms)


# -- measured peaks at small sizes, in one fresh process ------------------------------------------

MEASURE = textwrap.dedent("""
    import ctypes, gc, json
    import jax
    jax.config.update("jax_enable_x64", True)
    import mhajax as mj
    from mhajax.analysis.ntk import ntk_features

    def status(k):
        for line in open("/proc/self/status"):
            if line.startswith(k):
                return int(line.split()[1]) * 1024

    def peak(fn):
        fn(small=True)                                  # compile and allocate the same code path once
        gc.collect()
        ctypes.CDLL("libc.so.6").malloc_trim(0)         # give freed memory back: growth is then seen
        open("/proc/self/clear_refs", "w").write("5")   # reset VmHWM to the current RSS
        base = status("VmRSS")
        fn(small=False)
        return status("VmHWM") - base

    key = jax.random.PRNGKey(0)

    def mixture(small):
        mj.tokenized_mixture(key, 8 if small else 250_000, 6, 8)[0].block_until_ready()

    def features(small):
        H, n = (1, 8) if small else (256, 384)
        p = mj.init_params(key, H, 6, 8)
        X, _ = mj.tokenized_mixture(key, n, 6, 8)
        jax.jit(ntk_features)(p, X).block_until_ready()

    def init(small):
        mj.init_params(key, 1 if small else 250_000, 6, 8).U.block_until_ready()

    print(json.dumps(dict(mixture=peak(mixture), features=peak(features), init=peak(init))))
""")


def test_estimate_within_the_stated_factor_of_measured_peaks():
    """Three entry points at small sizes (~200-600 MiB each): the peak RSS growth of a
    fresh process (VmHWM reset through /proc/self/clear_refs, after a warm-up at a tiny size
    on the same code path) against the model's estimate less its tiny-size estimate."""
    if not os.path.exists("/proc/self/clear_refs"):
        pytest.skip("needs Linux /proc")
    env = dict(os.environ, MHAJAX_CACHE_DIR="off", PYTHONPATH=ROOT, MHAJAX_FORCE="1")
    r = subprocess.run([sys.executable, "-c", MEASURE], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    import json
    got = json.loads(r.stdout.strip().splitlines()[-1])
    pred = dict(
        mixture=M.api_tokenized_mixture(n=250_000).peak() - M.api_tokenized_mixture(n=8).peak(),
        features=M.api_ntk_features(heads=256, n=384).peak() - M.api_ntk_features(heads=1, n=8).peak(),
        init=M.api_init_params(heads=250_000).peak() - M.api_init_params(heads=1).peak())
    for k, v in pred.items():
        assert got[k] > 0 and M.FACTOR[0] <= v / got[k] <= M.FACTOR[1], (k, M.fmt_bytes(v), M.fmt_bytes(got[k]))


# -- what is available ------------------------------------------------------------------------------

def test_available_host_is_positive_and_named():
    a = M.available_host()
    assert a.nbytes > 0 and a.source
    assert M.available().nbytes > 0


def test_ulimit_v_is_read():
    code = ("from mhajax.runtime import memory as M; a = M.available_host(); print(a.source, '|', a.nbytes)")
    out = subprocess.run(["bash", "-c", 'ulimit -v 3000000; exec "$PY" -c "$CODE"'], capture_output=True,
                         text=True, timeout=120, env=dict(os.environ, PY=sys.executable, CODE=code, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr
    src, nbytes = out.stdout.rsplit("|", 1)
    assert "ulimit -v" in src and 0 < int(nbytes) < 3000000 * 1024


def _tree(tmp_path, files):
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


def test_cgroup_v2_limit_and_ancestors(tmp_path):
    _tree(tmp_path, {"proc": "0::/job/step\n",
                     "cg/job/memory.max": str(8 * GiB), "cg/job/memory.current": str(3 * GiB),
                     "cg/job/memory.stat": f"anon 1\ninactive_file {GiB}\n",
                     "cg/job/step/memory.max": "max", "cg/job/step/memory.current": "0"})
    lim = M.cgroup_limits(root=str(tmp_path / "cg"), proc_cgroup=str(tmp_path / "proc"))
    assert [v for v, _ in lim] == [6 * GiB]       # 8 − (3 − 1 inactive file)


def test_cgroup_v1_namespaced_root(tmp_path):
    _tree(tmp_path, {"proc": "4:memory:/process_api/abc\n3:cpuset:/\n",
                     "cg/memory/memory.limit_in_bytes": str(4 * GiB),
                     "cg/memory/memory.usage_in_bytes": str(GiB),
                     "cg/memory/memory.stat": "total_inactive_file 0\n"})
    lim = M.cgroup_limits(root=str(tmp_path / "cg"), proc_cgroup=str(tmp_path / "proc"))
    assert [v for v, _ in lim] == [3 * GiB]


def test_cgroup_v1_unlimited_ignored(tmp_path):
    _tree(tmp_path, {"proc": "4:memory:/\n", "cg/memory/memory.limit_in_bytes": "9223372036854771712",
                     "cg/memory/memory.usage_in_bytes": "5"})
    assert M.cgroup_limits(root=str(tmp_path / "cg"), proc_cgroup=str(tmp_path / "proc")) == []


def test_fmt_bytes():
    assert M.fmt_bytes(1536) == "1.5 KiB" and M.fmt_bytes(100 * GiB) == "100 GiB"
    assert M.fmt_bytes(2.2e5 * 2 ** 60) == "2.2e+05 EiB" and math.isfinite(float(M.fmt_bytes(5).split()[0]))
