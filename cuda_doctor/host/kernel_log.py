"""Xid and SXid events since boot, from the kernel log this user may read.

The NVIDIA driver logs each GPU fault as ``NVRM: Xid (PCI:0000:06:00): 79, pid=…, GPU has fallen
off the bus.``, and each NVSwitch fault as ``nvidia-nvswitch0: SXid (PCI:0000:c3:00.0): 12028, …``.
The log is read from ``/dev/kmsg`` (the kernel's ring buffer: root or CAP_SYSLOG when
``kernel.dmesg_restrict`` is 1), else ``journalctl -k -b`` (members of ``systemd-journal`` or
``adm``), else ``/var/log/kern.log`` from its last boot on; each within a size cap and a deadline.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import time
from pathlib import Path

from cuda_doctor.base.process import run_command, which
from cuda_doctor.base.reading import read_text
from cuda_doctor.core.facts import Facts
from cuda_doctor.core.probe import ProbeContext

KMSG = "/dev/kmsg"
KERN_LOG = "/var/log/kern.log"
DMESG_RESTRICT = "/proc/sys/kernel/dmesg_restrict"
#: The most of a kernel log read: the ring buffer is 16 MiB at its largest setting.
READ_CAP = 16 << 20
#: The most recent events kept as facts (the totals count them all).
KEPT = 100
#: How long reading the log may take, at most, whatever the source.
SECONDS = 2.0

_XID = re.compile(
    r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2})(?:\.\d)?\): (\d{1,9}),\s?(.*)"
)
_SXID = re.compile(r"nvidia-nvswitch(\d{1,6}): SXid \((?:PCI:)?([0-9A-Fa-f:.]{1,20})\): (\d{1,9}),\s?(.*)")
#: How a user who may not read it is let in (journalctl(1): members of these groups read every journal).
GRANT = "to let this user read it: sudo usermod -aG systemd-journal $USER (then log in again), or run as root"
#: A /dev/kmsg record: "priority,sequence,microseconds,flags;message".
_KMSG_RECORD = re.compile(r"^\d+,\d+,(\d{1,20}),[^;]*;(.*)$")
#: The kernel's own time stamp in a syslog or journal line: "[  269.516977]".
_STAMP = re.compile(r"\[\s*(\d+\.\d+)\]")
#: The first line the kernel logs at boot: in kern.log it starts this boot's lines.
_BOOT = re.compile(r"\] Linux version \d|kernel: Linux version \d")


class LogUnreadable(OSError):
    """No source of the kernel log could be read; the message says why, for each."""


def read_kmsg(path: Path, cap: int = READ_CAP, seconds: float = SECONDS) -> tuple[list[str], bool]:
    """The records of the kernel ring buffer (or of a file in its format), and whether the cap
    cut them.  /dev/kmsg hands out one record per read and says EAGAIN after the last."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not (stat.S_ISCHR(mode) or stat.S_ISREG(mode)):
            raise LogUnreadable(f"{path} is not the kernel's log device")
        chunks: list[bytes] = []
        size = 0
        deadline = time.monotonic() + seconds
        while size < cap and time.monotonic() < deadline:
            try:
                chunk = os.read(fd, 8192)
            except BlockingIOError:  # the last record was read
                break
            except BrokenPipeError:  # a record was overwritten while reading: read on
                continue
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks).decode("utf-8", "replace").splitlines(), size >= cap
    finally:
        os.close(fd)


def read_kern_log(path: Path, cap: int = READ_CAP) -> tuple[list[str], bool]:
    """The lines of this boot in a syslog kernel log: its last ``cap`` bytes, from the last
    "Linux version" line on (the whole kept part when that line is not in it)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise LogUnreadable(f"{path} is not a regular file")
        start = max(0, info.st_size - cap)
        os.lseek(fd, start, os.SEEK_SET)
        data = b""
        while len(data) < info.st_size - start:
            chunk = os.read(fd, min(1 << 20, info.st_size - start - len(data)))
            if not chunk:
                break
            data += chunk
    finally:
        os.close(fd)
    lines = data.decode("utf-8", "replace").splitlines()
    boots = [i for i, line in enumerate(lines) if _BOOT.search(line)]
    return (lines[boots[-1] :] if boots else lines), start > 0 and not boots


def parse(lines: list[str]) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """The Xid and SXid events of kernel log lines, oldest first."""
    xids: list[dict[str, object]] = []
    sxids: list[dict[str, object]] = []
    for raw in lines:
        line, at = raw, None
        record = _KMSG_RECORD.match(raw)
        if record:
            line, at = record.group(2), int(record.group(1)) / 1e6
        if "Xid" not in line:
            continue
        if at is None and (stamp := _STAMP.search(line)):
            at = float(stamp.group(1))
        if found := _XID.search(line):
            pci, code, text = found.groups()
            xids.append({"code": int(code), "pci": bus_address(pci), "at_s": at, "text": text.strip()[:200]})
        elif found := _SXID.search(line):
            switch, pci, code, text = found.groups()
            sxids.append({"code": int(code), "switch": int(switch), "pci": pci, "at_s": at, "text": text.strip()[:200]})
    return xids, sxids


def bus_address(text: str) -> str | None:
    """A PCI address as "domain:bus:device" in the kernel's form ("0000:06:00"), from NVML's
    "00000000:06:00.0" or the kernel's "0000:06:00"; None when it is neither."""
    parts = text.split(".")[0].split(":")
    if len(parts) != 3:
        return None
    try:
        domain, bus, device = (int(part, 16) for part in parts)
    except ValueError:
        return None
    return f"{domain:04x}:{bus:02x}:{device:02x}"


def _usable(lines: list[str], source: str, why: list[str]) -> bool:
    """Whether ``lines`` are a kernel log of this host; if not, ``why`` says so."""
    if not lines:
        why.append(f"{source}: no line at all, which no booted kernel's log is")
        return False
    if any("Starting gVisor" in line for line in lines[:20]):
        why.append(f"{source}: gVisor's own log, not the host kernel's (a sandbox cannot see the host's Xids)")
        return False
    return True


def _restricted(ctx: ProbeContext) -> str:
    try:
        value = read_text(ctx.file(DMESG_RESTRICT), 64, "a sysctl").strip()
    except OSError:
        return ""
    return f"kernel.dmesg_restrict = {value}; " if value else ""


class KernelLogProbe:
    name = "kernel_log"

    def applies(self, ctx: ProbeContext) -> bool:
        return True

    def collect(self, ctx: ProbeContext) -> Facts:
        facts = Facts()
        names = ("kernel_log.source", "kernel_log.xid_total", "kernel_log.xids", "kernel_log.sxids")
        try:
            source, lines, cut = self._read(ctx)
        except LogUnreadable as exc:
            facts.mark_all_unknown(names, str(exc))
            return facts
        xids, sxids = parse(lines)
        facts.set("kernel_log.source", source)
        facts.set("kernel_log.lines", len(lines))
        facts.set("kernel_log.cut", cut)
        facts.set("kernel_log.xid_total", len(xids))
        facts.set("kernel_log.xids", xids[-KEPT:])
        facts.set("kernel_log.sxid_total", len(sxids))
        facts.set("kernel_log.sxids", sxids[-KEPT:])
        try:
            facts.set("kernel_log.uptime_s", float(read_text(ctx.file("/proc/uptime"), 256).split()[0]))
        except (OSError, ValueError, IndexError) as exc:
            facts.mark_unknown("kernel_log.uptime_s", f"/proc/uptime could not be read: {exc}")
        return facts

    def _read(self, ctx: ProbeContext) -> tuple[str, list[str], bool]:
        """The first source that gives this boot's kernel log: a real one is never empty (the
        kernel logs its version at boot), and a sandbox's own log is not the host's."""
        why: list[str] = []
        denied = False
        try:
            lines, cut = read_kmsg(ctx.file(KMSG))
            if _usable(lines, KMSG, why):
                return KMSG, lines, cut
        except OSError as exc:
            denied = exc.errno in (errno.EPERM, errno.EACCES)
            why.append(f"{KMSG}: {_restricted(ctx) if denied else ''}{exc.strerror or exc}")
        journalctl = which("journalctl", ctx.path)
        if journalctl is None:
            why.append("journalctl: not found on PATH")
        else:
            argv = [journalctl, "-k", "-b", "-o", "short-monotonic", "--no-pager", "-q"]
            done = run_command(argv, timeout=min(ctx.timeout, SECONDS * 2), env=ctx.env, cap=READ_CAP)
            lines = done.stdout.splitlines()
            refused = "insufficient permissions" in done.stderr or "not seeing messages" in done.stderr
            denied = denied or refused
            if done.ok and not refused and _usable(lines, "journalctl -k -b", why):
                return "journalctl -k -b", lines, done.cut
            said = (done.stderr.strip().splitlines() or [done.error or f"exit status {done.returncode}"])[-1]
            if not done.ok or refused:
                why.append(f"journalctl -k: {said[:200]}")
        try:
            lines, cut = read_kern_log(ctx.file(KERN_LOG))
            if _usable(lines, KERN_LOG, why):
                return KERN_LOG, lines, cut
        except OSError as exc:
            denied = denied or exc.errno in (errno.EPERM, errno.EACCES)
            why.append(f"{KERN_LOG}: {exc.strerror or exc}")
        grant = f"; {GRANT}" if denied else ""
        raise LogUnreadable(f"the kernel log could not be read ({'; '.join(why)}){grant}")


PROBE = KernelLogProbe()
