"""Input fuzzing of every ``python -m verify`` check.

Every subcommand's parser is introspected; each flag gets values that no valid run
accepts (non-numbers, NaN/inf, negatives, zeros where > 0 is needed, huge integers,
empty or malformed lists, unknown names, broken ``--data npz`` files, unknown flags).
The contract checked for every one (in-process through :func:`mhajax.cli.verify.main`):

* exit code 2, and stderr is exactly one line ``error: ...`` naming the flag or the value;
* no traceback, no exception escaping ``main``;
* no ``summary.json`` written, and a ``summary.json`` already in ``--out`` is left byte-identical;
* nothing heavy runs first: ``run_and_save`` and every registered check's ``run`` are replaced
  by a tripwire, so a bad value that slips through validation fails the test at once instead
  of starting a sweep.

The parametrized table is exhaustive over (subcommand, flag, bad value); the hypothesis
test combines several bad and good flags at random. Cases that expose a bug in a file this
test does not own are marked ``xfail(strict=True)`` with the file and the fix.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mhajax.cli.verify
from mhajax.cli.flags import build_parser
from mhajax.cli.verify import main
from mhajax.experiments import CHECKS
from mhajax.experiments.registry import get_check

SUBCOMMANDS = list(CHECKS)

HUGE = str(10 ** 30)

# flags whose values are lists (parsed by the command, not by argparse)
INT_LISTS = {"--heads", "--ns"}
FLOAT_LISTS: set = set()
NAME_LISTS = {"--models", "--references", "--only", "--starts"}
NAMES = {"--model", "--loss", "--data", "--method", "--dtype", "--links", "--preset"}
# numeric flags for which <= 0 (or < 0) is out of range in every command that has them
POSITIVE = {"--lr", "--gap-tol", "--init-const", "--lr-zero", "--lr-random", "--level", "--steps-per-n",
            "--regime-c", "--zeta", "--seeds", "--n", "--tokens", "--dim", "--n-test",
            "--resamples", "--fit-points", "--lanczos-steps", "--max-cycles", "--grid", "--k-signal"}
NONNEGATIVE = {"--sigma", "--u-scale", "--w-scale", "--one-step-lr", "--seed0", "--clusters",
               "--signal", "--every", "--fit-start", "--save-every", "--boot-seed", "--steps"}
# integer flags that size an allocation: a huge value must be refused up front
SIZES = {"--seeds", "--n", "--tokens", "--dim", "--steps", "--n-test", "--resamples", "--grid",
         "--lanczos-steps", "--max-cycles", "--fit-points", "--clusters", "--k-signal", "--seed0"}


class ReachedCompute(AssertionError):
    pass


def _parser(name):
    return build_parser(get_check(name))


def _options(name):
    """``{flag: kind}`` of a subcommand's value-taking options."""
    out = {}
    for a in _parser(name)._actions:
        if not a.option_strings or a.nargs == 0 or a.dest == "help":
            continue
        flag = max(a.option_strings, key=len)
        if a.type is int:
            kind = "int"
        elif a.type is float:
            kind = "float"
        elif flag in INT_LISTS:
            kind = "int_list"
        elif flag in FLOAT_LISTS:
            kind = "float_list"
        elif flag in NAME_LISTS or flag in NAMES:
            kind = "name"
        else:
            kind = "other"
        out[flag] = kind
    return out


def bad_values(flag: str, kind: str) -> list[str]:
    """Values of ``flag`` that every valid run must refuse."""
    v = []
    if kind == "int":
        v += ["abc", "1.5", "", "nan", "1e3", "-1" if (flag in POSITIVE or flag in NONNEGATIVE) else None]
        v += ["0"] if flag in POSITIVE else []
        v += [HUGE] if flag in SIZES else []
    elif kind == "float":
        v += ["abc", "", "nan", "inf", "-inf", "1e999"]
        v += ["-1"] if (flag in POSITIVE or flag in NONNEGATIVE) else []
        v += ["0"] if flag in POSITIVE else []
    elif kind == "int_list":
        v += ["", ",", "1,,2", "0", "-1", "abc", "1.5", "nan", "2," + HUGE]
    elif kind == "float_list":
        v += ["", ",", "1,,2", "0", "-1", "abc", "nan", "inf", "1e999"]
    elif kind == "name":
        v += ["bogus", ""]
    return [x for x in v if x is not None]


def cases():
    out = []
    for name in SUBCOMMANDS:
        for flag, kind in _options(name).items():
            for val in bad_values(flag, kind):
                out.append((name, flag, val))
        out.append((name, "--bogus-flag", "1"))
    return out


CASES = cases()

# Bugs found in files this suite does not own are marked here, strict xfail, until fixed
# (none open now: the 10**30 sizes and the --k-signal checks were fixed in mhajax/validate.py,
# experiment.seed_list and the configs' validate()).
KNOWN = {}


def _xfail(case):
    reason = KNOWN.get(case)
    return pytest.param(*case, marks=pytest.mark.xfail(strict=True, reason=reason)) if reason else \
        pytest.param(*case)


@pytest.fixture(autouse=True)
def tripwire(monkeypatch):
    """Replace ``run_and_save`` and every registered check's ``run`` by a tripwire (see the
    module docstring), and restore float64 after a command that switched it."""
    import jax

    def trip(*a, **kw):
        raise ReachedCompute("validation accepted it: the run started")

    monkeypatch.setattr(mhajax.cli.verify, "run_and_save", trip)
    for name, entry in CHECKS.items():
        monkeypatch.setitem(CHECKS, name, entry._replace(run=trip))
    yield
    jax.config.update("jax_enable_x64", True)


def check_refused(capsys, tmp_path, argv, needles, *, preexisting: bool):
    """Run ``main(argv + --out OUT)`` and check the contract of the module docstring."""
    out = tmp_path / "out"
    before = None
    if preexisting:
        out.mkdir(parents=True, exist_ok=True)
        (out / "summary.json").write_bytes(b'{"sentinel": "untouched"}\n')
        before = (out / "summary.json").read_bytes()
    capsys.readouterr()
    rc = main([*argv, "--out", str(out)])
    cap = capsys.readouterr()
    err = cap.err.strip()
    assert rc == 2, f"{argv}: exit {rc}, stderr {cap.err!r}"
    assert err.startswith("error:") and "\n" not in err, f"{argv}: stderr not one line: {cap.err!r}"
    assert "Traceback" not in cap.err + cap.out
    assert any(n and n in err for n in needles), f"{argv}: {err!r} names none of {needles}"
    if preexisting:
        assert (out / "summary.json").read_bytes() == before
    else:
        assert not (out / "summary.json").exists()


def _needles(flag, val):
    bare = flag.lstrip("-")
    return [val, bare, bare.replace("-", "_"), bare.replace("-", " "), repr(val),
            *[p for p in val.split(",") if len(p) > 2]]


@pytest.mark.parametrize("name,flag,val", [_xfail(c) for c in CASES],
                         ids=[f"{n}:{f}={v[:12]}" for n, f, v in CASES])
def test_every_flag_refuses_bad_values(name, flag, val, capsys, tmp_path):
    check_refused(capsys, tmp_path, [name, f"{flag}={val}"], _needles(flag, val),
                  preexisting=len(val) % 2 == 1)


# --- the data models: --data npz with missing / garbage / malformed files ----------------

def _npz_files(tmp_path):
    rng = np.random.default_rng(0)
    good_X = rng.normal(size=(80, 6, 8))
    good_y = np.where(np.arange(80) % 2 == 0, 1.0, -1.0)
    files = {}
    (tmp_path / "garbage.npz").write_bytes(b"this is not a zip archive")
    files["garbage"] = tmp_path / "garbage.npz"
    np.savez(tmp_path / "noX.npz", Z=good_X, y=good_y)
    files["noX"] = tmp_path / "noX.npz"
    Xn = good_X.copy()
    Xn[3, 2, 1] = np.nan
    np.savez(tmp_path / "nan.npz", X=Xn, y=good_y)
    files["nan"] = tmp_path / "nan.npz"
    np.savez(tmp_path / "labels01.npz", X=good_X, y=(good_y + 1) / 2)
    files["labels01"] = tmp_path / "labels01.npz"
    np.savez(tmp_path / "shape.npz", X=good_X[:, :, :5], y=good_y)
    files["shape"] = tmp_path / "shape.npz"
    files["missing"] = tmp_path / "does-not-exist.npz"
    return files


NPZ_COMMANDS = [n for n in SUBCOMMANDS if "--data" in _options(n) and "--data-path" in _options(n)]


@pytest.mark.parametrize("name", NPZ_COMMANDS)
@pytest.mark.parametrize("which", ["none", "garbage", "noX", "nan", "labels01", "shape", "missing"])
def test_npz_data_files_are_checked_before_anything_runs(name, which, capsys, tmp_path):
    files = _npz_files(tmp_path)
    argv = [name, "--data", "npz"]
    if which != "none":
        argv += ["--data-path", str(files[which])]
    if which == "shape":   # the file's d is taken unless given: a given d that disagrees is refused
        argv += ["--dim", "6"]
    needles = ["--data-path", "data-path", str(files.get(which, "--data-path")), "X", "label"]
    check_refused(capsys, tmp_path, argv, needles, preexisting=which in ("nan", "shape"))


@pytest.mark.parametrize("name", [n for n in SUBCOMMANDS if "--dim" in _options(n)
                                  and "--clusters" in _options(n)])
def test_dim_too_small_for_the_mixture(name, capsys, tmp_path):
    # the mixture needs d >= K + 2 (docs/theory.md §9): d = 5 < 4 + 2
    check_refused(capsys, tmp_path, [name, "--dim", "5", "--clusters", "4"], ["dim", "d ="],
                  preexisting=False)


def test_unknown_subcommand_and_missing_values(capsys, tmp_path):
    check_refused(capsys, tmp_path, ["no-such-check"], ["no-such-check"], preexisting=False)
    for name in SUBCOMMANDS:
        check_refused(capsys, tmp_path, [name, "positional-extra"], ["positional-extra"],
                      preexisting=True)


# --- hypothesis: several flags at once, bad ones among good ones -------------------------

# valid on their own and together, in every subcommand that has them (with its defaults)
GOOD = {"--seeds": "2", "--n": "10", "--tokens": "3", "--heads": "1,2", "--quiet": None}


def _strategy():
    per_cmd = {n: [c for c in CASES if c[0] == n and c not in KNOWN] for n in SUBCOMMANDS}

    @st.composite
    def draw(pull):
        name = pull(st.sampled_from(sorted(n for n in per_cmd if per_cmd[n])))
        bad = pull(st.lists(st.sampled_from(per_cmd[name]), min_size=1, max_size=3,
                                 unique_by=lambda c: c[1]))
        opts = _options(name)
        flags = {o for a in _parser(name)._actions for o in a.option_strings}
        good = [f for f in GOOD if (f in opts and (f != "--heads" or opts[f] == "int_list"))
                or (GOOD[f] is None and f in flags)]
        good = pull(st.lists(st.sampled_from(good), unique=True, max_size=4)) if good else []
        good = [f for f in good if f not in {b[1] for b in bad}]
        groups = [[f] if GOOD[f] is None else [f, GOOD[f]] for f in good]
        groups += [[f"{f}={v}"] for _, f, v in bad]
        argv = [tok for g in pull(st.permutations(groups)) for tok in g]
        needles = [n for _, f, v in bad for n in _needles(f, v)]
        return [name, *argv], needles
    return draw()


# capsys and the tripwire are reused across examples on purpose: every example reads
# capsys before and after its own call, and the tripwire is the same for all.
@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=_strategy(), preexisting=st.booleans())
def test_random_mixtures_of_bad_and_good_flags_are_refused(case, preexisting, capsys, tmp_path_factory):
    argv, needles = case
    check_refused(capsys, tmp_path_factory.mktemp("fz"), argv, needles, preexisting=preexisting)


def test_the_table_is_not_empty_and_covers_every_subcommand():
    assert {c[0] for c in CASES} == set(SUBCOMMANDS)
    assert len(CASES) > 200
