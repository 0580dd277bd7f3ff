"""Docker image references (distribution/reference's grammar, plus bare image ids as ``docker
inspect`` takes them): parse, normalise, and tell which images cuda-doctor cares about."""

from __future__ import annotations

import re
from dataclasses import dataclass

_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*"
_DOMAIN_PART = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_PART}(?:\.{_DOMAIN_PART})*|\[[0-9a-fA-F:]+\])(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
_REFERENCE = re.compile(
    rf"^(?P<name>(?:(?P<domain>{_DOMAIN})/)?{_COMPONENT}(?:/{_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?$"
)
_IMAGE_ID = re.compile(r"^(?:sha256:[0-9a-f]{64}|[0-9a-f]{12,64})$")

DEFAULT_DOMAIN = "docker.io"
_INTERESTING = ("docker.io/nvidia/cuda", "docker.io/pytorch/pytorch")


@dataclass(frozen=True)
class ImageRef:
    text: str
    domain: str  # "docker.io", "nvcr.io", …
    path: str  # "nvidia/cuda", "library/ubuntu"
    tag: str | None
    digest: str | None
    is_id: bool = False

    @property
    def repository(self) -> str:
        """``docker.io/nvidia/cuda``: the normalised name without tag or digest."""
        return f"{self.domain}/{self.path}"


class InvalidReference(ValueError):
    pass


def parse_reference(text: str) -> ImageRef:
    """Parse ``text``; raises InvalidReference with the reason."""
    ref = text.strip()
    if not ref:
        raise InvalidReference("empty image reference")
    if _IMAGE_ID.match(ref):
        return ImageRef(ref, "", "", None, None, is_id=True)
    match = _REFERENCE.match(ref)
    if match is None:
        raise InvalidReference(f"not a valid image reference: {text!r}")
    name = match.group("name")
    if len(name) > 255:
        raise InvalidReference(f"not a valid image reference: {text!r} (name longer than 255 characters)")
    # As docker does: the first component is a registry if it has a dot or a port, or is localhost.
    first, sep, rest = name.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost" or first != first.lower()):
        domain, path = first, rest
    else:
        domain, path = DEFAULT_DOMAIN, (name if sep else f"library/{name}")
    return ImageRef(ref, domain, path, match.group("tag"), match.group("digest"))


def is_nvidia_cuda(repository: str) -> bool:
    return repository in ("docker.io/nvidia/cuda", "nvcr.io/nvidia/cuda")


def repo_tags_matching(repo_tags: list[str] | None) -> list[str]:
    """The tags among an image's RepoTags whose CUDA requirements matter (nvidia/cuda, pytorch/pytorch,
    nvcr.io/nvidia/*); ``<none>:<none>`` skipped."""
    out: list[str] = []
    for tag in repo_tags or []:
        try:
            ref = parse_reference(tag)
        except InvalidReference:
            continue
        if not ref.is_id and (ref.repository in _INTERESTING or ref.repository.startswith("nvcr.io/nvidia/")):
            out.append(tag)
    return out
