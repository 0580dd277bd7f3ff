"""The nvidia/cuda tag catalogue: what a tag is, and that every tag cuda-doctor suggests is real."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from cuda_doctor.base.paths import rules_dir
from cuda_doctor.container import tags

REPO = Path(__file__).resolve().parents[2]
#: CUDA minors of the torch wheels (cuXYZ) the knowledge tables know, and a few driver ceilings.
WHEEL_MINORS = [(11, 8), (12, 1), (12, 4), (12, 6), (12, 8), (12, 9), (13, 0), (13, 2)]
CEILINGS = [(10, 1), (11, 4), (11, 8), (12, 2), (12, 8), (13, 0), (13, 2)]


def supported_and_verified(tag: str) -> bool:
    return tags.catalogue().state.get(tag) == "supported"


@pytest.mark.parametrize(
    ("tag", "state", "certain"),
    [
        ("13.0.2-cudnn-devel-ubuntu24.04", "supported", True),
        # NVIDIA's supported list of 2025-12-15 still had both (older tables called them deleted)
        ("11.7.1-cudnn8-devel-ubuntu22.04", "supported", True),
        ("12.8.1-runtime-ubuntu24.04", "supported", True),
        # the latest patches of 11.3 and 12.0 were listed as still existing, unsupported
        ("11.3.1-cudnn8-runtime-ubuntu20.04", "unsupported", True),
        ("12.0.0-base-ubuntu22.04", "unsupported", True),
        ("12.1.0-devel-ubuntu22.04", "unsupported", True),
        # what was removed: the short form (<= 11.0), non-latest 11.x patches, CentOS 8
        ("10.2-cudnn7-devel-ubuntu18.04", "removed", True),
        ("9.0-base", "removed", True),
        ("11.0-base-ubuntu20.04-rc", "removed", True),
        ("11.2.0-devel-ubuntu20.04", "removed", True),
        ("11.0.3-base-centos8", "removed", True),
        ("latest", "removed", True),
        (None, "removed", True),
        # never published, in a release the catalogue covers
        ("12.4.3-base-ubuntu22.04", "nonexistent", True),
        ("12.3-base", "nonexistent", True),
        ("12.7.0-base-ubuntu22.04", "nonexistent", True),
        ("12.4.1-cudnn8-devel-ubuntu22.04", "nonexistent", True),  # 12.4.1 names them cudnn-
        ("12.2.0-cudnn8-devel-ubuntu22.04", "nonexistent", True),  # 12.2.0 has no cuDNN tag
        ("12.6.3-cudnn-devel-amzn2023", "nonexistent", True),  # no cuDNN tag on Amazon Linux
        ("10.2-cudnn9-devel-ubuntu18.04", "nonexistent", True),
        ("not-a-tag", "nonexistent", True),
        # newer than the catalogue, or a patch of the newest minor of a major: cannot be ruled out
        ("13.2.2-cudnn7-devel-ubuntu16.04", "unlisted", False),
        ("12.9.2-base-ubuntu22.04", "unlisted", False),
        ("14.0.0-base-ubuntu24.04", "unlisted", False),
        # seen in use after the catalogue's date: never an error
        ("13.2.1-devel-ubuntu24.04", "unverified", False),
    ],
)
def test_judge(tag: str | None, state: str, certain: bool) -> None:
    verdict = tags.judge(tag)
    assert (verdict.state, verdict.certain) == (state, certain), verdict.reason


def test_superseded_is_an_older_patch_of_a_supported_minor() -> None:
    assert tags.judge("12.6.1-base-ubuntu22.04").superseded is True
    assert tags.judge("11.3.1-base-ubuntu20.04").superseded is False  # no 11.3 patch is supported


@pytest.mark.parametrize(
    ("tag", "options", "expected"),
    [
        ("12.4.3-base-ubuntu22.04", {}, "12.4.1-base-ubuntu22.04"),
        ("12.3-base", {}, "12.3.2-base-ubuntu22.04"),
        # the tag the old table produced, 13.2.2-cudnn7-devel-ubuntu16.04, never existed
        ("10.2-cudnn7-devel-ubuntu18.04", {}, "11.0.3-cudnn8-devel-ubuntu18.04"),
        ("10.2-cudnn7-devel-ubuntu18.04", {"cuda_minor": (12, 6)}, "12.6.3-cudnn-devel-ubuntu20.04"),
        ("12.4.1-cudnn8-devel-ubuntu22.04", {}, "12.4.1-cudnn-devel-ubuntu22.04"),
        ("12.4.1-cudnn-devel-ubuntu22.04", {"ceiling": (12, 2)}, "12.2.2-cudnn8-devel-ubuntu22.04"),
        ("12.4.1-cudnn-devel-ubuntu22.04", {"ceiling": (12, 3)}, "12.3.2-cudnn9-devel-ubuntu22.04"),
        ("11.0.3-base-centos8", {}, "11.0.3-base-rockylinux8"),
        ("11.3.1-cudnn8-runtime-ubuntu20.04", {}, "11.4.3-cudnn8-runtime-ubuntu20.04"),
        ("12.6.1-runtime-ubuntu24.04", {"cuda_minor": (12, 6)}, "12.6.3-runtime-ubuntu24.04"),
        ("12.4.1-base-ubuntu22.04", {"cuda_minor": (13, 2)}, None),  # no verified 13.2 tag
        ("13.0.0-tensorrt-devel-ubuntu24.04", {}, None),  # no supported TensorRT flavour
        (None, {}, "13.1.0-runtime-ubuntu22.04"),
    ],
)
def test_suggest(tag: str | None, options: dict[str, object], expected: str | None) -> None:
    assert tags.suggest(tag, **options) == expected  # type: ignore[arg-type]


def _every_input_tag() -> list[str | None]:
    """Every tag the catalogue knows, and forms it does not: short, unpublished patches,
    other cuDNN numbers, other OSes, newer releases, `latest`, nothing."""
    cat = tags.catalogue()
    known = sorted(cat.state) + sorted(cat.unverified)
    versions = sorted({t.split("-", 1)[0] for t in known})
    made = []
    for version in [*versions, "12.4.3", "12.7.0", "13.2.2", "14.0.0", "12.3", "13.1"]:
        for flavour in ("base", "runtime", "devel", "cudnn7-devel", "cudnn8-runtime", "cudnn9-devel", "cudnn-devel"):
            for os_name in ("ubuntu16.04", "ubuntu24.04", "centos8", "ubi7", "amzn2023", "cm2"):
                made.append(f"{version}-{flavour}-{os_name}")
            made.append(f"{version}-{flavour}")
    return [None, "latest", "garbage", *known, *made]


def test_every_tag_the_code_can_suggest_is_a_supported_tag_of_the_catalogue() -> None:
    inputs = _every_input_tag()
    assert len(inputs) > 2156
    options: list[dict[str, object]] = [{}]
    options += [{"cuda_minor": m} for m in WHEEL_MINORS]
    options += [{"ceiling": c} for c in CEILINGS]
    options += [{"cuda_minor": (12, 6), "flavour": "devel"}, {"ceiling": (12, 2), "flavour": "base"}]
    suggested: set[str] = set()
    for tag, option in itertools.product(inputs, options):
        found = tags.suggest(tag, **option)  # type: ignore[arg-type]
        if found is not None:
            assert supported_and_verified(found), (tag, option, found)
            minor, ceiling = option.get("cuda_minor"), option.get("ceiling")
            numbers = tags.catalogue().parse(found).numbers  # type: ignore[union-attr]
            assert minor is None or numbers[:2] == minor, (tag, option, found)
            assert ceiling is None or numbers[:2] <= ceiling, (tag, option, found)
            suggested.add(found)
    assert len(suggested) > 300  # the enumeration reaches most of the catalogue


def test_suggestions_keep_the_flavour_and_os_where_the_release_has_them() -> None:
    for tag, state in tags.catalogue().state.items():
        if state != "unsupported":
            continue
        parsed = tags.catalogue().parse(tag)
        found = tags.suggest(tag)
        if parsed is None or found is None:
            continue
        target = tags.catalogue().parse(found)
        assert target is not None and target.kind == parsed.kind, (tag, found)
        assert (target.prefix == "") == (parsed.prefix == ""), (tag, found)  # cuDNN stays cuDNN
        if found.rsplit("-", 1)[0] + f"-{parsed.os}" in tags.catalogue().state:
            assert target.os == parsed.os, (tag, found)


TAG_IN_TEXT = re.compile(r"nvidia/cuda:(?P<tag>[0-9][\w.-]*[\w])")


def test_every_tag_written_in_rules_and_docs_exists() -> None:
    """Examples in rule texts and docs are suggestions too: each must be a supported tag."""
    files = [*rules_dir().glob("*.toml"), *(REPO / "docs").glob("*.md"), REPO / "README.md"]
    seen = 0
    for path in files:
        for match in TAG_IN_TEXT.finditer(path.read_text(encoding="utf-8")):
            tag = match.group("tag")
            if path.name == "rules.md" or "{" in tag:
                continue  # rules.md is generated from the rule files
            seen += 1
            verdict = tags.judge(tag)
            assert verdict.state in ("supported", "unsupported", "removed", "nonexistent", "unlisted"), tag
            if verdict.state != "supported":
                # a bad tag may be shown as the thing to avoid (or to silence): the line, or the
                # one above it, says so
                lines = path.read_text(encoding="utf-8").splitlines()
                at = next(n for n, li in enumerate(lines) if tag in li)
                context = " ".join(lines[max(0, at - 1) : at + 1]).lower()
                words = ("never", "deleted", "removed", "not ", "older", "newer", "ignore[")
                assert any(w in context for w in words), (path.name, tag, lines[at])
    assert seen > 0


def test_ngc_rows_carry_a_source_and_only_verified_ones_are_used() -> None:
    rows = tags.catalogue().ngc_pytorch
    assert rows["25.12"]["verified"] is True and tags.ngc_pytorch_cuda("25.12") == "13.1.0"
    for release, row in rows.items():
        assert row.get("source"), release
        assert isinstance(row.get("verified"), bool), release
        if row["verified"] is not True:
            assert tags.ngc_pytorch_cuda(release) is None, release
    assert tags.ngc_pytorch_cuda("25.01") is None  # CUDA 12.8 from a paste only


def test_the_catalogue_holds_every_tag_of_nvidias_lists() -> None:
    cat = tags.catalogue()
    assert cat.as_of == "2025-12-15"
    assert len(cat.state) == 2156
    counts = {s: sum(1 for v in cat.state.values() if v == s) for s in ("supported", "unsupported", "removed")}
    assert all(counts.values()), counts
    # what the catalogue says of each release: per version, which states its tags are in
    assert {cat.state[t] for t in cat.state if t.startswith("12.8.1-")} == {"supported"}
    assert {cat.state[t] for t in cat.state if t.startswith("11.0-")} == {"removed"}


def test_an_unreadable_catalogue_is_an_error_with_the_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    from cuda_doctor import tables

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / f"{tags.TABLE}.toml").write_text("as_of = \n")
    monkeypatch.setattr(tables, "rules_dir", lambda: tmp_path)
    tables.load_table.cache_clear()
    tags.catalogue.cache_clear()
    tags._releases_with.cache_clear()
    try:
        with pytest.raises(tags.CatalogueError, match="cannot be read"):
            tags.catalogue()
    finally:
        tables.load_table.cache_clear()
        tags.catalogue.cache_clear()
        tags._releases_with.cache_clear()


def test_a_row_marked_unverified_never_makes_an_error_or_a_suggestion() -> None:
    from cuda_doctor.tables import load_table

    data = dict(load_table(tags.TABLE))
    rows = [dict(r) for r in data["version"]]
    for row in rows:
        if row["cuda"] == "12.4.1":
            row["verified"] = False
    cat = tags._build({**data, "version": rows})
    assert "12.4.1-base-ubuntu22.04" in cat.unverified and "12.4.1-base-ubuntu22.04" not in cat.state
    assert (12, 4, 1) not in cat.supported  # so never suggested
    assert (12, 4, 1) in cat.doubtful_versions
    patched = pytest.MonkeyPatch()
    patched.setattr(tags, "catalogue", lambda: cat)
    try:
        assert tags.judge("12.4.1-base-ubuntu22.04").state == "unverified"
        assert tags.judge("12.4.1-cudnn8-devel-ubuntu22.04").certain is False  # not "never existed"
    finally:
        patched.undo()
