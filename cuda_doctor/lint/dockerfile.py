"""Dockerfiles: base image tags, launchers in RUN/CMD/ENTRYPOINT, torch wheels vs the image's CUDA."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cuda_doctor.container import tags
from cuda_doctor.core.results import Severity
from cuda_doctor.lint.findings import Hit
from cuda_doctor.lint.requirements import TorchPin, check_pin, pip_installs, requirements_pins, wheel_cuda
from cuda_doctor.lint.shell import runs_launcher

VAR = re.compile(r"\$\{(?P<name>\w+)(?::?(?P<op>[-+])(?P<word>[^}]*))?\}|\$(?P<bare>\w+)")
CUDA_REPOS = ("nvidia/cuda", "docker.io/nvidia/cuda", "nvcr.io/nvidia/cuda")
PYTORCH_REPOS = ("pytorch/pytorch", "docker.io/pytorch/pytorch", "ghcr.io/pytorch/pytorch")
NGC_PYTORCH = "nvcr.io/nvidia/pytorch"
ReadFile = Callable[[Path], "str | None"]
PARSER_DIRECTIVE = re.compile(r"^#\s*([a-zA-Z][\w-]*)\s*=\s*(\S+)\s*$")
#: What the tag catalogue's verdict is reported as.
_TAG_RULES = {"nonexistent": "CDL101", "unlisted": "CDL101", "removed": "CDL102", "unsupported": "CDL103"}


@dataclass(frozen=True)
class Instruction:
    line: int
    keyword: str
    args: str


def instructions(text: str) -> list[Instruction]:
    """Logical instructions: continuations joined, comment lines dropped, heredocs kept in RUN."""
    lines = text.splitlines()
    escape = _escape_directive(lines)
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
            parts.append("" if lines[index].lstrip().startswith("#") else lines[index])
            index += 1
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


def _escape_directive(lines: list[str]) -> str:
    """The escape character: ``# escape=`` among the ``# key=value`` parser directives at the very top."""
    for line in lines:
        match = PARSER_DIRECTIVE.match(line.strip())
        if match is None:
            break
        if match.group(1).lower() == "escape" and match.group(2) in ("\\", "`"):
            return match.group(2)
    return "\\"


def substitute(text: str, values: dict[str, str]) -> str | None:
    """Expand ``$VAR`` / ``${VAR}`` / ``${VAR:-default}``; None when a variable has no value."""
    missing = False

    def repl(match: re.Match[str]) -> str:
        nonlocal missing
        value = values.get(match.group("name") or match.group("bare"))
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


def declare(args: str, known: dict[str, str], target: dict[str, str], fallback: dict[str, str]) -> None:
    """ARG/ENV: a default is expanded with the values declared before it (as Docker does); one that names
    an unknown variable (a cycle, a build argument without a default) makes the variable unknown."""
    for name, value in _arg_assignments(args).items():
        if value is None:
            if name in fallback:  # re-declared in a stage: takes the global default
                target[name] = fallback[name]
            continue
        expanded = substitute(value, known)
        if expanded is None:
            target.pop(name, None)
        else:
            target[name] = expanded
        known = {**known, **target}


def base_image_reference(text: str) -> str | None:
    """The base image of the last stage (stage names followed, ARG defaults substituted), else None."""
    global_args: dict[str, str] = {}
    by_name: dict[str, str | None] = {}
    last: str | None = None
    stages = 0
    for ins in instructions(text):
        if ins.keyword == "ARG" and not stages:  # only an ARG before the first FROM is global
            declare(ins.args, global_args, global_args, {})
        elif ins.keyword == "FROM":
            stages += 1
            words = [w for w in ins.args.split() if not w.startswith("--")]
            if not words:
                return None
            reference = substitute(words[0], global_args)
            if reference is not None and "$" in reference:
                reference = None
            if reference is not None and reference.lower() in by_name:
                reference = by_name[reference.lower()]
            last = reference
            if len(words) >= 3 and words[1].upper() == "AS":
                by_name[words[2].lower()] = reference
    return last


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
    if ":" in name.rsplit("/", 1)[-1]:  # a colon in the last part: a tag, not a registry port
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
        return tags.ngc_pytorch_cuda(image.tag.split("-", 1)[0])  # verified rows only
    return None


def check_cuda_image(image: Image, wheel_cuda: str | None = None) -> Hit | None:
    """CDL101 (no such tag), CDL102 (deleted), CDL103 (unsupported); a suggestion keeps ``wheel_cuda``."""
    if image.digest and image.tag is None:
        return None
    verdict = tags.judge(image.tag)
    alias = image.tag is None or image.tag in tags.catalogue().removed_aliases  # `latest`: as good as no tag
    rule = "CDL101" if alias else _TAG_RULES.get(verdict.state)
    if rule is None:
        return None
    suggested = tags.suggest(image.tag, cuda_minor=tags.minor_of(wheel_cuda))
    severity = None if verdict.certain else Severity.WARNING
    fix = tag_fix(image, verdict, suggested, wheel_cuda)
    return Hit.make(
        rule, image.line, image.column, severity=severity, image=image.text, problem=verdict.reason, fix=fix
    )


def tag_fix(image: Image, verdict: tags.Verdict, suggested: str | None, wheel_cuda: str | None) -> str:
    if verdict.state == "unlisted":
        check = f"Check that it exists (`docker manifest inspect {image.text}`)"
        nearest = f"; the nearest tag in the catalogue is `{image.repository}:{suggested}`." if suggested else "."
        return check + nearest
    if suggested:
        where = "same flavour, and the same OS where it exists"
        return f"Use `{image.repository}:{suggested}` (the nearest supported tag: {where})."
    for_cuda = f" for CUDA {wheel_cuda} (the torch wheel's)" if wheel_cuda else " of this flavour"
    return f"cuda-doctor's tag catalogue has no supported tag{for_cuda}; pick one from NVIDIA's list of supported tags."


def exec_form(args: str) -> str:
    """The JSON form (``["python", "train.py"]``) as the command line it runs."""
    with contextlib.suppress(ValueError):
        words = json.loads(args) if args.startswith("[") else None
        if isinstance(words, list):
            return " ".join(str(w) for w in words)
    return args


def lint_dockerfile(text: str, path: Path, read_file: ReadFile) -> list[Hit]:
    hits: list[Hit] = []
    global_args: dict[str, str] = {}
    stage_args: dict[str, str] = {}
    stages: list[Stage] = []
    by_name: dict[str, Stage] = {}
    for ins in instructions(text):
        if ins.keyword == "ARG" and not stages:
            declare(ins.args, global_args, global_args, {})
        elif ins.keyword in ("ARG", "ENV") and stages:
            fallback = global_args if ins.keyword == "ARG" else {}
            declare(ins.args, {**global_args, **stage_args}, stage_args, fallback)
        elif ins.keyword == "FROM":
            stage_args = {}
            stage = _from(ins, global_args, by_name, hits)
            stages.append(stage)
            if stage.name:
                by_name[stage.name.lower()] = stage
        elif ins.keyword in ("RUN", "CMD", "ENTRYPOINT"):
            command = exec_form(ins.args)
            expanded = substitute(command, {**global_args, **stage_args}) or command
            if runs_launcher(expanded):
                hits.append(Hit.make("CDL006", ins.line, 1, command="python -m torch.distributed.launch"))
            if ins.keyword == "RUN" and stages:
                _run_pins(expanded, ins.line, path, read_file, stages[-1], hits)
    return hits + _stage_hits(stages, by_name)


def _stage_hits(stages: list[Stage], by_name: dict[str, Stage]) -> list[Hit]:
    hits: list[Hit] = []
    for stage in stages:
        if stage.image is not None and stage.image.repository in CUDA_REPOS:
            # judged once the stages are read: a torch wheel installed on it decides the CUDA
            hit = check_cuda_image(stage.image, _one_wheel_cuda(stage.image, stages, by_name))
            if hit:
                hits.append(hit)
        hits.extend(_mismatches(stage, by_name))
    return hits


def _one_wheel_cuda(image: Image, stages: list[Stage], by_name: dict[str, Stage]) -> str | None:
    """The CUDA of the torch wheels installed on ``image`` (in any stage built on it), when they agree."""
    found = {wheel_cuda(pin) for stage in stages if _base_image(stage, by_name) is image for pin in stage.pins}
    found.discard(None)
    return found.pop() if len(found) == 1 else None


def _from(ins: Instruction, global_args: dict[str, str], by_name: dict[str, Stage], hits: list[Hit]) -> Stage:
    words = [w for w in ins.args.split() if not w.startswith("--")]
    name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
    reference = substitute(words[0], global_args) if words else None
    if not reference or "$" in reference or reference.lower() == "scratch":
        return Stage(None, None, name)  # scratch, or a build-arg without a default or a cycle: cannot tell
    if reference.lower() in by_name:
        return Stage(None, reference.lower(), name)
    column = ins.args.find(words[0]) + len("FROM ") + 1
    image = parse_image(reference, ins.line, column)
    if image.repository not in CUDA_REPOS and image.tag is None and image.digest is None:
        hits.append(Hit.make("CDL104", ins.line, column, image=image.text))
    return Stage(image, None, name)


def _run_pins(command: str, line: int, path: Path, read_file: ReadFile, stage: Stage, hits: list[Hit]) -> None:
    for install in pip_installs(command, line):
        hits.extend(hit for hit in map(check_pin, install.pins) if hit)
        stage.pins.extend(install.pins)
        for name in install.requirement_files:
            text = read_file(path.parent / name)
            pins = requirements_pins(text) if text is not None else []
            stage.pins += [TorchPin(line, 1, f"{p.text} (from {name})", p.version, p.variant, p.via) for p in pins]


def _base_image(stage: Stage, by_name: dict[str, Stage]) -> Image | None:
    seen: set[str] = set()
    while stage.image is None and stage.parent and stage.parent not in seen:
        seen.add(stage.parent)
        stage = by_name[stage.parent]
    return stage.image


def _has_nvcc(image: Image) -> bool:
    """A ``devel`` tag or an NGC framework image: extensions are built with its nvcc (a pip torch
    wheel brings its own CUDA libraries, so a runtime image's CUDA is unused)."""
    if image.repository == NGC_PYTORCH:
        return True
    return image.tag is not None and "devel" in image.tag


def _mismatches(stage: Stage, by_name: dict[str, Stage]) -> list[Hit]:
    image = _base_image(stage, by_name)
    cuda = image_cuda(image) if image is not None else None
    if image is None or cuda is None or not _has_nvcc(image):
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
        hits.append(  # the base suggested is the one the tag check suggests for this wheel
            Hit.make(
                "CDL105",
                pin.line,
                pin.column,
                image=image.text,
                image_cuda=cuda,
                wheel=pin.text,
                wheel_cuda=wheel,
                fix=_mismatch_fix(image, wheel, matching),
            )
        )
    return hits


def _mismatch_fix(image: Image, wheel: str, matching: str) -> str:
    index = f"`--index-url https://download.pytorch.org/whl/{matching}`, if that torch release ships it"
    if image.repository not in CUDA_REPOS:
        return f"Install the torch variant matching the image ({index}) or base the image on CUDA {wheel}."
    suggested = tags.suggest(image.tag, cuda_minor=tags.minor_of(wheel))
    if suggested is None:
        return (
            f"Install the torch variant matching the image ({index}); cuda-doctor's tag catalogue has no "
            f"supported nvidia/cuda tag of CUDA {wheel} to base the image on."
        )
    return (
        f"Base the image on `{image.repository}:{suggested}` (CUDA {wheel}, the wheel's) "
        f"or install the torch variant matching the image ({index})."
    )
