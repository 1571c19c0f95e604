"""Timing helpers for the benchmarks (``python -m verify.bench``).

Every speed claim is a ratio against a baseline measured in the same run,
because shared machines are noisy: times are the median of ``repeat`` runs
after a warm-up call (compilation is timed separately).
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time

import jax

from mhajax.analysis.chain import chain_raw
from mhajax.api import hessian_extremes, lambda_min
from mhajax.curvature.operators import linearized_hvp, structured_parts
from mhajax.data.mixture import tokenized_mixture
from mhajax.losses import LOGISTIC, risk
from mhajax.models.softmax import SOFTMAX
from mhajax.models.softmax.head import init_params


def time_call(fn, *args, repeat: int = 5) -> dict:
    """Compile+first-call time and the median of ``repeat`` further calls (seconds)."""
    t = time.perf_counter()
    out = jax.block_until_ready(fn(*args))
    first = time.perf_counter() - t
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t)
    return dict(first_s=first, median_s=statistics.median(times), min_s=min(times),
                max_s=max(times), times_s=times, out=out)


def time_rounds(calls: dict, repeat: int) -> tuple[dict, dict, dict]:
    """``{name: fn}`` timed side by side: one compiling call each (``first``, seconds; its return
    value kept in ``out``), then ``repeat`` interleaved rounds, one call of each per round, so
    the machine's load falls on all alike; ``best`` is each call's fastest round. Returns
    ``(out, first, best)``."""
    out, first, times = {}, {}, {k: [] for k in calls}
    for k, f in calls.items():
        t = time.perf_counter()
        out[k] = f()
        first[k] = time.perf_counter() - t
    for _ in range(repeat):
        for k, f in calls.items():
            t = time.perf_counter()
            f()
            times[k].append(time.perf_counter() - t)
    return out, first, {k: min(v) for k, v in times.items()}


def time_process(cmd: list[str], env=None, timeout: float | None = None) -> dict:
    """Wall time of a whole process (import, compile and run), its exit code, its children's
    CPU seconds."""
    cpu0 = os.times()
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    cpu1 = os.times()
    return dict(seconds=time.perf_counter() - t, returncode=proc.returncode,
                cpu_s=(cpu1.children_user + cpu1.children_system) - (cpu0.children_user + cpu0.children_system),
                stdout_tail=proc.stdout[-2000:], stderr_tail=proc.stderr[-2000:])


def time_lambda_min(params, X, y, repeat: int = 3) -> dict:
    """The certified check through the public API, ``mhajax.lambda_min(method="auto")``, at
    one θ: compiled by a first call (timed apart as ``first_s``), then ``repeat`` calls
    timed in wall seconds and CPU seconds (this process, all threads). Returns the best and
    median of each, the value, and the record of :func:`hessian_extremes` (an
    :class:`~mhajax.curvature.spectrum.Extremes`: enclosures, counts) from the same compiled program."""
    kw = dict(method="auto", model=SOFTMAX, loss=LOGISTIC)
    t = time.perf_counter()
    value = lambda_min(params, X, y, **kw)
    first = time.perf_counter() - t
    wall, cpu = [], []
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        value = lambda_min(params, X, y, **kw)
        wall.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    rec = hessian_extremes(params, X, y, ends="min", **kw)   # the program lambda_min ran
    return dict(value=value, first_s=first, best_s=min(wall), median_s=statistics.median(wall), times_s=wall,
                cpu_best_s=min(cpu), cpu_median_s=statistics.median(cpu), record=rec)


def problem(heads: int, tokens: int, dim: int, n: int, seed: int = 0, w_scale: float = 1.0,
            num_clusters: int | None = None):
    """A random point θ and a tokenized-mixture data set for timing."""
    k1, k2 = jax.random.split(jax.random.PRNGKey(seed))
    K = num_clusters if num_clusters is not None else max(1, min(4, dim - 2))
    X, y = tokenized_mixture(k1, n, tokens, dim, num_clusters=K)
    params = init_params(k2, heads, tokens, dim, w_scale=w_scale)
    return params, X, y


def point_costs(params, X, y, *, method: str = "lanczos", links: str = "core", repeat: int = 3,
                num_steps: int = 64, max_cycles: int = 20) -> dict:
    """Time one gradient, one HVP (linearized jvp-of-grad, and structured G+B),
    and a full check at one θ (loss, certified λ_min(B), λ_min/λ_max with
    residuals, κ chain). Returns seconds and the check's solver statistics."""
    key = jax.random.PRNGKey(0)
    grad = jax.jit(jax.grad(risk))
    g = time_call(grad, params, X, y, repeat=repeat)
    P = sum(l.size for l in jax.tree_util.tree_leaves(params))
    v = jax.random.normal(key, (P,), X.dtype)

    lin = jax.jit(lambda th, X, y, v: linearized_hvp(th, X, y)(v))
    h = time_call(lin, params, X, y, v, repeat=repeat)
    S = jax.jit(structured_parts)(params, X, y)
    sm = time_call(jax.jit(lambda S, v: S.matvec(v)), S, v, repeat=repeat)
    check = jax.jit(lambda th, X, y, k: chain_raw(th, X, y, k, method=method, links=links,
                                                 num_steps=num_steps, max_cycles=max_cycles))
    c = time_call(check, params, X, y, key, repeat=repeat)
    out = c.pop("out").extremes
    return dict(P=int(P), gradient_s=g["median_s"], hvp_s=h["median_s"],
                structured_matvec_s=sm["median_s"], check_s=c["median_s"],
                check_min_s=c["min_s"], check_max_s=c["max_s"],
                check_first_s=c["first_s"], num_matvecs=int(out.num_matvecs),
                residual_min=float(out.residual_min), residual_max=float(out.residual_max),
                eig_converged=bool(out.eig_converged), lambda_min=float(out.lambda_min),
                lambda_max=float(out.lambda_max), lambda_min_block=float(out.lambda_min_block))


def python_cmd(*args) -> list[str]:
    """``[sys.executable, *args]``: a command run with this interpreter."""
    return [sys.executable, *args]


__all__ = ["time_call", "time_process", "time_lambda_min", "problem", "point_costs",
           "python_cmd"]
