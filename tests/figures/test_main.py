"""``python -m figures`` front end: bad input (an unknown figure, an unknown preset) is one
line and exit 2, with nothing written and no check run; ``--preset`` picks its own results
directory and is passed to the checks it runs."""
from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from mhajax.cli.common import run_main  # noqa: E402
from mhajax.figures import data  # noqa: E402
from mhajax.figures.main import main as figures_main  # noqa: E402
from mhajax.figures.main import select  # noqa: E402


@pytest.mark.parametrize("args, needle", [
    (["--only", "fig99"], "'fig99'"),
    (["--only", "2,nope"], "'nope'"),
    (["--preset", "huge"], "'huge'"),
    (["--bogus"], "--bogus"),
])
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, capsys, monkeypatch, args, needle):
    ran = []
    monkeypatch.setattr(data, "run_check", lambda *a, **k: ran.append(a) or 0)
    out, rep = tmp_path / "figs", tmp_path / "R.md"
    rc = run_main(figures_main, [*args, "--from", str(tmp_path / "res"), "--out", str(out),
                                 "--report", str(rep)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert len(err) == 1 and err[0].startswith("error:") and needle in err[0]
    assert not out.exists() and not rep.exists() and not (tmp_path / "res").exists()
    assert ran == []


def test_select_accepts_numbers_names_and_prefixes():
    assert select("2") == select("fig2") == [select(None)[1]]
    assert select("1,1") == [select(None)[0]]


def test_preset_reaches_the_checks_and_picks_results_dir(tmp_path, monkeypatch):
    calls = []

    def fake_run(results_dir, check, *, show=False, preset="quick"):
        calls.append((str(results_dir), check, preset))
        return 0

    monkeypatch.setattr(data, "run_check", fake_run)
    monkeypatch.chdir(tmp_path)
    rc = figures_main(["--preset", "paper", "--only", "2", "--out", str(tmp_path / "f"),
                       "--report", str(tmp_path / "R.md"), "--quiet"])
    assert rc == 1  # the fake run wrote nothing: the figure is skipped, and says so
    assert calls and all(r == "results-paper" and p == "paper" for r, _, p in calls)
    assert "results-paper" in (tmp_path / "R.md").read_text()
