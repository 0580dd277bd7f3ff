# The types of what cuda_doctor/__init__.py loads on first use (docs/api.md).
from cuda_doctor.api import PreflightError as PreflightError
from cuda_doctor.api import Report as Report
from cuda_doctor.api import Result as Result
from cuda_doctor.api import Status as Status
from cuda_doctor.api import check as check
from cuda_doctor.api import require as require

__version__: str
__all__ = ["PreflightError", "Report", "Result", "Status", "__version__", "check", "require"]
