"""A tiny stdlib-only progress display: a bar over steps and a ticking timer
for long single calls. Silent when disabled or when stdout is not a terminal."""
from __future__ import annotations

import sys
import threading
import time


def enabled(quiet: bool = False, stream=None) -> bool:
    """Whether to draw: not ``quiet`` and ``stream`` (default stdout) is a terminal."""
    stream = stream or sys.stdout
    return not quiet and hasattr(stream, "isatty") and stream.isatty()


class Bar:
    """``with Bar(total, "figures") as bar: bar.update("fig1")`` draws
    ``figures [#####     ] 3/6 fig1`` on one line."""

    def __init__(self, total: int, label: str = "", *, show: bool = True, width: int = 24, stream=None):
        self.total, self.label, self.width = max(1, total), label, width
        self.stream = stream or sys.stdout
        self.show, self.done = show, 0

    def _draw(self, note=""):
        if not self.show:
            return
        fill = int(self.width * self.done / self.total)
        self.stream.write(f"\r{self.label} [{'#' * fill}{' ' * (self.width - fill)}] "
                          f"{self.done}/{self.total} {note}"[:120].ljust(80))
        self.stream.flush()

    def __enter__(self):
        self._draw()
        return self

    def update(self, note: str = "", advance: int = 1):
        """Advance the bar by ``advance`` and show ``note``."""
        self.done = min(self.total, self.done + advance)
        self._draw(note)

    def __exit__(self, *exc):
        if self.show:
            self.stream.write("\n")
            self.stream.flush()


class Timer:
    """``with Timer("verify convergence"):`` shows ``verify convergence ... 12 s``
    ticking once a second while the block runs (a daemon thread)."""

    def __init__(self, label: str, *, show: bool = True, stream=None):
        self.label, self.show = label, show
        self.stream = stream or sys.stdout
        self._stop = threading.Event()
        self._width = 0

    def _line(self, text: str, end: str = ""):
        """Redraw the status line: a carriage return, then the text, padded over a longer one."""
        text = text[:120]
        self.stream.write("\r" + text.ljust(self._width) + end)
        self.stream.flush()
        self._width = 0 if end else len(text)

    def _text(self) -> str:
        return f"{self.label} ... {time.perf_counter() - self.t0:.0f} s"

    def _tick(self):
        while not self._stop.wait(1.0):
            self._line(self._text())

    def __enter__(self):
        self.t0 = time.perf_counter()
        if self.show:
            self._thread = threading.Thread(target=self._tick, daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0
        if self.show:
            self._stop.set()
            self._thread.join()
            self._line(f"{self.label} ... {self.seconds:.0f} s", end="\n")


class Status(Timer):
    """A ticking timer that also shows the last finished unit of a sweep:
    ``verify convergence ... 12 s (H=4 done)``. Call it as the sweep's ``progress``
    callback: ``status(H)`` or ``status("n=128")``; every positional argument
    is joined into the note (non-string objects such as result dicts are skipped)."""

    def __init__(self, label: str, *, show: bool = True, stream=None):
        super().__init__(label, show=show, stream=stream)
        self.note = ""
        self.units = 0

    def __call__(self, *parts):
        """Record a finished unit; its string/number parts become the note."""
        self.units += 1
        shown = [str(p) for p in parts if isinstance(p, (str, int, float))]
        self.note = f" ({', '.join(shown)} done)" if shown else f" ({self.units} done)"

    def _text(self) -> str:
        return super()._text() + self.note
