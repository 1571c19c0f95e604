"""The one registry of checks: every runner (``python -m verify <check>``, ``verify all``,
``python -m figures``, REPORT.md) reads it, and :func:`check` is the only way in.

An entry (:class:`Check`) names a command and gives what every runner needs: its config
(a dataclass whose options become the command's flags), the experiment (``run``), the
terminal table (``report``), the one-line summary after the verdict (``headline``), the
REPORT.md section (``section``), presets, and whether ``verify all`` runs it.
"""
from __future__ import annotations

import functools
import sys
from typing import Callable, NamedTuple

from mhajax.errors import InputError
from mhajax.runtime.records import decode, roundtrip


class Check(NamedTuple):
    """One registered check.

    ``run(cfg, *, store=None, progress=None) -> summary`` (holding ``verdict``,
    ``verdict_reason``, ``passed``, ``seeds`` and ``wall_time_s``);
    ``report(summary) -> str``; ``headline(summary) -> str``; ``section(summary) -> str``
    (Markdown); ``presets``: name -> dotted config overrides (``{"gd.steps": 100}``);
    ``claim``: the paper's statement in words; ``memory(cfg)``: the run's dominant arrays,
    ``[(label, shape), ...]`` (:mod:`mhajax.runtime.memory`), ``None`` for none; ``summary``:
    the type of what ``run`` returns (a NamedTuple, or a union of them; ``None``: a JSON-ready
    dict), which :meth:`load` rebuilds from a summary.json for the renderers, and which
    ``run`` returns exactly as that file gives it back (:func:`check`)."""

    name: str
    config: type
    run: Callable
    report: Callable
    headline: Callable
    section: Callable
    claim: str
    in_all: bool = True
    presets: dict = {}
    memory: Callable | None = None
    summary: object = None

    def load(self, data: dict):
        """The typed summary of a parsed summary.json, its provenance block ``meta`` aside
        (:func:`mhajax.runtime.records.decode`; an :class:`InputError` names a missing or
        mistyped field); ``data`` itself for a check whose summary is a dict."""
        if self.summary is None:
            return data
        return decode(self.summary, {k: v for k, v in data.items() if k != "meta"}, f"{self.name} summary")

    @property
    def description(self) -> str:
        """The first line of the experiment module's docstring."""
        doc = sys.modules[self.run.__module__].__doc__ or self.claim
        return doc.strip().splitlines()[0]

    @property
    def module(self) -> str:
        """The experiment module, named as the command (``weak-convexity`` -> ``weak_convexity``)."""
        return self.name.replace("-", "_")


CHECKS: dict = {}

#: the preset every check has: its own defaults.
QUICK = "quick"


def check(name: str, *, config: type, report: Callable, headline: Callable, section: Callable,
          claim: str, in_all: bool = True, presets: dict | None = None, memory: Callable | None = None,
          summary: object = None):
    """Decorator registering an experiment's ``run`` as the check ``name``; returns the
    registered ``run``: with a ``summary`` type, ``run`` followed by
    :func:`~mhajax.runtime.records.roundtrip`, so that what it returns equals what its
    summary.json gives back (NaN as ``None``, tuples as lists), called from the CLI or not.

    ``memory(cfg) -> [(label, shape), ...]``: the dominant arrays of a run with ``cfg``
    (checked by the CLI before anything is allocated: :func:`mhajax.cli.verify.memory_guard`)."""
    def wrap(run):
        if summary is not None:
            compute = run

            @functools.wraps(compute)
            def run(*args, **kwargs):
                return roundtrip(summary, compute(*args, **kwargs))
        CHECKS[name] = Check(name, config, run, report, headline, section, claim, in_all,
                             {QUICK: {}, **(presets or {})}, memory, summary)
        return run
    return wrap


def get_check(name: str) -> Check:
    """The registered check called ``name``; :class:`InputError` for an unknown one."""
    if name not in CHECKS:
        raise InputError(f"unknown check {name!r}; choose from {', '.join(CHECKS)}")
    return CHECKS[name]


def preset(entry: Check, name: str) -> dict:
    """The overrides of preset ``name`` of ``entry`` (``quick``, the defaults, always exists);
    :class:`InputError` for an unknown one."""
    if name == QUICK:
        return entry.presets.get(QUICK, {})
    if name not in entry.presets:
        raise InputError(f"--preset {name!r} is not a preset of {entry.name}; choose from "
                         f"{', '.join(entry.presets)}")
    return entry.presets[name]


__all__ = ["Check", "CHECKS", "QUICK", "check", "get_check", "preset"]
