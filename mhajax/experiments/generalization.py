"""The generalization experiment (SPEC §5.2): with K ≈ n steps, test − train = Õ(1/n).

For each n on a grid, ``seeds`` GD runs (one ``vmap``-ed, ``jit``-ed
:func:`mhajax.train.train`, one compile per n) train H heads for
``K = max(1, round(steps_per_n · n))`` steps on n samples of stream 0 of
each seed. Every run of a seed starts from the same θ_0 (stream 1) and is
tested on the same ``n_test`` fresh samples (stream 2), so the n-dependence
is not blurred by changing test sets. Per seed and n:

    train  L̂(θ_K)        (exact, on the training set)
    test   L(θ_K) ≈ (1/n_test) Σ_j ℓ(y_j Φ(θ_K; X_j)),   se = std_j(ℓ_j)/√n_test
    gap    L(θ_K) − L̂(θ_K)

The gap can be smaller than its noise: the test-sampling error
``se_test = √(Σ_s se_s²)/S`` of the seed-mean test loss, and — at large n the
larger part — the seed-to-seed spread of the gap itself (L̂ is an average of
n losses of one training set; its fluctuation around L is of either sign).
A grid point is *resolved* when the seed-mean gap exceeds ``2 · se_gap`` with
``se_gap = std_s(gap_s)/√S`` (ddof = 1; it includes the test-sampling noise of
each seed). The gap slope is fitted on resolved points only (at least 3,
else undefined), and the unresolved points are listed: selecting points by
their gap biases the slope, so the fit is only as good as the resolved set.
Slopes (log-log, bootstrap CI over seeds; :mod:`mhajax.analysis.rates`) of the test
loss and of the gap are compared with −1.

Training and testing use ``cfg.data.head_model()`` and ``cfg.data.loss_fn()``. Where the
rate analysis does not cover the pair (:func:`mhajax.analysis.rates.rate_applies`) the slopes are
informational and ``passed`` is None (False if a run diverged). ``--data npz`` needs
``--test-path``: without held-out data the check refuses to run (:class:`InputError`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from mhajax.analysis.rates import (RATE_TOLERANCE, bootstrap_slope, classify_slope, mean_band,
                                   rate_applies, rule_text, upper_bound_holds)
from mhajax.data.seeds import seed_list
from mhajax.experiments.base import (batched_data, batched_init, evaluate, final_params,
                                     require_test_data, steps_for, verdict_fields)
from mhajax.experiments.configs import Config, BootConfig, DataConfig, GDConfig, option, sub
from mhajax.experiments.registry import check
from mhajax.runtime.format import diverged_lines, fmt, fmt_ci, fmt_window, md_table, table
from mhajax.runtime import memory as mem
from mhajax.runtime.io import to_jsonable
from mhajax.runtime.resume import load_or_run
from mhajax.train import train_runs
from mhajax.validate import parse_list, positive_float, positive_int
from mhajax.verdict import Verdict

RESOLVED_SE = 2.0  # a gap is resolved when seed-mean gap > RESOLVED_SE · se_gap


@dataclass(frozen=True)
class GeneralizationConfig(Config):
    """GD runs of K = round(steps_per_n · n) steps per n; slopes over n of the test loss and
    of the test − train gap. ``data.n`` is set to ``max(ns)`` (the grid sets n)."""

    ns: tuple = option((32, 64, 128, 256, 512), "comma-separated training-set sizes n, increasing, "
                                                ">= 2, at least 3", kind="list")
    heads: int = option(4, "number of heads H")
    seeds: int = option(8, "GD runs per n (>= 2)")
    seed0: int = option(0, "first seed")
    steps_per_n: float = option(1.0, "K = round(steps_per_n · n) GD steps")
    gd: GDConfig = sub(GDConfig)
    n_test: int = option(32768, "fresh test samples per seed (stream 2)")
    boot: BootConfig = sub(BootConfig)
    data: DataConfig = sub(DataConfig)
    EXCLUDE: ClassVar[tuple] = ("gd.steps", "gd.every", "data.n")

    def validate(self):
        """Check every option (an :class:`InputError` names the bad one); returns self."""
        object.__setattr__(self, "ns", tuple(parse_list("--ns", self.ns, "int", minimum=2,
                                                        increasing=True, min_len=3)))
        positive_int("heads", self.heads)
        seed_list(self.seeds, self.seed0)
        positive_int("seeds", self.seeds, minimum=2)
        positive_float("steps_per_n", self.steps_per_n)
        self.gd.validate()
        positive_int("n_test", self.n_test, minimum=2)
        self.boot.validate()
        object.__setattr__(self, "data", replace(self.data, n=max(self.ns)))
        self.data.validate()
        require_test_data(self.data, "generalization")
        return self



def _floats(v) -> np.ndarray:
    """A saved list back to float64, ``None`` (a NaN/inf in JSON) as NaN."""
    return np.array([np.nan if x is None else x for x in v], dtype=np.float64)


def _run_n(cfg, n, th0, test, seeds, model, loss) -> dict:
    """One unit (one n): train every seed for K ≈ n steps, test. JSON-able."""
    t = time.perf_counter()
    K = steps_for(n, cfg.steps_per_n)
    X, y = batched_data(cfg.data, seeds, stream=0, n=n)
    traj = train_runs(th0, X, y, cfg.gd.lr, steps=K, every=K, model=model, loss=loss)
    th = final_params(traj)
    test_l, se, err = (np.asarray(a) for a in evaluate(th, test[0], test[1], model, loss))
    _, _, train_err = (np.asarray(a) for a in evaluate(th, X, y, model, loss))
    finite = np.asarray(traj.finite)
    diverged = [dict(n=n, seed=seed, step=int(np.argmin(finite[s])))
                for s, seed in enumerate(seeds) if not finite[s].all()]
    train_loss = np.asarray(traj.losses[:, -1])
    row = dict(n=n, steps=K, train=train_loss, test=test_l, test_se=se, gap=test_l - train_loss,
               test_error=err, train_error=train_err)
    return to_jsonable(dict(row=row, diverged=diverged, time_s=time.perf_counter() - t))


def run(cfg: GeneralizationConfig, progress=None, store=None) -> dict:
    """Run the experiment; returns the summary dict (per-n numbers, fits, verdict).

    ``store`` (a :class:`mhajax.resume.ProgressStore`) keeps each finished n; a rerun
    loads them (``resumed_ns``) and computes the rest."""
    cfg.validate()
    t0 = time.perf_counter()
    d = cfg.data
    model, loss = d.head_model(), d.loss_fn()
    seeds = seed_list(cfg.seeds, cfg.seed0)
    S = len(seeds)
    test = batched_data(d, seeds, stream=2, n=cfg.n_test)
    th0 = batched_init(d, seeds, cfg.heads)
    rows, timings, diverged, resumed = [], {}, [], []
    for n in cfg.ns:
        unit = f"n={n}"
        res = load_or_run(store, unit, lambda: _run_n(cfg, n, th0, test, seeds, model, loss), resumed, n)
        r = res["row"]
        rows.append(dict(r, **{k: _floats(r[k]) for k in
                               ("train", "test", "test_se", "gap", "test_error", "train_error")}))
        timings[n] = res["time_s"]
        diverged += res["diverged"]
        if progress:
            progress(n)
    ns = np.asarray(cfg.ns, dtype=np.float64)
    per = {k: np.stack([r[k] for r in rows], axis=1) for k in
           ("train", "test", "test_se", "gap", "test_error", "train_error")}  # [S, m]
    gap_mean = per["gap"].mean(axis=0)
    se_test = np.sqrt((per["test_se"] ** 2).sum(axis=0)) / S
    se_gap = per["gap"].std(axis=0, ddof=1) / np.sqrt(S)
    resolved = gap_mean > RESOLVED_SE * se_gap
    boot = cfg.boot.kwargs()
    fits = {}
    for name in ("test", "train"):
        fits[name] = bootstrap_slope(ns, per[name], **boot)
        fits[name + "_log_corrected"] = bootstrap_slope(ns, per[name], log_power=cfg.boot.log_power,
                                                        **boot)
    if resolved.sum() >= 3:
        fits["gap"] = bootstrap_slope(ns[resolved], per["gap"][:, resolved], **boot)
        fits["gap_log_corrected"] = bootstrap_slope(ns[resolved], per["gap"][:, resolved],
                                                    log_power=cfg.boot.log_power, **boot)
    else:
        fits["gap"] = fits["gap_log_corrected"] = None
    verdicts = {}
    for name in ("test", "gap", "train"):
        f = fits[name]
        verdicts[name] = (dict(classification="undefined", holds=None) if f is None else
                          dict(classification=classify_slope(f["ci"], f["slope"]),
                               holds=upper_bound_holds(f["ci"], f["slope"])))
    covered, why = rate_applies(model, loss)
    verdict = _verdict(verdicts, diverged, covered, why)
    curves = {k: v.tolist() for k, v in per.items()}
    bands = {k: mean_band(per[k], **boot) for k in ("train", "test", "gap")}
    return dict(**verdict, ns=list(cfg.ns), steps=[r["steps"] for r in rows], seeds=seeds,
                per_seed=curves, bands=bands, se_test=se_test.tolist(), se_gap=se_gap.tolist(),
                resolved=resolved.tolist(), resolved_rule=f"seed-mean gap > {RESOLVED_SE:g} x std_s(gap)/sqrt(S)",
                fits=fits, verdicts=verdicts, diverged=diverged, tolerance=RATE_TOLERANCE,
                theory_applies=covered, theory_note=why, resumed_ns=resumed, heads=cfg.heads,
                n_test=cfg.n_test, level=cfg.boot.level, log_power=cfg.boot.log_power,
                problem=dict(model=d.model, loss=d.loss, data=d.dataset),
                timings_s=timings, wall_time_s=time.perf_counter() - t0)


def _verdict(verdicts, diverged, covered, why) -> dict:
    """FAILED on a diverged run, or when the test-loss or gap slope CI lies entirely above the
    tolerance band; INFORMATIONAL where the rate is not claimed for the (model, loss) pair;
    INCONCLUSIVE where a judged slope is undefined (e.g. the gap resolved at fewer than 3 n)."""
    if diverged:
        return verdict_fields(Verdict.FAILED, f"{len(diverged)} run(s) became non-finite")
    judged = {k: verdicts[k]["holds"] for k in ("test", "gap")}
    if covered and any(h is False for h in judged.values()):
        bad = [k for k, h in judged.items() if h is False]
        return verdict_fields(Verdict.FAILED, f"the {' and '.join(bad)} slope decays more slowly than "
                                              "Õ(1/n) allows")
    if not covered:
        return verdict_fields(Verdict.INFORMATIONAL, f"the Õ(1/n) rate is not claimed here: {why}")
    if any(h is None for h in judged.values()):
        bad = [k for k, h in judged.items() if h is None]
        return verdict_fields(Verdict.INCONCLUSIVE, f"the {' and '.join(bad)} slope is undefined")
    return verdict_fields(Verdict.PASSED, "test loss and gap decay at least as fast as Õ(1/n)")


def report(summary) -> str:
    """Per n the seed-mean losses and the gap with its standard errors; then the slopes over
    n of the test loss, the gap and the train loss with their CIs and verdicts."""
    b = summary["bands"]
    S = len(summary["seeds"])
    rows = []
    for j, n in enumerate(summary["ns"]):
        rows.append([n, summary["steps"][j], fmt(b["train"]["mean"][j]), fmt(b["test"]["mean"][j]),
                     fmt(b["gap"]["mean"][j]), fmt(summary["se_gap"][j]), fmt(summary["se_test"][j]),
                     "yes" if summary["resolved"][j] else "no",
                     fmt(sum(summary["per_seed"]["test_error"][s][j] for s in range(S)) / S)])
    out = [table(["n", "K", "train L̂", "test L", "gap", "se(gap)", "se(test)", "resolved", "test err"], rows),
           f"seed means over {S} seeds, H={summary['heads']}, n_test={summary['n_test']}; se(gap) = std over "
           f"seeds / √S (includes test sampling); se(test) = test-sampling error alone; "
           f"{summary['resolved_rule']}."]
    f, v = summary["fits"], summary["verdicts"]
    rows = []
    for name, label in (("test", "test loss L(θ_K)"), ("gap", "gap L − L̂ (resolved n)"),
                        ("train", "train loss L̂(θ_K)")):
        rows.append([label, fmt_ci(f[name]), fmt_window(f[name]), fmt_ci(f[name + "_log_corrected"]),
                     v[name]["classification"],
                     {True: "yes", False: "NO", None: "undef"}[v[name]["holds"]]])
    level = summary["level"]
    out += ["", table(["slope over n", f"slope [{100 * level:g}% CI]", "lower/upper half",
                       f"slope of y/log^{summary['log_power']:g}n", "vs -1", "Õ(1/n) not contradicted"],
                      rows),
            rule_text(level),
            "verdict uses the test-loss and gap rows; the train row (K = n, so it is the convergence rate) is "
            "informational."]
    prob = summary["problem"]
    out.append(f"problem: --model {prob['model']} --loss {prob['loss']} --data {prob['data']}.")
    if not summary["theory_applies"]:
        out.append(f"INFORMATIONAL: the Õ(1/n) rate is not claimed for this (model, loss) pair "
                   f"({summary['theory_note']}); the slopes are reported, not judged.")
    if summary.get("resumed_ns"):
        out.append(f"resumed from saved progress: n = {summary['resumed_ns']}")
    unresolved = [n for n, r in zip(summary["ns"], summary["resolved"]) if not r]
    if unresolved:
        out.append(f"gap not resolved (seed-mean gap <= 2·se(gap)) at n = {unresolved}: excluded from the gap fit.")
    if f["gap"] is not None and f["gap"]["undefined_resamples"]:
        out.append(f"{f['gap']['undefined_resamples']} of {f['gap']['resamples']} bootstrap resamples had a "
                   f"non-positive mean gap somewhere and no slope.")
    out.extend(diverged_lines(summary["diverged"]))
    return "\n".join(out)


def headline(summary) -> str:
    """``slope over n: test -1.29 [...] (steeper), gap -1.92 [...] (steeper)``."""
    f, v = summary["fits"], summary["verdicts"]
    return (f"slope over n: test {fmt_ci(f['test'])} ({v['test']['classification']}), "
            f"gap {fmt_ci(f['gap'])} ({v['gap']['classification']})")


def section(summary) -> str:
    """REPORT.md: per-n means and the three slopes with their verdicts."""
    b = summary["bands"]
    rows = [[n, summary["steps"][j], b["train"]["mean"][j], b["test"]["mean"][j], b["gap"]["mean"][j],
             summary["resolved"][j]] for j, n in enumerate(summary["ns"])]
    t1 = md_table(["n", "K", "train L̂", "test L", "gap", "gap resolved"], rows)
    rows = [[k, fmt_ci(summary["fits"].get(k)), summary["verdicts"][k]["classification"],
             summary["verdicts"][k]["holds"]] for k in ("test", "gap", "train")]
    return t1 + "\n\n" + md_table(["slope over n of", "slope [CI]", "vs −1", "Õ(1/n) not contradicted"], rows)


# -- peak memory (issue 16): what `run` holds at once, checked by the CLI before it starts --

def memory(cfg: GeneralizationConfig, *, dtype: str = "float64", backend: str = "cpu"):
    """The estimated peak memory of :func:`run` (:func:`mhajax.runtime.memory.generalization`):
    the test set ``[S, n_test, T, d]`` resident, then per n the training data and GD of all
    seeds at once, and the evaluation in chunks of 2048 test samples."""
    d = cfg.data
    return mem.generalization(ns=tuple(cfg.ns), heads=cfg.heads, seeds=cfg.seeds,
                              steps_per_n=cfg.steps_per_n, n_test=cfg.n_test, tokens=d.tokens,
                              dim=d.dim, model=d.model, dtype=dtype, backend=backend)


check("generalization", config=GeneralizationConfig, report=report, headline=headline,
      section=section, claim="test − train loss = Õ(1/n) after K ≈ n GD steps", memory=memory)(run)
