"""docs/libraries.md: every library rule is explained there, under the error texts it explains."""

from __future__ import annotations

from pathlib import Path

from cuda_doctor.core.rules import load_rules
from cuda_doctor.tables import load_table

REPO = Path(__file__).resolve().parents[2]
PAGE = (REPO / "docs" / "libraries.md").read_text(encoding="utf-8")


def test_every_library_and_cuda_init_rule_is_on_the_page() -> None:
    ids = [r.id for r in load_rules() if r.category == "libraries" or r.id in ("CD111", "CD112", "CD113")]
    assert len(ids) >= 13
    assert [i for i in ids if i not in PAGE] == []


def test_the_error_texts_users_paste_are_on_the_page() -> None:
    # so that searching the text finds the page
    for row in load_table("cuda_errors")["error"]:
        assert row["text"] in PAGE, row["code"]
    for text in (
        "undefined symbol: __nvJitLinkComplete_12_4",
        "libcudnn.so.9: cannot open shared object file",
        "Could not load library libcudnn_cnn_infer.so.8",
        "libc10_cuda.so: cannot open shared object file",
        "operator torchvision::nms does not exist",
        "compiled with different CUDA major versions",
        "xFormers can't load C++/CUDA extensions",
        "unhandled system error (run with NCCL_DEBUG=INFO for details)",
        "Failed to initialize NVML: Driver/library version mismatch",
    ):
        assert text in PAGE, text


def test_the_readme_links_the_page() -> None:
    assert "(docs/libraries.md)" in (REPO / "README.md").read_text(encoding="utf-8")
