"""mhajax.runtime.jaxsetup's compile options: ``cpu_jit`` compiles with its options on CPU and
with XLA's defaults elsewhere, and XLA:CPU's older emitters (OLD_EMITTERS) give the κ-chain
analysis the same bits and the certified check the same numbers to the last bits."""
import jax
import numpy as np
import pytest
from helpers import XLA_DEFAULT_OPTIONS

from mhajax.curvature.spectrum import extremes
from mhajax.data.seeds import point_keys
from mhajax.experiments.base import analyse_batch, batched_data, batched_init, point_index
from mhajax.experiments.configs import DataConfig
from mhajax.runtime import jaxsetup
from mhajax.runtime.jaxsetup import OLD_EMITTERS, RUN_ONCE_OPTIONS, cpu_jit

cpu = pytest.mark.skipif(jax.default_backend() != "cpu", reason="CPU compiler options")


def test_cpu_jit_uses_its_options_on_cpu_and_xla_defaults_elsewhere(monkeypatch):
    """Each backend gets its own jitted program: the one compiled with ``options`` on CPU, the
    one with XLA's defaults (no options) elsewhere (recorded by a spy on ``jax.jit``)."""
    real, made = jax.jit, []

    def spy(fn, **kw):
        jitted = real(fn, **kw)
        made.append(kw.get("compiler_options"))
        return lambda *a, **k: (kw.get("compiler_options"), jitted(*a, **k))

    monkeypatch.setattr(jaxsetup.jax, "jit", spy)
    f = cpu_jit(lambda x: x + 1, options=RUN_ONCE_OPTIONS)
    assert sorted(map(str, made)) == sorted(map(str, [RUN_ONCE_OPTIONS, None]))
    monkeypatch.setattr(jaxsetup.jax, "default_backend", lambda: "cpu")
    opts, out = f(np.float64(1.0))
    assert opts == RUN_ONCE_OPTIONS and float(out) == 2.0
    monkeypatch.setattr(jaxsetup.jax, "default_backend", lambda: "gpu")
    opts, out = f(np.float64(1.0))
    assert opts is None and float(out) == 2.0


def test_cpu_jit_keeps_static_arguments_and_the_function_name():
    @cpu_jit(options=OLD_EMITTERS, static_argnames=("k",))
    def scaled(x, *, k):
        return x * k
    assert scaled.__name__ == "scaled"
    assert float(scaled(np.float64(2.0), k=3)) == 6.0


@pytest.mark.slow
@cpu
def test_the_older_emitters_change_the_analysis_not_at_all_and_the_check_at_the_last_bits():
    """The κ chain (analyse_batch) at -O0, compiled with XLA's fusion emitters and with the
    older ones: every output identical to the bit. The certified check (extremes) at XLA's
    default optimization: the two builds round differently in the last bits (measured <= 7e-16
    relative on this problem), so every λ field agrees to 64 eps relative, both are certified
    and their enclosures overlap."""
    cfg = DataConfig(n=16, tokens=4, dim=6)
    X, y = batched_data(cfg, [0])
    th = batched_init(cfg, [0], 3)
    flat = jax.tree_util.tree_map(lambda a: np.concatenate([np.asarray(a), 1.3 * np.asarray(a)]), th)
    si, keys = point_index(1, 2), point_keys(3, 2)
    static = ("method", "links", "lanczos_steps", "max_cycles", "batch_size", "model", "loss")
    kw = dict(method="auto", links="all", lanczos_steps=32, max_cycles=10, batch_size=None)
    O0 = {"xla_backend_optimization_level": 0}
    outs = [jax.jit(analyse_batch.__wrapped__, static_argnames=static, compiler_options=dict(O0, **o))(
        flat, si, keys, X, y, **kw) for o in ({"xla_cpu_use_fusion_emitters": True}, OLD_EMITTERS)]
    assert jax.tree_util.tree_structure(outs[0]) == jax.tree_util.tree_structure(outs[1])
    for (k, x), y_ in zip(jax.tree_util.tree_leaves_with_path(outs[0]), jax.tree_util.tree_leaves(outs[1])):
        x, y_ = np.asarray(x), np.asarray(y_)
        assert x.dtype == y_.dtype and x.tobytes() == y_.tobytes(), jax.tree_util.keystr(k)
    th1 = jax.tree_util.tree_map(lambda a: a[0], th)
    a, b = (jax.jit(lambda p, X, y, k: extremes(p, X, y, k, method="auto"), compiler_options=o)(
        th1, X[0], y[0], keys[0]) for o in (XLA_DEFAULT_OPTIONS, dict(XLA_DEFAULT_OPTIONS, **OLD_EMITTERS)))
    eps = np.finfo(np.float64).eps
    for k in ("lambda_min", "lambda_max", "lambda_min_lo", "lambda_min_hi", "lambda_max_lo", "lambda_max_hi",
              "lambda_min_block", "lambda_max_upper"):
        x, y_ = float(getattr(a, k)), float(getattr(b, k))
        assert abs(x - y_) <= 64 * eps * abs(x), (k, x, y_)
    assert bool(a.eig_certified) and bool(b.eig_certified)
    for e in ("min", "max"):
        lo, hi = f"lambda_{e}_lo", f"lambda_{e}_hi"
        assert float(getattr(a, lo)) <= float(getattr(b, hi)) and float(getattr(b, lo)) <= float(getattr(a, hi))
