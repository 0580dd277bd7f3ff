"""JAX, the third framework: what the target interpreter's JAX has installed, chose and computes.

JAX runs in a child of its own (``_child.py``), never in the torch child: initialising JAX's GPU
backend preallocates GPU memory and creates a context on every GPU, and a JAX that crashes must
not cost the torch facts.

* ``probe`` (phase 1, with the other read-only probes): the distributions (``jax``, ``jaxlib``,
  the CUDA plugin and its PJRT), the CUDA/cuDNN the plugin was built with, ``import jax`` and
  what it warned; then, in a full check, the backend comes up and the JAX smoke step is compiled
  there, beside torch's import (the GPU probe leaves cuda-doctor's own children out of the
  GPU's processes).
* ``gpu_probe`` (phase 2, one probe at a time, before the torch smoke run): the backend JAX
  chose, its devices and what it said while choosing, the CUDA libraries it loaded, and the
  JAX smoke step (``cuda_doctor/smoke/jax_level.py``) measured, in the same child.
* ``derive``: which plugin this driver runs, whether the versions match, what shadows a
  library, how much memory preallocation takes.

Facts: ``jax.*`` and, from the smoke step, ``smoke.jax_level.*`` and ``smoke[i].jax_*``.
"""
