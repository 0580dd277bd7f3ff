"""Whether the image a Dockerfile builds surely has no C compiler (CDL106).

Triton builds a small launcher module with the first C compiler it finds (``$CC``, else ``gcc``, else
``clang``: triton/runtime/build.py) the first time a ``torch.compile``d step runs.  The image is judged
only where the answer is certain: the final stage comes from a flavour that ships no compiler, written
out in its ``FROM`` line, and neither that stage nor a stage it builds on sets ``CC`` or runs anything
that installs, or may install, one.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

from cuda_doctor.container import tags
from cuda_doctor.lint.dockerfile import (
    CUDA_REPOS,
    PYTORCH_REPOS,
    Image,
    declare,
    exec_form,
    instructions,
    parse_image,
    substitute,
)

# A C compiler, a package that is one (a meta-package, a conda compiler, a CUDA toolkit whose nvcc
# needs gcc), or one that depends on gcc (Debian: libtool, gfortran, rustc, cargo, dkms, the MPI -dev).
COMPILER_PACKAGE = re.compile(
    r"^(?:gcc|g\+\+|cc|c\+\+|clang|clang\+\+|gxx|clangxx|tcc|icx|icpx)(?:[-_]?\d[\w.+~-]*)?$"
    r"|^(?:gcc|g\+\+)-(?:c\+\+|multilib|toolset-[\w.-]+)$|^devtoolset-[\w.-]+$"
    r"|^(?:build-essential|build-base|c-compiler|cxx-compiler|compilers)$|^crossbuild-essential-[\w-]+$"
    r"|^(?:gcc|gxx|clang|clangxx)_(?:linux|impl)[\w.-]*$"
    r"|^(?:cuda-nvcc|cuda-toolkit|cuda-minimal-build|cuda-compiler|nvidia-cuda-toolkit)(?:[-_][\w.-]*)?$"
    r"|^(?:libtool|gfortran(?:-\d+)?|rustc|cargo|dkms|libopenmpi-dev|libmpich-dev|mpi-default-dev)$"
)
# Debian packages whose Recommends bring gcc (build-essential, gcc), installed unless recommends are off.
RECOMMENDS_COMPILER = frozenset({"python3-pip", "python-pip", "cmake", "dpkg-dev", "cython3", "meson", "mpich"})
MANAGERS = {
    "apt-get": "apt", "apt": "apt", "aptitude": "apt", "dnf": "dnf", "yum": "dnf", "microdnf": "dnf",
    "tdnf": "dnf", "zypper": "zypper", "apk": "apk", "conda": "conda", "mamba": "conda", "micromamba": "conda",
    "dpkg": "local", "rpm": "local",
}  # fmt: skip
INSTALL = {"apt": ("install",), "dnf": ("install",), "zypper": ("install", "in"), "apk": ("add",)}
CONDA_INSTALL = ("install", "create", "update", "upgrade")
# sub-commands that install packages cuda-doctor cannot name (build dependencies, groups, local files)
UNNAMED = frozenset({"build-dep", "satisfy", "builddep", "groupinstall", "group", "groups", "source-install", "si"})
VALUE_OPTIONS = {
    "apt": frozenset({"-o", "-t", "-c", "--option", "--target-release", "--config-file"}),
    "dnf": frozenset({"-x", "--exclude", "--releasever", "--installroot", "--repo", "--enablerepo", "--setopt"}),
    "zypper": frozenset({"-r", "--repo", "--from"}),
    "apk": frozenset({"-t", "--virtual", "-X", "--repository", "--root", "-p"}),
    "conda": frozenset({"-c", "--channel", "-n", "--name", "-p", "--prefix", "--file"}),
}
WRAPPERS = frozenset({"sudo", "env", "nice", "nohup", "time", "exec", "command", "stdbuf"})
SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh"})  # `source`/`.` set a RUN's environment only
SEPARATOR = re.compile(r"&&|\|\||[;|&\n()]")
APT_PYTHON = re.compile(r"^python3(\.\d+)?(?:-(?:pip|venv|full|minimal))?$|^python-is-python3$")
DNF_PYTHON = re.compile(r"^python3(\.?\d+)?(?:-pip)?$")
PYTHON_HEADERS = re.compile(r"^(?:lib)?python3(\.?\d+)?-(?:dev|devel)$")
# pytorch/pytorch#170235 installs gcc in the runtime images, merged for 2.10: later ones are not judged;
# torch.compile exists from 2.0.
PYTORCH_WITH_GCC = (2, 10)
DNF_OS = ("rockylinux", "ubi", "oraclelinux", "centos", "amzn")


@dataclass(frozen=True)
class CompilerlessImage:
    """The final image of a Dockerfile that surely has no C compiler, and how to give it one."""

    dockerfile: str  # its path, as findings show it
    line: int  # of the FROM that names the image
    image: str  # as written, ARG defaults substituted
    flavour: str  # what the image is, in words: "a CUDA runtime image"
    fix: str


@dataclass
class _Stage:
    line: int
    written: str  # the image as written in FROM
    image: Image | None  # None: scratch, an earlier stage, or a reference cuda-doctor cannot resolve
    parent: str | None  # the earlier stage it builds on
    compiler: bool = False  # a RUN installs (or may install) a C compiler, or ENV sets CC
    packages: list[tuple[str, str]] = field(default_factory=list)  # (manager, package) installed


def compilerless_image(text: str, dockerfile: str) -> CompilerlessImage | None:
    """The final image of ``text`` when it surely has no C compiler, else None."""
    global_args: dict[str, str] = {}
    stage_args: dict[str, str] = {}
    stages: list[_Stage] = []
    by_name: dict[str, _Stage] = {}
    for ins in instructions(text):
        if ins.keyword == "ARG" and not stages:
            declare(ins.args, global_args, global_args, {})
        elif ins.keyword == "FROM":
            stage_args = {}
            stage = _from(ins.line, ins.args, global_args, by_name)
            if stage is None:
                return None
            stages.append(stage)
        elif not stages:
            continue
        elif ins.keyword in ("ARG", "ENV"):
            declare(ins.args, {**global_args, **stage_args}, stage_args, global_args if ins.keyword == "ARG" else {})
            if ins.keyword == "ENV" and _sets_cc(ins.args):
                stages[-1].compiler = True  # the user names a compiler: Triton takes $CC
        elif ins.keyword == "RUN":
            command = exec_form(_without_flags(ins.args))
            command = substitute(command, {**global_args, **stage_args}) or command
            stages[-1].compiler |= _installs_compiler(command, stages[-1].packages)
    chain = _chain(stages, by_name)
    image = chain[-1].image if chain else None
    if image is None or any(stage.compiler for stage in chain):
        return None
    packages = [package for stage in chain for package in stage.packages]
    judged = _judge(image, chain[-1].written, packages)
    if judged is None:
        return None
    flavour, fix = judged
    return CompilerlessImage(dockerfile, chain[-1].line, image.text, flavour, fix)


def _from(line: int, args: str, global_args: dict[str, str], by_name: dict[str, _Stage]) -> _Stage | None:
    words = [w for w in args.split() if not w.startswith("--")]
    if not words:
        return None
    reference = substitute(words[0], global_args)
    stage: _Stage
    if reference is None or "$" in reference or reference.lower() == "scratch":
        stage = _Stage(line, words[0], None, None)
    elif reference.lower() in by_name:
        stage = _Stage(line, words[0], None, reference.lower())
    else:
        stage = _Stage(line, words[0], parse_image(reference, line, 1), None)
    if len(words) >= 3 and words[1].upper() == "AS":
        by_name[words[2].lower()] = stage
    return stage


def _chain(stages: list[_Stage], by_name: dict[str, _Stage]) -> list[_Stage]:
    """The final stage and the stages it builds on, the one that names an image last."""
    if not stages:
        return []
    chain = [stages[-1]]
    while chain[-1].parent is not None:
        parent = by_name[chain[-1].parent]
        if parent in chain:
            return []
        chain.append(parent)
    return chain


def _without_flags(args: str) -> str:
    """RUN's own ``--mount=…`` / ``--network=…`` flags are not part of the command."""
    words = args.split(" ")
    while words and words[0].startswith("--"):
        words.pop(0)
    return " ".join(words)


def _sets_cc(args: str) -> bool:
    first = args.split(None, 1)[0] if args.split() else ""
    return first == "CC" or any(word.startswith("CC=") for word in args.split())


def _installs_compiler(command: str, packages: list[tuple[str, str]]) -> bool:
    """Whether the command installs a C compiler, or may: True when in doubt."""
    words = command.replace('"', " ").replace("'", " ").replace("\\\n", " ")
    found = False
    for segment in SEPARATOR.split(words):
        parts = segment.split()
        while parts and (parts[0] in WRAPPERS or re.match(r"^\w+=", parts[0])):
            parts.pop(0)  # sudo, env, VAR=value
        if not parts:
            continue
        program = os.path.basename(parts[0])
        if program in SHELLS and not any(re.match(r"^-\w*c\w*$", p) for p in parts[1:]):
            return True  # a script, or an installer piped into a shell: cannot tell what it installs
        if program.endswith((".sh", ".bash")) or parts[0].startswith("./"):
            return True
        for index, word in enumerate(parts):
            manager = MANAGERS.get(os.path.basename(word))
            if manager is not None:
                if "xargs" in parts[:index]:
                    return True  # the packages come from its input
                found |= _install(manager, os.path.basename(word), parts[index + 1 :], packages)
                break
    return found


def _install(manager: str, program: str, args: list[str], packages: list[tuple[str, str]]) -> bool:
    """One package-manager command: True when it installs a compiler or packages cuda-doctor cannot name."""
    if manager == "local":
        return any(a in ("-i", "--install", "-U", "--upgrade") or re.match(r"^-\w*[iU]", a) for a in args)
    words = iter(args)
    subcommand = ""
    options: list[str] = []
    for word in words:
        if word in VALUE_OPTIONS.get(manager, ()):
            options.append(f"{word}={next(words, '')}")
        elif word.startswith("-"):
            options.append(word)
        else:
            subcommand = word
            break
    if subcommand in UNNAMED:
        return True
    if subcommand not in (CONDA_INSTALL if manager == "conda" else INSTALL[manager]):
        return False
    names: list[str] = []
    for word in words:
        if word in VALUE_OPTIONS.get(manager, ()):
            options.append(f"{word}={next(words, '')}")
        elif word.startswith("-"):
            options.append(word)
        else:
            names.append(word)
    recommends = manager == "apt" and not any(
        o == "--no-install-recommends" or re.search(r"(?i)install-recommends=(false|0|no)", o) for o in options
    )
    for written in names:
        if (
            "$" in written
            or "`" in written
            or written.startswith(("@", "./", "/"))
            or written.endswith((".deb", ".rpm"))
        ):
            return True  # a variable, a group, a local package: not a name cuda-doctor can judge
        name = _package_name(written)
        packages.append((manager, name))
        if COMPILER_PACKAGE.match(name) or (recommends and name in RECOMMENDS_COMPILER):
            return True
    return False


def _package_name(written: str) -> str:
    """``gcc=4:11.2.0-1ubuntu1`` / ``conda-forge::gxx_linux-64>=12`` / ``gcc:amd64`` → the name."""
    name = written.rsplit("::", 1)[-1]
    name = re.split(r"[=<>!~\[]", name, maxsplit=1)[0]
    return name.split(":", 1)[0].lower()


def _judge(image: Image, written: str, packages: list[tuple[str, str]]) -> tuple[str, str] | None:
    """(the image in words, the fix) for a flavour that ships no C compiler, else None."""
    tag = image.tag
    if tag is None:
        return None
    if image.repository in CUDA_REPOS:
        parsed = tags.catalogue().parse(tag)
        # the flavour must be written out: one from a build argument may be `devel` at build time
        if (
            parsed is None
            or parsed.kind not in ("base", "runtime")
            or not re.search(rf"[-:]{parsed.kind}(-|@|$)", written)
        ):
            return None
        devel = re.sub(rf"(^|-){parsed.kind}(-|$)", r"\1devel\2", tag, count=1)
        flavour = f"a CUDA `{parsed.kind}` image"
        return flavour, _fix(image.repository, _devel_tag(devel), _cuda_install(parsed.os, packages))
    if image.repository in PYTORCH_REPOS and "$" not in written and tag.endswith("-runtime"):
        release = re.match(r"^(\d+)\.(\d+)", tag)
        if release is None or not (2, 0) <= (int(release.group(1)), int(release.group(2))) < PYTORCH_WITH_GCC:
            return None
        same = (tag.removesuffix("runtime") + "devel", "the `-devel` flavour of the same tag")
        # conda's Python has its headers, and the image's libpng-dev brings libc6-dev
        command = "RUN apt-get update && apt-get install -y --no-install-recommends gcc"
        return "a PyTorch `runtime` image", _fix(image.repository, same, command)
    return None


def _devel_tag(devel: str) -> tuple[str, str]:
    """The -devel tag to suggest, and what it is: the same tag's, else the nearest supported one."""
    if tags.judge(devel).state in ("supported", "unlisted", "unverified"):
        return devel, "the `-devel` flavour of the same tag"
    nearest = tags.suggest(devel)
    if nearest is None:
        return devel, "the `-devel` flavour of the same tag"
    return nearest, "the nearest supported `-devel` tag"


def _cuda_install(os_name: str | None, packages: list[tuple[str, str]]) -> str | None:
    """The RUN line that installs gcc, the C library's headers and, for a Python from the system's
    packages, its headers (Triton's launcher includes Python.h); None for an OS without a known command."""
    if os_name is None:
        return None
    names = {name for _, name in packages}
    has_headers = any(PYTHON_HEADERS.match(name) for name in names)
    if os_name.startswith(("ubuntu", "debian")):
        pythons = sorted(m.group(1) or "" for name in names if (m := APT_PYTHON.match(name)))
        extra = f" python3{pythons[-1]}-dev" if pythons and not has_headers else ""
        return f"RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev{extra}"
    if os_name.startswith(DNF_OS):
        manager = "yum" if os_name.endswith("7") else "dnf"
        pythons = sorted(m.group(1) or "" for name in names if (m := DNF_PYTHON.match(name)))
        extra = f" python3{pythons[-1]}-devel" if pythons and not has_headers else ""
        return f"RUN {manager} install -y gcc{extra} && {manager} clean all"
    return None


def _fix(repository: str, devel: tuple[str, str], command: str | None) -> str:
    tag, what = devel
    install = f"`{command}`" if command else "gcc and the C library's headers, with the image's package manager"
    return f"Base the final stage on `{repository}:{tag}` ({what}), or install a C compiler in it: {install}."
