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

from .data import check_mixture_args
from .errors import InputError
from .validate import positive_float, positive_int


@dataclass(frozen=True)
class DataConfig:
    """The problem every sweep runs on: the data model and its knobs, the head
    model, the loss, and the initialization scales.

    ``dataset`` is a name of :data:`mhajax.datasets.DATASETS`: ``mixture`` (SPEC §6,
    knobs ``zeta, num_clusters, signal, sigma, antipodal``), ``sparse`` (knobs ``k_signal,
    signal, sigma``) or ``npz`` (``data_path``; held-out draws, stream 2, come from
    ``test_path``). ``model`` names a :func:`mhajax.variants.get_model` entry (default the
    paper's ``softmax``); ``loss`` a :func:`mhajax.losses.get_loss` entry (default
    ``logistic``). The defaults reproduce the paper's setting.
    """

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
    dataset: str = "mixture"
    data_path: str | None = None
    test_path: str | None = None
    k_signal: int = 1
    model: str = "softmax"
    loss: str = "logistic"

    def validate(self, min_n: int = 2):
        from .datasets import check_sparse_args, get_dataset, load_npz
        from .losses import get_loss
        positive_int("n", self.n, minimum=min_n)
        positive_int("k_signal", self.k_signal)  # checked for every data model, used by sparse
        name = str(self.dataset).strip().lower()
        get_dataset(name)  # unknown name -> InputError listing the choices
        object.__setattr__(self, "dataset", name)
        if name == "mixture":
            check_mixture_args(self.n, self.tokens, self.dim, self.zeta, self.num_clusters,
                               self.signal, self.sigma)
        elif name == "sparse":
            check_sparse_args(self.n, self.tokens, self.dim, self.k_signal, self.signal, self.sigma)
        if name == "npz":
            if not self.data_path:
                raise InputError("--data npz needs --data-path FILE.npz (arrays X [n, T, d] and y [n])")
            for flag, path in (("--data-path", self.data_path), ("--test-path", self.test_path)):
                if path:
                    X, _ = load_npz(path, tokens=self.tokens, dim=self.dim)  # fails early, clearly
                    if flag == "--data-path" and X.shape[0] < self.n:
                        raise InputError(f"n = {self.n} samples requested but {path!r} holds only "
                                         f"{X.shape[0]}")
        else:
            for flag, path in (("--data-path", self.data_path), ("--test-path", self.test_path)):
                if path:
                    raise InputError(f"{flag} is only used with --data npz (got --data {name})")
        self.head_model()
        get_loss(self.loss)
        positive_float("u_scale", self.u_scale, allow_zero=True)
        positive_float("w_scale", self.w_scale, allow_zero=True)
        return self

    def head_model(self):
        """The :class:`~mhajax.model.HeadModel` named by ``model``."""
        from .variants import get_model
        return get_model(self.model)

    def loss_fn(self):
        """The :class:`~mhajax.losses.Loss` named by ``loss``."""
        from .losses import get_loss
        return get_loss(self.loss)

    def is_default_problem(self) -> bool:
        """Whether this is the paper's setting: softmax heads, logistic loss, mixture data."""
        return (self.dataset, self.model, self.loss) == ("mixture", "softmax", "logistic")

    def has_test_data(self) -> bool:
        """Whether held-out draws (stream 2) exist: always for a generator, and for
        ``npz`` only with a ``test_path`` (a second file: the training file would overlap)."""
        return self.dataset != "npz" or bool(self.test_path)

    def knobs(self) -> dict:
        """Keyword arguments of the chosen data model beyond ``(key, n, tokens, dim)``."""
        if self.dataset == "mixture":
            return self.mixture_kwargs()
        if self.dataset == "sparse":
            return dict(k=self.k_signal, signal=self.signal, sigma=self.sigma)
        return dict(path=self.data_path)

    def mixture_kwargs(self):
        return dict(zeta=self.zeta, num_clusters=self.num_clusters, signal=self.signal,
                    sigma=self.sigma, antipodal=self.antipodal)


def seed_list(seeds: int, seed0: int = 0) -> list[int]:
    """``[seed0, ..., seed0 + seeds − 1]``."""
    positive_int("seeds", seeds)
    if isinstance(seed0, bool) or not isinstance(seed0, int) or seed0 < 0:
        raise InputError(f"seed0 must be an integer >= 0, got {seed0!r}")
    if seed0 + seeds > 2 ** 32:
        raise InputError(f"seed0 + seeds must be <= 2**32 (PRNG seeds are uint32), got seed0={seed0}, "
                         f"seeds={seeds}")
    return list(range(seed0, seed0 + seeds))


def stream_keys(seeds, stream: int):
    """``[S, 2]`` PRNG keys: stream ``stream`` of each seed (0 data, 1 init, 2 test)."""
    return _stream_keys(jnp.asarray(list(seeds), jnp.uint32), stream)


@partial(jax.jit, static_argnames=("stream",))
def _stream_keys(seeds, stream):
    return jax.vmap(lambda s: jax.random.fold_in(jax.random.PRNGKey(s), stream))(seeds)


@partial(jax.jit, static_argnames=("cfg", "n"))
def _draw(keys, cfg, n):
    from .datasets import get_dataset
    draw = get_dataset(cfg.dataset)
    return jax.vmap(lambda k: draw(k, n, cfg.tokens, cfg.dim, **cfg.knobs()))(keys)


@partial(jax.jit, static_argnames=("cfg", "heads", "model"))
def _init(keys, cfg, heads, model):
    return jax.vmap(lambda k: model.init(k, heads, cfg.tokens, cfg.dim, u_scale=cfg.u_scale,
                                         w_scale=cfg.w_scale))(keys)


def batched_data(cfg: DataConfig, seeds, stream: int = 0, n: int | None = None):
    """``(X [S, n, T, d], y [S, n])``: one data set per seed from stream
    ``stream`` (0 = train, 2 = test) of the data model ``cfg.dataset``.

    Generators (``mixture``, ``sparse``) are drawn under one ``jit``/``vmap``; ``npz``
    subsamples its file per seed (stream 2 from ``cfg.test_path``; without one, an
    :class:`InputError`: a held-out set cannot come from the training file)."""
    from .datasets import TRACEABLE, get_dataset
    n = cfg.n if n is None else n
    keys = stream_keys(seeds, stream)
    if cfg.dataset in TRACEABLE:
        return _draw(keys, cfg, n)
    path = cfg.data_path
    if stream == 2:
        if not cfg.test_path:
            raise InputError("held-out data with --data npz needs --test-path FILE.npz (a second "
                             "file: test draws from the training file would overlap it)")
        path = cfg.test_path
    draw = get_dataset(cfg.dataset)
    pairs = [draw(k, n, cfg.tokens, cfg.dim, path=path) for k in keys]
    return jnp.stack([p[0] for p in pairs]), jnp.stack([p[1] for p in pairs])


def batched_init(cfg: DataConfig, seeds, heads: int, model=None):
    """Initial parameters for each seed, leaves with leading axis [S]; ``model``
    defaults to ``cfg.head_model()``."""
    return _init(stream_keys(seeds, 1), cfg, heads, model or cfg.head_model())


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
