"""Fatbin headers of real shared objects from PyPI wheels; the counts match cuobjdump's listing."""

from __future__ import annotations

import shutil
import struct
import time
from collections.abc import Callable
from pathlib import Path

from cuda_doctor.base.childside.elf import elf_sections
from cuda_doctor.framework.fatbin.parse import DeviceCode, read_device_code

CUFILE = ("nvidia-cufile==1.15.1.6", "nvidia/cu13/lib/libcufile.so.0")
TORCHAUDIO = ("torchaudio==2.11.0", "torchaudio/lib/libtorchaudio.abi3.so")
XFORMERS = ("xformers==0.0.35", "xformers/_C.so")
CUDART = ("nvidia-cuda-runtime==13.0.96", "nvidia/cu13/lib/libcudart.so.13")


def read(path: Path, deadline: float | None = None) -> DeviceCode:
    with path.open("rb", buffering=0) as handle:
        return read_device_code(handle.fileno(), elf_sections(handle), deadline)


def real(unpacked: Callable[[str], Path], which: tuple[str, str]) -> Path:
    return unpacked(which[0]) / which[1]


def test_cufile_sass_and_lz_compressed_ptx(unpacked: Callable[[str], Path]) -> None:
    code = read(real(unpacked, CUFILE))
    assert (code.sass, code.sass_specific, code.ptx) == ({75, 80, 86}, set(), {(86, "7.1")})
    assert (code.containers, code.entries, code.complete) == (1, 4, True)


def test_torchaudio_long_headers_and_zstd_ptx(unpacked: Callable[[str], Path]) -> None:
    code = read(real(unpacked, TORCHAUDIO))
    assert code.sass == {75, 80, 86, 90, 100, 120}
    assert code.ptx == {(120, "9.0")}
    assert (code.containers, code.entries, code.complete) == (3, 21, True)


def test_xformers_arch_specific_sm_90a(unpacked: Callable[[str], Path]) -> None:
    code = read(real(unpacked, XFORMERS))
    assert (code.sass, code.sass_specific, code.ptx) == ({75, 80}, {90}, {(80, "8.7")})
    assert (code.containers, code.entries) == (11, 44)


def test_a_library_without_device_code(unpacked: Callable[[str], Path]) -> None:
    code = read(real(unpacked, CUDART))
    assert not code.any and code.complete and code.containers == 0


def _damaged(source: Path, tmp_path: Path, at: int, data: bytes) -> Path:
    copy = tmp_path / source.name
    shutil.copyfile(source, copy)
    with copy.open("rb") as handle:
        section = elf_sections(handle)[".nv_fatbin"]
    with copy.open("r+b") as handle:
        handle.seek(section.offset + at)
        handle.write(data)
    return copy


def test_garbage_where_a_container_should_start(unpacked: Callable[[str], Path], tmp_path: Path) -> None:
    code = read(_damaged(real(unpacked, CUFILE), tmp_path, 0, b"\xde\xad\xbe\xef"))
    assert not code.complete and "no fatbin header at offset 0" in str(code.problem)
    assert not code.any


def test_an_entry_header_too_short(unpacked: Callable[[str], Path], tmp_path: Path) -> None:
    code = read(_damaged(real(unpacked, CUFILE), tmp_path, 16 + 4, struct.pack("<I", 8)))
    assert not code.complete and "entry header of 8 bytes" in str(code.problem)


def test_a_container_larger_than_its_section(unpacked: Callable[[str], Path], tmp_path: Path) -> None:
    code = read(_damaged(real(unpacked, CUFILE), tmp_path, 8, struct.pack("<Q", 1 << 40)))
    assert not code.complete and "runs past its section" in str(code.problem)


def test_the_deadline_stops_a_read_and_says_so(unpacked: Callable[[str], Path]) -> None:
    code = read(real(unpacked, TORCHAUDIO), deadline=time.monotonic() - 1)
    assert code.timed_out and not code.complete
    assert code.entries == 0


def _past_the_end(source: Path, tmp_path: Path, keep: int) -> DeviceCode:
    """``source``'s fatbin section read from a copy whose file ends ``keep`` bytes into that
    section, as its section table still says it is whole (an object cut short where it lies)."""
    with source.open("rb") as handle:
        section = elf_sections(handle)[".nv_fatbin"]
    copy = tmp_path / source.name
    copy.write_bytes(source.read_bytes()[: section.offset + keep])
    with copy.open("rb", buffering=0) as handle:
        return read_device_code(handle.fileno(), {".nv_fatbin": section})


def test_a_file_that_ends_inside_a_container_header(unpacked: Callable[[str], Path], tmp_path: Path) -> None:
    code = _past_the_end(real(unpacked, CUFILE), tmp_path, 8)
    assert not code.complete and "ends inside its fatbin section, at offset 0" in str(code.problem)


def test_a_file_that_ends_inside_an_entry_header(unpacked: Callable[[str], Path], tmp_path: Path) -> None:
    code = _past_the_end(real(unpacked, CUFILE), tmp_path, 16 + 20)
    assert not code.complete and "ends inside a fatbin entry's header" in str(code.problem)


BITSANDBYTES = ("bitsandbytes==0.50.2", "bitsandbytes/libbitsandbytes_cuda124.so")


def test_relocatable_ptx_counts(unpacked: Callable[[str], Path]) -> None:
    """bitsandbytes is built with ``-rdc``: its PTX is only in ``__nv_relfatbin`` (``cuobjdump
    --list-ptx`` lists none), and it is JIT-linked at load on a GPU newer than its SASS: it counts."""
    path = real(unpacked, BITSANDBYTES)
    with path.open("rb", buffering=0) as handle:
        sections = elf_sections(handle)
        linked = read_device_code(handle.fileno(), {".nv_fatbin": sections[".nv_fatbin"]})
        relocatable = read_device_code(handle.fileno(), {".nv_fatbin": sections["__nv_relfatbin"]})
    assert (linked.sass, linked.ptx) == ({60, 70, 75, 80, 86, 89, 90}, set())
    assert relocatable.ptx == {(90, "8.4")}
    code = read(path)
    assert (code.sass, code.sass_specific, code.ptx) == ({60, 70, 75, 80, 86, 89, 90}, set(), {(90, "8.4")})
