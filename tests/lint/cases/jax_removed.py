# ruff: noqa
import jax
import jax.numpy as jnp
from jax.experimental.maps import xmap  # expect: CDL012

params = jax.tree_map(lambda x: x * 2, {"w": jnp.ones(3)})  # expect: CDL012
leaves = jax.tree_leaves(params)  # expect: CDL012
low = jnp.NINF  # expect: CDL012
kept = jax.tree.map(lambda x: x, params)
kept = jax.tree_util.tree_map(lambda x: x, params)
