"""``python -m cuda_doctor``: the same entry as the ``cuda-doctor`` script.

``-m`` puts the current directory first on ``sys.path``; cuda-doctor runs inside repositories,
whose ``platform.py`` or ``json.py`` must not replace the standard library's, so it goes first.
"""

import os
import sys

if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from cuda_doctor.entry import main

if __name__ == "__main__":
    main()
