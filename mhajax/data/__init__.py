"""Data models and seeds.

* :mod:`~mhajax.data.mixture` — the tokenized mixture of docs/theory.md §9 (the paper's);
* :mod:`~mhajax.data.sparse` — sparse-token detection;
* :mod:`~mhajax.data.npz` — a validated user ``.npz`` file;
* :mod:`~mhajax.data.digits` — scikit-learn's 8×8 digits, even vs odd (optional extra ``digits``);
* :mod:`~mhajax.data.registry` — every data model by name;
* :mod:`~mhajax.data.seeds` — integer seeds to independent PRNG streams;
* :mod:`~mhajax.data.common` — balanced labels, random positions, the token radius R.
"""
from mhajax.data.common import token_radius
from mhajax.data.digits import check_digits_args
from mhajax.data.mixture import check_mixture_args
from mhajax.data.mixture import relevant_count
from mhajax.data.mixture import tokenized_mixture
from mhajax.data.npz import from_npz
from mhajax.data.npz import load_npz
from mhajax.data.registry import DATASETS
from mhajax.data.registry import TRACEABLE
from mhajax.data.registry import get_dataset
from mhajax.data.seeds import seed_keys
from mhajax.data.seeds import seed_list
from mhajax.data.seeds import stream_keys
from mhajax.data.sparse import check_sparse_args
from mhajax.data.sparse import sparse_tokens

__all__ = ["DATASETS", "TRACEABLE", "check_digits_args", "check_mixture_args", "check_sparse_args", "from_npz",
           "get_dataset", "load_npz", "relevant_count", "seed_keys", "seed_list",
           "sparse_tokens", "stream_keys", "token_radius", "tokenized_mixture"]
