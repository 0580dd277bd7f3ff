"""Code that runs inside the interpreter being judged, shared by the children that need it.

A child of the target interpreter is started as ``python -c SOURCE`` (``cuda_doctor.base.children``),
and that interpreter need not have cuda-doctor installed.  So a child's source must be whole:
``children.compose`` builds it from the child's own file and the modules of this package that
the file names, and nothing else.  What that asks of a module here:

* The standard library only, syntax that Python 3.8 reads, no work at import time beyond
  definitions (a child prints its first record before anything slow happens).
* It uses another module of this package only through one top-level line
  ``from cuda_doctor.base.childside.NAME import a, b``: ``compose`` puts NAME's source first and
  drops the line, so the same file runs in the parent (tests, the fatbin scan) through a normal
  import and in a child as one concatenated source.
* Top-level names are unique across the package and the children that use it (``compose``
  checks it), because in a child they all share one namespace.
* It never prints.  Its functions say what they raise; the child that calls them turns a
  failure into the reason of an unknown fact, as every probe does.
"""
