"""verify.progress: the bar, the ticking timer and the status line draw only
when enabled (a terminal and not --quiet), and draw what they say."""
from __future__ import annotations

import io
import threading
import time

import pytest

from mhajax.runtime.progress import Bar, Status, Timer, enabled


class TTY(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self):
        return True


class NoIsatty:
    """A stream without ``isatty`` at all (some wrapped streams)."""

    def __init__(self):
        self.parts = []

    def write(self, s):
        self.parts.append(s)

    def flush(self):
        pass


def test_enabled_only_on_a_terminal_and_not_quiet(capsys):
    assert enabled(False, TTY())
    assert not enabled(True, TTY())            # --quiet wins on a terminal
    assert not enabled(False, io.StringIO())   # a pipe / file: silent
    assert not enabled(False, NoIsatty())
    assert not enabled(False)                  # default stream: pytest's captured stdout, not a tty


def test_bar_draws_fill_count_and_note():
    buf = TTY()
    with Bar(4, "figs", show=True, stream=buf, width=8) as bar:
        assert buf.getvalue().startswith("\rfigs [        ] 0/4")
        bar.update("fig1")
        bar.update("fig2")
    out = buf.getvalue()
    last = out.split("\r")[-1]
    assert last.startswith("figs [####    ] 2/4 fig2") and out.endswith("\n")
    assert out.count("\r") == 3               # one redraw on enter, one per update


def test_bar_clamps_and_handles_zero_total():
    buf = TTY()
    with Bar(0, "x", show=True, stream=buf, width=4) as bar:   # total 0 -> 1, no division by zero
        bar.update(advance=5)
    assert "[####] 1/1" in buf.getvalue()


def test_bar_silent_when_not_shown():
    buf = TTY()
    with Bar(3, "x", show=False, stream=buf) as bar:
        bar.update("a")
    assert buf.getvalue() == "" and bar.done == 1


def test_timer_silent_when_not_shown_but_still_times():
    buf = TTY()
    n_threads = threading.active_count()
    with Timer("t", show=False, stream=buf) as t:
        assert threading.active_count() == n_threads   # no ticking thread started
        time.sleep(0.05)
    assert buf.getvalue() == ""
    assert 0.04 < t.seconds < 5


def test_timer_ticks_and_ends_the_line():
    buf = TTY()
    with Timer("verify demo", show=True, stream=buf) as t:
        time.sleep(1.3)                                 # one tick after 1 s
    out = buf.getvalue()
    ticks = out.split("\r")[1:]
    assert len(ticks) >= 2                              # >= 1 tick + the final line
    assert ticks[0].startswith("verify demo ... 1 s")
    assert ticks[-1].rstrip().endswith(f"{t.seconds:.0f} s") and out.endswith("\n")
    assert not t._thread.is_alive()


def test_timer_stops_its_thread_when_the_block_raises():
    buf = TTY()
    with pytest.raises(KeyError):
        with Timer("t", show=True, stream=buf) as t:
            raise KeyError("boom")
    assert not t._thread.is_alive() and buf.getvalue().endswith("\n")


def test_status_note_joins_scalars_and_skips_objects():
    st = Status("verify variants", show=False)
    assert st.note == ""
    st("softmax", 4, {"P": 10})                        # the variants callback shape
    assert st.note == " (softmax, 4 done)"
    st({"result": 1})                                  # nothing printable: count the units
    assert st.note == " (2 done)" and st.units == 2


def wait_for(pred, limit=10.0):
    t0 = time.perf_counter()
    while not pred() and time.perf_counter() - t0 < limit:
        time.sleep(0.02)
    return pred()


def test_status_line_ticks_with_the_note():
    buf = TTY()
    with Status("verify heads", show=True, stream=buf) as st:
        st("n=1024")
        assert wait_for(lambda: "\r" in buf.getvalue())      # first tick after ~1 s
    draws = buf.getvalue().split("\r")[1:]
    assert draws[0].startswith("verify heads ... 1 s (n=1024 done)")
    assert draws[-1].rstrip() == f"verify heads ... {st.seconds:.0f} s" and buf.getvalue().endswith("\n")


def test_status_line_pads_over_a_longer_previous_line():
    buf = TTY()
    st = Status("verify heads", show=True, stream=buf)
    st.t0 = time.perf_counter()
    st("n=1024")
    st._line(st._text())
    st("n=64")                                      # a shorter note than the one drawn
    st._line(st._text())
    first, second = buf.getvalue().split("\r")[1:]
    assert second.rstrip().endswith("(n=64 done)") and len(second) == len(first)  # no stale "24 done)"


def test_status_truncates_long_lines():
    buf = TTY()
    st = Status("x" * 200, show=True, stream=buf)
    st.t0 = time.perf_counter()
    st._line(st._text())
    assert len(buf.getvalue()) == 1 + 120


def test_run_and_save_draws_nothing_off_terminal(tmp_path, capsys):
    """run_and_save(show_progress=True) off a terminal: no status line, and the
    progress callback is not passed (the run sees no ``progress``)."""
    from mhajax.cli.common import run_and_save

    class Cfg:
        def to_dict(self):
            return {"k": 1}

    seen = {}

    def run(cfg, progress=None):
        seen["progress"] = progress
        return {"seeds": [0], "passed": True}

    summary, path = run_and_save(run, Cfg(), tmp_path / "out", show_progress=True)
    assert seen["progress"] is None and summary["passed"] and path.is_file()
    out = capsys.readouterr()
    assert "\r" not in out.out and "\r" not in out.err
