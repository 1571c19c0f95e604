"""What every experiment shares: batched draws and initializations per seed, GD-step
counts, held-out evaluation, the batched κ-chain analysis, and verdict fields.

No experiment imports another; anything two of them need lives here.
"""
from __future__ import annotations

import math
from typing import NamedTuple

import jax
import jax.flatten_util
import jax.numpy as jnp
import numpy as np

from mhajax.analysis.chain import chain_raw
from mhajax.curvature.premises import check_premises
from mhajax.curvature.spectrum import resolve_method
from mhajax.data.registry import TRACEABLE, get_dataset
from mhajax.data.seeds import stream_keys
from mhajax.errors import InputError
from mhajax.experiments.configs import DataConfig, options
from mhajax.losses import LOGISTIC, Loss, is_builtin_loss
from mhajax.models.base import get_model, head_size, is_builtin, is_coupled
from mhajax.models.softmax import SOFTMAX
from mhajax.runtime import memory as mem
from mhajax.runtime.jaxsetup import RUN_ONCE_OPTIONS, cpu_jit, sized_jit
from mhajax.runtime.resume import load_or_run
from mhajax.runtime.records import fields
from mhajax.train import num_checkpoints
from mhajax.verdict import Judgement, Verdict

# ---------------------------------------------------------------------------
# Seeds -> data and initial parameters, batched
# ---------------------------------------------------------------------------


@cpu_jit(options=RUN_ONCE_OPTIONS, static_argnames=("cfg", "n"))
def _draw(keys, cfg, n):
    draw = get_dataset(cfg.dataset)
    return jax.vmap(lambda k: draw(k, n, cfg.tokens, cfg.dim, **cfg.knobs()))(keys)


@cpu_jit(options=RUN_ONCE_OPTIONS, static_argnames=("cfg", "heads", "model"))
def _init(keys, cfg, heads, model):
    return jax.vmap(lambda k: model.init(k, heads, cfg.tokens, cfg.dim, u_scale=cfg.u_scale,
                                         w_scale=cfg.w_scale))(keys)


def batched_data(cfg: DataConfig, seeds, stream: int = 0, n: int | None = None):
    """``(X [S, n, T, d], y [S, n])``: one data set per seed from stream ``stream``
    (0 = train, 2 = test) of the data model ``cfg.dataset``.

    Generators (``mixture``, ``sparse``) are drawn under one ``jit``/``vmap``; ``npz``
    subsamples its file per seed (stream 2 from ``cfg.test_path``; without one, an
    :class:`InputError`: a held-out set cannot come from the training file); ``digits``
    subsamples its training split per seed, stream 2 its fixed held-out split."""
    n = cfg.n if n is None else n
    keys = stream_keys(seeds, stream)
    if cfg.dataset in TRACEABLE:
        return _draw(keys, cfg, n)
    draw = get_dataset(cfg.dataset)
    if cfg.dataset == "npz":
        path = cfg.data_path
        if stream == 2:
            if not cfg.test_path:
                raise InputError("held-out data with --data npz needs --test-path FILE.npz (a second "
                                 "file: test draws from the training file would overlap it)")
            path = cfg.test_path
        knobs = dict(path=path)
    else:
        knobs = cfg.knobs(stream)
    pairs = [draw(k, n, cfg.tokens, cfg.dim, **knobs) for k in keys]
    return jnp.stack([p[0] for p in pairs]), jnp.stack([p[1] for p in pairs])


#: the problem as the summary names it: the model, the loss and the data model
ProblemNames = NamedTuple("ProblemNames", fields(("model loss data", str)))


class Problem(NamedTuple):
    """A check's problem, resolved once where its ``run`` starts (:func:`resolve`): the model
    and loss objects, and per seed the training data ``X [S, n, T, d]``, ``y [S, n]``."""

    model: object
    loss: Loss
    X: jax.Array
    y: jax.Array


def resolve(cfg: DataConfig, seeds) -> Problem:
    """The :class:`Problem` of a validated ``cfg`` for ``seeds``: ``cfg.model``, ``cfg.loss``,
    and stream 0 of the data model (``cfg.n`` samples per seed)."""
    return Problem(cfg.head_model(), cfg.loss_fn(), *batched_data(cfg, seeds))


def batched_init(cfg: DataConfig, seeds, heads: int, model=None):
    """Initial parameters for each seed (stream 1), leaves ``[S, H, ...]``; ``model``
    defaults to ``cfg.head_model()``."""
    return _init(stream_keys(seeds, 1), cfg, heads, model or cfg.head_model())


def params_per_head(params) -> int:
    """Parameters per head of batched params (leaves ``[S, H, ...]``)."""
    return sum(int(math.prod(l.shape[2:])) for l in jax.tree_util.tree_leaves(params))


# ---------------------------------------------------------------------------
# Rate sweeps: K ≈ c·n steps, held-out evaluation
# ---------------------------------------------------------------------------

def steps_for(n: int, steps_per_n: float) -> int:
    """``K = max(1, round(steps_per_n · n))``."""
    return max(1, int(round(steps_per_n * n)))


def require_test_data(d: DataConfig, check: str) -> None:
    """Raise :class:`InputError` when ``d`` has no held-out data (``--data npz`` without
    ``--test-path``): ``check`` measures a test loss and cannot run without one."""
    if not d.has_test_data():
        raise InputError(f"{check} measures a held-out test loss: --data npz needs --test-path "
                         f"FILE.npz (a second file; test draws from --data-path would overlap training)")


def witness_applies(d: DataConfig) -> tuple:
    """``(applies, reason)``: the explicit witness (:mod:`mhajax.analysis.witness`) moves the
    softmax readouts along the mixture's class direction, so it certifies NTK separability
    only for the tokenized mixture with softmax heads."""
    if d.dataset == "mixture" and d.model == "softmax":
        return True, "softmax heads on the tokenized mixture"
    return False, (f"not applicable: the explicit witness is built for softmax heads on the "
                   f"tokenized mixture (class direction of μ±), not --model {d.model} --data {d.dataset}")


# ---------------------------------------------------------------------------
# The κ chain at a batch of points
# ---------------------------------------------------------------------------

def point_index(seeds: int, checkpoints: int) -> np.ndarray:
    """``seed_index [S·C]`` of :func:`analyse_batch` for points ordered seed-major (point
    ``b = s·C + c`` is seed s at checkpoint c): ``[0]*C + [1]*C + ...``, JAX's default int
    dtype, built on the host (an eager ``jnp.repeat`` compiles four small programs)."""
    dtype = jax.dtypes.canonicalize_dtype(np.int64)
    return np.repeat(np.arange(seeds, dtype=dtype), checkpoints)


def _analyse(params, seed_index, keys, X, y, *, method, links, lanczos_steps, max_cycles,
             batch_size=None, model=SOFTMAX, loss=LOGISTIC):
    """:func:`mhajax.analysis.chain.chain_raw` at a batch of points ``params`` (leaves
    ``[B, ...]``), point b on data set ``seed_index[b]`` of ``X [S, n, T, d]`` with key
    ``keys[b]``; ``batch_size`` points at a time under ``vmap`` (None: one by one). Returns
    a :class:`~mhajax.analysis.chain.ChainPoint` whose leaves are ``[B]``."""
    def one(args):
        th, s, k = args
        return chain_raw(th, X[s], y[s], k, method=method, links=links, model=model, loss=loss,
                         num_steps=lanczos_steps, max_cycles=max_cycles)
    return jax.lax.map(one, (params, seed_index, keys), batch_size=batch_size)


def _points_size(params, *args, **kwargs) -> int:
    """Parameters of one point of ``params`` (leaves ``[B, ...]``)."""
    return sum(math.prod(leaf.shape[1:]) for leaf in jax.tree_util.tree_leaves(params))


#: :func:`_analyse` compiled as a run-once program (LLVM -O0: fast to compile) for points of
#: fewer than :data:`~mhajax.runtime.jaxsetup.LARGE_P` parameters, with XLA's defaults from it on
#: (at H = 1024, P = 114,688, one point's chain runs in 10 s instead of 25 s for 3 s more compile)
analyse_batch = sized_jit(_analyse, size=_points_size, large={},
                          static_argnames=("method", "links", "lanczos_steps", "max_cycles", "batch_size",
                                           "model", "loss"))


# ---------------------------------------------------------------------------
# The sweep: one unit per key, resumable, typed
# ---------------------------------------------------------------------------

def sweep(store, keys, compute, kind, *, unit=lambda k: f"heads={k}", progress=None) -> tuple:
    """``({key: record}, resumed keys)``: for each key in order, ``compute(key)`` (a ``kind``
    NamedTuple), or the record saved in ``store`` by an earlier run
    (:func:`mhajax.runtime.resume.load_or_run`; unit name ``unit(key)``); a key listed twice is
    computed once. ``progress(key)`` is called after each. Records come back as the file gives
    them (:func:`mhajax.runtime.records.roundtrip`), so a resumed sweep equals an uninterrupted one."""
    out, resumed, memo = {}, [], {}
    for k in keys:
        out[k] = load_or_run(store, unit(k), lambda: compute(k), resumed, k, memo, kind=kind)
        if progress:
            progress(k)
    return out, resumed


# -- the door: a user's model and loss checked against autodiff before a run starts --

def _data_configs(cfg) -> list:
    """``[(DataConfig, the models it runs)]`` of a check's config (``models``: variants' list)."""
    out = []
    for path, _, v in options(cfg):
        if path == "dataset" or path.endswith(".dataset"):
            owner = cfg
            for part in path.split(".")[:-1]:
                owner = getattr(owner, part)
            models = getattr(cfg, "models", None)     # variants: its list replaces data.model
            out.append((owner, tuple(models) if models else (owner.model,)))
    return out


def door_premises(cfg) -> dict:
    """Check every model and loss of ``cfg`` that is not built in against autodiff
    (:func:`mhajax.curvature.premises.check_premises`) on the first seed's training data at θ₀
    (the smallest H of the check) and at a point near it (θ₀ + 0.1·rms(θ₀)·g: a closed form right
    only at W = 0 is caught before the run): an :class:`InputError` naming the model, the field
    and the discrepancy, before anything is written. Built-in models and losses are checked by
    the test suite and once per process by the public functions. Returns
    ``{model name: {field: discrepancy}}`` for the summary."""
    heads = getattr(cfg, "heads", 1)
    H = min(heads) if isinstance(heads, (tuple, list)) else int(heads)
    seed0 = int(getattr(cfg, "seed0", 0))
    out = {}
    for d, models in _data_configs(cfg):
        loss = d.loss_fn()
        for name in models:
            model = get_model(name)
            if is_builtin(model) and is_builtin_loss(loss):
                continue
            X, y = batched_data(d, [seed0], n=min(d.n, 64))
            X, y = X[0], y[0]
            params = batched_init(d, [seed0], H, model)
            params = jax.tree_util.tree_map(lambda a: a[0], params)
            z, unravel = jax.flatten_util.ravel_pytree(params)
            rms = float(jnp.sqrt(jnp.mean(z ** 2))) or 1.0
            near = unravel(z + 0.1 * rms * jax.random.normal(jax.random.PRNGKey(seed0 + 1), z.shape, z.dtype))
            found = {}
            for where, th in (("θ₀", params), ("a point near θ₀", near)):
                found = check_premises(th, X, y, model=model, loss=loss, at=f"{where} (H = {H}, seed {seed0})")
            out[str(name)] = found
    return out


# -- memory: the dominant arrays of GD and the κ chain, checked by the CLI before a run starts --

def chain_memory(cfg, model) -> list:
    """The dominant arrays (:mod:`mhajax.runtime.memory`) of GD and the κ chain of ``model``
    at the largest H: the data, GD of all seeds with the checkpoints kept, the Hessian at one
    checkpoint (``cfg``: a weak-convexity or variants config)."""
    d, e, S, H = cfg.data, cfg.eig, cfg.seeds, max(mem.ints(cfg.heads))
    p, m = head_size(model, d.tokens, d.dim), get_model(model)
    coupled = is_coupled(m)
    norms = []
    if e.links == "all" and not coupled:   # the head matrices: the reduced ones when smaller than p × p
        norms = mem.head_norms(H, 2 * d.tokens ** 2 if m.reduced_hessian is not None and 2 * d.tokens ** 2 < p else p)
    return ([mem.data(S, d.n, d.tokens, d.dim)]
            + mem.gd(S, d.n, d.tokens, d.dim, H, p, num_checkpoints(cfg.gd.steps, cfg.gd.every), cfg.gd.steps)
            + mem.analysis(d.n, d.tokens, H, p, resolve_method(e.method, coupled), e.lanczos_steps, coupled)
            + norms)



# ---------------------------------------------------------------------------
# Verdicts
# ---------------------------------------------------------------------------

def verdict_fields(verdict: Verdict, reason: str) -> dict:
    """The summary fields of a verdict (:meth:`mhajax.verdict.Judgement.fields`): ``verdict``,
    ``verdict_reason`` (one line), and ``passed`` (True for PASSED, False for FAILED, None otherwise)."""
    return Judgement(Verdict(verdict), reason).fields()


#: a claim is judged only when at least this fraction of its checkpoints (pairs, cells)
#: could be judged; below it the verdict is INCONCLUSIVE, never PASSED.
MIN_JUDGED_FRACTION = 0.5


def judged_enough(judged: int, total: int, why_not: dict, what: str = "checkpoints") -> tuple:
    """``(enough, text)``: whether ``judged`` of ``total`` reaches :data:`MIN_JUDGED_FRACTION`
    (and at least one), and one line saying how many were judged and why the others were
    not (``why_not``: reason -> count), e.g. ``1 of 11 checkpoints judged (at least half
    needed); not judged: 10 with L̂ underflowed to 0``."""
    enough = total > 0 and judged >= 1 and judged >= MIN_JUDGED_FRACTION * total
    others = [f"{c} {r}" for r, c in why_not.items() if c]
    text = (f"{judged} of {total} {what} judged (at least {MIN_JUDGED_FRACTION:.0%} needed)"
            + (f"; not judged: {', '.join(others)}" if others else ""))
    return enough, text


#: why a checkpoint was not judged, in the order a verdict's text names the reasons
NOT_JUDGED = ("diverged", "with L̂ underflowed to 0 (ratios undefined)", "with no implied inequality defined")


def not_judged(points) -> dict:
    """Reason (:data:`NOT_JUDGED`) -> how many checkpoints were not judged for it (the ``why_not``
    of :func:`judged_enough`); ``points``: ``(judged, diverged, loss_defined)`` per checkpoint. A
    judged one counts nowhere; else diverged first, then L̂ undefined (underflowed or not finite),
    else no implied inequality defined there."""
    counts = [0, 0, 0]
    for judged, diverged, loss_defined in points:
        if not judged:
            counts[0 if diverged else 1 if not loss_defined else 2] += 1
    return dict(zip(NOT_JUDGED, counts))


#: a GD run (H, seed) that became non-finite, at ``step``
DivergedRun = NamedTuple("DivergedRun", fields(("heads seed step", int)))


__all__ = ["batched_data", "batched_init", "chain_memory", "params_per_head",
           "steps_for", "require_test_data", "witness_applies",
           "analyse_batch", "point_index", "sweep", "DivergedRun", "Problem", "ProblemNames", "resolve",
           "verdict_fields", "MIN_JUDGED_FRACTION", "judged_enough", "NOT_JUDGED", "not_judged"]
