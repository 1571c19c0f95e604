"""Flags shared by the rate subcommands (convergence, generalization, heads,
quasi-convexity): the tokenized-mixture knobs, list parsing, CI formatting."""
from __future__ import annotations

from mhajax.errors import InputError

from .cli import fmt


def add_data_args(p, *, n: int | None = 64):
    """Data and initialization flags (SPEC §6); ``--n`` only when ``n`` is given."""
    a = p.add_argument
    if n is not None:
        a("--n", type=int, default=n, help=f"training samples (default {n})")
    a("--tokens", type=int, default=6, help="tokens per sequence T")
    a("--dim", type=int, default=8, help="token dimension d (needs d >= clusters + 2)")
    a("--zeta", type=float, default=0.25, help="fraction of relevant tokens ζ")
    a("--clusters", type=int, default=4, help="irrelevant clusters K")
    a("--signal", type=float, default=1.0, help="signal strength s of μ±")
    a("--sigma", type=float, default=0.1, help="token noise σ")
    a("--antipodal", action="store_true", help="use μ- = -μ+")
    a("--u-scale", type=float, default=1.0, help="init std of U entries")
    a("--w-scale", type=float, default=0.0, help="init std of W entries times sqrt(d)")
    add_problem_args(p)
    a("--seed0", type=int, default=0, help="first seed")
    a("--dtype", default="float64", help="float64 (default) or float32")
    a("--quiet", action="store_true", help="print only the verdict")


def add_problem_args(p):
    """``--model``, ``--loss``, ``--data`` and their companions (issue 7): which head
    model, loss and data model the check runs on. Defaults: the paper's setting."""
    from mhajax.datasets import DATASETS
    from mhajax.losses import LOSSES
    from mhajax.variants import MODELS
    a = p.add_argument
    a("--model", default="softmax", help=f"head model: {', '.join(MODELS)} (default softmax)")
    a("--loss", default="logistic", help=f"loss: {', '.join(LOSSES)} (default logistic)")
    a("--data", default="mixture", help=f"data model: {', '.join(DATASETS)} (default mixture)")
    a("--data-path", default=None, help="training file for --data npz (arrays X [n,T,d], y [n])")
    a("--test-path", default=None, help="held-out file for --data npz (checks that need test data)")
    a("--k-signal", type=int, default=1, help="signal positions per positive sequence (--data sparse)")


def add_boot_args(p):
    a = p.add_argument
    a("--resamples", type=int, default=2000, help="bootstrap resamples over seeds")
    a("--level", type=float, default=0.95, help="confidence level of the CIs")
    a("--boot-seed", type=int, default=0, help="seed of the bootstrap resampling")
    a("--log-power", type=float, default=2.0,
      help="p of the log-factor correction: also report the slope of y/log^p(x)")


def data_config(args, n: int):
    from mhajax.experiment import DataConfig
    return DataConfig(n=n, tokens=args.tokens, dim=args.dim, zeta=args.zeta,
                      num_clusters=args.clusters, signal=args.signal, sigma=args.sigma,
                      antipodal=args.antipodal, u_scale=args.u_scale, w_scale=args.w_scale,
                      **problem_kwargs(args))


def problem_kwargs(args) -> dict:
    """The DataConfig fields set by :func:`add_problem_args`."""
    return dict(dataset=args.data, data_path=args.data_path, test_path=args.test_path,
                k_signal=args.k_signal, model=args.model, loss=args.loss)


def int_list(flag: str, text: str) -> list[int]:
    """Parse ``"64,128,256"``; raise :class:`InputError` naming ``flag`` and the value."""
    parts = [p.strip() for p in str(text).split(",")]
    if not str(text).strip() or any(p == "" for p in parts):
        raise InputError(f"{flag} must be a comma-separated list of integers, got {text!r}")
    out = []
    for p in parts:
        try:
            out.append(int(p))
        except ValueError:
            raise InputError(f"{flag} must be a comma-separated list of integers, got {text!r} "
                             f"({p!r} is not an integer)") from None
    return out


def name_list(flag: str, text: str, choices) -> list[str]:
    parts = [p.strip() for p in str(text).split(",")]
    if not str(text).strip() or any(p == "" for p in parts):
        raise InputError(f"{flag} must be a comma-separated list from {', '.join(choices)}, got {text!r}")
    for p in parts:
        if p not in choices:
            raise InputError(f"{flag}: unknown value {p!r}; choose from {', '.join(choices)}")
    return parts


def fmt_ci(fit, prec=3) -> str:
    """``-1.08 [-1.10, -1.07]`` from a :func:`mhajax.rates.bootstrap_slope` dict."""
    if fit is None or fit.get("slope") is None:
        return "undef"
    s = f"{fit['slope']:.{prec}g}"
    if fit.get("ci") is None:
        return s + " [no CI]"
    lo, hi = fit["ci"]
    return f"{s} [{lo:.{prec}g}, {hi:.{prec}g}]"


def fmt_window(fit, prec=3) -> str:
    w = (fit or {}).get("window") or {}
    lo, hi = w.get("lower"), w.get("upper")
    return f"{fmt(lo, 1, prec).strip()} / {fmt(hi, 1, prec).strip()}"
