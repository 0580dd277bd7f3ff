"""Code that runs inside the interpreter being judged, where cuda-doctor need not be installed:
``children.compose`` pastes these modules into a child's source.  So a module here uses the
standard library only, in syntax Python 3.8 reads, does no work at import and never prints; it
imports another only by a top-level ``from cuda_doctor.base.childside.NAME import a, b``; and its
top-level names are unique across the package and the children, which share one namespace."""
