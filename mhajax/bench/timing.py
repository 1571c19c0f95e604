"""Timing helpers for the benchmarks (``python -m verify.bench``).

Every speed claim is a ratio against a baseline measured in the same run,
because shared machines are noisy: times are the median of ``repeat`` runs
after a warm-up call (compilation is timed separately).
"""
from __future__ import annotations

import statistics
import subprocess
import sys
import time

import jax

from mhajax.analysis.chain import chain_raw
from mhajax.curvature.operators import linearized_hvp, structured_parts
from mhajax.data.mixture import tokenized_mixture
from mhajax.losses import empirical_risk
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


def time_process(cmd: list[str], env=None, timeout: float | None = None) -> dict:
    """Wall time of a whole process (import, compile and run), and its exit code."""
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    return dict(seconds=time.perf_counter() - t, returncode=proc.returncode,
                stdout_tail=proc.stdout[-2000:], stderr_tail=proc.stderr[-2000:])


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
    grad = jax.jit(jax.grad(empirical_risk))
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
    out = c.pop("out")
    return dict(P=int(P), gradient_s=g["median_s"], hvp_s=h["median_s"],
                structured_matvec_s=sm["median_s"], check_s=c["median_s"],
                check_min_s=c["min_s"], check_max_s=c["max_s"],
                check_first_s=c["first_s"], num_matvecs=int(out["num_matvecs"]),
                residual_min=float(out["residual_min"]), residual_max=float(out["residual_max"]),
                eig_converged=bool(out["eig_converged"]), lambda_min=float(out["lambda_min"]),
                lambda_max=float(out["lambda_max"]), lambda_min_block=float(out["lambda_min_block"]))


def python_cmd(*args) -> list[str]:
    """``[sys.executable, *args]``: a command run with this interpreter."""
    return [sys.executable, *args]


__all__ = ["time_call", "time_process", "problem", "point_costs", "python_cmd"]
