"""Comparing saved reports: one machine before and after a change (``diff``), many nodes
side by side (``fleet``).  Pure data in, frozen data out; reporters do the printing.
Reports are read by ``cuda_doctor.core.reportfile``."""
