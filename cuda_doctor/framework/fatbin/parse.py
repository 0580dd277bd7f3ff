"""The device code of one ELF shared object, from its fatbin headers alone (payloads are skipped).

Both sections count.  ``__nv_relfatbin`` holds each object's relocatable device code of an
``nvcc -rdc=true`` build, and its PTX is JIT-compiled and linked when the library loads on a GPU
that its SASS does not cover, although ``cuobjdump --list-ptx`` does not list it: on an H200
(sm_90), a library built with ``-rdc=true`` for ``sm_80`` SASS and ``compute_80`` PTX, whose
``.nv_fatbin`` holds the sm_80 SASS alone, launched its kernel without error.  bitsandbytes'
libraries carry their PTX only there.

Layout (little-endian) of the section, containers back to back, as checked against
``cuobjdump --list-elf --list-ptx``:

    container: u32 magic 0xBA55ED50 @0, u16 version @4, u16 header size @6, u64 size of what follows @8
    entry:     u16 kind @0x00 (1 PTX, 2 SASS), u32 header size @0x04, u32 padded payload size @0x08,
               u16 minor @0x18, u16 major @0x1A (PTX: its ISA version), u32 arch @0x1C (75 = sm_75),
               u64 flags @0x28 (0x8000 zstd, 0x1000/0x2000 nvcc compression)

The kind is the same for a compressed entry (flags say only how its payload is packed): nvcc 13.0
with ``-Xfatbin -compress-all`` writes kind 1 / 2 with flags 0x8011 and a zstd payload, and
bitsandbytes' ``-rdc`` objects kind 1 with 0x2011 and nvcc's own compression.
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass, field

from cuda_doctor.base.childside.elf import Section

FATBIN_MAGIC = 0xBA55ED50
FATBIN_SECTIONS = (".nv_fatbin", "__nv_relfatbin")
KIND_PTX = 1
KIND_ELF = 2
CONTAINER_HEADER = 16
ENTRY_HEADER = 64
#: Seen on the SASS entries of an arch-specific target ("9.0a"); undocumented, so never trusted more.
FLAG_ARCH_SPECIFIC = 0x100000
#: Entries read per file at most; a file with more is reported as read in part.
MAX_ENTRIES = 200_000
#: How far past a container's end a reader looks for the next container's magic.
RESYNC_WINDOW = 64 << 10


@dataclass
class DeviceCode:
    """What one file's fatbins hold; ``complete`` is False when reading stopped early."""

    sass: set[int] = field(default_factory=set)
    sass_specific: set[int] = field(default_factory=set)
    ptx: set[tuple[int, str]] = field(default_factory=set)  # (arch, ISA version "9.0")
    containers: int = 0
    entries: int = 0
    complete: bool = True
    problem: str | None = None
    timed_out: bool = False  # the scan's deadline stopped it (not the file's own shape)

    @property
    def any(self) -> bool:
        return bool(self.sass or self.ptx)


def read_device_code(fd: int, sections: dict[str, Section], deadline: float | None = None) -> DeviceCode:
    """The device code in ``fd``'s fatbin sections (``sections`` from ``childside.elf``)."""
    code = DeviceCode()
    for name in FATBIN_SECTIONS:
        section = sections.get(name)
        if section is not None and section.size:
            _read_section(fd, section, code, deadline)
            if not code.complete:
                break
    return code


def _read_section(fd: int, section: Section, code: DeviceCode, deadline: float | None) -> None:
    position, end = section.offset, section.offset + section.size
    while position + CONTAINER_HEADER <= end:
        if deadline is not None and time.monotonic() > deadline:
            _stop(code, "the scan's time budget ran out in this file")
            code.timed_out = True
            return
        header = os.pread(fd, CONTAINER_HEADER, position)
        if len(header) < CONTAINER_HEADER:  # the file is shorter than its section table says
            _stop(code, f"the file ends inside its fatbin section, at offset {position - section.offset}")
            return
        magic, _version, header_size, size = struct.unpack("<IHHQ", header)
        if magic != FATBIN_MAGIC:
            found = _resync(fd, position, end)
            if found is None:
                return  # only padding left, or _resync said what it found
            if found < 0:
                _stop(code, f"no fatbin header at offset {position - section.offset} of the section")
                return
            position = found
            continue
        if header_size < CONTAINER_HEADER or position + header_size + size > end:
            _stop(code, f"a fatbin container at offset {position - section.offset} runs past its section")
            return
        code.containers += 1
        if not _read_entries(fd, position + header_size, position + header_size + size, code):
            return
        position += header_size + size


def _read_entries(fd: int, position: int, end: int, code: DeviceCode) -> bool:
    while position + ENTRY_HEADER <= end:
        header = os.pread(fd, ENTRY_HEADER, position)
        if len(header) < ENTRY_HEADER:  # the file is shorter than its section table says
            _stop(code, "the file ends inside a fatbin entry's header")
            return False
        kind, _version, header_size, padded = struct.unpack_from("<HHII", header, 0)
        minor, major, arch = struct.unpack_from("<HHI", header, 0x18)
        (flags,) = struct.unpack_from("<Q", header, 0x28)
        if header_size < ENTRY_HEADER:
            _stop(code, f"a fatbin entry header of {header_size} bytes (at least {ENTRY_HEADER} expected)")
            return False
        if kind == KIND_ELF:
            (code.sass_specific if flags & FLAG_ARCH_SPECIFIC else code.sass).add(arch)
        elif kind == KIND_PTX:
            code.ptx.add((arch, f"{major}.{minor}"))
        code.entries += 1
        if code.entries >= MAX_ENTRIES:
            _stop(code, f"more than {MAX_ENTRIES} fatbin entries")
            return False
        position += header_size + padded
    return True


def _resync(fd: int, position: int, end: int) -> int | None:
    """The next container's offset after zero padding; None if only zeros are left; -1 if not zeros."""
    window = os.pread(fd, min(RESYNC_WINDOW, end - position), position)
    magic = struct.pack("<I", FATBIN_MAGIC)
    for at in range(0, len(window) - 3, 8):
        if window[at : at + 4] == magic:
            return position + at
        if window[at : at + 8].strip(b"\0"):
            return -1
    return None if position + len(window) >= end else -1


def _stop(code: DeviceCode, problem: str) -> None:
    code.complete = False
    code.problem = problem
