"""Command-line flags generated from a check's config (no flag is declared by hand).

Every option of the config (:func:`mhajax.experiments.configs.options`, sub-configs
flattened) becomes one flag, named by its metadata or its field name; the check's
``EXCLUDE`` drops the ones it does not use. Values the user gives override the chosen
preset, which overrides the config's defaults; the config then validates itself once.
"""
from __future__ import annotations

import argparse

from mhajax.cli.common import ArgumentParser
from mhajax.errors import InputError
from mhajax.experiments.configs import fit_to_data, options, unused_knobs, updated
from mhajax.experiments.registry import QUICK, Check, preset
from mhajax.runtime.jaxsetup import DTYPES

_TYPES = {"int": int, "float": float, "str": str, "list": str}


def flag_name(path: str, f) -> str:
    """The flag of option ``path`` (dotted): its metadata ``flag``, else ``--`` + the field
    name with ``-`` for ``_``."""
    return f.metadata.get("flag") or "--" + f.name.replace("_", "-")


def _kind(f, default) -> str:
    kind = f.metadata.get("kind")
    if kind:
        return kind
    if isinstance(default, bool):
        return "bool"
    if isinstance(default, (tuple, list)):
        return "list"
    return {int: "int", float: "float", str: "str"}.get(type(default), "str")


def _show(v) -> str:
    if isinstance(v, (tuple, list)):
        return ",".join(f"{x:g}" if isinstance(x, float) else str(x) for x in v)
    return "none" if v is None else str(v)


def option_flags(entry: Check) -> list:
    """``[(flag, path, field, default), ...]`` of every flag of ``entry``'s config."""
    excluded = set(getattr(entry.config, "EXCLUDE", ()))
    out, seen = [], {}
    for path, f, default in options(entry.config()):
        if path in excluded:
            continue
        flag = flag_name(path, f)
        if flag in seen:
            raise RuntimeError(f"{entry.name}: options {seen[flag]} and {path} both map to {flag}")
        seen[flag] = path
        out.append((flag, path, f, default))
    return out


def build_parser(entry: Check, prog: str | None = None) -> ArgumentParser:
    """The parser of ``python -m verify <entry.name>``: the config's flags, then
    ``--preset --out --fresh --quiet --dtype --force``. Option flags default to "not given"."""
    p = ArgumentParser(prog=prog or f"python -m verify {entry.name}",
                       description=f"{entry.description} Claim: {entry.claim}.")
    for flag, path, f, default in option_flags(entry):
        kind = _kind(f, default)
        help_ = f.metadata.get("help", "")
        choices = f.metadata.get("choices")
        if choices:
            help_ += f" ({', '.join(map(str, choices))})"
        if kind == "bool":
            p.add_argument(flag, dest=path, action="store_true", default=argparse.SUPPRESS, help=help_)
        else:
            p.add_argument(flag, dest=path, type=_TYPES[kind], default=argparse.SUPPRESS,
                           metavar=flag.lstrip("-").upper().replace("-", "_"),
                           help=f"{help_} (default {_show(default)})")
    a = p.add_argument
    a("--preset", default=QUICK, help=f"named sizes: {', '.join(entry.presets)} (default {QUICK}: "
                                      "the defaults above); explicit flags override the preset")
    a("--out", default=None, help=f"output directory (default results/{entry.name}; with "
                                  f"--preset P other than {QUICK}: results-P/{entry.name})")
    a("--fresh", action="store_true", help="discard saved progress in --out and start over")
    a("--quiet", action="store_true", help="print only the verdict")
    a("--dtype", default="float64", help=f"{' or '.join(DTYPES)} (default float64)")
    a("--force", action="store_true", help="run even when the estimated peak memory exceeds what the "
                                           "device has (the guard refuses with exit 2 otherwise)")
    return p


def default_out(entry: Check, preset_name: str) -> str:
    """``results/<check>``, or ``results-<preset>/<check>`` for a preset other than quick."""
    root = "results" if preset_name == QUICK else f"results-{preset_name}"
    return f"{root}/{entry.name}"


def unvalidated_config(entry: Check, args, notes: list | None = None):
    """The config before validation: defaults, then the preset's overrides, then the flags
    given (list options may still be strings), then fitted to a data set of fixed size where
    the flags did not set the value (:func:`~mhajax.experiments.configs.fit_to_data`: the data's
    own T and d, an ``.npz`` file's n, default sizes lowered to what the data holds; one line
    per change is appended to ``notes``). :func:`config_from_args` validates it."""
    cfg = updated(entry.config(), preset(entry, args.preset))
    given = {path: getattr(args, path) for _, path, _, _ in option_flags(entry) if hasattr(args, path)}
    try:
        cfg, lines = fit_to_data(updated(cfg, given), given)
    except TypeError as e:  # a value of the wrong kind reached a dataclass
        raise InputError(f"{entry.name}: {e}") from None
    if notes is not None:
        notes.extend(lines)
    return cfg


def config_from_args(entry: Check, args, notes: list | None = None):
    """The validated config: defaults, then the preset's overrides, then the flags given, fitted
    to the data (``notes``: as :func:`unvalidated_config`). A data-model knob given with a data
    model that does not use it (``--signal`` with ``--data npz``) is refused
    (:class:`InputError`), not ignored."""
    lines: list = []
    try:
        cfg = unvalidated_config(entry, args, lines).validate()
    except InputError as e:   # a size lowered to fit the data may be what validation refuses: say so
        raise InputError(f"{e} (after: {'; '.join(lines)})" if lines else str(e)) from None
    if notes is not None:
        notes.extend(lines)
    given = [path for _, path, _, _ in option_flags(entry) if hasattr(args, path)]
    for path, f, name in unused_knobs(cfg, given):
        only = " or ".join(f.metadata["datasets"])
        raise InputError(f"{flag_name(path, f)} is only used with --data {only} (got --data {name})")
    return cfg


__all__ = ["build_parser", "config_from_args", "unvalidated_config", "default_out", "flag_name", "option_flags"]
