"""The README's main command, ``python -m verify`` on its defaults, as a user runs it (slow tier):
on one device and on four (``XLA_FLAGS=--xla_force_host_platform_device_count=4``), each
exits 0 with no traceback and nothing INCONCLUSIVE or FAILED, every number of every
summary.json agrees to 1e-10 (``helpers.summary_differences``), and ``figures --no-run``
draws from the results. (A file of its own: CI's two workers take a file each.)"""
from __future__ import annotations

import json

import pytest
from helpers import run_as_user, summary_differences

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One compilation cache for the module's processes, as a user's runs share theirs."""
    return tmp_path_factory.mktemp("xla-cache")


@pytest.fixture(scope="module")
def main_job(tmp_path_factory, cache):
    """The README's main command, ``python -m verify``, on one device and on four."""
    out = {}
    for devices in (1, 4):
        cwd = tmp_path_factory.mktemp(f"main{devices}")
        r = run_as_user(["verify"], cwd, cache, devices=devices, timeout=1200)
        out[devices] = (cwd, r)
    return out


def test_the_main_job_exits_0_with_no_traceback(main_job):
    for devices, (cwd, r) in main_job.items():
        assert "Traceback" not in r.stdout + r.stderr, r.stderr[-4000:]
        assert r.returncode == 0, (devices, (r.stdout + r.stderr)[-4000:])
        assert "INCONCLUSIVE" not in r.stdout and "FAILED" not in r.stdout


def test_the_main_job_on_four_devices_gives_the_numbers_of_one(main_job):
    one, four = main_job[1][0] / "results", main_job[4][0] / "results"
    names = sorted(p.parent.name for p in one.glob("*/summary.json"))
    assert names and names == sorted(p.parent.name for p in four.glob("*/summary.json"))
    for name in names:
        a = json.loads((one / name / "summary.json").read_text())
        b = json.loads((four / name / "summary.json").read_text())
        assert summary_differences(a, b, rtol=1e-10) == [], name


def test_figures_from_the_main_jobs_results(main_job, tmp_path, cache):
    cwd = main_job[1][0]
    args = ["figures", "--no-run", "--out", str(tmp_path / "figs"), "--report", str(tmp_path / "REPORT.md")]
    r = run_as_user(args, cwd, cache)
    assert r.returncode == 0 and "Traceback" not in r.stdout + r.stderr, (r.stdout + r.stderr)[-4000:]
    pngs = sorted(p.name for p in (tmp_path / "figs").glob("*.png"))
    assert len(pngs) >= 6 and (tmp_path / "REPORT.md").exists(), (pngs, (r.stdout + r.stderr)[-2000:])
