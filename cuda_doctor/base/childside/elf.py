"""The section table, soname and needed libraries of an ELF64 little-endian shared object, read
by capped seeks, never whole.  Anything else, or tables over the caps, raises ``ValueError``."""

from __future__ import annotations

import struct
from typing import BinaryIO, NamedTuple

ELF_MAGIC = b"\x7fELF"
ELF_CLASS_64 = 2
ELF_DATA_LSB = 1
SHT_NOBITS = 8
SHN_XINDEX = 0xFFFF
DT_NULL, DT_NEEDED, DT_SONAME = 0, 1, 14
#: Bytes of section headers, of the section-name table and of the dynamic section read at most.
SECTION_TABLE_CAP = 4 << 20
SECTION_NAMES_CAP = 1 << 20
DYNAMIC_CAP = 1 << 20
#: A library name in the dynamic string table is read up to this many bytes.
NAME_CAP = 512


class Section(NamedTuple):
    type: int
    offset: int
    size: int
    link: int


def elf_sections(handle: BinaryIO) -> dict[str, Section]:
    """The sections of an ELF64 object by name (the first of a repeated name wins)."""
    header = _read_at(handle, 0, 64)
    if len(header) < 64 or header[:4] != ELF_MAGIC:
        raise ValueError("not an ELF file")
    if header[4] != ELF_CLASS_64 or header[5] != ELF_DATA_LSB:
        raise ValueError("not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", header, 0x28)
    entsize, count, names_index = struct.unpack_from("<HHH", header, 0x3A)
    if shoff == 0:
        return {}  # no section table (a stripped-down object): nothing to find by name
    if entsize < 64:
        raise ValueError(f"section header size {entsize} is below 64 bytes")
    head = _read_at(handle, shoff, 64)
    if len(head) < 64:
        raise ValueError("the section table is cut short")
    first = _section(head, 0)
    if count == 0:  # more than 0xff00 sections: the count is in section 0 (gABI extended numbering)
        count = first[4]
    if names_index == SHN_XINDEX:
        names_index = first[5]
    if count * entsize > SECTION_TABLE_CAP:
        raise ValueError(f"{count} section headers are more than {SECTION_TABLE_CAP >> 20} MiB")
    table = _read_at(handle, shoff, count * entsize)
    if len(table) < count * entsize:
        raise ValueError("the section table is cut short")
    raw = [_section(table, index * entsize) for index in range(count)]
    if names_index >= count:
        raise ValueError(f"section-name table index {names_index} is out of range")
    names_offset, names_size = raw[names_index][3], raw[names_index][4]
    if names_size > SECTION_NAMES_CAP:
        raise ValueError(f"the section-name table is more than {SECTION_NAMES_CAP >> 20} MiB")
    names = _read_at(handle, names_offset, names_size)
    sections: dict[str, Section] = {}
    for name_at, kind, _flags, offset, size, link in (entry[:6] for entry in raw):
        name = _c_string(names, name_at)
        if name not in sections:
            sections[name] = Section(kind, offset, 0 if kind == SHT_NOBITS else size, link)
    return sections


def dynamic_names(handle: BinaryIO, sections: dict[str, Section]) -> tuple[str | None, list[str]]:
    """The object's soname (``DT_SONAME``) and the libraries it needs (``DT_NEEDED``), in order."""
    dynamic = sections.get(".dynamic")
    strings = sections.get(".dynstr")
    if dynamic is None or strings is None or dynamic.size == 0:
        return None, []
    if dynamic.size > DYNAMIC_CAP:
        raise ValueError(f"the dynamic section is more than {DYNAMIC_CAP >> 20} MiB")
    data = _read_at(handle, dynamic.offset, dynamic.size)
    soname = None
    needed: list[str] = []
    for at in range(0, len(data) - 15, 16):
        tag, value = struct.unpack_from("<qQ", data, at)
        if tag == DT_NULL:
            break
        if tag in (DT_NEEDED, DT_SONAME) and value < strings.size:
            # one short read per name: the table also holds every symbol name (megabytes)
            name = _c_string(_read_at(handle, strings.offset + value, min(NAME_CAP, strings.size - value)), 0)
            if tag == DT_SONAME:
                soname = name
            else:
                needed.append(name)
    return soname, needed


def _section(table: bytes, at: int) -> tuple[int, int, int, int, int, int, int]:
    """(name offset, type, flags, file offset, size, link, info) of the header at ``at``."""
    name, kind, flags, _addr, offset, size, link, info = struct.unpack_from("<IIQQQQII", table, at)
    return name, kind, flags, offset, size, link, info


def _read_at(handle: BinaryIO, offset: int, size: int) -> bytes:
    handle.seek(offset)
    return handle.read(size)


def _c_string(data: bytes, at: int) -> str:
    end = data.find(b"\0", at)
    return data[at : end if end >= 0 else len(data)].decode("utf-8", "replace")
