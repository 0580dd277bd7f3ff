"""Dockerfiles: base image tags, launchers in RUN/CMD/ENTRYPOINT, torch wheels vs the image's CUDA."""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cuda_doctor.lint.findings import Hit
from cuda_doctor.lint.python_ast import LAUNCH_RE
from cuda_doctor.lint.requirements import (
    TorchPin,
    check_pin,
    pip_installs,
    requirements_pins,
    wheel_cuda,
)
from cuda_doctor.paths import rules_dir
from cuda_doctor.tomlcompat import tomllib

VAR = re.compile(r"\$\{(?P<name>\w+)(?::?(?P<op>[-+])(?P<word>[^}]*))?\}|\$(?P<bare>\w+)")
CUDA_REPOS = ("nvidia/cuda", "docker.io/nvidia/cuda", "nvcr.io/nvidia/cuda")
PYTORCH_REPOS = ("pytorch/pytorch", "docker.io/pytorch/pytorch", "ghcr.io/pytorch/pytorch")
NGC_PYTORCH = "nvcr.io/nvidia/pytorch"


@functools.lru_cache(maxsize=1)
def cuda_tags() -> dict[str, Any]:
    with (rules_dir() / "data" / "nvidia_cuda_tags.toml").open("rb") as handle:
        return tomllib.load(handle)


@dataclass(frozen=True)
class Instruction:
    line: int
    keyword: str
    args: str


def instructions(text: str) -> list[Instruction]:
    """Logical instructions: continuations joined, comment lines dropped, heredocs kept in RUN."""
    escape = "\\"
    lines = text.splitlines()
    head = lines[0] if lines else ""
    directive = re.match(r"#\s*escape\s*=\s*(\S)", head)
    if directive:
        escape = directive.group(1)
    out: list[Instruction] = []
    index = 0
    while index < len(lines):
        raw = lines[index]
        start = index + 1
        index += 1
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        parts = [raw]
        while parts[-1].rstrip().endswith(escape) and index < len(lines):
            parts[-1] = parts[-1].rstrip()[:-1]
            nxt = lines[index]
            index += 1
            if nxt.lstrip().startswith("#"):
                parts.append("")
                continue
            parts.append(nxt)
        joined = " ".join(p.strip() for p in parts)
        heredoc = re.search(r"<<-?\s*['\"]?(\w+)['\"]?", joined)
        if heredoc:
            body: list[str] = []
            while index < len(lines) and lines[index].strip() != heredoc.group(1):
                body.append(lines[index])
                index += 1
            index += 1
            joined += "\n" + "\n".join(body)
        keyword, _, args = joined.strip().partition(" ")
        out.append(Instruction(start, keyword.upper(), args.strip()))
    return out


def substitute(text: str, values: dict[str, str]) -> str | None:
    """Expand ``$VAR`` / ``${VAR}`` / ``${VAR:-default}``; None when a variable has no value."""
    missing = False

    def repl(match: re.Match[str]) -> str:
        nonlocal missing
        name = match.group("name") or match.group("bare")
        value = values.get(name)
        op = match.group("op")
        if op == "-":
            return value if value else (match.group("word") or "")
        if op == "+":
            return (match.group("word") or "") if value else ""
        if value is None:
            missing = True
            return ""
        return value

    result = VAR.sub(repl, text)
    return None if missing else result


def _arg_assignments(args: str) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for word in args.split():
        name, eq, value = word.partition("=")
        out[name] = value.strip("\"'") if eq else None
    return out


@dataclass
class Image:
    line: int
    column: int
    text: str  # as written after substitution
    repository: str
    tag: str | None
    digest: str | None


def parse_image(reference: str, line: int, column: int) -> Image:
    name, _, digest = reference.partition("@")
    repository, tag = name, None
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        repository, tag = name.rsplit(":", 1)
    return Image(line, column, reference, repository.lower(), tag, digest or None)


@dataclass
class Stage:
    image: Image | None  # None for FROM scratch
    parent: str | None  # name of an earlier stage it builds on
    name: str | None
    pins: list[TorchPin] = field(default_factory=list)


def image_cuda(image: Image) -> str | None:
    """The CUDA version inside a known image, from its tag or the NGC release table."""
    if image.tag is None:
        return None
    if image.repository in CUDA_REPOS:
        match = re.match(r"^(\d+\.\d+(?:\.\d+)?)", image.tag)
        return match.group(1) if match else None
    if image.repository in PYTORCH_REPOS:
        match = re.search(r"-cuda(\d+\.\d+)", image.tag)
        return match.group(1) if match else None
    if image.repository == NGC_PYTORCH:
        release = image.tag.split("-", 1)[0]
        for row in cuda_tags().get("ngc_pytorch", []):
            if row.get("release") == release:
                return str(row["cuda"])
    return None


def check_cuda_image(image: Image) -> Hit | None:
    """CDL101 (no such tag format), CDL102 (deleted), CDL103 (EOL or old patch)."""
    table = cuda_tags()
    rows = {row["version"]: row for row in table.get("minor", [])}
    newest = max(
        (row for row in rows.values() if row.get("status") == "supported"),
        key=lambda row: tuple(int(x) for x in row["version"].split(".")),
    )
    default_os = table.get("default_os", "ubuntu22.04")
    tag = image.tag

    def hit(rule_id: str, **captures: Any) -> Hit:  # the image is named in every one
        return Hit.make(rule_id, image.line, image.column, image=image.text, **captures)

    if image.digest and tag is None:
        return None
    if tag is None or tag in table.get("removed_tags", []):
        problem = "no tag (defaults to `latest`)" if tag is None else f"tag `{tag}` was removed"
        suggested = f"{newest['latest_patch']}-runtime-{default_os}"
        return hit("CDL101", problem=problem, suggested=suggested, format=table.get("tag_format", ""))
    match = re.match(table["tag_regex"], tag)
    if match is None:
        short = re.match(
            r"^(\d+)\.(\d+)(?:\.(\d+))?(?:-(cudnn\d*))?(?:-(base|runtime|devel))?"
            r"(?:-([a-z]+[0-9.]*))?$",
            tag,
        )
        row = rows.get(f"{short.group(1)}.{short.group(2)}") if short else None
        patch = row["latest_patch"] if row and row.get("latest_patch") else newest["latest_patch"]
        parts = [patch]
        if short and short.group(4):
            parts.append(short.group(4))
        parts.append(short.group(5) if short and short.group(5) else "runtime")
        parts.append(short.group(6) if short and short.group(6) else default_os)
        problem = f"tag `{tag}` does not exist (not in the MAJOR.MINOR.PATCH-flavor-OS form)"
        return hit("CDL101", problem=problem, suggested="-".join(parts), format=table.get("tag_format", ""))
    minor = f"{match.group('major')}.{match.group('minor')}"
    row = rows.get(minor)
    if row is None:
        return None
    rest = tag[len(match.group("version")) :]
    target = newest if row.get("status") != "supported" else row
    suggested = f"{target['latest_patch']}{rest}"
    status = row.get("status")
    if status == "deleted":
        return hit("CDL102", minor=minor, suggested=suggested, source=row.get("source", ""))
    if status == "eol":
        reason = f"CUDA {minor} images are end of life (no updates; scheduled for deletion)"
        return hit("CDL103", suggested=suggested, reason=reason)
    latest = row.get("latest_patch")
    if latest and _vtuple(match.group("version")) < _vtuple(latest):
        reason = f"only the latest patch of CUDA {minor} ({latest}) is supported; older patch tags are deleted"
        return hit("CDL103", suggested=suggested, reason=reason)
    return None


def _vtuple(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", text))


def _exec_form(args: str) -> str:
    if args.startswith("["):
        try:
            words = json.loads(args)
            if isinstance(words, list):
                return " ".join(str(w) for w in words)
        except ValueError:
            return args
    return args


ReadFile = Callable[[Path], "str | None"]


def lint_dockerfile(text: str, path: Path, read_file: ReadFile) -> list[Hit]:
    hits: list[Hit] = []
    global_args: dict[str, str] = {}
    stage_args: dict[str, str] = {}
    stages: list[Stage] = []
    by_name: dict[str, Stage] = {}
    for ins in instructions(text):
        if ins.keyword == "ARG":
            for name, value in _arg_assignments(ins.args).items():
                target = stage_args if stages else global_args
                if value is not None:
                    target[name] = value
                elif name in global_args:  # re-declared in a stage: takes the global default
                    target[name] = global_args[name]
            continue
        if ins.keyword == "ENV" and stages:
            for name, value in _arg_assignments(ins.args).items():
                if value is not None:
                    stage_args[name] = value
            continue
        if ins.keyword == "FROM":
            stage_args = {}
            stage = _from(ins, global_args, by_name, hits)
            stages.append(stage)
            if stage.name:
                by_name[stage.name.lower()] = stage
            continue
        if ins.keyword in ("RUN", "CMD", "ENTRYPOINT"):
            command = _exec_form(ins.args)
            expanded = substitute(command, {**global_args, **stage_args}) or command
            if LAUNCH_RE.search(expanded):
                hits.append(Hit.make("CDL006", ins.line, 1, command="python -m torch.distributed.launch"))
            if ins.keyword == "RUN" and stages:
                _run_pins(expanded, ins.line, path, read_file, stages[-1], hits)
    for stage in stages:
        hits.extend(_mismatches(stage, by_name))
    return hits


def _from(ins: Instruction, global_args: dict[str, str], by_name: dict[str, Stage], hits: list[Hit]) -> Stage:
    words = [w for w in ins.args.split() if not w.startswith("--")]
    name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
    if not words:
        return Stage(None, None, name)
    reference = substitute(words[0], global_args)
    if reference is None or not reference:
        return Stage(None, None, name)  # a build-arg without a default: cannot tell
    if reference.lower() == "scratch":
        return Stage(None, None, name)
    if reference.lower() in by_name:
        return Stage(None, reference.lower(), name)
    column = ins.args.find(words[0]) + len("FROM ") + 1
    image = parse_image(reference, ins.line, column)
    if image.repository in CUDA_REPOS:
        hit = check_cuda_image(image)
        if hit:
            hits.append(hit)
    elif image.tag is None and image.digest is None:
        hits.append(Hit.make("CDL104", ins.line, column, image=image.text))
    return Stage(image, None, name)


def _run_pins(command: str, line: int, path: Path, read_file: ReadFile, stage: Stage, hits: list[Hit]) -> None:
    for install in pip_installs(command, line):
        for pin in install.pins:
            hit = check_pin(pin)
            if hit:
                hits.append(hit)
            stage.pins.append(pin)
        for name in install.requirement_files:
            text = read_file(path.parent / name)
            if text is None:
                continue
            for pin in requirements_pins(text):
                stage.pins.append(TorchPin(line, 1, f"{pin.text} (from {name})", pin.version, pin.variant, pin.via))


def _base_image(stage: Stage, by_name: dict[str, Stage]) -> Image | None:
    seen: set[str] = set()
    while stage.image is None and stage.parent and stage.parent not in seen:
        seen.add(stage.parent)
        stage = by_name[stage.parent]
    return stage.image


def _mismatches(stage: Stage, by_name: dict[str, Stage]) -> list[Hit]:
    image = _base_image(stage, by_name)
    if image is None:
        return []
    cuda = image_cuda(image)
    if cuda is None:
        return []
    image_mm = ".".join(cuda.split(".")[:2])
    hits: list[Hit] = []
    for pin in stage.pins:
        if pin.via == "index URL" and pin.version is None and not pin.text.startswith("torch"):
            continue  # the index line alone; the torch requirement that uses it is reported
        wheel = wheel_cuda(pin)
        if wheel is None or wheel == image_mm:
            continue
        matching = "cu" + image_mm.replace(".", "")
        hits.append(
            Hit.make(
                "CDL105",
                pin.line,
                pin.column,
                image=image.text,
                image_cuda=cuda,
                wheel=pin.text,
                wheel_cuda=wheel,
                matching_variant=matching,
            )
        )
    return hits
