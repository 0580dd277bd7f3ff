"""The project a file belongs to, and what that project says about its torch, TensorFlow and JAX.

A file's project is the nearest folder above it (within its git checkout) with dependency files; when they
say nothing about a framework, the base image of the nearest ``Dockerfile`` above the file may bring it.
"""

from __future__ import annotations

import functools
import os
import re
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.version import InvalidVersion, Version

from cuda_doctor.lint.compiler import CompilerlessImage, compilerless_image
from cuda_doctor.lint.dockerfile import NGC_PYTORCH, PYTORCH_REPOS, base_image_reference, parse_image
from cuda_doctor.lint.findings import display_path
from cuda_doctor.lint.requirements import caps_below, framework_requirements, parse_requirement
from cuda_doctor.tables import load_table

FRAMEWORKS = ("torch", "tensorflow", "jax", "deepspeed")
MAX_DEPENDENCY_BYTES = 1024 * 1024
PROJECT_FILES = frozenset({"pyproject.toml", "setup.py", "setup.cfg"})
REQUIREMENTS = re.compile(r"^(requirements|constraints)[^/]*\.(txt|in)$", re.IGNORECASE)
DOCKERFILE = re.compile(r"^(dockerfile|containerfile)([._-][^/]*)?$|\.(docker|container)file$", re.IGNORECASE)
ReadText = Callable[[Path], "str | None"]
TENSORFLOW_REPOS = ("nvcr.io/nvidia/tensorflow", "tensorflow/tensorflow", "docker.io/tensorflow/tensorflow")
IMAGE_FRAMEWORK = {
    **dict.fromkeys((NGC_PYTORCH, *PYTORCH_REPOS), "torch"),
    **dict.fromkeys(TENSORFLOW_REPOS, "tensorflow"),
    **dict.fromkeys(("nvcr.io/nvidia/jax", "ghcr.io/nvidia/jax"), "jax"),
}


@dataclass(frozen=True)
class FrameworkSource:
    """What a file's project says about one framework."""

    requirements: tuple[tuple[str, str], ...] = ()  # (requirement as written, the file it is in)
    image: str = ""  # the base image the framework comes with, when the dependency files say nothing
    image_version: str = ""  # that image's framework version when known, else ""

    def exact(self) -> tuple[str, str] | None:
        """(release, as written) of the first exact pin, e.g. ("2.1.0", "torch==2.1.0 (requirements.txt)")."""
        for text, where in self.requirements:
            req = parse_requirement(text)
            if req is None:
                continue
            for spec in req.specifier:
                if spec.operator in ("==", "===") and "*" not in spec.version:
                    return spec.version.partition("+")[0], f"{req} ({where})"
        if self.image_version and not self.requirements:
            return self.image_version, f"the base image `{self.image}`"
        return None

    def capped_below(self, bound: str) -> str | None:
        """How the project allows no release at or above ``bound`` (as written), else None."""
        limit = Version(bound)
        for text, where in self.requirements:
            req = parse_requirement(text)
            if req is not None and caps_below(req, limit):
                return f"{req} ({where})"
        if not self.requirements and self.image_version:
            try:
                if Version(self.image_version) < limit:
                    return f"the base image `{self.image}` ({self.image_version})"
            except InvalidVersion:
                return None
        return None

    def unknown_image(self) -> str:
        """The base image the framework comes from when its version is not known, else ''."""
        return self.image if self.image and not self.image_version and not self.requirements else ""


@dataclass(frozen=True)
class ProjectContext:
    """Per file: the framework sources of its project (picklable: sent to worker processes)."""

    torch: FrameworkSource = field(default_factory=FrameworkSource)
    tensorflow: FrameworkSource = field(default_factory=FrameworkSource)
    jax: FrameworkSource = field(default_factory=FrameworkSource)
    deepspeed: FrameworkSource = field(default_factory=FrameworkSource)  # only whether it is required
    root: str = ""  # the git checkout the file is in ("" when none)
    # the image of the nearest Dockerfiles above the file, when every one of them surely has no C compiler
    compilerless: CompilerlessImage | None = None

    def relative(self, path: Path | str) -> str:
        """The path inside its checkout (what "tests/" in a path means is decided on this)."""
        text = os.fspath(path)
        if self.root:
            absolute = os.path.abspath(text)
            prefix = self.root.rstrip(os.sep) + os.sep
            if absolute.startswith(prefix):
                text = absolute[len(prefix) :]
        return text.replace(os.sep, "/")


@functools.lru_cache(maxsize=1)
def _ngc_versions() -> dict[tuple[str, str], str]:
    """(framework, NGC release) → framework version, from the verified rows of the tag data."""
    data = load_table("nvidia_cuda_tags")
    out: dict[tuple[str, str], str] = {}
    for framework, table in (("torch", "ngc_pytorch"), ("tensorflow", "ngc_tensorflow")):
        for row in data.get(table, []):
            version = row.get(framework)
            if version and row.get("verified", True):
                out[(framework, str(row["release"]))] = str(version)
    return out


def image_framework(reference: str) -> tuple[str, str] | None:
    """(framework, version or '') of a base image that comes with one, else None."""
    image = parse_image(reference, 1, 1)
    framework = IMAGE_FRAMEWORK.get(image.repository)
    if framework is None:
        return None
    tag = image.tag or ""
    if image.repository.startswith("nvcr.io/nvidia/"):
        if framework == "tensorflow" and "-tf1" in tag:
            return framework, "1.15"  # NGC's TF1 images carry TensorFlow 1.15 (NVIDIA/tensorflow releases)
        return framework, _ngc_versions().get((framework, tag.split("-", 1)[0]), "")  # the tag starts with its release
    match = re.match(r"^(\d+\.\d+(?:\.\d+)?)(?:-|$)", tag)
    return framework, match.group(1) if match else ""


def _image(folder: _Folder, framework: str) -> tuple[str, str]:
    """(base image, its framework version or '') of the folder's Dockerfile that brings the framework."""
    for reference in folder.images:
        found = image_framework(reference)
        if found is not None and found[0] == framework:
            return reference, found[1]
    return "", ""


@dataclass(eq=False)  # compared and hashed by identity: a folder read once is one key
class _Folder:
    is_git_root: bool = False
    is_project: bool = False
    dependency_files: list[tuple[str, str, str]] = field(default_factory=list)  # (name, kind, text)
    images: list[str] = field(default_factory=list)  # base images of its Dockerfiles, "Dockerfile" first
    dockerfiles: int = 0  # how many Dockerfiles it has (read or not)
    compilerless: list[CompilerlessImage] = field(default_factory=list)  # of those, the images with no C compiler


def read_small_text(path: Path, limit: int = MAX_DEPENDENCY_BYTES) -> str | None:
    """A regular file of at most ``limit`` bytes as UTF-8, else None (never blocks on a FIFO)."""
    try:
        info = path.stat()
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return None
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, ValueError):
        return None


class ProjectFinder:
    """Finds each file's ProjectContext; caches what it reads per folder for one lint run."""

    def __init__(self, read_text: ReadText = read_small_text) -> None:
        self._read = read_text
        self._folder = functools.cache(self._read_folder)
        self._context_in = functools.cache(self._context_of)
        self._sources_of = functools.cache(self._sources)  # once per project and Dockerfile folder

    def context(self, path: Path) -> ProjectContext:
        return self._context_in(os.path.dirname(os.path.abspath(path)))

    def _context_of(self, folder: str) -> ProjectContext:
        chain = self._ancestors(folder)
        project = next((info for _, info in chain if info.is_project), None)
        images = next((info for _, info in chain if info.images), None)
        docker = next((info for _, info in chain if info.dockerfiles), None)
        root = next((path for path, info in chain if info.is_git_root), "")
        return self._sources_of(project, images, docker, root)

    @staticmethod
    def _sources(project: _Folder | None, images: _Folder | None, docker: _Folder | None, root: str) -> ProjectContext:
        """One project's framework sources, and the image its nearest Dockerfiles build when none of
        them has a C compiler (a folder with several may run the code in any one of them)."""
        sources: dict[str, FrameworkSource] = {}
        for framework in FRAMEWORKS:
            requirements: list[tuple[str, str]] = []
            if project is not None:
                for name, kind, text in project.dependency_files:
                    requirements.extend((str(req), name) for req in framework_requirements(text, kind, framework))
            image, version = ("", "") if requirements or images is None else _image(images, framework)
            sources[framework] = FrameworkSource(tuple(requirements), image, version)
        compilerless = None
        if docker is not None and len(docker.compilerless) == docker.dockerfiles:
            compilerless = docker.compilerless[0]
        return ProjectContext(**sources, root=root, compilerless=compilerless)

    def _ancestors(self, folder: str) -> list[tuple[str, _Folder]]:
        """The folder and those above it, up to and including the git root (or the top)."""
        out: list[tuple[str, _Folder]] = []
        current = folder
        for _ in range(64):  # a bound on depth: a path is never this deep in practice
            info = self._folder(current)
            out.append((current, info))
            parent = os.path.dirname(current)
            if info.is_git_root or parent == current:
                break
            current = parent
        return out

    def _read_folder(self, folder: str) -> _Folder:
        info = _Folder()
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            return info  # an unreadable folder says nothing about any project
        info.is_git_root = ".git" in names
        dependency: list[str] = []
        dockerfiles: list[str] = []
        for name in names:
            if name in PROJECT_FILES or REQUIREMENTS.match(name):
                info.is_project = True
            if name == "pyproject.toml" or REQUIREMENTS.match(name):
                dependency.append(name)
            elif DOCKERFILE.search(name):
                dockerfiles.append(name)
        if "requirements" in names:
            try:
                nested = sorted(os.listdir(os.path.join(folder, "requirements")))
            except OSError:
                nested = []
            dependency.extend(f"requirements/{n}" for n in nested if n.endswith((".txt", ".in")))
        for name in dependency:
            text = self._read(Path(folder, name))
            if text is not None:
                info.dependency_files.append((name, "pyproject" if name == "pyproject.toml" else "requirements", text))
        dockerfiles.sort(key=lambda n: (n.lower() != "dockerfile", n))
        info.dockerfiles = len(dockerfiles)
        for name in dockerfiles:
            text = self._read(Path(folder, name))
            reference = base_image_reference(text) if text is not None else None
            if reference:
                info.images.append(reference)
            image = compilerless_image(text, display_path(Path(folder, name))) if text is not None else None
            if image is not None:
                info.compilerless.append(image)
        return info
