"""The variants experiment: does the 1/√H weak-convexity behaviour survive beyond the paper?

For each model (the per-head models of :mod:`mhajax.variants`, and the coupled
:mod:`mhajax.two_layer`) and each H, ``seeds`` GD trajectories are trained together
(:func:`mhajax.train.train`, one compile per shape) and every checkpoint gets the κ chain
(:func:`mhajax.chain.chain_raw`, ``lax.map`` over seeds × checkpoints, one compile per
shape), judged with :func:`mhajax.applicability.judge`: only the inequalities that the
(model, loss) pair implies count towards ``passed``.

The 1/√H question. ``κ_emp = −√H λ_min(∇²L̂)/L̂``. If ``λ_min >= −(c/√H) L̂`` with c
independent of H, κ_emp stays flat in H (log-log slope 0); if the multi-head gain were
absent (``λ_min ~ −c L̂``), κ_emp would grow like √H (slope 1/2). Per model we fit the slope
of ``log max_trajectory κ_emp`` against ``log H`` and call the behaviour *surviving* when
the slope is below :data:`SURVIVES_BELOW` = 1/4 (halfway between the two hypotheses).
"""
from __future__ import annotations

import functools
import math
import time
from dataclasses import asdict, dataclass

import jax
import jax.numpy as jnp
import numpy as np

from .applicability import judge
from .chain import LINKS, finalize
from .curvature import METHODS, resolve_method
from .datasets import TRACEABLE, get_dataset
from .errors import InputError
from .io import to_jsonable
from .experiment import heads_list, seed_list, stream_keys
from .losses import get_loss
from .resume import load_or_run
from .train import checkpoint_steps, train_runs
from .two_layer import init_two_layer, train_two_layer
from .validate import positive_float, positive_int
from .variants import MODELS, get_model
from .weak_convexity import COUPLED_NOTE, TWO_LAYER, analysis

ALL_MODELS = MODELS + (TWO_LAYER,)
SURVIVES_BELOW = 0.25
KAPPAS = ("kappa_emp", "kappa_block", "kappa_mid", "kappa_phi", "kappa_bound")


@dataclass(frozen=True)
class VariantsConfig:
    models: tuple = ALL_MODELS
    heads: tuple = (1, 2, 4, 8, 16, 32, 64)
    seeds: int = 1
    seed0: int = 0
    n: int = 32
    tokens: int = 4
    dim: int = 6
    steps: int = 100
    every: int = 50
    lr: float = 1.0
    loss: str = "logistic"
    data: str = "mixture"
    data_path: str | None = None
    zeta: float = 0.25
    clusters: int = 4
    signal: float = 1.0
    sigma: float = 0.1
    k_signal: int = 1
    u_scale: float = 1.0
    w_scale: float = 1.0
    method: str = "auto"
    links: str = "all"
    lanczos_steps: int = 64
    max_cycles: int = 20

    def validate(self):
        models = self.models
        if isinstance(models, str):
            models = tuple(m.strip() for m in models.split(",") if m.strip())
        models = tuple(str(m).strip().lower().replace("_", "-") for m in models)
        if not models:
            raise InputError("--models must name at least one model")
        bad = [m for m in models if m not in ALL_MODELS]
        if bad:
            raise InputError(f"unknown model(s) {', '.join(map(repr, bad))}; choose from {', '.join(ALL_MODELS)}")
        if len(set(models)) != len(models):
            raise InputError(f"--models lists a model twice: {','.join(models)}")
        object.__setattr__(self, "models", models)
        object.__setattr__(self, "heads", tuple(heads_list(self.heads)))
        seed_list(self.seeds, self.seed0)
        positive_int("n", self.n, minimum=2)
        positive_int("tokens", self.tokens)
        positive_int("dim", self.dim)
        positive_int("steps", self.steps, minimum=0)
        positive_int("every", self.every)
        positive_float("lr", self.lr)
        get_loss(self.loss)
        get_dataset(self.data)
        if self.data == "npz" and not self.data_path:
            raise InputError("--data npz needs --data-path FILE.npz")
        if self.data != "npz" and self.data_path:
            raise InputError(f"--data-path is only used with --data npz (got --data {self.data})")
        positive_float("u_scale", self.u_scale, allow_zero=True)
        positive_float("w_scale", self.w_scale, allow_zero=True)
        if self.method not in METHODS:
            raise InputError(f"--method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.links not in LINKS:
            raise InputError(f"--links must be one of {', '.join(LINKS)}, got {self.links!r}")
        positive_int("lanczos_steps", self.lanczos_steps, minimum=2)
        positive_int("max_cycles", self.max_cycles)
        positive_int("k_signal", self.k_signal)  # checked for every data model, used by sparse
        self.data_knobs()  # validates the knobs of the chosen data model
        return self

    def data_knobs(self) -> dict:
        if self.data == "mixture":
            from .data import check_mixture_args
            check_mixture_args(self.n, self.tokens, self.dim, self.zeta, self.clusters,
                               self.signal, self.sigma)
            return dict(zeta=self.zeta, num_clusters=self.clusters, signal=self.signal,
                        sigma=self.sigma)
        if self.data == "sparse":
            from .datasets import check_sparse_args
            check_sparse_args(self.n, self.tokens, self.dim, self.k_signal, self.signal, self.sigma)
            return dict(k=self.k_signal, signal=self.signal, sigma=self.sigma)
        from .datasets import load_npz
        X, _ = load_npz(self.data_path, tokens=self.tokens, dim=self.dim)  # fail early, clearly
        if X.shape[0] < self.n:
            raise InputError(f"n = {self.n} samples requested but {self.data_path!r} holds only {X.shape[0]}")
        return dict(path=self.data_path)

    def to_dict(self):
        return asdict(self)


def draw_data(cfg: VariantsConfig, seeds):
    """``(X [S, n, T, d], y [S, n])``: one training set per seed (stream 0 of each seed)."""
    draw = get_dataset(cfg.data)
    keys = stream_keys(seeds, 0)
    knobs = cfg.data_knobs()
    if cfg.data in TRACEABLE:
        return jax.jit(jax.vmap(lambda k: draw(k, cfg.n, cfg.tokens, cfg.dim, **knobs)))(keys)
    pairs = [draw(k, cfg.n, cfg.tokens, cfg.dim, **knobs) for k in keys]
    return jnp.stack([p[0] for p in pairs]), jnp.stack([p[1] for p in pairs])


@functools.lru_cache(maxsize=None)
def _analysis(model, loss, method, links, lanczos_steps, max_cycles):
    """jit: chain_raw over a flat batch of points, point b on data set ``seed_index[b]``
    (:func:`mhajax.weak_convexity.analysis`; ``model=None``: the coupled two-layer model)."""
    fn, static = analysis(model, loss, method=method, links=links, lanczos_steps=lanczos_steps,
                          max_cycles=max_cycles, batch_size=None)
    return functools.partial(fn, **static)


def _params_per_head(params) -> int:
    return sum(int(np.prod(l.shape[2:])) for l in jax.tree_util.tree_leaves(params))


def run_unit(cfg: VariantsConfig, name: str, H: int, X, y, seeds, ck) -> dict:
    """Train every seed of one (model, H) and analyse every checkpoint."""
    loss = get_loss(cfg.loss)
    keys = stream_keys(seeds, 1)
    tm = {}
    t = time.perf_counter()
    if name == TWO_LAYER:
        model = None
        th0 = jax.vmap(lambda k: init_two_layer(k, H, cfg.tokens, cfg.dim, u_scale=cfg.u_scale,
                                                w_scale=cfg.w_scale))(keys)
        traj = train_two_layer(th0, X, y, cfg.lr, steps=cfg.steps, every=cfg.every, loss=loss)
    else:
        model = get_model(name)
        th0 = jax.vmap(lambda k: model.init(k, H, cfg.tokens, cfg.dim, u_scale=cfg.u_scale,
                                            w_scale=cfg.w_scale))(keys)
        traj = train_runs(th0, X, y, cfg.lr, steps=cfg.steps, every=cfg.every, model=model, loss=loss)
    traj = jax.block_until_ready(traj)
    tm["train_s"] = time.perf_counter() - t
    S, C = len(seeds), len(ck)
    P = H * _params_per_head(th0)
    method = "lanczos" if model is None else resolve_method(cfg.method, P)
    flat = jax.tree_util.tree_map(lambda a: a.reshape((S * C,) + a.shape[2:]), traj.params)
    seed_index = jnp.repeat(jnp.arange(S), C)
    ekeys = jax.random.split(jax.random.fold_in(jax.random.PRNGKey(H), ALL_MODELS.index(name)), S * C)
    t = time.perf_counter()
    fn = _analysis(model, loss, cfg.method, cfg.links, cfg.lanczos_steps, cfg.max_cycles)
    raw = jax.block_until_ready(fn(flat, seed_index, ekeys, X, y))
    tm["analysis_s"] = time.perf_counter() - t
    raw = jax.tree_util.tree_map(np.asarray, raw)
    finite = np.asarray(traj.finite)
    records = []
    for b in range(S * C):
        s, c = divmod(b, C)
        rec = dict(model=name, heads=H, seed=seeds[s], step=ck[c])
        if not finite[s, : ck[c] + 1].all():
            rec.update(diverged=True, diverged_at_step=int(np.argmin(finite[s])), passed=None)
        else:
            fin = finalize({k: v[b] for k, v in raw.items()}, H, model=model, loss=loss)
            j = judge(fin, model, loss)
            rec.update({k: fin[k] for k in ("loss", "lambda_min", "lambda_max", "lambda_min_residual",
                                            "eig_converged", "lambda_min_block") + KAPPAS})
            rec.update(implied=j["implied"], not_implied=j["not_implied"], failed=j["failed"],
                       passed=j["passed"], diverged=False)
        records.append(rec)
    return dict(records=records, P=P, method=method, timings=tm)


def _loss_defined(L) -> bool:
    """Whether ratios over ``L̂ = L`` are defined (``L >= tiny/eps``, as in chain.finalize)."""
    fi = np.finfo(np.dtype(jnp.result_type(float)))  # float64, or float32 under --dtype float32
    return L is not None and math.isfinite(L) and L >= fi.tiny / fi.eps


def _fit_slope(hs, vals):
    """Least-squares slope of log v against log H over the positive values, or None."""
    pts = [(math.log(h), math.log(v)) for h, v in zip(hs, vals) if v is not None and v > 0]
    if len(pts) < 2 or len({p[0] for p in pts}) < 2:
        return None
    x = np.array([p[0] for p in pts])
    z = np.array([p[1] for p in pts])
    return float(np.polyfit(x, z, 1)[0])


def summarize_model(name, records, heads, seeds, notes) -> dict:
    """Per-H maxima over the trajectory, the κ_emp-vs-H slope, and the verdicts."""
    by_heads = {}
    for H in heads:
        rs = [r for r in records if r["heads"] == H and not r.get("diverged")]
        row = dict(checkpoints=len(rs),
                   diverged=sorted({r["seed"] for r in records if r["heads"] == H and r.get("diverged")}))
        for k in KAPPAS:
            vals = [r[k] for r in rs if r.get(k) is not None]
            row[f"max_{k}"] = max(vals) if vals else None
        finals = [r["loss"] for r in rs if r["step"] == max(x["step"] for x in rs)] if rs else []
        row["final_loss"] = max(finals) if finals else None
        verdicts = [r["passed"] for r in rs if r["passed"] is not None]
        row["passed"] = (all(verdicts) if verdicts else None)
        row["failed"] = sorted({f for r in rs for f in r.get("failed", [])})
        ni = {}
        for r in rs:
            for k, v in r.get("not_implied", {}).items():
                if v is not None:
                    ni[k] = ni.get(k, True) and v
        row["not_implied_held"] = ni
        by_heads[H] = row
    hs = list(heads)
    slope = {k: _fit_slope(hs, [by_heads[H][f"max_{k}"] for H in hs]) for k in ("kappa_emp", "kappa_block")}
    per_seed = []
    for s in seeds:
        vals = []
        for H in hs:
            v = [r["kappa_emp"] for r in records if r["heads"] == H and r["seed"] == s
                 and not r.get("diverged") and r.get("kappa_emp") is not None]
            vals.append(max(v) if v else None)
        per_seed.append(_fit_slope(hs, vals))
    nonpos = [H for H in hs if by_heads[H]["max_kappa_emp"] is not None and by_heads[H]["max_kappa_emp"] <= 0]
    s = slope["kappa_emp"]
    missing = [H for H in hs if by_heads[H]["max_kappa_emp"] is None]
    if s is None:
        survives = None
        why = []
        if nonpos:
            why.append(f"κ_emp <= 0 (no negative curvature) at H = {nonpos}")
        if missing:
            why.append(f"κ_emp not computed or undefined (--method block, L̂ underflowed or "
                       f"diverged) at H = {missing}")
        statement = "undefined: fewer than two H with κ_emp > 0" + (f" ({'; '.join(why)})" if why else "")
    elif s < SURVIVES_BELOW:
        survives = True
        statement = (f"survives (slope < {SURVIVES_BELOW}): κ_emp ∝ H^{s:+.2f}, i.e. "
                     f"λ_min/L̂ ∝ H^{s - 0.5:+.2f} (paper: H^-0.50)")
    else:
        survives = False
        statement = (f"does NOT survive (slope >= {SURVIVES_BELOW}): κ_emp ∝ H^{s:+.2f}, i.e. "
                     f"λ_min/L̂ ∝ H^{s - 0.5:+.2f} (paper: H^-0.50)")
    if nonpos and s is not None:
        statement += f" (fit over H with κ_emp > 0; κ_emp <= 0 at H = {nonpos})"
    verdicts = [row["passed"] for row in by_heads.values() if row["passed"] is not None]
    return dict(by_heads=by_heads, slope_kappa_emp=s, slope_kappa_block=slope["kappa_block"],
                slope_kappa_emp_per_seed=per_seed, survives=survives, statement=statement,
                passed=(all(verdicts) if verdicts else None), note=notes)


def run(cfg: VariantsConfig, progress=None, store=None) -> dict:
    """Run the sweep; returns the JSON-ready summary (records, per-model tables, slopes, verdict).

    ``store`` (a :class:`mhajax.resume.ProgressStore`) keeps each finished (model, H)
    unit, so a killed sweep resumes with identical numbers (``resumed`` lists the units
    loaded from disk); ``progress(name, H, res)`` is called after each unit."""
    from .variants import NOTES
    cfg.validate()
    t0 = time.perf_counter()
    seeds = seed_list(cfg.seeds, cfg.seed0)
    X, y = draw_data(cfg, seeds)
    ck = checkpoint_steps(cfg.steps, cfg.every)
    records, by_model, units, resumed = [], {}, {}, []
    for name in cfg.models:
        recs = []
        for H in cfg.heads:
            unit = f"model={name}.heads={H}"
            res = load_or_run(store, unit, lambda: to_jsonable(run_unit(cfg, name, H, X, y, seeds, ck)),
                              resumed, f"{name}/H={H}")
            recs += res["records"]
            units[f"{name}/H={H}"] = dict(P=res["P"], method=res["method"], **res["timings"])
            if progress:
                progress(name, H, res)
        note = NOTES.get(name, COUPLED_NOTE)
        by_model[name] = summarize_model(name, recs, cfg.heads, seeds, note)
        for H in cfg.heads:
            by_model[name]["by_heads"][H].update(units[f"{name}/H={H}"])
        records += recs
    diverged = sorted({(r["model"], r["heads"], r["seed"]) for r in records if r.get("diverged")})
    failures = [dict(model=r["model"], heads=r["heads"], seed=r["seed"], step=r["step"],
                     failed=r["failed"]) for r in records if r.get("passed") is False]
    judged = sum(r.get("passed") is not None for r in records)
    passed = not failures and not diverged
    return dict(passed=passed, judged=judged, records=records, by_model=by_model, failures=failures,
                diverged=[dict(model=m, heads=h, seed=s) for m, h, s in diverged],
                undefined=sum(not r.get("diverged") and not _loss_defined(r.get("loss")) for r in records),
                checkpoints=ck, seeds=seeds, survives_below=SURVIVES_BELOW, resumed=resumed,
                wall_time_s=time.perf_counter() - t0)


__all__ = ["VariantsConfig", "run", "run_unit", "summarize_model", "draw_data", "ALL_MODELS",
           "TWO_LAYER", "SURVIVES_BELOW"]
