# ruff: noqa
import jax

tree_map = jax.tree.map if hasattr(jax, "tree") else jax.tree_map
try:
    from jax.experimental.maps import Mesh
except ImportError:
    from jax.sharding import Mesh
