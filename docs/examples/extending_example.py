"""A new attention variant, written and checked in under 30 lines (docs/extending.md)."""
import jax
import jax.numpy as jnp

jax.config.update("jax_enable_x64", True)
from mhajax import HeadModel, init_params, tokenized_mixture, train  # noqa: E402
from mhajax.analysis.chain import chain_raw, finalize  # noqa: E402
from mhajax.testing import assert_chain, assert_head_block_diagonal  # noqa: E402


def sigmoid_head(theta, X):  # f = (1/T) <U, σ(X W Xᵀ) X>: every score gated on its own
    return jnp.sum(theta.U * (jax.nn.sigmoid(X @ theta.W @ X.T) @ X)) / X.shape[0]


def sigmoid_kappa(params, R, T):  # |σ'| <= 1/4, |σ''| <= 1/(6√3)  (derivation: docs/extending.md)
    l21 = jnp.sum(jnp.linalg.norm(params.U, axis=-1), axis=-1)
    return R**3 * jnp.sqrt(T) / 4 + R**5 * jnp.max(l21) / (6 * jnp.sqrt(3.0))


SIGMOID = HeadModel("sigmoid", sigmoid_head, init_params, kappa=sigmoid_kappa)
H, (X, y) = 4, tokenized_mixture(jax.random.PRNGKey(0), 32, 4, 6)
theta0 = init_params(jax.random.PRNGKey(1), H, 4, 6, w_scale=1.0)
batch = lambda tree: jax.tree_util.tree_map(lambda a: a[None], tree)  # noqa: E731
traj = train(batch(theta0), X[None], y[None], 1.0, steps=60, every=30, model=SIGMOID)
for c, step in enumerate(traj.steps[0].tolist()):
    theta = jax.tree_util.tree_map(lambda a: a[0, c], traj.params)
    rec = finalize(chain_raw(theta, X, y, jax.random.PRNGKey(2), model=SIGMOID), H)
    print(f"step {step}: L̂={rec.loss:.4f}", {k: round(getattr(rec, k), 3) for k in
          ("kappa_emp", "kappa_block", "kappa_mid", "kappa_phi", "kappa_bound")})
    assert rec.all_hold, rec.links                     # every link of the chain, at this θ
    assert_head_block_diagonal(theta, X, y, model=SIGMOID)  # heads share no parameters
    assert_chain(theta, X, y, model=SIGMOID)              # same chain, with a report; β₂ skipped
