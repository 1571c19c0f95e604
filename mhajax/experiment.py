"""Shared plumbing for sweeps: seeds -> data and initial parameters, batched.

A seed ``s`` gives three independent PRNG streams (:func:`mhajax.data.seed_keys`):
training data, initialization, test data. For a fixed seed, every H and
every step size sees the same training data.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from functools import partial

import jax
import jax.numpy as jnp

from .data import check_mixture_args, tokenized_mixture
from .errors import InputError
from .validate import positive_float, positive_int


@dataclass(frozen=True)
class DataConfig:
    """Tokenized-mixture knobs (SPEC §6) and the initialization scales."""

    n: int = 64
    tokens: int = 6
    dim: int = 8
    zeta: float = 0.25
    num_clusters: int = 4
    signal: float = 1.0
    sigma: float = 0.1
    antipodal: bool = False
    u_scale: float = 1.0
    w_scale: float = 0.0

    def validate(self, min_n: int = 2):
        positive_int("n", self.n, minimum=min_n)
        check_mixture_args(self.n, self.tokens, self.dim, self.zeta, self.num_clusters,
                           self.signal, self.sigma)
        positive_float("u_scale", self.u_scale, allow_zero=True)
        positive_float("w_scale", self.w_scale, allow_zero=True)
        return self

    def mixture_kwargs(self):
        return dict(zeta=self.zeta, num_clusters=self.num_clusters, signal=self.signal,
                    sigma=self.sigma, antipodal=self.antipodal)


def seed_list(seeds: int, seed0: int = 0) -> list[int]:
    """``[seed0, ..., seed0 + seeds − 1]``."""
    positive_int("seeds", seeds)
    if isinstance(seed0, bool) or not isinstance(seed0, int) or seed0 < 0:
        raise InputError(f"seed0 must be an integer >= 0, got {seed0!r}")
    return list(range(seed0, seed0 + seeds))


def stream_keys(seeds, stream: int):
    """``[S, 2]`` PRNG keys: stream ``stream`` of each seed (0 data, 1 init, 2 test)."""
    return _stream_keys(jnp.asarray(list(seeds), jnp.uint32), stream)


@partial(jax.jit, static_argnames=("stream",))
def _stream_keys(seeds, stream):
    return jax.vmap(lambda s: jax.random.fold_in(jax.random.PRNGKey(s), stream))(seeds)


@partial(jax.jit, static_argnames=("cfg", "n"))
def _draw(keys, cfg, n):
    return jax.vmap(lambda k: tokenized_mixture(k, n, cfg.tokens, cfg.dim, **cfg.mixture_kwargs()))(keys)


@partial(jax.jit, static_argnames=("cfg", "heads", "model"))
def _init(keys, cfg, heads, model):
    return jax.vmap(lambda k: model.init(k, heads, cfg.tokens, cfg.dim, u_scale=cfg.u_scale,
                                         w_scale=cfg.w_scale))(keys)


def batched_data(cfg: DataConfig, seeds, stream: int = 0, n: int | None = None):
    """``(X [S, n, T, d], y [S, n])``: one data set per seed from stream
    ``stream`` (0 = train, 2 = test)."""
    return _draw(stream_keys(seeds, stream), cfg, cfg.n if n is None else n)


def batched_init(cfg: DataConfig, seeds, heads: int, model=None):
    """Initial parameters for each seed, leaves with leading axis [S]."""
    from .model import SOFTMAX
    return _init(stream_keys(seeds, 1), cfg, heads, model or SOFTMAX)


def heads_list(value) -> list[int]:
    """Parse ``"1,4,16"`` (or a sequence) into a list of H >= 1."""
    if isinstance(value, str):
        parts = [p.strip() for p in value.split(",")]
        if not value.strip() or any(p == "" for p in parts):
            raise InputError(f"--heads must be a comma-separated list of integers >= 1, got {value!r}")
        out = []
        for p in parts:
            try:
                out.append(int(p))
            except ValueError:
                raise InputError(f"--heads must be a comma-separated list of integers >= 1, got {value!r} ({p!r} is not an integer)") from None
    else:
        out = list(value)
        if not out:
            raise InputError("heads must be a non-empty list of integers >= 1, got []")
    for h in out:
        positive_int("heads (H)", h)
    return out


def as_dict(cfg) -> dict:
    return asdict(cfg)


__all__ = ["DataConfig", "seed_list", "batched_data", "batched_init", "heads_list", "as_dict"]
