"""The local quasi-convexity check (docs/theory.md §10, §15.6): (QC) at every GD checkpoint θ_k
against each reference θ*, by :mod:`mhajax.analysis.quasi_convexity`.

References θ*: ``final`` (θ_K, pairs k < K); ``witness`` (``θ_0 + (log n/γ_w) w``,
:mod:`mhajax.analysis.witness`, softmax heads on the mixture); ``ntk`` (the max-margin witness of
:func:`mhajax.analysis.ntk.ntk_margin`). A model without closed-form κ, β₂ is not applicable; a loss
that is not self-bounded makes the check informational (:func:`mhajax.analysis.rates.rate_applies`).
"""
from __future__ import annotations

import time
import typing
from collections import Counter
from dataclasses import dataclass, replace
from typing import NamedTuple, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from mhajax.analysis.ntk import ntk_margin
from mhajax.analysis.ntk import witness as ntk_witness
from mhajax.analysis.quasi_convexity import (CONVEX_BOUNDS, REL_TOL, PairCheck, Segment, check_pairs, finalize,
                                            judged_pair)
from mhajax.analysis.rates import rate_applies
from mhajax.analysis.step_premise import StepPremise, gd_step_premise, premise_line, premise_violated
from mhajax.analysis.witness import class_direction, witness, witness_point
from mhajax.data.common import token_radius
from mhajax.data.seeds import seed_list
from mhajax.errors import InputError
from mhajax.experiments.base import DivergedRun, batched_data, batched_init, judged_enough, sweep, witness_applies
from mhajax.experiments.configs import Config, DataConfig, GDConfig, option, sub
from mhajax.experiments.registry import check
from mhajax.losses import LOGISTIC
from mhajax.models.base import head_size
from mhajax.models.softmax import SOFTMAX
from mhajax.runtime import memory as mem
from mhajax.runtime.format import diverged_lines, fmt, md_table, table
from mhajax.train import checkpoint_steps, num_checkpoints, runs
from mhajax.validate import heads_list, parse_list, positive_int
from mhajax.verdict import Judgement, Verdict

REFERENCES = ("final", "witness", "ntk")
#: the paper-scale preset (``--preset paper``): the defaults (H = 1, 4, 16; the pairwise
#: segment checks already run at the sizes where the inequality is certified)
PAPER: dict = {}
@dataclass(frozen=True)
class QuasiConvexityConfig(Config):
    """GD runs per H; the (QC) inequality of docs/theory.md §10 at every checkpoint against each
    reference θ* (the final iterate, the explicit witness, the NTK witness)."""

    heads: tuple = option((1, 4, 16), "comma-separated numbers of heads H", kind="list")
    seeds: int = option(2, "GD runs per H")
    seed0: int = option(0, "first seed")
    gd: GDConfig = sub(GDConfig)
    grid: int = option(128, "segment grid intervals for max_seg L̂ and κ_dir")
    references: tuple = option(REFERENCES, "comma-separated θ* choices", kind="list",
                               choices=REFERENCES)
    data: DataConfig = sub(DataConfig)

    def validate(self):
        """The validated config, a new one; an :class:`InputError` names the first bad option."""
        cfg = replace(self, heads=tuple(heads_list(self.heads)))
        seed_list(cfg.seeds, cfg.seed0)
        cfg.gd.validate(min_steps=1)
        positive_int("grid", cfg.grid, minimum=2)
        refs = tuple(parse_list("--references", cfg.references, "name", choices=REFERENCES))
        if len(set(refs)) != len(refs):
            raise InputError(f"--references must be distinct names from {', '.join(REFERENCES)}, "
                             f"got {list(refs)!r}")
        cfg = replace(cfg, references=refs)
        cfg = replace(cfg, data=cfg.data.validate())
        return cfg


def _ntk_points(th0, X, y, bad, model=SOFTMAX, loss=LOGISTIC):
    """The NTK witness of docs/theory.md §11 per seed (host-side margin solver, :mod:`mhajax.analysis.ntk`):
    ``(θ* [S, ...], ok [S], [NtkMargin or Status] [S])``; θ_0 stands in where ``ok`` is False."""
    S = X.shape[0]
    pts, ok, info = [], [], []
    for s in range(S):
        p = jax.tree_util.tree_map(lambda a: a[s], th0)
        if s in bad:
            pts.append(p), ok.append(False), info.append(Status("diverged run"))
            continue
        m = ntk_margin(p, X[s], y[s], model)   # within the command's own estimate
        good = bool(m.separable)
        info.append(NtkMargin(m.status, m.gamma, m.gamma_bar))
        pts.append(ntk_witness(p, X[s], y[s], m, model, loss).params if good else p)
        ok.append(good)
    return jax.tree_util.tree_map(lambda *a: jnp.stack(a), *pts), ok, info


#: one checked pair as recorded: the :class:`PairCheck` and where it was taken
PairRecord = NamedTuple("PairRecord", [*typing.get_type_hints(PairCheck).items(), ("heads", int),
                                       ("reference", str), ("seed", int), ("step", int), ("judged", bool)])
#: a reference with no pair checked at one H; ``NoWitness``: the witness does not apply (``note`` says why)
Unchecked = NamedTuple("Unchecked", [("heads", int), ("reference", str), ("pairs", int)])
NoWitness = NamedTuple("NoWitness", [*Unchecked.__annotations__.items(), ("note", str)])
#: the witness margin γ_w per seed (``None``: no witness), and the NTK max-margin γ, γ̄ = γ/max_i ‖g_i‖ per
#: seed with the solver's status (``Status`` alone: not solved)
NtkMargin = NamedTuple("NtkMargin", [("status", str), ("gamma", float | None), ("gamma_bar", float | None)])
Status = NamedTuple("Status", [("status", str)])
Margins = NamedTuple("Margins", [("gamma_w", list[float | None] | None)])
MarginsNTK = NamedTuple("MarginsNTK", [*Margins.__annotations__.items(), ("ntk", list[NtkMargin | Status])])


class Unit(NamedTuple):
    """One H, as saved in the progress store (``summary`` keyed ``"H/reference"``)."""

    records: list[PairRecord]
    summary: dict[str, QCSummary | NoWitness | Unchecked]
    margins: MarginsNTK | Margins
    notes: list[str]
    diverged: list[DivergedRun]
    premise: StepPremise
    planned: int
    skipped: dict[str, int]
    time_s: float


class Summary(NamedTuple):
    """The check's summary.json."""

    checkpoints: list[int]
    seeds: list[int]
    model: str
    loss: str
    data: str
    verdict: str
    verdict_reason: str
    passed: bool | None
    applicable: bool
    theory_applies: bool
    theory_note: str
    premise: dict[int, StepPremise]
    pairs_planned: int
    pairs_judged: int
    pairs_not_judged: dict[str, int]
    kappa_bar_exact: bool
    summary: dict[str, QCSummary | NoWitness | Unchecked]
    records: list[PairRecord]
    margins: dict[int, MarginsNTK | Margins]
    diverged: list[DivergedRun]
    notes: list[str]
    resumed_heads: list[int]
    timings_s: dict[int, float]
    wall_time_s: float


#: the summary of a model without closed-form κ and β₂: nothing checked, so no premise and no pair counts
NotApplicable = NamedTuple("NotApplicable", [(f, t) for f, t in Summary.__annotations__.items() if f not in (
    "premise", "pairs_planned", "pairs_judged", "pairs_not_judged", "kappa_bar_exact")])

_witness_stats = jax.jit(jax.vmap(witness, in_axes=(0, 0, 0, None)))
_witness_points = jax.jit(jax.vmap(witness_point, in_axes=(0, 0, 0, None)))
_radius = jax.jit(jax.vmap(token_radius))


def _unit(cfg, H, X, y, R, e, seeds, ck, rel_tol, model, loss, exact_bar, wit_ok, wit_why) -> Unit:
    """One H: train, then check every (θ_k, θ*) pair."""
    t = time.perf_counter()
    d = cfg.data
    S, C = len(seeds), len(ck)
    th0 = batched_init(d, seeds, H)
    premise = gd_step_premise(cfg.gd.lr, th0, X, y, model=model, loss=loss)   # docs/theory.md §15, at θ₀
    traj = runs(th0, X, y, cfg.gd.lr, steps=cfg.gd.steps, every=cfg.gd.every, model=model, loss=loss)
    finite = np.asarray(traj.finite)
    bad = {s for s in range(S) if not finite[s].all()}
    diverged = [DivergedRun(H, seeds[s], int(np.argmin(finite[s]))) for s in sorted(bad)]
    gam = np.asarray(_witness_stats(th0, X, y, e).gamma) if wit_ok else None
    wpts = _witness_points(th0, X, y, e) if wit_ok else th0
    margins = Margins(gam)
    if "ntk" in cfg.references:
        try:
            npts, ok_ntk, ntk_info = _ntk_points(th0, X, y, bad, model, loss)
        except ImportError as err:  # mhajax.ntk needs its margin solver's dependencies
            npts, ok_ntk, ntk_info = th0, [False] * S, [Status(f"unavailable ({err})")] * S
        margins = MarginsNTK(gam, ntk_info)
    records, summary, notes = [], {}, []
    planned, skipped = 0, {}   # pairs planned; reason -> pairs not judged

    def skip(reason, k):
        skipped[reason] = skipped.get(reason, 0) + k
    for ref in cfg.references:
        if ref == "witness" and not wit_ok:
            summary[f"{H}/{ref}"] = NoWitness(H, ref, 0, wit_why)
            continue
        pairs = []  # (seed index, checkpoint index)
        for s in range(S):
            k = C - 1 if ref == "final" else C
            planned += k
            if s in bad:
                skip("from diverged runs", k)
                continue
            if ref == "witness" and not gam[s] > 0:
                notes.append(f"H={H} seed={seeds[s]}: witness margin γ_w={gam[s]:.3g} <= 0, witness reference skipped")
                skip("without a witness (γ_w <= 0)", k)
                continue
            if ref == "ntk" and not ok_ntk[s]:
                notes.append(f"H={H} seed={seeds[s]}: NTK margin solver status "
                             f"{ntk_info[s].status!r}, ntk reference skipped")
                skip("without a certified NTK witness", k)
                continue
            pairs += [(s, c) for c in range(k)]
        if not pairs:
            summary[f"{H}/{ref}"] = Unchecked(H, ref, 0)
            continue
        si, ci = np.array(pairs).T
        tk = jax.tree_util.tree_map(lambda a: a[si, ci], traj.params)
        if ref == "final":
            ts = jax.tree_util.tree_map(lambda a: a[si, C - 1], traj.params)
        else:
            ts = jax.tree_util.tree_map(lambda a: a[si], wpts if ref == "witness" else npts)
        raw = jax.tree_util.tree_map(np.asarray, check_pairs(tk, ts, jnp.asarray(si), X, y, R, grid=cfg.grid,
                                                             model=model, loss=loss, exact_bar=exact_bar))
        checks = []
        fi = np.finfo(np.asarray(X).dtype)
        for b, (s, c) in enumerate(pairs):
            pc = finalize(Segment(*(v[b] for v in raw)), rel_tol, certifiable=exact_bar)
            # L̂(θ_k) underflowed (below tiny/eps, as in chain.finalize): (QC) is vacuous, not judged
            judged = judged_pair(pc.loss_k, fi.tiny / fi.eps)
            if not judged:
                skip("with L̂(θ_k) underflowed to 0 (vacuous)", 1)
            checks.append(pc)
            records.append(PairRecord(*pc, H, ref, seeds[s], ck[c], judged))
        summary[f"{H}/{ref}"] = summarize(checks, H, ref)
    return Unit(records, summary, margins, notes, diverged, premise, planned, skipped, time.perf_counter() - t)


def run(cfg: QuasiConvexityConfig, progress=None, store=None) -> Summary | NotApplicable:
    """Run the check, one resumable unit per H (``resumed_heads``: loaded from ``store``)."""
    cfg = cfg.validate()
    t0 = time.perf_counter()
    d = cfg.data
    model, loss = d.head_model(), d.loss_fn()
    seeds = seed_list(cfg.seeds, cfg.seed0)
    ck = checkpoint_steps(cfg.gd.steps, cfg.gd.every)
    if model.kappa is None or model.beta2 is None:
        why = f"model {model.name!r} has no closed-form κ and β₂: (QC) cannot be stated"
        return NotApplicable(ck, seeds, model.name, loss.name, d.dataset, **Judgement(Verdict.INFORMATIONAL, why).fields(),
                             applicable=False, theory_applies=False, theory_note=why, summary={}, records=[], margins={},
                             diverged=[], notes=[why], resumed_heads=[], timings_s={},
                             wall_time_s=time.perf_counter() - t0)
    covered, why = rate_applies(model, loss)
    exact_bar = model.name in CONVEX_BOUNDS
    wit_ok, wit_why = witness_applies(d)
    X, y = batched_data(d, seeds)
    R = _radius(X)
    e = class_direction(d.dim, d.antipodal)
    rel_tol = max(REL_TOL, 1e3 * float(jnp.finfo(X.dtype).eps))
    notes = [f"witness reference {wit_why}"] if "witness" in cfg.references and not wit_ok else []
    if not exact_bar:
        notes.append(f"{model.name}: κ and β₂ are not convex along segments; κ̄ and β̄₂ are maxima over "
                     f"the grid (a QC 'holds' stays certified; no violation can be certified)")
    units, resumed = sweep(store, cfg.heads, lambda H: _unit(cfg, H, X, y, R, e, seeds, ck, rel_tol, model, loss,
                                                             exact_bar, wit_ok, wit_why), Unit, progress=progress)
    notes += [n for u in units.values() for n in u.notes]
    if not covered:
        notes.append(f"informational: {why}; (QC) and κ_dir <= κ are not implied for this pair")
    records = [r for u in units.values() for r in u.records]
    diverged = [r for u in units.values() for r in u.diverged]
    skipped = sum((Counter(u.skipped) for u in units.values()), Counter())   # reason -> pairs, first seen first
    planned, judged = sum(u.planned for u in units.values()), sum(r.judged for r in records)
    premises = {H: u.premise for H, u in units.items()}
    judgement = judge(QCRecord(
        pairs=tuple(PairOutcome(r.holds, r.certified_violation, r.wc_holds) for r in records),
        diverged=len(diverged), covered=covered, why=why, premise=premise_violated(list(premises.values())),
        judged=judged_enough(judged, planned, skipped, "(θ_k, θ*) pairs")))
    return Summary(ck, seeds, model.name, loss.name, d.dataset, **judgement.fields(), applicable=True,
                   theory_applies=covered, theory_note=why, premise=premises, pairs_planned=planned,
                   pairs_judged=judged, pairs_not_judged=skipped, kappa_bar_exact=exact_bar,
                   summary={k: v for u in units.values() for k, v in u.summary.items()}, records=records,
                   margins={H: u.margins for H, u in units.items()}, diverged=diverged, notes=notes,
                   resumed_heads=resumed, timings_s={H: u.time_s for H, u in units.items()},
                   wall_time_s=time.perf_counter() - t0)


class QCSummary(NamedTuple):
    """Per-(H, reference) summary of pair checks (:func:`summarize`)."""

    heads: int
    reference: str
    pairs: int
    holds: int                      # pairs where (QC) holds
    certified_violations: int
    inconclusive: int
    convex: int
    max_kappa_need: float | None
    max_kappa_dir: float | None
    max_kappa_bar: float | None
    max_wc_ratio: float | None
    wc_holds: bool                  # κ_dir <= κ at every pair
    looseness: float | None         # min κ̄ / max positive κ_need
    max_cert_factor: float | None
    max_loss_star: float | None
    max_dist: float | None          # √(max ‖Δ‖²)


def _max(vals):
    """The max of the values that are not None (None if none)."""
    vals = [v for v in vals if v is not None]
    return max(vals) if vals else None


def summarize(recs: Sequence[PairCheck], H, ref) -> QCSummary:
    """Per-(H, reference) summary of pair checks: counts of each verdict and the maxima."""
    need = [r.kappa_need for r in recs if r.kappa_need is not None]
    pos = [v for v in need if v > 0]
    dist2 = _max(r.dist2 for r in recs)
    return QCSummary(heads=H, reference=ref, pairs=len(recs), holds=sum(r.holds for r in recs),
                     certified_violations=sum(r.certified_violation for r in recs),
                     inconclusive=sum(r.inconclusive for r in recs),
                     convex=sum(r.convex for r in recs),
                     max_kappa_need=max(need) if need else None, max_kappa_dir=_max(r.kappa_dir for r in recs),
                     max_kappa_bar=_max(r.kappa_bar for r in recs), max_wc_ratio=_max(r.wc_ratio for r in recs),
                     wc_holds=all(r.wc_holds for r in recs),
                     looseness=(min(r.kappa_bar for r in recs) / max(pos)) if pos else None,
                     max_cert_factor=_max(r.cert_factor for r in recs),
                     max_loss_star=_max(r.loss_star for r in recs),
                     max_dist=float(np.sqrt(dist2)) if dist2 is not None else None)


class PairOutcome(NamedTuple):
    """The verdicts of one pair, as :func:`judge` reads them."""

    holds: bool
    certified_violation: bool
    wc_holds: bool


class QCRecord(NamedTuple):
    """What :func:`judge` reads."""

    pairs: tuple                # PairOutcome per checked pair
    diverged: int               # runs that became non-finite
    covered: bool               # (QC) is implied for the (model, loss) pair
    why: str                    # why not, where it is not
    premise: Judgement | None   # PREMISE_VIOLATED of a failed step premise, else None
    judged: tuple | None        # judged_enough's (enough, text), None: not counted



def judge(r: QCRecord) -> Judgement:
    """FAILED on a certified (QC) violation or κ_dir > κ (pointwise facts, whatever the step
    size); PREMISE_VIOLATED when the step size breaks the GD premise measured at θ₀ (the
    pairs lie along GD; numbers still reported); FAILED on a diverged run; INFORMATIONAL where
    (QC) is not implied for the pair; INCONCLUSIVE when fewer than
    :data:`~mhajax.experiments.base.MIN_JUDGED_FRACTION` of the planned pairs were judged
    (diverged runs, no witness, L̂ underflowed), or (QC) failed only with the sampled segment
    maximum (refine the grid); else PASSED."""
    viol = sum(p.certified_violation for p in r.pairs)
    wc_bad = sum(not p.wc_holds for p in r.pairs)
    if r.covered and (viol or wc_bad):
        return Judgement(Verdict.FAILED, f"{viol} certified (QC) violation(s), κ_dir > κ at {wc_bad} pair(s)")
    if r.covered and r.premise is not None:
        return r.premise
    if r.diverged:
        return Judgement(Verdict.FAILED, f"{r.diverged} run(s) became non-finite")
    if not r.covered:
        return Judgement(Verdict.INFORMATIONAL, f"(QC) is not implied here: {r.why}")
    if not r.pairs:
        return Judgement(Verdict.INCONCLUSIVE, "no (θ_k, θ*) pair could be checked")
    if r.judged is not None and not r.judged[0]:
        return Judgement(Verdict.INCONCLUSIVE, f"too little could be judged: {r.judged[1]}")
    fails = sum(not p.holds for p in r.pairs)
    if fails:
        return Judgement(Verdict.INCONCLUSIVE, f"(QC) fails at {fails} pair(s) with the sampled "
                                               "max_seg L̂ only: refine --grid")
    return Judgement(Verdict.PASSED, f"(QC) and κ_dir <= κ hold on all {len(r.pairs)} pairs"
                     + (f" ({r.judged[1]})" if r.judged is not None else ""))


def report(s: Summary | NotApplicable) -> str:
    """Per (H, θ*): pairs, how many hold, certified violations, κ_need against κ̄."""
    rows = [[v.heads, v.reference, v.pairs, f"{v.holds}/{v.pairs}", v.certified_violations, v.inconclusive,
             f"{v.convex}/{v.pairs}", fmt(v.max_kappa_need), fmt(v.max_kappa_dir), fmt(v.max_kappa_bar),
             fmt(v.max_wc_ratio), fmt(v.max_cert_factor), fmt(v.max_loss_star), fmt(v.max_dist)]
            if v.pairs else [v.heads, v.reference, 0] + ["n/a" if isinstance(v, NoWitness) else "-"] * 11
            for v in s.summary.values()]
    if not rows:
        return "\n".join([f"nothing checked: {s.theory_note}"] + [f"note: {n}" for n in s.notes])
    out = [table(["H", "θ*", "pairs", "QC holds", "cert. viol.", "inconcl.", "convex", "max κ_need",
                  "max κ_dir", "max κ̄", "max κ_dir/κ", "M_cert/M_s", "max L̂(θ*)", "max ‖Δ‖"], rows),
           "QC holds: the inequality with the sampled max_seg L̂ (M_s <= true max, so 'holds' is certified); "
           "cert. viol.: fails even with the certified upper bound M_cert = M_s·exp(β̄₂‖Δ‖/(2·grid)); "
           "inconcl.: fails with M_s only (refine --grid).",
           ("κ̄ = max(κ(θ_k), κ(θ*)) is exact (the closed form is convex along the segment). "
            if s.kappa_bar_exact else
            "κ̄ = max of κ over the grid (κ is not convex along segments for this model: sampled). ") +
           "κ_need: smallest κ̄ that makes QC hold (<= 0: plain convexity holds on the pair, counted in 'convex'); "
           "κ_dir: largest −√H·ΔᵀHessΔ/(‖Δ‖²L̂) on the grid (directional weak-convexity constant, sampled); "
           "κ_dir/κ must be <= 1 (docs/theory.md (6.7), checked at each grid point).",
           f"problem: --model {s.model} --loss {s.loss} --data {s.data}."]
    if s.resumed_heads:
        out.append(f"resumed from saved progress: H = {s.resumed_heads}")
    for H, m in s.margins.items():
        gw = None if m.gamma_w is None else [round(g, 4) for g in m.gamma_w]
        ntk = [round(i.gamma, 4) if isinstance(i, NtkMargin) and i.gamma is not None else None
               for i in m.ntk] if isinstance(m, MarginsNTK) else None
        out.append(f"H={H}: witness margin γ_w per seed {gw if gw is not None else 'n/a'}"
                   + (f"; NTK max-margin γ per seed {ntk}" if ntk is not None else ""))
    out += [f"note: {n}" for n in s.notes] + [f"H={H}: {premise_line(p)}" for H, p in s.premise.items()]
    return "\n".join(out + diverged_lines(s.diverged))


def headline(s: Summary | NotApplicable) -> str:
    """``QC held on 66/66 pairs (0 certified violations); plain convexity on 12/66``."""
    n = len(s.records)
    return (f"QC held on {sum(r.holds for r in s.records)}/{n} pairs "
            f"({sum(r.certified_violation for r in s.records)} certified violations); "
            f"plain convexity on {sum(r.convex for r in s.records)}/{n}")


def section(s: Summary | NotApplicable) -> str:
    """REPORT.md: the per-(H, θ*) summary rows and the notes."""
    rows = [[v.heads, v.reference, v.pairs] + ([v.holds, v.certified_violations, v.inconclusive, v.convex,
                                                v.max_kappa_need, v.max_kappa_bar, v.looseness, v.max_wc_ratio,
                                                v.wc_holds] if isinstance(v, QCSummary) else [None] * 9)
            for v in s.summary.values()]
    out = md_table(["H", "θ*", "pairs", "holds", "certified_violations", "inconclusive", "convex", "max_kappa_need",
                    "max_kappa_bar", "looseness", "max_wc_ratio", "wc_holds"], rows)
    if s.notes:
        out += "\n\nnotes: " + "; ".join(s.notes[:10]) + ("; …" if len(s.notes) > 10 else "")
    return out


# -- memory: the run's dominant arrays, checked by the CLI before it starts --

def memory(cfg: QuasiConvexityConfig) -> list:
    """The dominant arrays (:mod:`mhajax.runtime.memory`) at the largest H: the data, GD of all
    seeds with the checkpoints kept, the (θ_k, θ*) pairs, one segment check of ``grid + 1``
    points (value and two forward-mode derivatives), and with ``ntk`` a Jacobian."""
    d, S, H, K = cfg.data, cfg.seeds, max(mem.ints(cfg.heads)), cfg.grid
    p, C = head_size(d.model, d.tokens, d.dim), num_checkpoints(cfg.gd.steps, cfg.gd.every)
    out = ([mem.data(S, d.n, d.tokens, d.dim)] + mem.gd(S, d.n, d.tokens, d.dim, H, p, C, cfg.gd.steps)
           + [("pairs (θ_k, θ*) [2, S·C, P]", (2, S * C, H * p)),
              ("segment attention weights [K + 1, 3, n, H, T, T]", (K + 1, 3, d.n, H, d.tokens, d.tokens))])
    return out + ([("per-sample Jacobian J [n, P]", (d.n, H * p))] if "ntk" in cfg.references else [])


run = check("quasi-convexity", config=QuasiConvexityConfig, report=report, headline=headline,
            section=section, claim="local quasi-convexity along the segment to θ* (docs/theory.md §10)",
            presets={"paper": PAPER}, memory=memory,
            summary=Summary | NotApplicable)(run)
