"""The heads experiment (SPEC §5.3): the smallest H that reaches the Õ(1/n) regime, vs log⁶ n.

The theory asks for ``H = Ω(log⁶ n)`` heads (a sufficient condition of the
analysis). For each n on a grid and each H on a grid (1, 2, 4, …), ``seeds``
GD runs of ``K = max(1, round(steps_per_n · n))`` steps train H heads on n
samples; every run with a given seed starts from the same H-head
initialization as ``batched_init(cfg, seeds, H)`` and is tested on the same
``n_test`` fresh samples (stream 2).

**Reaching the regime.** Run (n, H) *reaches the Õ(1/n) regime* when the
seed-mean test loss after K ≈ n steps is at most ``c · log(n) / n``::

    reached(n, H)  ⇔  (1/S) Σ_s L(θ_K^{(s)}) <= c · log(n) / n,     c = regime_c (default 1).

This is the shape of the paper's guarantee (test loss Õ(1/n) after K ≈ n steps)
with one stated constant: c is the only knob, chosen before looking at data,
and every test loss is in the output, so any other c can be applied
afterwards. ``H_min(n)`` is the smallest H on the grid with ``reached(n, H)``
(None if none), printed beside ``log⁶ n``.

**One compile per n.** All (H, seed) runs are padded to ``H_max`` heads with a
frozen head mask (:mod:`mhajax.masked`): ``Φ = (1/√H) Σ_h m_h f_h``, so the
whole grid of H is one ``vmap`` batch of one compiled program. The padded
heads cost compute (``|grid|·H_max`` heads instead of ``Σ H``) but not
compiles; the trajectories equal the unpadded ones to rounding. Any head model
(``cfg.data.head_model()``) is padded this way, trained and tested with ``cfg.data.loss_fn()``;
where the rate analysis does not cover the (model, loss) pair
(:func:`mhajax.rates.rate_applies`) the table is informational and ``passed`` is None.
The held-out set is required (``--data npz`` needs ``--test-path``).
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
from typing import ClassVar
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from mhajax.analysis.rates import rate_applies
from mhajax.data.seeds import seed_list
from mhajax.experiments.base import (batched_data, batched_init, evaluate, final_params,
                                     require_test_data, steps_for, verdict_fields)
from mhajax.experiments.configs import Config, DataConfig, GDConfig, option, sub
from mhajax.experiments.registry import check
from mhajax.models.masked import masked, pad
from mhajax.runtime.format import diverged_lines, fmt, md_table, table
from mhajax.runtime import memory as mem
from mhajax.runtime.io import to_jsonable
from mhajax.runtime.resume import load_or_run
from mhajax.train import train_runs
from mhajax.validate import parse_list, positive_float, positive_int
from mhajax.verdict import Verdict


def log6(n: int) -> float:
    """``log⁶ n`` (natural log), the theory's width requirement up to constants."""
    return math.log(n) ** 6


@dataclass(frozen=True)
class HeadsConfig(Config):
    """GD runs per (n, H) on a grid, all H padded to the largest (one compile per n);
    ``data.n`` is set to ``max(ns)`` (the grid sets n)."""

    ns: tuple = option((64, 128, 256, 512), "comma-separated training-set sizes n, increasing, >= 2",
                       kind="list")
    heads: tuple = option((1, 2, 4, 8), "comma-separated H grid, increasing", kind="list")
    seeds: int = option(3, "GD runs per (n, H)")
    seed0: int = option(0, "first seed")
    steps_per_n: float = option(1.0, "K = round(steps_per_n · n) GD steps")
    gd: GDConfig = sub(GDConfig)
    n_test: int = option(16384, "fresh test samples per seed (stream 2)")
    regime_c: float = option(1.0, "c of the regime rule: test loss <= c·log(n)/n")
    data: DataConfig = sub(DataConfig)
    EXCLUDE: ClassVar[tuple] = ("gd.steps", "gd.every", "data.n")

    def validate(self):
        """Check every option (an :class:`InputError` names the bad one); returns self."""
        object.__setattr__(self, "ns", tuple(parse_list("--ns", self.ns, "int", minimum=2,
                                                        increasing=True)))
        object.__setattr__(self, "heads", tuple(parse_list("--heads", self.heads, "int",
                                                           increasing=True)))
        seed_list(self.seeds, self.seed0)
        positive_float("steps_per_n", self.steps_per_n)
        self.gd.validate()
        positive_int("n_test", self.n_test, minimum=2)
        positive_float("regime_c", self.regime_c)
        object.__setattr__(self, "data", replace(self.data, n=max(self.ns)))
        self.data.validate()
        require_test_data(self.data, "heads")
        return self



def padded_init(cfg: DataConfig, seeds, heads) -> object:
    """Initial parameters of every (H, seed) run, padded to ``max(heads)``
    (:class:`~mhajax.masked.MaskedParams` of ``cfg.head_model()``'s parameters):
    leaves ``[G·S, H_max, ...]``, H-major (run ``g·S + s`` is H = heads[g], seed s)."""
    Hmax = max(heads)
    parts = [pad(batched_init(cfg, seeds, H), Hmax, batched=True) for H in heads]
    return jax.tree_util.tree_map(lambda *a: jnp.concatenate(a), *parts)


def threshold(n: int, c: float) -> float:
    """``c · log(n) / n``."""
    return c * math.log(n) / n


def _run_n(cfg, n, th0, test, seeds, model, loss) -> dict:
    """One unit (one n): every (H, seed) run trained and tested. JSON-able."""
    t = time.perf_counter()
    d = cfg.data
    S, G = len(seeds), len(cfg.heads)
    grouped = lambda a: a.reshape((G, S) + a.shape[1:])
    K = steps_for(n, cfg.steps_per_n)
    X, y = batched_data(d, seeds, stream=0, n=n)
    Xr, yr = jnp.tile(X, (G, 1, 1, 1)), jnp.tile(y, (G, 1))
    traj = train_runs(th0, Xr, yr, cfg.gd.lr, steps=K, every=K, model=model, loss=loss)
    th = jax.tree_util.tree_map(grouped, final_params(traj))
    test_l, _, err = (np.asarray(a) for a in _eval_all(th, test[0], test[1], model, loss))  # [G, S]
    train_loss = np.asarray(traj.losses[:, -1]).reshape(G, S)
    finite = np.asarray(traj.finite).reshape(G, S, -1)
    thr = threshold(n, cfg.regime_c)
    rows, diverged = {}, []
    for g, H in enumerate(cfg.heads):
        for s, seed in enumerate(seeds):
            if not finite[g, s].all():
                diverged.append(dict(n=n, heads=H, seed=seed, step=int(np.argmin(finite[g, s]))))
        mt = float(test_l[g].mean())
        rows[H] = dict(train=train_loss[g].tolist(), test=test_l[g].tolist(),
                       gap=(test_l[g] - train_loss[g]).tolist(), test_error=err[g].tolist(),
                       mean_train=float(train_loss[g].mean()), mean_test=mt,
                       normalized=mt * n / math.log(n),
                       reached=bool(np.isfinite(mt) and mt <= thr))
    reached = [H for H in cfg.heads if rows[H]["reached"]]
    hmin = reached[0] if reached else None
    entry = dict(steps=K, threshold=thr, log6=log6(n), by_heads=rows, reached=reached,
                 smallest_heads=hmin,
                 upward_closed=(reached == [H for H in cfg.heads if hmin is not None and H >= hmin]))
    return to_jsonable(dict(entry=entry, diverged=diverged, time_s=time.perf_counter() - t))


@partial(jax.jit, static_argnames=("model", "loss"))
def _eval_all(th, Xt, yt, model, loss):
    """:func:`~mhajax.generalization.evaluate` for every H group: leaves ``[G, S, ...]`` -> ``[G, S]``."""
    return jax.vmap(lambda p: evaluate(p, Xt, yt, model, loss))(th)


def run(cfg: HeadsConfig, progress=None, store=None) -> dict:
    """Run the experiment; returns the summary dict (per-n table, H_min, verdict).

    ``store`` (a :class:`mhajax.resume.ProgressStore`) keeps each finished n; a rerun
    loads them (``resumed_ns``) and computes the rest."""
    cfg.validate()
    t0 = time.perf_counter()
    d = cfg.data
    seeds = seed_list(cfg.seeds, cfg.seed0)
    model, loss = masked(d.head_model()), d.loss_fn()
    test = batched_data(d, seeds, stream=2, n=cfg.n_test)
    th0 = padded_init(d, seeds, cfg.heads)
    by_n, timings, diverged, resumed = {}, {}, [], []
    for n in cfg.ns:
        unit = f"n={n}"
        res = load_or_run(store, unit, lambda: _run_n(cfg, n, th0, test, seeds, model, loss), resumed, n)
        entry = dict(res["entry"])
        entry["by_heads"] = {int(H): v for H, v in entry["by_heads"].items()}
        by_n[n], timings[n] = entry, res["time_s"]
        diverged += res["diverged"]
        if progress:
            progress(n)
    covered, why = rate_applies(d.head_model(), d.loss_fn())
    verdict = _verdict(by_n, diverged, covered, why)
    return dict(**verdict, by_n=by_n, heads=list(cfg.heads), ns=list(cfg.ns), seeds=seeds,
                regime_rule=f"seed-mean test loss after K = round({cfg.steps_per_n:g}·n) steps "
                            f"<= {cfg.regime_c:g}·log(n)/n",
                theory_applies=covered, theory_note=why, resumed_ns=resumed, n_test=cfg.n_test,
                problem=dict(model=d.model, loss=d.loss, data=d.dataset),
                diverged=diverged, timings_s=timings, wall_time_s=time.perf_counter() - t0)


def _verdict(by_n, diverged, covered, why) -> dict:
    """FAILED on a diverged run; INFORMATIONAL where the regime is not claimed for the
    (model, loss) pair; NOT_REACHED when some n reaches the regime at no H of the grid
    (the grid may stop far below the theory's width); else PASSED."""
    if diverged:
        return verdict_fields(Verdict.FAILED, f"{len(diverged)} run(s) became non-finite")
    if not covered:
        return verdict_fields(Verdict.INFORMATIONAL, f"the Õ(1/n) regime is not claimed here: {why}")
    missing = [n for n, v in by_n.items() if v["smallest_heads"] is None]
    if missing:
        return verdict_fields(Verdict.NOT_REACHED, f"n = {missing} reach the regime at no H on the grid")
    return verdict_fields(Verdict.PASSED, "every n reaches the regime on the grid")


def _at(by_heads, H):
    """``by_heads[H]`` whether the keys are ints (a fresh summary) or strings (read from JSON)."""
    return by_heads[H] if H in by_heads else by_heads[str(H)]


def report(summary) -> str:
    """Per n the seed-mean test loss of every H (``*``: in the regime), H_min beside log⁶ n,
    and the test loss in units of log(n)/n."""
    Hs = summary["heads"]
    rows = []
    for n, v in summary["by_n"].items():
        rows.append([n, v["steps"], fmt(v["threshold"])]
                    + [fmt(_at(v["by_heads"], H)["mean_test"]) + (" *" if _at(v["by_heads"], H)["reached"] else "  ")
                       for H in Hs]
                    + [v["smallest_heads"] if v["smallest_heads"] is not None else f"> {max(Hs)}",
                       fmt(v["log6"])])
    out = [table(["n", "K", "c·log(n)/n"] + [f"test L, H={H}" for H in Hs] + ["H_min", "log⁶ n"], rows),
           f"rule: (n, H) is in the Õ(1/n) regime when the {summary['regime_rule']} "
           f"(* marks it); H_min = smallest such H on the grid {Hs}. Seed means over "
           f"{len(summary['seeds'])} seeds, n_test={summary['n_test']}.",
           "The theory's width requirement H = Ω(log⁶ n) is a sufficient condition with unstated constants: "
           "H_min below log⁶ n does not contradict it, and no H on a grid far below log⁶ n can confirm it."]
    rows = []
    for n, v in summary["by_n"].items():
        rows.append([n] + [fmt(_at(v["by_heads"], H)["normalized"]) for H in Hs])
    out += ["", table(["n"] + [f"n·L/log n, H={H}" for H in Hs], rows),
            "n·L/log n is the test loss in units of log(n)/n: flat in n means the Õ(1/n) rate; "
            "the regime rule is n·L/log n <= c."]
    for n, v in summary["by_n"].items():
        if v["smallest_heads"] is not None and not v["upward_closed"]:
            out.append(f"note n={n}: the regime is reached at H = {v['reached']} but not at every larger H on the grid.")
    prob = summary["problem"]
    out.append(f"problem: --model {prob['model']} --loss {prob['loss']} --data {prob['data']}.")
    if not summary["theory_applies"]:
        out.append(f"INFORMATIONAL: the Õ(1/n) regime is not claimed for this (model, loss) pair "
                   f"({summary['theory_note']}); the table is reported, not judged.")
    if summary.get("resumed_ns"):
        out.append(f"resumed from saved progress: n = {summary['resumed_ns']}")
    trend = [(n, v["smallest_heads"]) for n, v in summary["by_n"].items()]
    out.append("H_min by n: " + ", ".join(f"{n}: {h if h is not None else '>' + str(max(Hs))}" for n, h in trend))
    out.extend(diverged_lines(summary["diverged"]))
    return "\n".join(out)


def headline(summary) -> str:
    """``n=64: H_min=1 (log⁶ n = 5.0e3), ...``."""
    return ", ".join(f"n={n}: H_min={v['smallest_heads'] if v['smallest_heads'] is not None else 'none'} "
                     f"(log⁶ n = {v['log6']:.3g})" for n, v in summary["by_n"].items())


def section(summary) -> str:
    """REPORT.md: the test loss per (n, H), H_min and log⁶ n."""
    Hs = summary["heads"]
    rows = [[n, v["steps"], v["threshold"]] + [_at(v["by_heads"], H)["mean_test"] for H in Hs]
            + [v["smallest_heads"] if v["smallest_heads"] is not None else f"> {max(Hs)}", v["log6"]]
            for n, v in summary["by_n"].items()]
    return md_table(["n", "K", "c·log(n)/n"] + [f"test L, H={H}" for H in Hs] + ["H_min", "log⁶ n"],
                    rows) + f"\n\nrule: {summary['regime_rule']}."


# -- peak memory (issue 16): what `run` holds at once, checked by the CLI before it starts --

def memory(cfg: HeadsConfig, *, dtype: str = "float64", backend: str = "cpu"):
    """The estimated peak memory of :func:`run` (:func:`mhajax.runtime.memory.heads_check`):
    per n, all G·S (H, seed) runs padded to H_max heads (p + 1 parameters per head) trained
    in one vmap, then evaluated on the test set ``[S, n_test, T, d]`` in chunks."""
    d = cfg.data
    return mem.heads_check(ns=tuple(cfg.ns), heads=tuple(cfg.heads), seeds=cfg.seeds,
                           steps_per_n=cfg.steps_per_n, n_test=cfg.n_test, tokens=d.tokens, dim=d.dim,
                           model=d.model, dtype=dtype, backend=backend)


check("heads", config=HeadsConfig, report=report, headline=headline, section=section,
      claim="H = Ω(log⁶ n) heads suffice for the Õ(1/n) regime", memory=memory)(run)
