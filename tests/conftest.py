"""Shared test setup: float64 everywhere, seeded keys, small problem builders."""
import jax
import pytest

jax.config.update("jax_enable_x64", True)


@pytest.fixture
def key():
    return jax.random.PRNGKey(0)
