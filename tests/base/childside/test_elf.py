"""The ELF reader on real shared objects from NVIDIA's wheels, and on files that are not ones."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from cuda_doctor.base.childside.elf import dynamic_names, elf_sections

CUDART = "nvidia-cuda-runtime==13.0.96"
CUFILE = "nvidia-cufile==1.15.1.6"


def test_sections_soname_and_needed_of_the_cuda_runtime(unpacked: Callable[[str], Path]) -> None:
    library = unpacked(CUDART) / "nvidia" / "cu13" / "lib" / "libcudart.so.13"
    with library.open("rb") as handle:
        sections = elf_sections(handle)
        soname, needed = dynamic_names(handle, sections)
    assert {".dynamic", ".dynstr", ".text"} <= set(sections)
    assert ".nv_fatbin" not in sections  # the runtime itself carries no device code
    assert soname == "libcudart.so.13"
    assert "libc.so.6" in needed


def test_a_library_with_device_code_has_its_fatbin_section(unpacked: Callable[[str], Path]) -> None:
    library = unpacked(CUFILE) / "nvidia" / "cu13" / "lib" / "libcufile.so.0"
    with library.open("rb") as handle:
        sections = elf_sections(handle)
        soname, _ = dynamic_names(handle, sections)
    fatbin = sections[".nv_fatbin"]
    assert fatbin.size > 0 and fatbin.offset + fatbin.size <= library.stat().st_size
    assert soname == "libcufile.so.0"


def test_files_that_are_not_64_bit_little_endian_elf(tmp_path: Path, unpacked: Callable[[str], Path]) -> None:
    text = tmp_path / "libnot.so"
    text.write_text("INPUT(-lfoo)\n")  # a linker script named like a library
    with text.open("rb") as handle, pytest.raises(ValueError, match="not an ELF file"):
        elf_sections(handle)
    real = unpacked(CUDART) / "nvidia" / "cu13" / "lib" / "libcudart.so.13"
    header = bytearray(real.read_bytes()[:64])
    header[4] = 1  # ELFCLASS32
    thirty_two = tmp_path / "lib32.so"
    thirty_two.write_bytes(bytes(header))
    with thirty_two.open("rb") as handle, pytest.raises(ValueError, match="64-bit little-endian"):
        elf_sections(handle)


def test_a_file_cut_short_says_so(tmp_path: Path, unpacked: Callable[[str], Path]) -> None:
    real = unpacked(CUDART) / "nvidia" / "cu13" / "lib" / "libcudart.so.13"
    cut = tmp_path / "libcut.so"
    with real.open("rb") as source, cut.open("wb") as target:
        shutil.copyfileobj(source, target, 4096)
        target.truncate(real.stat().st_size // 2)  # the section table sits at the end
    with cut.open("rb") as handle, pytest.raises(ValueError, match="cut short"):
        elf_sections(handle)
