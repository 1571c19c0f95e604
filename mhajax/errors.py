"""Error type for bad user input.

Every public entry point validates its arguments before any work is done (and
before anything is written to disk) and raises :class:`InputError`, whose
message names the offending argument and value.
"""


class InputError(ValueError):
    """Bad user input: wrong shape, non-finite data, labels not in {-1,+1}, ..."""
