"""Print the target interpreter's ``sys.path`` and standard-library folders (run as ``python -c``).

Standard library only, and syntax that Python 3.8 reads: the interpreter being judged need not
have cuda-doctor installed.  Records (``cuda_doctor.children``): ``{"started": true}``, then
``{"sys_path": [...], "stdlib": [...]}``.
"""

import json
import sys
import sysconfig

print('{"started": true}', flush=True)
paths = sysconfig.get_paths()
print(json.dumps({"sys_path": sys.path, "stdlib": [paths.get("stdlib"), paths.get("platstdlib")]}), flush=True)
