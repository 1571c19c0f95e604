"""The shared sub-configs of every check, validated once, with their command-line flags.

A check's config is a frozen dataclass whose fields are options (:func:`option`) or
sub-configs: :class:`DataConfig` (the problem: data model and its knobs, head model,
loss, initialization scales), :class:`GDConfig` (steps, checkpoints, step size),
:class:`EigenConfig` (the λ_min/λ_max solver) and :class:`BootConfig` (bootstrap CIs).
Each option's metadata gives its flag and help; :mod:`mhajax.cli.flags` generates the
parser from them, so no flag is declared by hand. A check may drop flags it does not use
(``EXCLUDE``, dotted field paths such as ``"data.n"``).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from typing import ClassVar

from mhajax.data.digits import check_digits_args
from mhajax.data.mixture import check_mixture_args
from mhajax.data.npz import load_npz
from mhajax.data.registry import DATASETS, capacity, get_dataset
from mhajax.data.sparse import check_sparse_args
from mhajax.errors import InputError
from mhajax._version import __version__
from mhajax.losses import LOSSES, get_loss, loss_identity
from mhajax.models import ALL_MODELS
from mhajax.models.base import get_model, identity, is_coupled, model_name
from mhajax.runtime.imports import file_digest
from mhajax.analysis.chain import LINKS, Links
from mhajax.curvature.spectrum import METHODS
from mhajax.validate import positive_float, positive_int


class Config:
    """Base of every check's config (a frozen dataclass): ``to_dict`` gives what result files
    record, ``EXCLUDE`` the dotted option paths the check offers no flag for."""

    EXCLUDE: ClassVar[tuple] = ()

    def to_dict(self) -> dict:
        """The config as nested plain dicts."""
        return asdict(self)

    def inputs(self, dtype: str = "float64") -> dict:
        """What a run with this (validated) config depends on beyond the config itself: the
        package version, the dtype, the identity of every model and loss it names (a user's:
        the SHA-256 of its source files, :func:`mhajax.models.base.identity`) and the SHA-256 of
        every data file. Saved progress and kept results are reused only when this is equal."""
        out = dict(version=__version__, dtype=str(dtype), models={}, losses={}, files={})
        for path, _, v in (options(self) if is_dataclass(self) else ()):
            leaf = path.rsplit(".", 1)[-1]
            if leaf == "model" or leaf == "models":
                for m in (v if isinstance(v, (tuple, list)) else (v,)):
                    out["models"][str(m)] = identity(m)
            elif leaf == "loss":
                out["losses"][str(v)] = loss_identity(v)
            elif leaf in ("data_path", "test_path") and v:
                out["files"][str(v)] = file_digest(v)
        return out


def option(default, help: str, *, flag: str | None = None, kind: str | None = None,
           choices=None, factory=None, datasets: tuple | None = None, sizes: str | None = None):
    """A config field with its command line: ``flag`` (default ``--`` + the field name with
    ``-`` for ``_``), ``help``, ``kind`` (``int``, ``float``, ``str``, ``bool`` (a switch),
    ``list`` (comma-separated, parsed by the config's ``validate``); default: from the
    default's type), ``choices`` (printed in the help) and ``datasets`` (a knob of these
    data models only: :func:`unused_knobs` names it when given with another) and ``sizes``
    (``"train"`` or ``"test"``: a number of samples of that split, lowered by :func:`fit_to_data`
    to what a data set of fixed size holds when the user did not give it)."""
    meta = dict(help=help, flag=flag, kind=kind, choices=choices, datasets=datasets, sizes=sizes)
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def sub(factory):
    """A sub-config field (its options become flags of the check too)."""
    return field(default_factory=factory)


@dataclass(frozen=True)
class DataConfig:
    """The problem every check runs on: the data model and its knobs, the head model, the
    loss, and the initialization scales.

    ``dataset`` names a data model of :data:`mhajax.data.registry.DATASETS`: ``mixture``
    (docs/theory.md §9, knobs ``zeta, num_clusters, signal, sigma, antipodal``), ``sparse`` (knobs
    ``k_signal, signal, sigma``) or ``npz`` (``data_path``; held-out draws, stream 2, from
    ``test_path``) or ``digits`` (scikit-learn's 8×8 digits, even vs odd, T = d = 8; held-out
    draws, stream 2, from its fixed test split). ``model`` a registered model or an import
    reference ``package.module:NAME`` of a user's (:func:`mhajax.models.get_model`), ``loss``
    likewise (:func:`mhajax.losses.get_loss`). The defaults are the paper's setting.
    """

    n: int = option(64, "training samples n (--data npz: the file's)", sizes="train")
    tokens: int = option(6, "tokens per sequence T")
    dim: int = option(8, "token dimension d (the mixture needs d >= clusters + 2)")
    zeta: float = option(0.25, "fraction of relevant tokens ζ (mixture)", datasets=("mixture",))
    num_clusters: int = option(4, "irrelevant clusters K (mixture)", flag="--clusters",
                               datasets=("mixture",))
    signal: float = option(1.0, "signal strength s of μ± (mixture, sparse)", datasets=("mixture", "sparse"))
    sigma: float = option(0.1, "token noise σ (mixture, sparse)", datasets=("mixture", "sparse"))
    antipodal: bool = option(False, "use μ- = -μ+ (mixture)", datasets=("mixture",))
    u_scale: float = option(1.0, "init std of the readout entries U")
    w_scale: float = option(0.0, "init std of the key-query entries times sqrt(d) (0: W = 0)")
    dataset: str = option("mixture", "data model", flag="--data", choices=tuple(DATASETS))
    data_path: str | None = option(None, "training file for --data npz (arrays X [n,T,d], y [n]; n, T and d "
                                         "are the file's unless given)", kind="str")
    test_path: str | None = option(None, "held-out file for --data npz (checks that need test data)",
                                   kind="str")
    k_signal: int = option(1, "signal positions per positive sequence (--data sparse)",
                           datasets=("sparse",))
    model: str = option("softmax", "head model: a built-in name, or your HeadModel as package.module:NAME "
                                   "or path/to/file.py:NAME", choices=ALL_MODELS)
    loss: str = option("logistic", "loss: a built-in name, or your Loss as package.module:NAME",
                       choices=tuple(LOSSES))

    def validate(self, min_n: int = 2, coupled_ok: bool = False):
        """Check every knob (raises :class:`InputError` naming it); ``coupled_ok`` admits a
        coupled model (only the checks that handle one pass it). Returns the validated config, a
        new one (the data model's name lower-cased, the model's canonical name, the loss stripped)."""
        cfg = self
        positive_int("n", cfg.n, minimum=min_n)
        positive_int("k_signal", cfg.k_signal)  # checked for every data model, used by sparse
        name = str(cfg.dataset).strip().lower()
        get_dataset(name)  # unknown name -> InputError listing the choices
        cfg = replace(cfg, dataset=name)
        if name == "mixture":
            check_mixture_args(cfg.n, cfg.tokens, cfg.dim, cfg.zeta, cfg.num_clusters,
                               cfg.signal, cfg.sigma)
        elif name == "sparse":
            check_sparse_args(cfg.n, cfg.tokens, cfg.dim, cfg.k_signal, cfg.signal, cfg.sigma)
        elif name == "digits":
            check_digits_args(cfg.n, cfg.tokens, cfg.dim)
        if name == "npz":
            if not cfg.data_path:
                raise InputError("--data npz needs --data-path FILE.npz (arrays X [n, T, d] and y [n])")
            for flag, path in (("--data-path", cfg.data_path), ("--test-path", cfg.test_path)):
                if path:
                    X, _ = load_npz(path, tokens=cfg.tokens, dim=cfg.dim)  # fails early, clearly
                    if flag == "--data-path" and X.shape[0] < cfg.n:
                        raise InputError(f"n = {cfg.n} samples requested but {path!r} holds only "
                                         f"{X.shape[0]}")
        else:
            for flag, path in (("--data-path", cfg.data_path), ("--test-path", cfg.test_path)):
                if path:
                    raise InputError(f"{flag} is only used with --data npz (got --data {name})")
        model = cfg.head_model()
        if is_coupled(model) and not coupled_ok:
            raise InputError(f"--model {model.name} couples its heads (no head blocks): only "
                             "weak-convexity and variants measure it")
        cfg = replace(cfg, model=model_name(cfg.model))
        get_loss(cfg.loss)
        cfg = replace(cfg, loss=str(cfg.loss).strip())
        positive_float("u_scale", cfg.u_scale, allow_zero=True)
        positive_float("w_scale", cfg.w_scale, allow_zero=True)
        return cfg

    def head_model(self):
        """The registered model named by ``model`` (a HeadModel or a CoupledModel)."""
        return get_model(self.model)

    def loss_fn(self):
        """The :class:`~mhajax.losses.Loss` named by ``loss``."""
        return get_loss(self.loss)

    def has_test_data(self) -> bool:
        """Whether held-out draws (stream 2) exist: always for a generator, and for
        ``npz`` only with a ``test_path`` (a second file: the training file would overlap)."""
        return self.dataset != "npz" or bool(self.test_path)

    def check_test_size(self, n_test: int, what: str = "n_test") -> None:
        """Refuse (:class:`InputError`) more held-out samples than the data model holds: only
        ``digits`` has a finite test split (a generator draws any number; an npz test file is
        checked when drawn)."""
        if self.dataset == "digits":
            check_digits_args(n_test, self.tokens, self.dim, split="test", what=what)

    def knobs(self, stream: int = 0) -> dict:
        """Keyword arguments of the chosen data model beyond ``(key, n, tokens, dim)``;
        ``stream`` 2 (held-out draws) selects digits' test split."""
        if self.dataset == "mixture":
            return self.mixture_kwargs()
        if self.dataset == "sparse":
            return dict(k=self.k_signal, signal=self.signal, sigma=self.sigma)
        if self.dataset == "digits":
            return dict(split="test" if stream == 2 else "train")
        return dict(path=self.data_path)

    def mixture_kwargs(self):
        """Keyword arguments of :func:`mhajax.data.mixture.tokenized_mixture` beyond the sizes."""
        return dict(zeta=self.zeta, num_clusters=self.num_clusters, signal=self.signal,
                    sigma=self.sigma, antipodal=self.antipodal)


@dataclass(frozen=True)
class GDConfig:
    """Full-batch GD: ``steps`` steps of size ``lr``, θ kept every ``every`` steps."""

    steps: int = option(200, "GD steps")
    every: int = option(20, "checkpoint every this many steps")
    lr: float = option(1.0, "GD step size η")

    def validate(self, min_every: int = 1, min_steps: int = 0):
        """Check the options (``every >= min_every``, ``steps >= min_steps``); returns self (valid as it is)."""
        positive_int("steps", self.steps, minimum=min_steps)
        positive_int("every", self.every, minimum=min_every)
        positive_float("lr", self.lr)
        return self


@dataclass(frozen=True)
class EigenConfig:
    """The λ_min/λ_max solver: ``method`` (auto: the certified inertia-count search for head
    models, Lanczos for coupled ones; block: the certified bound only), the chain's
    ``links`` and the Lanczos budget."""

    method: str = option("auto", "λmin/λmax solver", choices=METHODS)
    links: Links = option("all", "'all' (full chain) or 'core' (skip κ_mid, κ_Φ)", choices=LINKS)
    lanczos_steps: int = option(64, "Krylov basis size per Lanczos cycle")
    max_cycles: int = option(20, "Lanczos restarts before giving up")

    def validate(self):
        """Check the solver options; returns self."""
        if self.method not in METHODS:
            raise InputError(f"--method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.links not in LINKS:
            raise InputError(f"--links must be one of {', '.join(LINKS)}, got {self.links!r}")
        positive_int("lanczos_steps", self.lanczos_steps, minimum=2)
        positive_int("max_cycles", self.max_cycles)
        return self


@dataclass(frozen=True)
class BootConfig:
    """Bootstrap CIs over seeds (:mod:`mhajax.analysis.rates`) and the log-factor power."""

    resamples: int = option(2000, "bootstrap resamples over seeds")
    level: float = option(0.95, "confidence level of the CIs")
    boot_seed: int = option(0, "seed of the bootstrap resampling")
    log_power: float = option(2.0, "p of the log-factor correction: also report the slope of "
                                   "y/log^p(x)")

    def validate(self):
        """Check the bootstrap options; returns self."""
        positive_float("log_power", self.log_power, allow_zero=True)
        positive_int("resamples", self.resamples, minimum=100)
        if not 0 < positive_float("level", self.level) < 1:
            raise InputError(f"level must lie in (0, 1), got {self.level!r}")
        positive_int("boot_seed", self.boot_seed, minimum=0)
        return self

    def kwargs(self) -> dict:
        """Keyword arguments of :func:`mhajax.analysis.rates.bootstrap_slope`/``mean_band``."""
        return dict(resamples=self.resamples, level=self.level, seed=self.boot_seed)


# ---------------------------------------------------------------------------
# Walking configs: the options of a (nested) config, and dotted updates.
# ---------------------------------------------------------------------------

def unused_knobs(cfg, given) -> list:
    """``[(path, field, dataset), ...]``: the options in ``given`` (dotted paths, e.g. the
    flags a user typed) that belong to data models other than the one ``cfg`` uses (field
    metadata ``datasets``), e.g. ``data.signal`` with ``dataset="npz"``. ``cfg`` is an
    instance; the data model is read from the ``dataset`` field beside each option."""
    fields_of = {path: f for path, f, _ in options(cfg)}
    out = []
    for path in given:
        f = fields_of.get(path)
        only = f.metadata.get("datasets") if f is not None else None
        if not only:
            continue
        owner = cfg
        for part in path.split(".")[:-1]:
            owner = getattr(owner, part)
        name = str(getattr(owner, "dataset", "")).strip().lower()
        if name in DATASETS and name not in only:   # an unknown name is left to validate()
            out.append((path, f, name))
    return out


def fit_to_data(cfg, given=()) -> tuple:
    """``(cfg, notes)``: ``cfg`` fitted to a data set of fixed size (:func:`mhajax.data.registry.capacity`:
    ``digits``, an ``.npz`` file) where the user did not give the value (``given``: dotted paths
    typed). ``tokens`` and ``dim`` become the data's own, and so does ``n`` for an ``.npz`` file
    (it holds n); a default size (an option with ``sizes`` metadata: ``train`` or ``test``) the data
    cannot supply is lowered to what it holds (a list: each value, repeats dropped). ``notes``: one
    line per change. Given values are kept: validation refuses what the data cannot supply."""
    changes, notes = {}, []
    for path, _, v in options(cfg):
        if not (path == "dataset" or path.endswith(".dataset")):
            continue
        prefix = path[: -len("dataset")]
        owner = cfg
        for part in prefix.split(".")[:-1]:
            owner = getattr(owner, part)
        name = str(v).strip().lower()
        cap = capacity(name, getattr(owner, "data_path", None), getattr(owner, "test_path", None))
        fixed = {}
        if cap.shape:
            fixed.update(tokens=cap.shape[0], dim=cap.shape[1])
        if name == "npz" and cap.train is not None:
            fixed["n"] = cap.train
        taken = [f"{k} = {val}" for k, val in fixed.items() if prefix + k not in given]
        for k, val in fixed.items():
            if prefix + k not in given:
                changes[prefix + k] = val
        if taken and name == "npz":
            notes.append(f"--data npz: {', '.join(taken)} from {getattr(owner, 'data_path')!r}")
        for opath, f, ov in options(cfg):
            split = f.metadata.get("sizes")
            limit = getattr(cap, split) if split else None
            if limit is None or opath in given:
                continue
            ov = changes.get(opath, ov)
            if isinstance(ov, (tuple, list)):
                new = tuple(sorted({min(int(x), limit) for x in ov}))
            else:
                new = min(int(ov), limit)
            if new != (tuple(ov) if isinstance(ov, (tuple, list)) else ov):
                changes[opath] = new
                flag = f.metadata.get("flag") or "--" + f.name.replace("_", "-")
                shown = ",".join(map(str, new)) if isinstance(new, tuple) else str(new)
                notes.append(f"--data {name} holds {limit} {split} samples: {flag} lowered from "
                             f"{','.join(map(str, ov)) if isinstance(ov, (tuple, list)) else ov} to {shown}")
    return (updated(cfg, changes) if changes else cfg), notes


def options(cfg, prefix: str = ""):
    """``[(path, field, value), ...]`` of every option of ``cfg`` (an instance), sub-configs
    flattened: ``path`` is dotted (``"data.n"``), ``value`` the current value."""
    out = []
    for f in fields(cfg):
        v = getattr(cfg, f.name)
        if is_dataclass(v):
            out += options(v, f"{prefix}{f.name}.")
        else:
            out.append((prefix + f.name, f, v))
    return out


def updated(cfg, changes: dict):
    """``cfg`` with dotted-path ``changes`` applied (``{"gd.steps": 100, "heads": (1, 4)}``);
    an unknown path is an :class:`InputError`."""
    nested: dict = {}
    for path, v in changes.items():
        head, _, rest = path.partition(".")
        if head not in {f.name for f in fields(cfg)}:
            raise InputError(f"{type(cfg).__name__} has no option {path!r}")
        if rest:
            nested.setdefault(head, {})[rest] = v
        else:
            nested[head] = v
    kw = {}
    for name, v in nested.items():
        kw[name] = updated(getattr(cfg, name), v) if isinstance(v, dict) else v
    return replace(cfg, **kw)


def make(cls, **kw):
    """A ``cls`` config from flat keywords: each key is a field of ``cls`` or the unique leaf
    name of an option of a sub-config (``make(ConvergenceConfig, steps=100, level=0.9)`` sets
    ``gd.steps`` and ``boot.level``). Not validated; an unknown or ambiguous key is an
    :class:`InputError`."""
    base = cls()
    top = {f.name for f in fields(base)}
    leaves: dict = {}
    for path, _, _ in options(base):
        leaves.setdefault(path.rsplit(".", 1)[-1], []).append(path)
    changes = {}
    for k, v in kw.items():
        if k in top:
            changes[k] = v
        elif len(leaves.get(k, ())) == 1:
            changes[leaves[k][0]] = v
        else:
            raise InputError(f"{cls.__name__} has no unique option {k!r}"
                             + (f" (candidates {leaves[k]})" if k in leaves else ""))
    return updated(base, changes)


def as_dict(cfg) -> dict:
    """The config as nested plain dicts (what result files record)."""
    return asdict(cfg)


__all__ = ["Config", "DataConfig", "GDConfig", "EigenConfig", "BootConfig", "option", "sub", "options", "unused_knobs",
           "fit_to_data",
           "updated", "make", "as_dict"]
