"""The weak-convexity experiment: GD trajectories, and the κ chain at every checkpoint.

For each H, ``seeds`` trajectories are trained together (one ``vmap``-ed,
``jit``-ed GD per shape); every checkpoint θ of every trajectory then gets the
full curvature analysis of :mod:`mhajax.chain` — batched with ``lax.map`` over
the ``seeds × checkpoints`` points, one compile per H.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .chain import LINKS, chain_raw, finalize
from .curvature import METHODS, resolve_method
from .errors import InputError
from .experiment import DataConfig, batched_data, batched_init, heads_list, seed_list
from .losses import LOGISTIC
from .model import SOFTMAX
from .sharding import device_count, over_runs
from .train import checkpoint_steps, train
from .validate import positive_float, positive_int


@dataclass(frozen=True)
class WeakConvexityConfig:
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

    def validate(self):
        object.__setattr__(self, "heads", tuple(heads_list(self.heads)))
        seed_list(self.seeds, self.seed0)
        positive_int("steps", self.steps, minimum=0)
        positive_int("every", self.every)
        positive_float("lr", self.lr)
        if self.method not in METHODS:
            raise InputError(f"--method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.links not in LINKS:
            raise InputError(f"--links must be one of {', '.join(LINKS)}, got {self.links!r}")
        positive_int("lanczos_steps", self.lanczos_steps, minimum=2)
        positive_int("max_cycles", self.max_cycles)
        self.data.validate()
        return self

    def to_dict(self):
        return asdict(self)


def _batch_size(cfg: WeakConvexityConfig, H: int, method: str, budget_bytes: float = 1.5e9):
    """How many θ to analyse at once under ``vmap`` so memory stays ~budget.

    ``None`` (one θ at a time) on CPU: there, batching buys little, and a
    batched Lanczos ``while_loop`` would run every θ for as many restarts as
    the slowest one needs."""
    if jax.default_backend() == "cpu":
        return None
    d = cfg.data
    p = d.tokens * d.dim + d.dim ** 2
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


def _run_heads(cfg: WeakConvexityConfig, H: int, X, y, seeds, ck) -> dict:
    """One unit of the sweep: train every seed at this H, analyse every checkpoint.
    Returns ``dict(records=[...], timings={...}, method=...)`` (JSON-ready)."""
    d = cfg.data
    tm = {}
    th0 = batched_init(d, seeds, H)
    P = H * (d.tokens * d.dim + d.dim ** 2)
    method = resolve_method(cfg.method, P)
    S, C = len(seeds), len(ck)
    seed_index = jnp.repeat(jnp.arange(S), C)
    keys = jax.random.split(jax.random.PRNGKey(H), S * C)
    static = dict(method=cfg.method, links=cfg.links, lanczos_steps=cfg.lanczos_steps,
                  max_cycles=cfg.max_cycles, batch_size=_batch_size(cfg, H, method))
    t = time.perf_counter()
    if device_count() > 1:
        # Several devices: split the seeds over them for training (the run
        # axis of the vmapped GD). The analysis stays on one device: on CPU its
        # eigensolvers are host callbacks, and OpenBLAS entered from several
        # device threads at once was seen to hang.
        traj = over_runs(lambda th, X, y: train.__wrapped__(th, X, y, cfg.lr, steps=cfg.steps,
                                                             every=cfg.every), (th0, X, y))
        traj = jax.device_put(traj, jax.devices()[0])
    else:
        train_c = train.lower(th0, X, y, cfg.lr, steps=cfg.steps, every=cfg.every).compile()
        tm["train_compile_s"] = time.perf_counter() - t
        t = time.perf_counter()
        traj = train_c(th0, X, y, cfg.lr)
    traj = jax.block_until_ready(traj)
    tm["train_run_s"] = time.perf_counter() - t
    flat = jax.tree_util.tree_map(lambda a: a.reshape((S * C,) + a.shape[2:]), traj.params)
    t = time.perf_counter()
    analyse_c = analyse_batch.lower(flat, seed_index, keys, X, y, **static).compile()
    tm["analysis_compile_s"] = time.perf_counter() - t
    t = time.perf_counter()
    raw = jax.block_until_ready(analyse_c(flat, seed_index, keys, X, y))
    tm["analysis_run_s"] = time.perf_counter() - t
    raw = jax.tree_util.tree_map(np.asarray, raw)
    finite = np.asarray(traj.finite)
    records = []
    for b in range(S * C):
        s, c = divmod(b, C)
        rec = dict(seed=seeds[s], step=ck[c])
        if not finite[s, : ck[c] + 1].all():
            # A non-finite iterate: reported as diverged, never averaged or passed.
            rec.update(heads=H, diverged=True, diverged_at_step=int(np.argmin(finite[s])),
                       chain_holds=None, all_hold=None)
        else:
            rec.update(finalize({k: v[b] for k, v in raw.items()}, H), diverged=False)
        records.append(rec)
    return dict(records=records, timings=tm, method=method, P=P)


def run(cfg: WeakConvexityConfig, progress=None, store=None) -> dict:
    """Run the experiment; returns the summary dict (records, per-H table, verdict).

    ``store`` (a :class:`mhajax.resume.ProgressStore`) keeps each finished H on
    disk, so a killed run resumes where it stopped with identical numbers."""
    cfg.validate()
    t0 = time.perf_counter()
    seeds = seed_list(cfg.seeds, cfg.seed0)
    X, y = batched_data(cfg.data, seeds)
    ck = checkpoint_steps(cfg.steps, cfg.every)
    records, per_heads, methods, timings, resumed = [], {}, {}, {}, []
    for H in cfg.heads:
        unit = f"heads={H}"
        if store is not None and store.has(unit):
            res = store.load(unit)
            resumed.append(H)
        else:
            res = _run_heads(cfg, H, X, y, seeds, ck)
            if store is not None:
                store.save(unit, res)
        records += res["records"]
        methods[H], timings[H] = res["method"], res["timings"]
        per_heads[H] = dict(summarize_heads(res["records"]), method=res["method"], P=res["P"])
        if progress:
            progress(H)
    diverged = [dict(heads=r["heads"], seed=r["seed"], step=r["diverged_at_step"])
                for r in records if r.get("diverged")]
    defined = [r for r in records if r.get("all_hold") is not None]
    violations = [r for r in defined if not r["all_hold"]]
    passed = bool(defined) and not violations and not diverged
    return dict(passed=passed, records=records, by_heads=per_heads, methods=methods,
                violations=[_violation(r) for r in violations],
                diverged=_unique(diverged),
                undefined=sum(r.get("all_hold") is None and not r.get("diverged") for r in records),
                checkpoints=ck, seeds=seeds, resumed_heads=resumed, timings=timings,
                wall_time_s=time.perf_counter() - t0)


def _unique(items):
    seen, out = set(), []
    for it in items:
        key = (it["heads"], it["seed"])
        if key not in seen:
            seen.add(key)
            out.append(it)
    return out


def _violation(r):
    failed = [k for k, v in {**r["links"], **r["checks"]}.items() if v is False]
    return dict(heads=r["heads"], seed=r["seed"], step=r["step"], failed=failed,
                **{k: r[k] for k in ("loss", "lambda_min", "lambda_min_block", "kappa_emp",
                                      "kappa_block", "kappa_mid", "kappa_phi", "kappa_bound")})


CHAIN = ("kappa_emp", "kappa_block", "kappa_mid", "kappa_phi", "kappa_bound")


def summarize_heads(recs) -> dict:
    """Per-H summary: the largest value of each κ, and the slack of each link
    (the smallest ratio ``next/prev`` over checkpoints; >= 1 means it held)."""
    out = {"checkpoints": len(recs), "undefined": sum(r.get("all_hold") is None for r in recs)}
    ok = [r for r in recs if r.get("all_hold") is not None]
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
                             if any(r.get("kappa_emp") and r["kappa_emp"] > 0 for r in ok) else None)
    out["all_hold"] = all(r["all_hold"] for r in ok) if ok else None
    out["max_residual"] = max((max(r["lambda_min_residual"] or 0.0, r["lambda_max_residual"] or 0.0)
                               for r in ok), default=None)
    out["all_converged"] = all(r["eig_converged"] for r in ok) if ok else None
    return out

