"""mhajax.runtime.jaxsetup's compiler options: which decorator compiles with which, the probe of
an option the jaxlib may not know, and the claim that XLA:CPU's older emitters
(CPU_COMPILE_OPTIONS) give the certified analysis the same bits."""
import jax
import numpy as np
import pytest
from helpers import XLA_DEFAULT_OPTIONS

from mhajax.curvature.spectrum import extremes
from mhajax.data.seeds import point_keys
from mhajax.experiments.base import analyse_batch, batched_data, batched_init, point_index
from mhajax.experiments.configs import DataConfig
from mhajax.runtime import jaxsetup
from mhajax.runtime.jaxsetup import (CPU_COMPILE_OPTIONS, FAST_COMPILE_OPTIONS, cached_jit, cpu_compile_options,
                                     default_compile_options, fast_compile_jit, fast_compile_options)

cpu = pytest.mark.skipif(jax.default_backend() != "cpu", reason="CPU compiler options")


def test_an_option_this_jaxlib_does_not_know_is_left_out_not_raised():
    assert jaxsetup._cpu_option_supported("xla_cpu_no_such_option_mhajax", True) is False
    assert set(cpu_compile_options()) <= set(CPU_COMPILE_OPTIONS)


@cpu
def test_each_decorator_compiles_with_its_options():
    f = lambda x: x + 1  # noqa: E731
    assert fast_compile_jit(f)._options() == dict(FAST_COMPILE_OPTIONS, **cpu_compile_options()) == fast_compile_options()
    assert cached_jit(f)._options() is None                      # GD: XLA's defaults
    assert cached_jit(f, fusion_emitters=False)._options() == default_compile_options() == (cpu_compile_options() or None)


def _same_bits(a, b):
    for k in a:
        x, y = np.asarray(a[k]), np.asarray(b[k])
        assert x.dtype == y.dtype and x.tobytes() == y.tobytes(), k


@cpu
@pytest.mark.skipif(not cpu_compile_options(), reason="this jaxlib has none of CPU_COMPILE_OPTIONS")
def test_the_older_emitters_change_the_analysis_not_at_all_and_the_check_at_the_last_bits():
    """The κ chain (analyse_batch) at -O0, compiled with XLA's fusion emitters and with
    CPU_COMPILE_OPTIONS: every output identical to the bit. The certified check (extremes) at
    XLA's default optimization (asked for explicitly: the suite's process compiles at -O0): the two
    builds round differently in the last bits (measured <= 7e-16 relative on this problem), so
    every λ field agrees to 64 eps relative, both are certified and their enclosures overlap."""
    cfg = DataConfig(n=16, tokens=4, dim=6)
    X, y = batched_data(cfg, [0])
    th = batched_init(cfg, [0], 3)
    flat = jax.tree_util.tree_map(lambda a: np.concatenate([np.asarray(a), 1.3 * np.asarray(a)]), th)
    si, keys = point_index(1, 2), point_keys(3, 2)
    static = ("method", "links", "lanczos_steps", "max_cycles", "batch_size", "model", "loss")
    kw = dict(method="auto", links="all", lanczos_steps=32, max_cycles=10, batch_size=None)
    newer = {k: v for k, v in XLA_DEFAULT_OPTIONS.items() if k in CPU_COMPILE_OPTIONS}   # the fusion emitters
    outs = [jax.jit(analyse_batch.__wrapped__, static_argnames=static, compiler_options=dict(FAST_COMPILE_OPTIONS, **o))(
        flat, si, keys, X, y, **kw) for o in (newer, cpu_compile_options())]
    for k in outs[0]:
        x, y_ = np.asarray(outs[0][k]), np.asarray(outs[1][k])
        assert x.dtype == y_.dtype and x.tobytes() == y_.tobytes(), k
    th1 = jax.tree_util.tree_map(lambda a: a[0], th)
    a, b = (jax.jit(lambda p, X, y, k: extremes(p, X, y, k, method="auto"), compiler_options=o)(
        th1, X[0], y[0], keys[0]) for o in (XLA_DEFAULT_OPTIONS, dict(XLA_DEFAULT_OPTIONS, **cpu_compile_options())))
    eps = np.finfo(np.float64).eps
    for k in ("lambda_min", "lambda_max", "lambda_min_lo", "lambda_min_hi", "lambda_max_lo", "lambda_max_hi",
              "lambda_min_block", "lambda_max_upper"):
        x, y_ = float(a[k]), float(b[k])
        assert abs(x - y_) <= 64 * eps * abs(x), (k, x, y_)
    assert bool(a["eig_certified"]) and bool(b["eig_certified"])
    for e in ("min", "max"):
        assert float(a[f"lambda_{e}_lo"]) <= float(b[f"lambda_{e}_hi"]) and float(b[f"lambda_{e}_lo"]) <= float(a[f"lambda_{e}_hi"])
