"""The kernel log probe: Xid and SXid lines from /dev/kmsg, journalctl or kern.log, bounded."""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from cuda_doctor.core.facts import Facts
from cuda_doctor.core.pipeline import derive_all
from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.host import kernel_log
from cuda_doctor.host.kernel_log import PROBE, bus_address, parse, read_kern_log, read_kmsg

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernel_log"


def root_with(tmp_path: Path, **files: Path) -> Path:
    """A file system root holding the given fixtures at /dev/kmsg, /var/log/kern.log, /proc/uptime."""
    places = {"kmsg": "dev/kmsg", "kern_log": "var/log/kern.log", "uptime": "proc/uptime"}
    for key, source in files.items():
        target = tmp_path / places[key]
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
    return tmp_path


def test_the_ring_buffer_records_give_each_xid_with_its_time_and_gpu_address(tmp_path: Path) -> None:
    (tmp_path / "uptime").write_text("7200.50 14000.00\n")
    root = root_with(tmp_path, kmsg=FIXTURES / "kmsg.txt", uptime=tmp_path / "uptime")
    facts = PROBE.collect(ProbeContext(root=root, env={"PATH": ""}))
    assert facts.get("kernel_log.source") == "/dev/kmsg"
    assert facts.get("kernel_log.uptime_s") == 7200.5
    xids = facts.get("kernel_log.xids")
    assert [(x["code"], x["pci"], x["at_s"]) for x in xids] == [
        (79, "0000:2b:00", 3243.449443),
        (119, "0000:9b:00", 4560.000001),
        (13, "0000:cb:00", 5000.0),
    ]
    assert xids[1]["text"].startswith("pid=4071838, name=python, Timeout after 45s")
    assert facts.get("kernel_log.sxids") == [
        {
            "code": 12028,
            "switch": 3,
            "pci": "0000:05:00.0",
            "at_s": 5100.0,
            "text": "Non-fatal, Link 32 egress non-posted PRIV error (First)",
        }
    ]


def test_journalctl_is_asked_when_the_ring_buffer_is_not_readable(
    tmp_path: Path, make_executable: Callable[[str, str], Path]
) -> None:
    journalctl = make_executable(
        "journalctl", f'[ "$1 $2 $3" = "-k -b -o" ] || exit 3\nexec /bin/cat {FIXTURES / "journal.txt"}'
    )
    facts = PROBE.collect(ProbeContext(root=tmp_path, env={"PATH": str(journalctl.parent)}))
    assert facts.get("kernel_log.source") == "journalctl -k -b"
    assert [(x["code"], x["at_s"]) for x in facts.get("kernel_log.xids")] == [
        (31, 31543.449443),
        (32, 31609.615516),
        (45, 31700.000001),
    ]


def test_kern_log_is_read_from_the_last_boot_on(tmp_path: Path) -> None:
    root = root_with(tmp_path, kern_log=FIXTURES / "kern.log")
    facts = PROBE.collect(ProbeContext(root=root, env={"PATH": ""}))
    assert facts.get("kernel_log.source") == "/var/log/kern.log"
    # the Xid 79 of the boot before is not this boot's
    assert [(x["code"], x["pci"], x["at_s"]) for x in facts.get("kernel_log.xids")] == [
        (3, "0000:01:00", 269.517039),
        (109, "0000:cb:00", 4282.0),
    ]


def test_an_unreadable_log_is_unknown_with_each_reason_and_how_to_be_let_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/dmesg_restrict").write_text("1\n")
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/kmsg").write_text("")
    real_open = os.open

    def denied(path: object, *args: object, **kwargs: object) -> int:
        # a user without CAP_SYSLOG: the tests run as root, whom the kernel never refuses
        if str(path).endswith("dev/kmsg"):
            raise PermissionError(errno.EPERM, "Operation not permitted")
        return real_open(path, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(kernel_log.os, "open", denied)
    facts = PROBE.collect(ProbeContext(root=tmp_path, env={"PATH": ""}))
    reason = facts.reason("kernel_log.xids")
    assert reason is not None
    assert "/dev/kmsg: kernel.dmesg_restrict = 1; Operation not permitted" in reason
    assert "journalctl: not found on PATH" in reason
    assert "/var/log/kern.log: No such file or directory" in reason
    assert "sudo usermod -aG systemd-journal $USER" in reason


def test_a_machine_without_any_kernel_log_says_so_without_a_grant(tmp_path: Path) -> None:
    reason = PROBE.collect(ProbeContext(root=tmp_path, env={"PATH": ""})).reason("kernel_log.xids")
    assert reason is not None and "No such file or directory" in reason and "usermod" not in reason


def test_a_fifo_in_place_of_the_log_is_refused_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "kmsg")
    with pytest.raises(kernel_log.LogUnreadable, match="not the kernel's log device"):
        read_kmsg(tmp_path / "kmsg")


def test_a_log_larger_than_the_cap_is_read_in_part_and_says_so(tmp_path: Path) -> None:
    big = tmp_path / "kmsg"
    record = "3,1,5000000,-;NVRM: Xid (PCI:0000:cb:00): 13, Graphics Exception\n"
    big.write_text(record * 2000)
    lines, cut = read_kmsg(big, cap=10_000)
    assert cut and 0 < len(lines) < 2000
    log = tmp_path / "kern.log"
    log.write_text("x\n" * 100 + "Dec  1 08:04:29 h kernel: [  1.0] NVRM: Xid (PCI:0000:cb:00): 13, a\n")
    lines, cut = read_kern_log(log, cap=100)
    assert cut and lines[-1].endswith("13, a")


@pytest.mark.parametrize(
    ("text", "address"),
    [("00000000:06:00.0", "0000:06:00"), ("0000:9b:00", "0000:9b:00"), ("0000:9B:00", "0000:9b:00"), ("bad", None)],
)
def test_nvml_and_kernel_addresses_meet(text: str, address: str | None) -> None:
    assert bus_address(text) == address


def test_lines_that_only_mention_xid_are_not_events() -> None:
    xids, sxids = parse(["NVRM: Xid 13 is an application fault, see the catalog", "kernel: nothing here"])
    assert (xids, sxids) == ([], [])


def facts_with(xids: list[dict[str, object]], recovery: str | None = "none", gpus: int = 1) -> Facts:
    facts = Facts()
    facts.set("gpu.count", gpus)
    for i in range(gpus):
        facts.set(f"gpu[{i}].pci_bus_id", f"00000000:{0x2B + i:02X}:00.0")
        if recovery is not None:
            facts.set(f"gpu[{i}].recovery_action", recovery)
    facts.set("kernel_log.source", "/dev/kmsg")
    facts.set("kernel_log.uptime_s", 7200.0)
    facts.set("kernel_log.xids", xids)
    facts.set("kernel_log.sxids", [])
    return facts


XID_79 = {"code": 79, "pci": "0000:2b:00", "at_s": 240.0, "text": "GPU has fallen off the bus."}
XID_119 = {"code": 119, "pci": "0000:2b:00", "at_s": 3600.0, "text": "pid=1, Timeout after 45s"}
XID_13 = {"code": 13, "pci": "0000:2b:00", "at_s": 60.0, "text": "Graphics Exception"}


@pytest.mark.parametrize(
    ("xids", "recovery", "gpus", "state", "command"),
    [
        ([XID_79], None, 0, "gone", "sudo reboot"),  # NVML lists no GPU at that address
        ([XID_119], "gpu_reset", 1, "needed", "sudo nvidia-smi -r -i 0"),
        ([XID_119], None, 1, "unconfirmed", "sudo nvidia-smi -r -i 0"),  # a driver without the recovery action
        ([XID_119], "none", 1, "recovered", "sudo nvidia-smi -r"),
        ([XID_13], "none", 1, "none", "sudo nvidia-smi -r"),
    ],
)
def test_each_xid_is_judged_by_the_catalog_and_the_drivers_recovery_action(
    xids: list[dict[str, object]], recovery: str | None, gpus: int, state: str, command: str
) -> None:
    facts = facts_with(xids, recovery, gpus)
    assert derive_all(facts) == []
    assert facts.get("derived.xid.node_state") == state
    assert facts.get("derived.xid.recovery_command") == command


def test_an_event_names_the_catalog_entry_the_gpu_and_when() -> None:
    facts = facts_with([XID_79, XID_13])
    derive_all(facts)
    assert facts.get("derived.xid.node_events") == [
        "Xid 79 (ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS: GPU has fallen off the bus) on GPU 0 (0000:2b:00),"
        " 4 min after boot, 2 h ago: RESTART_BM"
    ]
    assert facts.get("derived.xid.app_events") == [
        "Xid 13 (ROBUST_CHANNEL_GR_EXCEPTION / ROBUST_CHANNEL_GR_ERROR_SW_NOTIFY: Graphics Engine Exception)"
        " on GPU 0 (0000:2b:00), 1 min after boot, 2 h ago"
    ]


def test_a_sandboxes_own_log_and_a_journal_without_permission_are_not_taken_for_a_clean_log(
    tmp_path: Path, make_executable: Callable[[str, str], Path]
) -> None:
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/kmsg").write_text(
        "6,1,0,-;Starting gVisor...\n6,2,10,-;Checking naughty and nice process list...\n"
    )
    hint = "Hint: You are currently not seeing messages from other users and the system."
    journalctl = make_executable("journalctl", f"echo '{hint}' >&2")
    facts = PROBE.collect(ProbeContext(root=tmp_path, env={"PATH": str(journalctl.parent)}))
    reason = facts.reason("kernel_log.xids")
    assert reason is not None and not facts.has("kernel_log.xids")
    assert "gVisor's own log, not the host kernel's" in reason
    assert f"journalctl -k: {hint}" in reason and "usermod -aG systemd-journal" in reason


def test_a_journalctl_that_hangs_is_abandoned_within_the_deadline(
    tmp_path: Path, make_executable: Callable[[str, str], Path]
) -> None:
    journalctl = make_executable("journalctl", "exec sleep 60")
    facts = PROBE.collect(ProbeContext(root=tmp_path, env={"PATH": f"{journalctl.parent}:/bin:/usr/bin"}, timeout=1))
    reason = facts.reason("kernel_log.xids")
    assert reason is not None and "journalctl -k:" in reason


def test_absurd_numbers_in_a_log_line_are_no_event_and_no_crash() -> None:
    lines = [f"NVRM: Xid (PCI:0000:2b:00): {'9' * 5000}, GPU has fallen off the bus.", f"3,1,{'9' * 5000},-;x"]
    assert parse(lines) == ([], [])
