"""Which mount a folder lives on, from ``/proc/self/mountinfo`` (proc(5)), and what that means for
a compile cache: a network file system, a read-only or a ``noexec`` mount, a folder this user
cannot write."""

from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

#: File system types whose files live on another machine (NFS, SMB, FUSE mounts of object stores,
#: cluster file systems): locks and renames are slow or weaker there, and Triton's and Inductor's
#: caches meet "Stale file handle" (pytorch/pytorch#173679; DeepSpeed warns of it, PR #6487).
NETWORK_TYPES = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "9p", "ceph", "glusterfs", "lustre", "gpfs", "beegfs")
#: FUSE file systems are named ``fuse.<program>`` (sshfs, gcsfuse, s3fs…); ``fuse`` alone too.
NETWORK_PREFIXES = ("fuse",)


class Mount(NamedTuple):
    point: str  # where it is mounted, as the kernel wrote it (escapes undone)
    fstype: str
    source: str
    options: tuple[str, ...]  # the mount's own options and the superblock's, without duplicates


def unescape(field: str) -> str:
    """mountinfo writes a space as ``\\040``, a tab ``\\011``, a newline ``\\012``, a backslash ``\\134``."""
    out, i = [], 0
    while i < len(field):
        code = field[i + 1 : i + 4]
        if field[i] == "\\" and len(code) == 3 and all(c in "01234567" for c in code):
            out.append(chr(int(code, 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[Mount]:
    """Every well-formed line: ``ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL…] - TYPE SOURCE SUPER``."""
    mounts = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields[6:]:
            continue
        dash = fields.index("-", 6)
        if len(fields) < dash + 3:
            continue
        options = fields[5].split(",") + (fields[dash + 3].split(",") if len(fields) > dash + 3 else [])
        point, source = unescape(fields[4]), unescape(fields[dash + 2])
        mounts.append(Mount(point, fields[dash + 1], source, tuple(dict.fromkeys(options))))
    return mounts


def mount_of(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount ``path`` (absolute, symbolic links resolved) is on: the longest mount point above
    it, the last one mounted where several share a point (the one on top)."""
    found: Mount | None = None
    for mount in mounts:
        point = mount.point.rstrip("/") or "/"
        inside = point == "/" or path == point or path.startswith(point + "/")
        if inside and (found is None or len(point) >= len(found.point.rstrip("/") or "/")):
            found = mount
    return found


def is_network(fstype: str) -> bool:
    return fstype in NETWORK_TYPES or fstype.split(".", 1)[0] in NETWORK_PREFIXES


def nearest_existing(path: Path, root: Path) -> Path | None:
    """``path`` or the nearest folder above it that exists (never above ``root``); None when none."""
    for candidate in (path, *path.parents):
        try:
            if candidate.is_dir():
                return candidate
        except OSError:  # a folder on the way that cannot be searched
            return None
        if candidate == root:
            return None
    return None


def inside_root(path: Path, root: Path) -> str:
    """The absolute path of the inspected system that ``path`` (under ``root``) stands for."""
    relative = os.path.relpath(path, root)
    return "/" if relative == "." else "/" + relative
