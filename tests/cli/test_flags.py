"""Flags generated from a check's config (mhajax/cli/flags.py): a data-model knob typed with a
data model that does not use it is refused with exit 2 and one line naming the flag, the
data model it belongs to and the one chosen — never silently ignored."""
import numpy as np
import pytest

from mhajax.cli.flags import build_parser, config_from_args
from mhajax.cli.verify import main
from mhajax.errors import InputError
from mhajax.experiments.configs import DataConfig, unused_knobs
from mhajax.experiments.registry import CHECKS, get_check

# (flag typed, value, --data chosen, the data models that use the flag)
MISUSED = [
    ("--signal", "2", "npz", "mixture or sparse"),
    ("--sigma", "0.2", "npz", "mixture or sparse"),
    ("--zeta", "0.3", "sparse", "mixture"),
    ("--clusters", "3", "sparse", "mixture"),
    ("--antipodal", None, "npz", "mixture"),
    ("--k-signal", "2", "mixture", "sparse"),
]
DATA_CHECKS = [name for name in CHECKS if "--data" in build_parser(get_check(name)).format_help()]


@pytest.mark.parametrize("flag, value, data, owners", MISUSED)
@pytest.mark.parametrize("name", DATA_CHECKS)
def test_a_knob_of_another_data_model_is_refused(name, flag, value, data, owners, tmp_path, capsys):
    out = tmp_path / "out"
    argv = [name, "--tokens", "6", "--dim", "8", "--data", data, flag] + ([value] if value is not None else []) + ["--out", str(out)]
    if data == "npz":   # valid files, large enough for every check's defaults: the knob is what is refused
        f = tmp_path / "x.npz"
        np.savez(f, X=np.ones((4096, 6, 8)), y=np.where(np.arange(4096) % 2, 1.0, -1.0))
        argv += ["--data-path", str(f), "--test-path", str(f)]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"error: {flag} is only used with --data {owners} (got --data {data})"]
    assert not out.exists()


def test_the_same_knob_with_its_own_data_model_is_taken():
    entry = get_check("weak-convexity")
    args = build_parser(entry).parse_args(["--data", "sparse", "--signal", "2", "--sigma", "0.3", "--k-signal", "3"])
    d = config_from_args(entry, args).data
    assert (d.dataset, d.signal, d.sigma, d.k_signal) == ("sparse", 2.0, 0.3, 3)


def test_a_knob_left_at_its_default_is_not_a_misuse():
    """Only what the user gave counts: the config's own defaults (signal, zeta, ...) exist for
    every data model and are not refused."""
    entry = get_check("weak-convexity")
    args = build_parser(entry).parse_args(["--data", "sparse"])
    assert config_from_args(entry, args).data.dataset == "sparse"


def test_unused_knobs_reads_the_data_model_beside_each_option():
    cfg = DataConfig(dataset="npz")
    got = [(path, name) for path, _, name in unused_knobs(cfg, ["signal", "n", "zeta", "k_signal"])]
    assert got == [("signal", "npz"), ("zeta", "npz"), ("k_signal", "npz")]
    assert unused_knobs(DataConfig(dataset="mixture"), ["signal", "zeta", "sigma", "antipodal"]) == []
    assert [p for p, _, _ in unused_knobs(DataConfig(dataset="Sparse "), ["zeta", "signal"])] == ["zeta"]


def test_the_refusal_is_an_input_error(tmp_path):
    entry = get_check("one-step")
    f = tmp_path / "x.npz"
    np.savez(f, X=np.ones((4096, 6, 8)), y=np.where(np.arange(4096) % 2, 1.0, -1.0))
    args = build_parser(entry).parse_args(["--data", "npz", "--data-path", str(f), "--zeta", "0.5"])
    with pytest.raises(InputError, match=r"^--zeta is only used with --data mixture \(got --data npz\)$"):
        config_from_args(entry, args)
