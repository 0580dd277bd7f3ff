"""The fake ``pynvml`` (``tests/fakes/fake_pynvml.py``) for tests that run cuda-doctor as a real process.

Put this folder first on PYTHONPATH: ``import pynvml`` then answers with the H200 readings (two
GPUs unless FAKE_PYNVML_GPUS says otherwise).  Errors and constants are the real binding's.  Each
call's name is appended to the file named by FAKE_PYNVML_LOG, so a test can count them after the
process has ended.  FAKE_PYNVML_FABRIC gives every GPU that NVSwitch fabric state (``completed``,
``not_started``, ``in_progress``; N/A otherwise) and FAKE_PYNVML_NVLINKS_DOWN the links that are
down, as ``GPU:link`` pairs (``5:4,5:9``).
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FAKES = HERE.parent

# the real binding, found on sys.path past this folder, stands in while fake_pynvml imports it
_search = [entry for entry in sys.path if Path(entry or ".").resolve() != HERE]
_spec = importlib.machinery.PathFinder.find_spec("pynvml", _search)
assert _spec is not None and _spec.loader is not None, "nvidia-ml-py must be installed"
_real = importlib.util.module_from_spec(_spec)
_this = sys.modules[__name__]
sys.modules["pynvml"] = _real
_spec.loader.exec_module(_real)
_fakes_spec = importlib.util.spec_from_file_location("_fake_pynvml_for_process", FAKES / "fake_pynvml.py")
assert _fakes_spec is not None and _fakes_spec.loader is not None
_fakes = importlib.util.module_from_spec(_fakes_spec)
sys.modules[_fakes_spec.name] = _fakes
_fakes_spec.loader.exec_module(_fakes)
sys.modules["pynvml"] = _this

_gpus = int(os.environ.get("FAKE_PYNVML_GPUS", "2"))
_state = getattr(_real, f"NVML_GPU_FABRIC_STATE_{os.environ.get('FAKE_PYNVML_FABRIC', 'not_supported').upper()}")
_pairs = [pair.split(":") for pair in os.environ.get("FAKE_PYNVML_NVLINKS_DOWN", "").split(",") if pair]
_down = [(int(gpu), int(link)) for gpu, link in _pairs]
_fake = _fakes.FakeNvml(
    readings=_fakes.h200_readings(FAKES.parent / "fixtures" / "h200" / "nvml.txt"),
    device_count=_gpus,
    log=os.environ.get("FAKE_PYNVML_LOG") or None,
    fabric={i: (_state, _real.NVML_SUCCESS) for i in range(_gpus)},
    nvlinks_down=frozenset((gpu, link) for gpu, link in _down),
)
for _name, _value in vars(_real).items():
    if not _name.startswith("__"):
        globals()[_name] = _value
globals().update(vars(_fake.module()))
