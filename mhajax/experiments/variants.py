"""The variants experiment: does the 1/√H weak-convexity behaviour survive beyond the paper?

For each model (the per-head models of :mod:`mhajax.models.variants` and the paper's, and
the coupled :mod:`mhajax.models.two_layer`) and each H, ``seeds`` GD trajectories are
trained together (:func:`mhajax.train.train`, one compile per shape) and every
checkpoint gets the κ chain (:func:`mhajax.experiments.base.analyse_batch`), judged with
:func:`mhajax.analysis.applicability.judge`: only the inequalities that the (model, loss)
pair implies count towards the verdict.

The 1/√H question. ``κ_emp = −√H λ_min(∇²L̂)/L̂``. If ``λ_min >= −(c/√H) L̂`` with c
independent of H, κ_emp stays flat in H (log-log slope 0); if the multi-head gain were
absent (``λ_min ~ −c L̂``), κ_emp would grow like √H (slope 1/2). Per model we fit the slope
of ``log max_trajectory κ_emp`` against ``log H`` and call the behaviour *surviving* when
the slope is below :data:`SURVIVES_BELOW` = 1/4 (halfway between the two hypotheses).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import ClassVar, Mapping, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from mhajax.analysis.applicability import judge as judge_point, requirements
from mhajax.analysis.chain import finalize
from mhajax.analysis.kappa import CHAIN, SYMBOL
from mhajax.analysis.step_premise import StepPremise, premise_from_records, premise_line
from mhajax.curvature.spectrum import resolve_method
from mhajax.data.seeds import point_keys, seed_list, stream_keys
from mhajax.errors import InputError
from mhajax.experiments.base import (Problem, analyse_batch, batched_data, chain_memory, judged_enough, not_judged,
                                     params_per_head, point_index, sweep)
from mhajax.experiments.configs import Config, DataConfig, EigenConfig, GDConfig, option, sub
from mhajax.experiments.registry import check
from mhajax.models import ALL_MODELS
from mhajax.models.base import get_model, is_coupled, model_name
from mhajax.runtime.imports import is_reference
from mhajax.runtime import memory as mem
from mhajax.runtime.format import fmt, md_table, table
from mhajax.runtime.records import fields
from mhajax.train import checkpoint_steps, runs
from mhajax.validate import heads_list, parse_list
from mhajax.verdict import Judgement, Verdict

SURVIVES_BELOW = 0.25
#: the paper-scale preset (``--preset paper``; variants go beyond the paper): H up to 64
PAPER: dict = {"heads": (1, 2, 4, 8, 16, 32, 64)}


class Checkpoint(NamedTuple):
    """What the judge reads of one checkpoint record: the (model, H, seed) run it belongs to,
    ``passed`` (every implied inequality held; ``None``: not judged), ``diverged``, and L̂."""

    model: str
    heads: int
    seed: int
    passed: bool | None
    diverged: bool = False
    loss: float | None = None


class Survival(NamedTuple):
    """Whether the 1/√H behaviour survives (``None``: the slope is undefined), in one line."""

    survives: bool | None
    statement: str


_NUM, _VERDICTS = float | None, dict[str, bool | None]
#: one checkpoint of a (model, H, seed) run: the κ chain (:func:`mhajax.analysis.chain.finalize`)
#: and the verdicts split by what the (model, loss) pair implies (:func:`mhajax.analysis.applicability.judge`)
Record = NamedTuple("Record", fields(
    ("model", str), ("heads seed step", int), ("loss lambda_min lambda_max lambda_min_residual", _NUM),
    ("eig_converged", bool),
    ("lambda_min_block lambda_max_upper beta2 kappa_emp kappa_block kappa_mid kappa_phi kappa_bound", _NUM),
    ("implied not_implied", _VERDICTS), ("failed", list[str]), ("passed", bool | None), ("diverged", bool)))


class Diverged(NamedTuple):
    """A checkpoint at or past a non-finite iterate: reported, never judged or averaged."""

    model: str
    heads: int
    seed: int
    step: int
    diverged: bool
    diverged_at_step: int
    passed: bool | None = None
    # not fields: what a Record holds and a diverged checkpoint has not
    loss = lambda_max_upper = beta2 = kappa_bound = None


Timings = NamedTuple("Timings", fields(("train_s analysis_s", float)))
#: one (model, H) of the sweep: its checkpoints (seed-major), P, the eigen-method, timings
Unit = NamedTuple("Unit", fields(("records", list[Record | Diverged]), ("P", int), ("method", str),
                                  ("timings", Timings)))
#: one (model, H): the largest κ of each kind and the final L̂ over its runs, whether every implied
#: inequality held, which failed, and per not-implied inequality whether it held everywhere
HeadsRow = NamedTuple("HeadsRow", fields(
    ("checkpoints", int), ("diverged", list[int]),
    ("max_kappa_emp max_kappa_block max_kappa_mid max_kappa_phi max_kappa_bound final_loss", _NUM),
    ("passed", bool | None), ("failed", list[str]), ("not_implied_held", dict[str, bool]), ("P", int),
    ("method", str), ("train_s analysis_s", float), ("premise", StepPremise)))
#: one model: its rows per H, the slopes of log max κ against log H, and the 1/√H rule on κ_emp's
ModelRow = NamedTuple("ModelRow", fields(
    ("by_heads", dict[int, HeadsRow]), ("slope_kappa_emp slope_kappa_block", _NUM),
    ("slope_kappa_emp_per_seed", list[float | None]), ("survives", bool | None), ("statement", str),
    ("passed", bool | None), ("note", str)))
Failure = NamedTuple("Failure", fields(("model", str), ("heads seed step", int), ("failed", list[str])))
Run = NamedTuple("Run", fields(("model", str), ("heads seed", int)))
#: what run returns; summary.json field for field
Summary = NamedTuple("Summary", fields(
    ("verdict verdict_reason", str), ("passed", bool | None), ("judged", int), ("loss", str),
    ("records", list[Record | Diverged]), ("by_model", dict[str, ModelRow]), ("failures", list[Failure]),
    ("diverged", list[Run]), ("undefined", int), ("checkpoints seeds", list[int]), ("survives_below", float),
    ("resumed", list[str]), ("wall_time_s", float)))


@dataclass(frozen=True)
class VariantsConfig(Config):
    """Per model and H, GD trajectories and the κ chain at every checkpoint; per model the
    slope of log max κ_emp against log H."""

    models: tuple = option(ALL_MODELS, "comma-separated models: built-in names or your own as "
                                       "package.module:NAME", kind="list", choices=ALL_MODELS)
    heads: tuple = option((1, 4, 16), "comma-separated numbers of heads H", kind="list")
    seeds: int = option(1, "trajectories per (model, H)")
    seed0: int = option(0, "first seed")
    gd: GDConfig = sub(lambda: GDConfig(steps=100, every=50))
    eig: EigenConfig = sub(EigenConfig)
    data: DataConfig = sub(lambda: DataConfig(n=32, tokens=4, dim=6, w_scale=1.0))
    EXCLUDE: ClassVar[tuple] = ("data.model",)

    def validate(self):
        """The validated config, a new one (lists parsed, names normalized); an
        :class:`InputError` names the first bad option."""
        cfg = self
        models = cfg.models
        if isinstance(models, str):
            models = [m.strip() for m in models.split(",")]
        models = [model_name(m) for m in models]
        builtin = [m for m in models if not is_reference(m)]
        if builtin or not models:
            parse_list("--models", ",".join(builtin), "name", choices=ALL_MODELS)
        for m in models:
            if is_reference(m):
                get_model(m)       # imports it: a reference that does not load is refused here
        models = tuple(models)
        if len(set(models)) != len(models):
            raise InputError(f"--models lists a model twice: {','.join(models)}")
        cfg = replace(cfg, models=models)
        cfg = replace(cfg, heads=tuple(heads_list(cfg.heads)))
        seed_list(cfg.seeds, cfg.seed0)
        cfg.gd.validate()
        cfg.eig.validate()
        cfg = replace(cfg, data=cfg.data.validate())
        return cfg



def run_unit(cfg: VariantsConfig, name: str, H: int, pb: Problem, seeds, ck) -> Unit:
    """Train every seed of model ``name`` (``pb.model``) at H and analyse every checkpoint."""
    model, loss, X, y = pb
    keys = stream_keys(seeds, 1)
    d = cfg.data
    t = time.perf_counter()
    th0 = jax.vmap(lambda k: model.init(k, H, d.tokens, d.dim, u_scale=d.u_scale,
                                        w_scale=d.w_scale))(keys)
    traj = runs(th0, X, y, cfg.gd.lr, steps=cfg.gd.steps, every=cfg.gd.every, model=model, loss=loss)
    traj = jax.block_until_ready(traj)
    train_s = time.perf_counter() - t
    S, C = len(seeds), len(ck)
    P = H * params_per_head(th0)
    method = "lanczos" if is_coupled(model) else resolve_method(cfg.eig.method)
    # host-side glue (an eager reshape, repeat or split on the device compiles a small program each)
    flat = jax.tree_util.tree_map(lambda a: np.asarray(a).reshape((S * C,) + a.shape[2:]), traj.params)
    seed_index = point_index(S, C)
    ekeys = point_keys(H, S * C, fold=ALL_MODELS.index(name) if name in ALL_MODELS
                       else len(ALL_MODELS) + cfg.models.index(name))
    t = time.perf_counter()
    e = cfg.eig
    raw = jax.block_until_ready(analyse_batch(
        flat, seed_index, ekeys, X, y, method=e.method, links=e.links, lanczos_steps=e.lanczos_steps,
        max_cycles=e.max_cycles, model=model, loss=loss))
    tm = Timings(train_s, time.perf_counter() - t)
    raw = jax.tree_util.tree_map(np.asarray, raw)
    finite = np.asarray(traj.finite)
    records = []
    for b in range(S * C):
        s, c = divmod(b, C)
        if not finite[s, : ck[c] + 1].all():
            records.append(Diverged(name, H, seeds[s], ck[c], True, int(np.argmin(finite[s]))))
        else:
            fin = finalize(jax.tree_util.tree_map(lambda v: v[b], raw), H, model=model, loss=loss)
            kw = dict(fin._asdict(), **judge_point({**fin.links, **fin.checks}, model, loss)._asdict(), model=name,
                      seed=seeds[s], step=ck[c], diverged=False)
            records.append(Record(*(kw[f] for f in Record._fields)))
    return Unit(records, P, method, tm)


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


def survival(slope: float | None, heads: Sequence[int], maxima: Sequence[float | None]) -> Survival:
    """The 1/√H rule on the slope of log max κ_emp against log H: survives when it is below
    :data:`SURVIVES_BELOW`, does not at or above it, undefined without a slope (``maxima``: the
    largest κ_emp per H of ``heads``, ``None`` where not computed; the H with κ_emp <= 0 or
    none are named)."""
    nonpos = [H for H, v in zip(heads, maxima) if v is not None and v <= 0]
    missing = [H for H, v in zip(heads, maxima) if v is None]
    if slope is None:
        why = []
        if nonpos:
            why.append(f"κ_emp <= 0 (no negative curvature) at H = {nonpos}")
        if missing:
            why.append(f"κ_emp not computed or undefined (--method block, L̂ underflowed or "
                       f"diverged) at H = {missing}")
        return Survival(None, "undefined: fewer than two H with κ_emp > 0" + (f" ({'; '.join(why)})" if why else ""))
    if slope < SURVIVES_BELOW:
        survives, statement = True, (f"survives (slope < {SURVIVES_BELOW}): κ_emp ∝ H^{slope:+.2f}, i.e. "
                                     f"λ_min/L̂ ∝ H^{slope - 0.5:+.2f} (paper: H^-0.50)")
    else:
        survives, statement = False, (f"does NOT survive (slope >= {SURVIVES_BELOW}): κ_emp ∝ H^{slope:+.2f}, i.e. "
                                      f"λ_min/L̂ ∝ H^{slope - 0.5:+.2f} (paper: H^-0.50)")
    if nonpos:
        statement += f" (fit over H with κ_emp > 0; κ_emp <= 0 at H = {nonpos})"
    return Survival(survives, statement)


def summarize_model(name: str, units: Mapping[int, Unit], heads, seeds, lr: float, loss) -> ModelRow:
    """One model's row: per H the maxima over its trajectories, the verdicts and the GD step
    premise at θ₀ (informational: the inequality is pointwise); the κ_emp-vs-H slope and its rule."""
    model = get_model(name)
    records = [r for H in heads for r in units[H].records]
    by_heads = {}
    for H in heads:
        rs = [r for r in records if r.heads == H and not r.diverged]
        last = max((r.step for r in rs), default=None)
        finals = [r.loss for r in rs if r.step == last]
        verdicts = [r.passed for r in rs if r.passed is not None]
        ni = {}
        for r in rs:
            for k, v in r.not_implied.items():
                if v is not None:
                    ni[k] = ni.get(k, True) and v
        u = units[H]
        by_heads[H] = HeadsRow(
            checkpoints=len(rs), diverged=sorted({r.seed for r in records if r.heads == H and r.diverged}),
            **{f"max_{k}": max((getattr(r, k) for r in rs if getattr(r, k) is not None), default=None)
               for k in CHAIN},
            final_loss=max(finals) if finals else None, passed=all(verdicts) if verdicts else None,
            failed=sorted({f for r in rs for f in r.failed}), not_implied_held=ni, P=u.P, method=u.method,
            **u.timings._asdict(), premise=premise_from_records(lr, [r for r in records if r.heads == H], model, loss))
    hs = list(heads)
    s, s_block = (_fit_slope(hs, [getattr(by_heads[H], f"max_{k}") for H in hs]) for k in ("kappa_emp", "kappa_block"))
    per_seed = [_fit_slope(hs, [max((r.kappa_emp for r in records if r.heads == H and r.seed == sd
                                     and not r.diverged and r.kappa_emp is not None), default=None) for H in hs])
                for sd in seeds]
    survives, statement = survival(s, hs, [by_heads[H].max_kappa_emp for H in hs])
    verdicts = [row.passed for row in by_heads.values() if row.passed is not None]
    return ModelRow(by_heads, s, s_block, per_seed, survives, statement, all(verdicts) if verdicts else None,
                    model.note)


def run(cfg: VariantsConfig, progress=None, store=None) -> Summary:
    """Run the sweep. ``store`` (a :class:`mhajax.runtime.resume.ProgressStore`) keeps each
    finished (model, H) unit, so a killed sweep resumes with identical numbers (``resumed``
    lists the units loaded); ``progress(name, H)`` is called after each unit."""
    cfg = cfg.validate()
    t0 = time.perf_counter()
    seeds = seed_list(cfg.seeds, cfg.seed0)
    X, y = batched_data(cfg.data, seeds)
    ck = checkpoint_steps(cfg.gd.steps, cfg.gd.every)
    loss = cfg.data.loss_fn()
    units, resumed = sweep(store, [(m, H) for m in cfg.models for H in cfg.heads],
                           lambda k: run_unit(cfg, *k, Problem(get_model(k[0]), loss, X, y), seeds, ck), Unit,
                           unit=lambda k: f"model={k[0]}.heads={k[1]}", progress=progress and (lambda k: progress(*k)))
    by_model = {m: summarize_model(m, {H: units[m, H] for H in cfg.heads}, cfg.heads, seeds, cfg.gd.lr, loss)
                for m in cfg.models}
    records = [r for m in cfg.models for H in cfg.heads for r in units[m, H].records]
    points = [Checkpoint(r.model, r.heads, r.seed, r.passed, r.diverged, r.loss) for r in records]
    implies = {m: any(ok for ok, _ in requirements(get_model(m), loss).values()) for m in cfg.models}
    return Summary(**judge(points, implies).fields(), judged=sum(p.passed is not None for p in points),
                   loss=loss.name, records=records, by_model=by_model,
                   failures=[Failure(r.model, r.heads, r.seed, r.step, r.failed) for r in records if r.passed is False],
                   diverged=[Run(*d) for d in _diverged_runs(points)],
                   undefined=sum(not p.diverged and not _loss_defined(p.loss) for p in points),
                   checkpoints=ck, seeds=seeds, survives_below=SURVIVES_BELOW,
                   resumed=[f"{m}/H={H}" for m, H in resumed], wall_time_s=time.perf_counter() - t0)


def _diverged_runs(points: Sequence[Checkpoint]) -> list:
    """The distinct (model, H, seed) runs with a diverged checkpoint, sorted."""
    return sorted({(p.model, p.heads, p.seed) for p in points if p.diverged})


def judge(points: Sequence[Checkpoint], implies: Mapping[str, bool]) -> Judgement:
    """FAILED on a diverged (model, H, seed) run or a violated implied inequality; INFORMATIONAL
    when no chosen model implies anything with the loss (``implies``: model -> whether its
    (model, loss) pair implies an inequality; e.g. only the coupled model); INCONCLUSIVE when
    fewer than :data:`~mhajax.experiments.base.MIN_JUDGED_FRACTION` of the checkpoints of models
    that imply something could be judged (L̂ underflowed, ...); else PASSED."""
    diverged = _diverged_runs(points)
    failures = sum(p.passed is False for p in points)
    if diverged:
        return Judgement(Verdict.FAILED, f"{len(diverged)} (model, H, seed) run(s) diverged")
    if failures:
        return Judgement(Verdict.FAILED, f"an implied inequality failed at {failures} checkpoint(s)")
    if not any(implies.values()):
        return Judgement(Verdict.INFORMATIONAL, "no chosen (model, loss) pair implies an inequality")
    judgeable = [p for p in points if implies[p.model]]   # a model implying nothing is informational
    judged = sum(p.passed is not None for p in points)
    enough, text = judged_enough(judged, len(judgeable), not_judged(
        (p.passed is not None, p.diverged, _loss_defined(p.loss)) for p in judgeable))
    if not enough:
        return Judgement(Verdict.INCONCLUSIVE, f"too little could be judged: {text}")
    return Judgement(Verdict.PASSED, f"every implied inequality held: {text}")


def _yes(v):
    return {True: "yes", False: "NO", None: "-"}[v]


def report(summary: Summary) -> str:
    """Per (model, H) the largest κ of each kind; per model the slope of log κ_emp vs log H."""
    rows = [[name, H, r.P, r.method, fmt(r.final_loss), *(fmt(getattr(r, f"max_{k}")) for k in CHAIN), _yes(r.passed),
             ",".join(f"{k.replace('kappa_', '')}:{'ok' if v else 'FAIL'}" for k, v in r.not_implied_held.items()) or "-"]
            for name, m in summary.by_model.items() for H, r in m.by_heads.items()]
    head = ("model", "H", "P", "method", "final L̂", *(SYMBOL[k] for k in CHAIN), "implied held", "not implied (info)")
    srows = []
    for name, m in summary.by_model.items():
        ps = [s for s in m.slope_kappa_emp_per_seed if s is not None]
        spread = f"{min(ps):+.2f}..{max(ps):+.2f}" if len(ps) > 1 else "-"
        srows.append([name, fmt(m.slope_kappa_emp), spread, fmt(m.slope_kappa_block),
                      {True: "yes", False: "NO", None: "undef"}[m.survives]])
    out = [table(head, rows),
           "κ columns: largest value over checkpoints and seeds; 'undef' = does not apply or L̂ underflowed. "
           "'implied held': every inequality the (model, loss) pair implies held at every checkpoint.", "",
           table(("model", "slope κ_emp", "per-seed", "slope κ_blk", "1/√H survives"), srows),
           f"slope of log(max κ_emp) vs log H: 0 = the paper's λ_min >= −(c/√H)L̂ with c flat in H; "
           f"1/2 = no multi-head gain. 'survives' = slope < {summary.survives_below}."]
    out += [f"  {name}: {m.statement}" for name, m in summary.by_model.items()]
    out += [f"VIOLATED: {f.model} H={f.heads} seed={f.seed} step={f.step}: {', '.join(f.failed)}"
            for f in summary.failures[:10]]
    out += [f"DIVERGED: {d.model} H={d.heads} seed={d.seed} (non-finite iterate)" for d in summary.diverged]
    if summary.undefined:
        out.append(f"{summary.undefined} checkpoint(s) with L̂ underflowed or not finite: ratios undefined, not judged.")
    out += [f"{name} H={H}: {premise_line(r.premise)} (informational: the inequality is pointwise)"
            for name, m in summary.by_model.items() for H, r in m.by_heads.items() if r.premise.holds is False]
    if summary.resumed:
        out.append(f"resumed from saved progress: {', '.join(summary.resumed)}")
    return "\n".join(out)


def headline(summary: Summary) -> str:
    """``12 judged checkpoints of 14``."""
    return f"{summary.judged} judged checkpoints of {len(summary.records)}"


def _judged(flags):
    """Yes if every judged flag is true, **no** if one is false, 'not judged' if none was."""
    flags = [f for f in flags if f is not None]
    return "not judged" if not flags else ("yes" if all(flags) else "**no**")


def section(summary: Summary) -> str:
    """REPORT.md: per model the largest κ_emp, the slope over H and whether the implied
    inequalities held; not-implied failures are listed as informational."""
    rows = []
    for name, m in summary.by_model.items():
        bh = m.by_heads.values()
        info = {k for r in bh for k, v in r.not_implied_held.items() if not v}
        rows.append([name, ",".join(map(str, m.by_heads)),
                     max((r.final_loss for r in bh if r.final_loss is not None), default=None),
                     max((r.max_kappa_emp for r in bh if r.max_kappa_emp is not None), default=None),
                     m.slope_kappa_emp, {True: "yes", False: "**no**", None: "undef"}[m.survives],
                     _judged([r.passed for r in bh]), ", ".join(sorted(info)) or "-"])
    return md_table(("model", "H", "max final L̂", "max κ_emp", "slope log κ_emp vs log H",
                     "1/√H gain survives", "implied inequalities hold", "not implied, failed (info)"), rows) + (
        f"\n\nloss: {summary.loss}; judged checkpoints: {summary.judged}, violations: "
        f"{len(summary.failures)}, diverged: {len(summary.diverged)}, undefined: {summary.undefined}. "
        f"'survives' = slope < {summary.survives_below}.")


# -- memory: the run's dominant arrays, checked by the CLI before it starts --

def memory(cfg: VariantsConfig) -> list:
    """The models run one after another: the largest of their
    :func:`mhajax.experiments.base.chain_memory`."""
    models = cfg.models.split(",") if isinstance(cfg.models, str) else cfg.models
    return max((chain_memory(cfg, m.strip()) for m in models), key=mem.entries)


run = check("variants", config=VariantsConfig, report=report, headline=headline, section=section,
            claim="the weak-convexity lemma and its 1/√H gain for attention variants (beyond the paper)",
            in_all=False, presets={"paper": PAPER}, memory=memory, summary=Summary)(run)


__all__ = ["VariantsConfig", "Checkpoint", "Survival", "Summary", "run", "run_unit", "summarize_model", "survival",
           "judge", "SURVIVES_BELOW"]
