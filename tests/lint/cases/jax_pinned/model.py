# ruff: noqa
import jax

params = jax.tree_map(lambda x: x, {})  # expect: CDL012
