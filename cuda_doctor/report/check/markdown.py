"""Markdown, for pasting a report into an issue or a chat."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cuda_doctor import __version__
from cuda_doctor.core.results import Result, Severity, Status
from cuda_doctor.report import md_cell, md_code, md_text, origin_note, printable, value_text
from cuda_doctor.report.check.common import (
    CATEGORY_TITLES,
    MARKS,
    Causes,
    consequence_line,
    grouped,
    summary_line,
    visible,
)

if TYPE_CHECKING:
    from cuda_doctor.core.checkreport import Report

KEY_FACTS = (
    "driver.version", "driver.cuda_version", "gpu.count", "gpu[0].name", "gpu[0].compute_capability",
    "torch.import_error", "torch.version", "torch.cuda_build", "torch.cudnn_version", "torch.nccl_version",
    "jax.import_error", "jax.version", "jax.jaxlib_version", "jax.cuda_plugin", "jax.cuda_plugin_version",
    "jax.backend", "jax.gpu_count", "container.detected", "container.cuda_version", "toolkit.nvcc_version",
)  # fmt: skip

#: Marks that stay unambiguous in Markdown ("-" would start a nested list).
MD_MARKS = {**MARKS, Status.SKIPPED: "·", Status.WARN: "⚠", Status.INFO: "ℹ"}


def render(report: Report, *, verbose: bool = False, terminal: bool = False, fail_on: Severity = Severity.ERROR) -> str:
    lines = [
        f"## cuda-doctor report: {md_text(report.host)}",
        "",
        f"cuda-doctor {__version__}, {md_text(report.created)}",
        "",
    ]
    lines += ["| fact | value |", "| --- | --- |"]
    for name in KEY_FACTS:
        if name in ("torch.import_error", "jax.import_error") and not report.facts.get(name):
            continue  # shown only when the import failed
        if name.startswith("jax.") and report.facts.get("jax.installed") is not True:
            continue  # JAX's rows only where it is installed
        if report.facts.has(name):
            lines.append(f"| `{name}` | {md_cell(value_text(report.facts.get(name)))} |")
        elif name in report.facts.unknown:
            lines.append(f"| `{name}` | unknown: {md_cell(report.facts.unknown[name])} |")
    lines.append("")
    causes = Causes(report.results)
    for category, results in grouped(report.results):
        # a failure another one explains is listed under its cause, not here
        shown = [r for r in results if visible(r, verbose) and not causes.is_consequence(r)]
        if not shown:
            continue
        lines += [f"### {CATEGORY_TITLES.get(category, category)}", ""]
        for r in shown:
            lines += _result_lines(r)
            consequences = causes.of(r)
            if consequences:
                lines.append(f"  - {md_text(consequence_line(consequences))}")
            if verbose:
                lines += [f"    {line}" if line else line for c in consequences for line in _result_lines(c)]
        lines.append("")
    lines.append(f"**{summary_line(report, fail_on)}**")
    # each line whole: a control character from outside (a value, a message) is escaped wherever it is
    return "".join(printable(line) + "\n" for line in lines)


def _result_lines(r: Result) -> list[str]:
    subject = f" **{md_text(r.subject)}**:" if r.subject else ""
    lines = [f"- {MD_MARKS[r.status]} `{md_text(r.rule_id)}`{subject} {md_text(r.message)}"]
    if r.origin:
        lines.append(f"  - *{md_text(origin_note(r.origin))}*")
    if r.fix and r.status not in (Status.PASS, Status.SKIPPED):
        lines.append(f"  - fix: {md_text(r.fix)}")
    if r.commands and r.status not in (Status.PASS, Status.SKIPPED):
        lines += ["", *(f"    {line}" for line in md_code(list(r.commands))), ""]
    return lines
