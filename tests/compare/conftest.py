from __future__ import annotations

import sys
from pathlib import Path

# The report builders live next to the tests (no package __init__ in tests/).
sys.path.insert(0, str(Path(__file__).parent))
