"""One vocabulary of verdicts, and its one mapping to exit codes.

Every check ends in exactly one :class:`Verdict`:

================  ====  ==================================================================
verdict           exit  meaning
================  ====  ==================================================================
PASSED            0     a claim of the paper was judged, its premises held, and it held
FAILED            1     a judged claim was violated, or a trajectory diverged
(bad input)       2     not a verdict: the command refused its input (one line, nothing written)
INCONCLUSIVE      3     the claim applies, but too little could be judged (e.g. L̂ underflowed)
PREMISE_VIOLATED  4     a measurable premise of the claim failed (e.g. a step size beyond the
                        theory's); the numbers are reported, the claim is not judged
INFORMATIONAL     5     the paper makes no claim for this setting; numbers reported only
NOT_REACHED       6     the sizes run do not reach the regime the claim is about
================  ====  ==================================================================

:func:`worst` combines several verdicts: the most severe one wins, in the order FAILED,
PREMISE_VIOLATED, INCONCLUSIVE, NOT_REACHED, INFORMATIONAL, PASSED.

``verify all`` exits with :func:`all_exit_code`: 0 when every claim the run could judge held
(no FAILED, INCONCLUSIVE or PREMISE_VIOLATED) and no input was refused; a NOT_REACHED (a
claim out of reach at the sizes a machine can run) or INFORMATIONAL (no claim of the paper
for the setting) check is shown as such and does not by itself make the exit non-zero.
``--strict`` makes every verdict other than PASSED count.
"""
from __future__ import annotations

import enum
from typing import Mapping, NamedTuple

EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


class Verdict(str, enum.Enum):
    """The outcome of a check (its value is what result files record)."""

    PASSED = "passed"
    FAILED = "failed"
    INCONCLUSIVE = "inconclusive"
    PREMISE_VIOLATED = "premise violated"
    INFORMATIONAL = "informational"
    NOT_REACHED = "not reached"

    @property
    def exit_code(self) -> int:
        """The process exit code of this verdict (see the module table)."""
        return _EXIT[self]

    @property
    def label(self) -> str:
        """Upper-case form printed on the verdict line, e.g. ``PREMISE VIOLATED``."""
        return self.value.upper()


_EXIT = {Verdict.PASSED: 0, Verdict.FAILED: 1, Verdict.INCONCLUSIVE: 3,
         Verdict.PREMISE_VIOLATED: 4, Verdict.INFORMATIONAL: 5, Verdict.NOT_REACHED: 6}
_SEVERITY = (Verdict.FAILED, Verdict.PREMISE_VIOLATED, Verdict.INCONCLUSIVE, Verdict.NOT_REACHED,
             Verdict.INFORMATIONAL, Verdict.PASSED)


class Judgement(NamedTuple):
    """What a check's ``judge`` returns: the verdict, one line saying why, and the figures
    behind it (name -> number or text, e.g. ``{"judged": 9, "total": 11}``; not written to the
    summary, which records :meth:`fields` only)."""

    verdict: Verdict
    reason: str
    figures: Mapping = {}

    @property
    def passed(self):
        """True for PASSED, False for FAILED, None for every other verdict."""
        v = Verdict(self.verdict)
        return True if v is Verdict.PASSED else (False if v is Verdict.FAILED else None)

    def fields(self) -> dict:
        """The summary fields: ``verdict`` (its value), ``verdict_reason``, ``passed``."""
        return dict(verdict=Verdict(self.verdict).value, verdict_reason=self.reason, passed=self.passed)


def worst(verdicts) -> Verdict:
    """The most severe of ``verdicts`` (``INCONCLUSIVE`` when there are none: nothing judged)."""
    vs = [Verdict(v) for v in verdicts]
    if not vs:
        return Verdict.INCONCLUSIVE
    return min(vs, key=_SEVERITY.index)


#: verdicts that do not make ``verify all`` exit non-zero (unless ``--strict``)
NON_BLOCKING = (Verdict.PASSED, Verdict.NOT_REACHED, Verdict.INFORMATIONAL)


def all_exit_code(verdicts, *, strict: bool = False, bad_input: bool = False, errors: bool = False) -> int:
    """The exit code of a run of several checks (``verify all``). ``verdicts``: those the
    checks ended with; ``bad_input``: a check refused its input (exit 2, which wins);
    ``errors``: a check ended without a verdict (a crash: exit 1). Otherwise the code of the
    most severe verdict among those that count — every verdict outside :data:`NON_BLOCKING`,
    or every verdict but PASSED when ``strict`` — and 0 when none counts. No verdict at all
    (nothing ran) is INCONCLUSIVE."""
    if bad_input:
        return EXIT_BAD_INPUT
    if errors:
        return Verdict.FAILED.exit_code
    vs = [Verdict(v) for v in verdicts]
    if not vs:
        return Verdict.INCONCLUSIVE.exit_code
    counted = [v for v in vs if v is not Verdict.PASSED and (strict or v not in NON_BLOCKING)]
    return worst(counted).exit_code if counted else 0


def exit_code(verdict) -> int:
    """Exit code of a verdict given as a :class:`Verdict` or its string value."""
    return Verdict(verdict).exit_code


def from_exit_code(code: int):
    """The verdict a process exit code stands for, or ``None`` (bad input, interrupt, crash)."""
    for v, c in _EXIT.items():
        if c == code:
            return v
    return None


__all__ = ["Verdict", "Judgement", "worst", "exit_code", "from_exit_code", "all_exit_code", "NON_BLOCKING",
           "EXIT_BAD_INPUT", "EXIT_INTERRUPTED"]
