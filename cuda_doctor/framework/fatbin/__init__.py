"""The device code inside compiled CUDA libraries and extensions: which GPUs it can run on.

``parse`` reads the headers of the fatbins in one ELF shared object; ``scan`` walks the target
interpreter's site-packages, reads every ``*.so`` once (``cache`` keeps what it found per file,
keyed on size, modification time and inode) within a time budget; ``collect`` turns the scan
into ``fatbin.*`` facts (the framework probe calls it with its child's ``sys.path``); ``derive``
judges them per GPU.
"""
