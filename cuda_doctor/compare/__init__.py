"""Comparing saved reports: one machine before and after a change (``diff``), many nodes
side by side (``fleet``).  Pure data in, frozen data out; reporters do the printing."""

from __future__ import annotations

from cuda_doctor.reportfile import SUPPORTED_SCHEMA, Report, ReportError, load_report

__all__ = ["SUPPORTED_SCHEMA", "Report", "ReportError", "load_report"]
