"""JAX: what the target interpreter's JAX has installed, chose and computes, found out in a child of
its own (never the torch child: a JAX that crashes must not cost the torch facts)."""
