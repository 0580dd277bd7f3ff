"""Comparing saved reports (read by ``cuda_doctor.core.reportfile``): one machine before and after
a change (``diff``), many nodes side by side (``fleet``).  Pure data in, frozen data out."""
