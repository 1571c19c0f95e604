"""REPORT.md's side-by-side table of two presets (quick ``results/`` and ``results-paper/``):
one row per check with each directory's recorded verdict and wall time, "not run" where a
file is missing, and the table only when a second directory exists."""
import json
from pathlib import Path

from mhajax.experiments import CHECKS
from mhajax.figures.report import other_preset_dir, render


def _write(d: Path, check: str, verdict: str, seconds: float):
    (d / check).mkdir(parents=True)
    (d / check / "summary.json").write_text(json.dumps(dict(verdict=verdict, wall_time_s=seconds)))


def test_side_by_side_rows_come_from_each_directory(tmp_path):
    quick, paper = tmp_path / "results", tmp_path / "results-paper"
    quick.mkdir()
    paper.mkdir()
    _write(quick, "one-step", "inconclusive", 12.5)
    _write(paper, "one-step", "passed", 51.8)
    _write(paper, "heads", "not reached", 246.5)
    text = render(quick, tmp_path / "R.md", tmp_path / "figs", paper)
    assert "## Two presets side by side" in text
    table = text.split("## Two presets side by side")[1]
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
            for line in table.splitlines() if line.startswith("| ") and not line.startswith("| check")}
    assert set(rows) == set(CHECKS)
    assert rows["one-step"][0] == "**INCONCLUSIVE**" and rows["one-step"][1] == "12.5"
    assert rows["one-step"][3] == "passed" and rows["one-step"][4] == "51.8"
    assert rows["heads"][0] == "not run" and rows["heads"][3] == "**NOT REACHED**"
    assert rows["weak-convexity"][0] == rows["weak-convexity"][3] == "not run"


def test_no_second_directory_no_table(tmp_path):
    (tmp_path / "results").mkdir()
    assert "side by side" not in render(tmp_path / "results", tmp_path / "R.md", tmp_path / "f", None)
    assert "side by side" not in render(tmp_path / "results", tmp_path / "R.md", tmp_path / "f",
                                        tmp_path / "missing")


def test_other_preset_dir():
    assert other_preset_dir("results") == Path("results-paper")
    assert other_preset_dir("x/results-paper") == Path("x/results")
    assert other_preset_dir("mine") is None
