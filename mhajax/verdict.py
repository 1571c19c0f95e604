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

:func:`worst` combines several verdicts (``verify all``): the most severe one wins, in the
order FAILED, PREMISE_VIOLATED, INCONCLUSIVE, NOT_REACHED, INFORMATIONAL, PASSED.
"""
from __future__ import annotations

import enum

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


def worst(verdicts) -> Verdict:
    """The most severe of ``verdicts`` (``INCONCLUSIVE`` when there are none: nothing judged)."""
    vs = [Verdict(v) for v in verdicts]
    if not vs:
        return Verdict.INCONCLUSIVE
    return min(vs, key=_SEVERITY.index)


def exit_code(verdict) -> int:
    """Exit code of a verdict given as a :class:`Verdict` or its string value."""
    return Verdict(verdict).exit_code


def from_exit_code(code: int):
    """The verdict a process exit code stands for, or ``None`` (bad input, interrupt, crash)."""
    for v, c in _EXIT.items():
        if c == code:
            return v
    return None


__all__ = ["Verdict", "worst", "exit_code", "from_exit_code", "EXIT_BAD_INPUT", "EXIT_INTERRUPTED"]
