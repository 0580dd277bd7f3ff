"""Static checks of training code, notebooks, Dockerfiles and requirements (``cuda-doctor lint``)."""
