"""The weak-convexity experiment: GD trajectories, and the κ chain at every checkpoint.

For each H, ``seeds`` trajectories are trained together (one ``vmap``-ed,
``jit``-ed GD per shape); every checkpoint θ of every trajectory then gets the
full curvature analysis of :mod:`mhajax.chain` — batched with ``lax.map`` over
the ``seeds × checkpoints`` points, one compile per H.

The problem is ``cfg.data``: its data model, head model (``cfg.data.head_model()``) and
loss (``cfg.data.loss_fn()``). ``data.model = "two-layer"`` selects the coupled model of
:mod:`mhajax.two_layer` instead: it has no head blocks, so only κ_emp is measured
(matrix-free Lanczos) and no inequality is judged. Each record's verdicts count only
where the (model, loss) pair implies them (:mod:`mhajax.applicability`); the others are
reported as *not implied* (informational).

Resuming: with a :class:`mhajax.resume.ProgressStore`, every finished H is kept; with
``save_every = N > 0`` (a multiple of ``every``; default ~:data:`SAVE_EVERY`) each H's GD is
also run in segments of N steps, and after each segment the iterate, optimizer state, checkpoints, losses and finite
flags are saved (``.npz``), so a killed run continues from the last saved segment. The
segmentation is part of the config, so a resumed run runs the very same compiled
programs as an uninterrupted one and gives identical numbers.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .applicability import requirements
from .chain import LINKS, chain_raw, finalize
from .curvature import METHODS, resolve_method
from .errors import InputError
from .experiment import DataConfig, batched_data, batched_init, heads_list, seed_list, stream_keys
from .losses import LOGISTIC
from .model import SOFTMAX
from .sharding import device_count, over_runs
from .train import checkpoint_steps, opt_init, segment_bounds, train_segment
from .validate import positive_float, positive_int

TWO_LAYER = "two-layer"
#: what is (not) measured for the coupled two-layer model.
COUPLED_NOTE = ("coupled heads: block bound, κ_mid, κ_Φ and closed-form κ do not apply; "
                "κ_emp by Lanczos on the linearized gradient")


#: default GD steps per saved segment (rounded down to a multiple of ``every``).
SAVE_EVERY = 500


def model_key(name) -> str:
    """Normalized model name (``two_layer`` -> ``two-layer``)."""
    return str(name).strip().lower().replace("_", "-")


@dataclass(frozen=True)
class WeakConvexityConfig:
    """``save_every``: GD steps per saved segment, a multiple of ``every`` (0: save per H
    only; ``None``: :data:`SAVE_EVERY` rounded down to a multiple of ``every``, at least
    ``every`` — resolved by :meth:`validate`, so the config records the number used)."""

    heads: tuple = (1, 4, 16)
    seeds: int = 2
    seed0: int = 0
    steps: int = 200
    every: int = 20
    lr: float = 1.0
    method: str = "auto"
    links: str = "all"
    lanczos_steps: int = 64
    max_cycles: int = 20
    data: DataConfig = field(default_factory=DataConfig)
    save_every: int | None = None

    @property
    def two_layer(self) -> bool:
        return model_key(self.data.model) in (TWO_LAYER, "twolayer")

    def head_model(self):
        """The HeadModel of ``data.model``, or ``None`` for the coupled two-layer model."""
        return None if self.two_layer else self.data.head_model()

    def validate(self):
        object.__setattr__(self, "heads", tuple(heads_list(self.heads)))
        seed_list(self.seeds, self.seed0)
        positive_int("steps", self.steps, minimum=0)
        positive_int("every", self.every)
        positive_float("lr", self.lr)
        if self.save_every is None:
            object.__setattr__(self, "save_every", max(self.every, SAVE_EVERY // self.every * self.every))
        positive_int("save_every", self.save_every, minimum=0)
        if self.save_every % self.every:
            raise InputError(f"--save-every must be 0 or a multiple of --every ({self.every}), "
                             f"got {self.save_every}")
        if self.method not in METHODS:
            raise InputError(f"--method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.links not in LINKS:
            raise InputError(f"--links must be one of {', '.join(LINKS)}, got {self.links!r}")
        positive_int("lanczos_steps", self.lanczos_steps, minimum=2)
        positive_int("max_cycles", self.max_cycles)
        if self.two_layer:
            # DataConfig only knows HeadModels: validate the rest with a stand-in model.
            base = replace(self.data, model=SOFTMAX.name).validate()
            object.__setattr__(self, "data", replace(base, model=TWO_LAYER))
            if self.method not in ("auto", "lanczos"):
                raise InputError(f"--method {self.method} does not apply to --model two-layer "
                                 "(coupled heads: only matrix-free Lanczos); use auto or lanczos")
        else:
            self.data.validate()
        return self

    def to_dict(self):
        return asdict(self)


def _batch_size(cfg: WeakConvexityConfig, H: int, p: int, method: str, budget_bytes: float = 1.5e9):
    """How many θ to analyse at once under ``vmap`` so memory stays ~budget
    (``p`` parameters per head).

    ``None`` (one θ at a time) on CPU: there, batching buys little, and a
    batched Lanczos ``while_loop`` would run every θ for as many restarts as
    the slowest one needs."""
    if jax.default_backend() == "cpu":
        return None
    d = cfg.data
    P = H * p
    per = d.n * P + H * p * p  # structured parts
    if method == "dense":
        per += 3 * P * P
    if method == "lanczos":
        per += 2 * min(cfg.lanczos_steps, P) * P
    if cfg.links == "all":
        per += min(d.n, max(1, int(2e7) // (H * p * p))) * H * p * p
    return max(1, int(budget_bytes // (8 * per)))


@partial(jax.jit, static_argnames=("method", "links", "lanczos_steps", "max_cycles", "batch_size",
                                   "model", "loss"))
def analyse_batch(params, seed_index, keys, X, y, *, method, links, lanczos_steps, max_cycles,
                  batch_size, model=SOFTMAX, loss=LOGISTIC):
    """:func:`mhajax.chain.chain_raw` at a batch of points ``params`` (leaves
    ``[B, ...]``), point b using data set ``seed_index[b]`` of ``X [S, n, T, d]``."""
    def one(args):
        th, s, k = args
        return chain_raw(th, X[s], y[s], k, method=method, links=links, model=model, loss=loss,
                         num_steps=lanczos_steps, max_cycles=max_cycles)
    return jax.lax.map(one, (params, seed_index, keys), batch_size=batch_size)


@partial(jax.jit, static_argnames=("lanczos_steps", "max_cycles", "batch_size", "loss"))
def analyse_batch_two_layer(params, seed_index, keys, X, y, *, lanczos_steps, max_cycles,
                            batch_size=None, loss=LOGISTIC):
    """:func:`mhajax.two_layer.two_layer_chain_raw` at a batch of points (as :func:`analyse_batch`)."""
    from .two_layer import two_layer_chain_raw

    def one(args):
        th, s, k = args
        return two_layer_chain_raw(th, X[s], y[s], k, loss=loss, num_steps=lanczos_steps,
                                   max_cycles=max_cycles)
    return jax.lax.map(one, (params, seed_index, keys), batch_size=batch_size)


def analysis(model, loss, *, method, links, lanczos_steps, max_cycles, batch_size=None):
    """``(jitted fn, static kwargs)`` analysing a flat batch of points with the chain of
    ``model`` (``None``: the coupled two-layer model, κ_emp only)."""
    if model is None:
        return analyse_batch_two_layer, dict(lanczos_steps=lanczos_steps, max_cycles=max_cycles,
                                             batch_size=batch_size, loss=loss)
    return analyse_batch, dict(method=method, links=links, lanczos_steps=lanczos_steps,
                               max_cycles=max_cycles, batch_size=batch_size, model=model, loss=loss)


def init_params(cfg: WeakConvexityConfig, seeds, H: int):
    """Initial parameters of every seed (stream 1), leaves ``[S, H, ...]``."""
    d = cfg.data
    if cfg.two_layer:
        from .two_layer import init_two_layer
        return jax.vmap(lambda k: init_two_layer(k, H, d.tokens, d.dim, u_scale=d.u_scale,
                                                 w_scale=d.w_scale))(stream_keys(seeds, 1))
    return batched_init(d, seeds, H)


def params_per_head(params) -> int:
    """Parameters per head of batched params (leaves ``[S, H, ...]``)."""
    return sum(int(np.prod(l.shape[2:])) for l in jax.tree_util.tree_leaves(params))


def _segment_unit(H: int, stop: int) -> str:
    return f"heads={H}.seg={stop}"


def train_resumable(cfg: WeakConvexityConfig, H: int, th0, X, y, store=None, progress=None):
    """GD of every seed at this H, in the segments of :func:`mhajax.train.segment_bounds`;
    with a ``store`` and more than one segment, each finished segment is saved and a saved
    one is loaded instead of recomputed. Returns ``(params [S, C, ...], finite [S, steps+1],
    losses [S, steps+1], resumed_from_step, timings)``."""
    model, loss = cfg.head_model(), cfg.data.loss_fn()
    bounds = segment_bounds(cfg.steps, cfg.every, cfg.save_every)
    saving = store is not None and len(bounds) > 1
    p_leaves, p_def = jax.tree_util.tree_flatten(th0)
    st = jax.vmap(opt_init)(th0)
    s_def = jax.tree_util.tree_structure(st)
    th = th0
    kept = [jax.tree_util.tree_map(lambda a: np.asarray(a)[:, None], th0)]
    finite, losses = [], []
    resumed_from, compiled, tm = 0, {}, dict(train_compile_s=0.0, train_run_s=0.0)
    for a, b in bounds:
        unit = _segment_unit(H, b)
        if saving and store.has_arrays(unit):
            z = store.load_arrays(unit)
            if (int(z["start"]), int(z["stop"])) != (a, b):
                raise InputError(f"saved segment {unit} covers steps {int(z['start'])}..{int(z['stop'])}, "
                                 f"expected {a}..{b}; rerun with --fresh")
            new = jax.tree_util.tree_unflatten(p_def, [z[f"p{i}"] for i in range(len(p_leaves))])
            st = jax.tree_util.tree_unflatten(s_def, [z[f"s{i}"] for i in range(s_def.num_leaves)])
            fin, fin_last, L, L_last = z["finite"], z["finite_last"], z["losses"], z["loss_last"]
            resumed_from = b
        else:
            length = b - a
            kw = dict(steps=length, every=cfg.every, model=model, loss=loss)
            t = time.perf_counter()
            if device_count() > 1:
                # Several devices: split the seeds over them (the run axis of the vmapped
                # GD); the analysis stays on one device (see _run_heads).
                traj, st = over_runs(lambda th, st, X, y: train_segment.__wrapped__(
                    th, st, X, y, cfg.lr, **kw), (th, st, X, y))
                traj, st = jax.device_put((traj, st), jax.devices()[0])
            else:
                if length not in compiled:
                    compiled[length] = train_segment.lower(th, st, X, y, cfg.lr, **kw).compile()
                    tm["train_compile_s"] += time.perf_counter() - t
                    t = time.perf_counter()
                traj, st = compiled[length](th, st, X, y, cfg.lr)
            traj, st = jax.block_until_ready((traj, st))
            tm["train_run_s"] += time.perf_counter() - t
            new = jax.tree_util.tree_map(lambda a: np.asarray(a)[:, 1:], traj.params)
            fin, fin_last = np.asarray(traj.finite)[:, :-1], np.asarray(traj.finite)[:, -1]
            L, L_last = np.asarray(traj.losses)[:, :-1], np.asarray(traj.losses)[:, -1]
            if saving:
                arrays = {f"p{i}": v for i, v in enumerate(jax.tree_util.tree_leaves(new))}
                arrays.update({f"s{i}": v for i, v in enumerate(jax.tree_util.tree_leaves(st))})
                store.save_arrays(unit, dict(arrays, start=a, stop=b, finite=fin, finite_last=fin_last,
                                             losses=L, loss_last=L_last))
        kept.append(new)
        finite.append(fin)
        losses.append(L)
        th = jax.tree_util.tree_map(lambda a: a[:, -1], new)
        if progress and len(bounds) > 1:
            progress(f"H={H} step {b}/{cfg.steps}")
    params = jax.tree_util.tree_map(lambda *a: np.concatenate(a, axis=1), *kept)
    finite = np.concatenate(finite + [np.asarray(fin_last)[:, None]], axis=1)
    losses = np.concatenate(losses + [np.asarray(L_last)[:, None]], axis=1)
    return params, finite, losses, resumed_from, tm


def _run_heads(cfg: WeakConvexityConfig, H: int, X, y, seeds, ck, store=None, progress=None) -> dict:
    """One unit of the sweep: train every seed at this H, analyse every checkpoint.
    Returns ``dict(records=[...], timings={...}, method=..., P=..., resumed_from_step=...)``
    (JSON-ready)."""
    model, loss = cfg.head_model(), cfg.data.loss_fn()
    th0 = init_params(cfg, seeds, H)
    p = params_per_head(th0)
    P = H * p
    method = "lanczos" if model is None else resolve_method(cfg.method, P)
    S, C = len(seeds), len(ck)
    seed_index = jnp.repeat(jnp.arange(S), C)
    keys = jax.random.split(jax.random.PRNGKey(H), S * C)
    params, finite, _, resumed_from, tm = train_resumable(cfg, H, th0, X, y, store, progress)
    flat = jax.tree_util.tree_map(lambda a: jnp.asarray(a.reshape((S * C,) + a.shape[2:])), params)
    # The analysis stays on one device: on CPU its eigensolvers are host callbacks, and
    # OpenBLAS entered from several device threads at once was seen to hang.
    fn, static = analysis(model, loss, method=cfg.method, links=cfg.links,
                          lanczos_steps=cfg.lanczos_steps, max_cycles=cfg.max_cycles,
                          batch_size=_batch_size(cfg, H, p, method))
    t = time.perf_counter()
    analyse_c = fn.lower(flat, seed_index, keys, X, y, **static).compile()
    tm["analysis_compile_s"] = time.perf_counter() - t
    t = time.perf_counter()
    raw = jax.block_until_ready(analyse_c(flat, seed_index, keys, X, y))
    tm["analysis_run_s"] = time.perf_counter() - t
    raw = jax.tree_util.tree_map(np.asarray, raw)
    records = []
    for b in range(S * C):
        s, c = divmod(b, C)
        rec = dict(seed=seeds[s], step=ck[c])
        if not finite[s, : ck[c] + 1].all():
            # A non-finite iterate: reported as diverged, never averaged or passed.
            rec.update(heads=H, diverged=True, diverged_at_step=int(np.argmin(finite[s])),
                       chain_holds=None, all_hold=None)
        else:
            rec.update(finalize({k: v[b] for k, v in raw.items()}, H, model=model, loss=loss),
                       diverged=False)
        records.append(rec)
    return dict(records=records, timings=tm, method=method, P=P, resumed_from_step=resumed_from)


def problem_note(cfg: WeakConvexityConfig) -> str:
    """What the closed form of the model is, or why the coupled model has none."""
    from .variants import NOTES
    return COUPLED_NOTE if cfg.two_layer else NOTES.get(cfg.data.head_model().name, "")


def run(cfg: WeakConvexityConfig, progress=None, store=None) -> dict:
    """Run the experiment; returns the summary dict (records, per-H table, verdict).

    ``store`` (a :class:`mhajax.resume.ProgressStore`) keeps each finished H on
    disk — and, with ``cfg.save_every``, each finished GD segment — so a killed run
    resumes where it stopped with identical numbers. ``passed`` is None when the
    (model, loss) pair implies no inequality at all (informational run)."""
    cfg.validate()
    t0 = time.perf_counter()
    model, loss = cfg.head_model(), cfg.data.loss_fn()
    seeds = seed_list(cfg.seeds, cfg.seed0)
    X, y = batched_data(cfg.data, seeds)
    ck = checkpoint_steps(cfg.steps, cfg.every)
    records, per_heads, methods, timings, resumed, resumed_steps = [], {}, {}, {}, [], {}
    for H in cfg.heads:
        unit = f"heads={H}"
        if store is not None and store.has(unit):
            res = store.load(unit)
            resumed.append(H)
            store.discard_arrays(_segment_unit(H, 0)[:-1])   # left if killed right after the save
        else:
            res = _run_heads(cfg, H, X, y, seeds, ck, store, progress)
            if store is not None:
                store.save(unit, res)
                store.discard_arrays(_segment_unit(H, 0)[:-1])   # its segments: no longer needed
            if res["resumed_from_step"]:
                resumed_steps[H] = res["resumed_from_step"]
        records += res["records"]
        methods[H], timings[H] = res["method"], res["timings"]
        per_heads[H] = dict(summarize_heads(res["records"]), method=res["method"], P=res["P"])
        if progress:
            progress(f"H={H}")
    req = requirements(model, loss)
    implies_any = any(ok for ok, _ in req.values())
    diverged = [dict(heads=r["heads"], seed=r["seed"], step=r["diverged_at_step"])
                for r in records if r.get("diverged")]
    judged = [r for r in records if r.get("all_hold") is not None]
    violations = [r for r in judged if not r["all_hold"]]
    if not implies_any and not diverged:
        passed = None  # informational: nothing this (model, loss) pair implies
    else:
        passed = bool(judged) and not violations and not diverged
    return dict(passed=passed, records=records, by_heads=per_heads, methods=methods,
                problem=dict(model=cfg.data.model, loss=loss.name, data=cfg.data.dataset,
                             note=problem_note(cfg)),
                not_implied={k: why for k, (ok, why) in req.items() if not ok},
                judged=len(judged),
                violations=[_violation(r) for r in violations],
                diverged=_unique(diverged),
                undefined=sum(not r.get("loss_defined") and not r.get("diverged") for r in records),
                checkpoints=ck, seeds=seeds, resumed_heads=resumed, resumed_from_step=resumed_steps,
                timings=timings, wall_time_s=time.perf_counter() - t0)


def _unique(items):
    seen, out = set(), []
    for it in items:
        key = (it["heads"], it["seed"])
        if key not in seen:
            seen.add(key)
            out.append(it)
    return out


def _violation(r):
    return dict(heads=r["heads"], seed=r["seed"], step=r["step"], failed=r["failed"],
                **{k: r[k] for k in ("loss", "lambda_min", "lambda_min_block", "kappa_emp",
                                      "kappa_block", "kappa_mid", "kappa_phi", "kappa_bound")})


CHAIN = ("kappa_emp", "kappa_block", "kappa_mid", "kappa_phi", "kappa_bound")


def summarize_heads(recs) -> dict:
    """Per-H summary: the largest value of each κ, and the slack of each link
    (the smallest ratio ``next/prev`` over checkpoints; >= 1 means it held).
    ``not_implied``: per inequality the (model, loss) pair does not imply, how often
    it held and was violated (informational), and why it is not implied."""
    out = {"checkpoints": len(recs), "undefined": sum(not r.get("loss_defined") for r in recs)}
    ok = [r for r in recs if r.get("loss_defined") and not r.get("diverged")]
    for k in CHAIN:
        vals = [r[k] for r in ok if r.get(k) is not None]
        out[f"max_{k}"] = max(vals) if vals else None
    present = [k for k in CHAIN if out[f"max_{k}"] is not None]
    slack = {}
    for a, b in zip(present, present[1:]):
        ratios = [r[b] / r[a] for r in ok
                  if r.get(a) is not None and r.get(b) is not None and r[a] > 0]
        slack[f"{b}/{a}"] = min(ratios) if ratios else None
    out["min_slack"] = {k: v for k, v in slack.items() if v is not None}
    out["bound_over_emp"] = (max(r["kappa_bound"] / r["kappa_emp"] for r in ok
                                 if r.get("kappa_emp") and r["kappa_emp"] > 0 and r.get("kappa_bound"))
                             if any(r.get("kappa_emp") and r["kappa_emp"] > 0 and r.get("kappa_bound")
                                    for r in ok) else None)
    judged = [r["all_hold"] for r in ok if r.get("all_hold") is not None]
    out["all_hold"] = all(judged) if judged else None
    out["max_residual"] = max((max(r["lambda_min_residual"] or 0.0, r["lambda_max_residual"] or 0.0)
                               for r in ok), default=None)
    out["all_converged"] = all(r["eig_converged"] for r in ok) if ok else None
    ni = {}
    for r in ok:
        for k, v in (r.get("not_implied") or {}).items():
            e = ni.setdefault(k, dict(held=0, violated=0, undefined=0, reason=r["reasons"][k]))
            e["held" if v is True else "violated" if v is False else "undefined"] += 1
    out["not_implied"] = ni
    return out
