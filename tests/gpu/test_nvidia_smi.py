"""nvidia-smi parsing on real H200 recordings; the probe against a fake nvidia-smi executable."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cuda_doctor.core.probe import ProbeContext
from cuda_doctor.gpu.nvidia_smi import collect_nvidia_smi, find_document, parse_query_gpu_csv, parse_query_xml
from cuda_doctor.gpu.nvml.binding import VERSION_MISMATCH_MESSAGE
from cuda_doctor.gpu.probe import GpuProbe


def _nvml_recording(h200_dir: Path) -> dict[str, str]:
    """A few values from nvml.txt, the pynvml readings taken on the same machine."""
    lines = (h200_dir / "nvml.txt").read_text().splitlines()
    words = lines[1].split()
    gpu = lines[2].split()
    return {"driver": words[1], "cuda": words[3], "name": " ".join(gpu[1:3]), "uuid": gpu[3]}


def test_xml_matches_the_nvml_and_csv_recordings(h200_dir: Path) -> None:
    facts = parse_query_xml((h200_dir / "nvidia-smi-q.xml").read_text())
    nvml = _nvml_recording(h200_dir)
    csv = parse_query_gpu_csv((h200_dir / "query-gpu.csv").read_text())[0]

    assert facts.get("driver.source") == "nvidia-smi"
    assert facts.get("driver.status") == "ok"
    assert facts.get("driver.error") is None
    assert facts.get("driver.version") == nvml["driver"] == csv["driver_version"] == "580.159.04"
    assert nvml["cuda"] == "13000"
    assert facts.get("driver.cuda_version") == "13.0"
    assert facts.get("gpu.count") == 1
    assert facts.indices("gpu") == [0]
    assert facts.get("gpu[0].name") == nvml["name"] == csv["name"] == "NVIDIA H200"
    assert facts.get("gpu[0].uuid") == nvml["uuid"] == csv["uuid"]
    assert facts.get("gpu[0].pci_bus_id") == csv["pci.bus_id"] == "00000000:00:06.0"
    assert facts.get("gpu[0].memory_total_mib") == 143771
    assert csv["memory.total"] == "143771 MiB"
    assert facts.get("gpu[0].memory_used_mib") == 0
    assert facts.get("gpu[0].persistence_mode") is True
    assert facts.get("gpu[0].ecc_enabled") is True
    assert facts.get("gpu[0].ecc_uncorrected_volatile") == 0
    assert facts.get("gpu[0].mig_enabled") is False
    assert facts.get("gpu[0].mig_pending") is False  # <pending_mig>Disabled</pending_mig>
    assert facts.get("gpu[0].recovery_action") == "none"  # <gpu_recovery_action>None</gpu_recovery_action>
    assert facts.get("gpu[0].recovery_action_label") == "None"
    assert (facts.get("gpu[0].pcie_gen_current"), facts.get("gpu[0].pcie_gen_max")) == (5, 5)
    assert (facts.get("gpu[0].pcie_width_current"), facts.get("gpu[0].pcie_width_max")) == (16, 16)
    assert int(csv["clocks_event_reasons.active"] or "", 16) == 1
    assert facts.get("gpu[0].clock_event_reasons") == 0x1
    assert facts.get("gpu[0].clock_event_reason_names") == ["gpu_idle"]
    assert facts.get("gpu[0].temperature_c") == 36
    assert facts.get("gpu[0].power_w") == 78.02
    assert facts.get("gpu[0].power_limit_w") == 700.0
    assert facts.get("gpu[0].remapped_rows_pending") is False
    assert facts.get("gpu[0].remapped_rows_failure") is False
    # the H200 prints N/A for page retirement (it remaps rows instead)
    assert facts.has("gpu[0].retired_pages_pending")
    assert facts.get("gpu[0].retired_pages_pending") is None
    assert facts.get("gpu[0].processes") == []
    assert facts.get("gpu[0].process_count") == 0
    # not in -q -x: filled in from --query-gpu by the probe
    assert facts.reason("gpu[0].compute_capability") == "not in nvidia-smi -q -x output"
    assert "nvml.version" in facts.unknown


def test_old_driver_layout(h200_dir: Path) -> None:
    facts = parse_query_xml((h200_dir / "nvidia-smi-q-old-driver.xml").read_text())
    assert facts.get("driver.version") == "470.82.01"
    assert facts.get("driver.cuda_version") == "11.4"
    # <clocks_throttle_reasons> and <power_readings> of older drivers
    assert facts.get("gpu[0].clock_event_reason_names") == ["gpu_idle"]
    assert facts.get("gpu[0].power_w") == 78.0
    assert facts.get("gpu[0].power_limit_w") == 700.0
    assert facts.get("gpu[0].retired_pages_pending") is False
    # the graphics-only client is not a compute process
    assert facts.get("gpu[0].processes") == [{"pid": 4242, "name": "python3", "used_mib": 1024.0}]
    assert facts.get("gpu[0].process_count") == 1


def test_malformed_xml_leaves_facts_unknown_with_the_reason() -> None:
    facts = parse_query_xml('<?xml version="1.0" ?>\n<nvidia_smi_log><driver_version>5')
    assert "driver.version" not in facts
    assert "not valid XML" in facts.unknown["driver.version"]
    assert "not valid XML" in (facts.reason("gpu[0].name") or "")


def test_active_reasons_become_a_mask() -> None:
    xml = """<nvidia_smi_log><driver_version>580.1</driver_version><gpu id="x">
      <clocks_event_reasons>
        <clocks_event_reason_gpu_idle>Not Active</clocks_event_reason_gpu_idle>
        <clocks_event_reason_sw_power_cap>Active</clocks_event_reason_sw_power_cap>
        <clocks_event_reason_hw_thermal_slowdown>Active</clocks_event_reason_hw_thermal_slowdown>
      </clocks_event_reasons></gpu></nvidia_smi_log>"""
    facts = parse_query_xml(xml)
    assert facts.get("gpu[0].clock_event_reasons") == 0x4 | 0x40
    assert facts.get("gpu[0].clock_event_reason_names") == ["sw_power_cap", "hw_thermal"]
    assert "driver.cuda_version" in facts.unknown


def test_csv_with_and_without_header(h200_dir: Path) -> None:
    rows = parse_query_gpu_csv((h200_dir / "query-gpu.csv").read_text())
    assert list(rows) == [0]
    assert rows[0]["compute_cap"] == "9.0"
    assert rows[0]["pcie.link.gen.max"] == "5"
    plain = parse_query_gpu_csv("0, GPU-aaa, 9.0\n1, GPU-bbb, [N/A]\n", fields=("index", "uuid", "compute_cap"))
    assert plain == {
        0: {"index": "0", "uuid": "GPU-aaa", "compute_cap": "9.0"},
        1: {"index": "1", "uuid": "GPU-bbb", "compute_cap": None},
    }
    with pytest.raises(ValueError, match="columns"):
        parse_query_gpu_csv("0, GPU-aaa\n")


# -- the probe against a real (fake) executable ---------------------------------------------
def test_collect_from_the_h200_recording(fake_nvidia_smi: Any) -> None:
    facts = collect_nvidia_smi(fake_nvidia_smi.ctx("ok"))
    assert facts.get("driver.source") == "nvidia-smi"
    assert facts.get("driver.status") == "ok"
    assert facts.get("driver.version") == "580.159.04"
    assert facts.get("driver.cuda_version") == "13.0"
    assert facts.get("gpu[0].compute_capability") == "9.0"
    assert facts.get("gpu[0].uuid") == "GPU-3d95cf99-d22a-5850-a342-8583fdfbb084"


def test_collect_from_an_old_driver(fake_nvidia_smi: Any) -> None:
    facts = collect_nvidia_smi(fake_nvidia_smi.ctx("old"))
    assert facts.get("driver.status") == "ok"
    assert facts.get("driver.version") == "470.82.01"
    assert facts.get("driver.cuda_version") == "11.4"
    # 470 drivers do not know the compute_cap query field
    reason = facts.reason("gpu[0].compute_capability") or ""
    assert "compute_cap" in reason and "status 2" in reason


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in {"Z", "X"}


def test_a_hung_nvidia_smi_is_killed(fake_nvidia_smi: Any) -> None:
    facts = collect_nvidia_smi(fake_nvidia_smi.ctx("hang", timeout=1.0))
    assert facts.get("driver.status") == "not_answering"
    assert facts.get("driver.error") == "nvidia-smi did not answer in 1 s"
    assert facts.reason("driver.version") == "nvidia-smi did not answer in 1 s"
    pids = [int(p) for p in fake_nvidia_smi.pidfile.read_text().split()]
    assert len(pids) == 2
    # the fake and its `sleep 60` child share a process group that was killed; allow
    # the init process a moment to reap the orphaned child
    deadline = time.monotonic() + 10
    while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in pids if not _gone(pid)] == []


def test_a_flooding_nvidia_smi_is_stopped_at_the_cap(fake_nvidia_smi: Any) -> None:
    facts = collect_nvidia_smi(fake_nvidia_smi.ctx("flood", timeout=30.0))
    assert facts.get("driver.status") == "output_flood"
    assert facts.get("driver.error") == "nvidia-smi produced more than 8 MiB of output and was stopped"
    assert facts.reason("driver.version") == facts.get("driver.error")


@pytest.mark.parametrize(
    ("mode", "status", "error"),
    [
        ("not_loaded", "not_loaded", "couldn't communicate with the NVIDIA driver"),
        ("mismatch", "version_mismatch", VERSION_MISMATCH_MESSAGE),
        ("no_devices", "no_gpu", "No devices were found"),
    ],
)
def test_driver_failures_are_classified(fake_nvidia_smi: Any, mode: str, status: str, error: str) -> None:
    facts = collect_nvidia_smi(fake_nvidia_smi.ctx(mode))
    assert facts.get("driver.status") == status
    assert error in facts.get("driver.error")
    assert "driver.version" in facts.unknown
    assert facts.get("gpu.count") == (0 if status == "no_gpu" else None)


def test_garbage_output_falls_back_to_the_csv(fake_nvidia_smi: Any) -> None:
    facts = collect_nvidia_smi(fake_nvidia_smi.ctx("garbage"))
    assert facts.get("driver.status") == "ok"  # nvidia-smi answered: the driver is there
    assert facts.get("driver.version") == "580.159.04"
    assert facts.get("gpu[0].compute_capability") == "9.0"
    assert "not valid XML" in facts.unknown["gpu[0].ecc_uncorrected_volatile"]


def test_an_nvidia_smi_that_answered_is_not_a_missing_driver(fake_nvidia_smi: Any) -> None:
    facts = collect_nvidia_smi(fake_nvidia_smi.ctx("garbage_no_csv"))
    assert facts.get("driver.status") == "error"
    error = facts.get("driver.error")
    assert "nvidia-smi answered" in error and "not valid XML" in error and "--query-gpu" in error


def test_missing_nvidia_smi(tmp_path: Path) -> None:
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    ctx = ProbeContext(root=tmp_path, env={"PATH": str(empty)}, timeout=5)
    facts = collect_nvidia_smi(ctx)
    assert facts.unknown["driver.status"] == "nvidia-smi not found on PATH"
    assert facts.unknown["driver.version"] == "nvidia-smi not found on PATH"
    assert "driver.status" not in facts


def _h200_xml_with(h200_dir: Path, old: str, new: str) -> str:
    text = (h200_dir / "nvidia-smi-q.xml").read_text()
    assert old in text
    return text.replace(old, new)


@pytest.mark.parametrize(
    ("text", "action"),
    [
        ("GPU Reset", "gpu_reset"),
        ("Node Reboot", "node_reboot"),
        ("Drain and Reset", "drain_and_reset"),
        ("Odd", "other"),
    ],
)
def test_recovery_actions_other_than_none(h200_dir: Path, text: str, action: str) -> None:
    xml = _h200_xml_with(h200_dir, "<gpu_recovery_action>None<", f"<gpu_recovery_action>{text}<")
    facts = parse_query_xml(xml)
    assert facts.get("gpu[0].recovery_action") == action
    assert facts.get("gpu[0].recovery_action_label") == text  # shown as the driver printed it


@pytest.mark.parametrize("shown", ["N/A", "[N/A]", "Not Supported"])
def test_a_recovery_action_that_is_not_reported_is_unknown(h200_dir: Path, shown: str) -> None:
    facts = parse_query_xml(_h200_xml_with(h200_dir, "<gpu_recovery_action>None<", f"<gpu_recovery_action>{shown}<"))
    assert not facts.has("gpu[0].recovery_action")
    assert shown in facts.unknown["gpu[0].recovery_action"]
    older = parse_query_xml(_h200_xml_with(h200_dir, "<gpu_recovery_action>None</gpu_recovery_action>", ""))
    assert "does not report it" in older.unknown["gpu[0].recovery_action"]


def test_a_pending_mig_mode_change_is_read(h200_dir: Path) -> None:
    facts = parse_query_xml(_h200_xml_with(h200_dir, "<pending_mig>Disabled<", "<pending_mig>Enabled<"))
    assert (facts.get("gpu[0].mig_enabled"), facts.get("gpu[0].mig_pending")) == (False, True)


# -- output as it comes ---------------------------------------------------------------------
INFOROM = "WARNING: infoROM is corrupted at gpu 00000000:00:06.0"


def test_the_document_is_found_in_what_was_printed_around_it(h200_dir: Path) -> None:
    xml = (h200_dir / "nvidia-smi-q.xml").read_text()
    document, notes = find_document(f"{INFOROM}\n{xml}\ntrailing words\n")
    assert document is not None and document.startswith("<?xml") and document.endswith("</nvidia_smi_log>")
    assert notes == [INFOROM, "trailing words"]
    assert find_document("No report here\n") == (None, ["No report here"])
    cut, _ = find_document(xml[:500])
    assert cut == xml[:500]  # the parser says where it stops


def test_notes_are_bounded() -> None:
    _, notes = find_document("x" * 1000 + "\n" + "line\n" * 50 + "<nvidia_smi_log></nvidia_smi_log>")
    assert len(notes) == 6 and len(notes[0]) == 201 and notes[-1] == "… and 46 more line(s)"


@pytest.mark.parametrize("mode", ["warn_before", "warn_after"])
def test_a_driver_warning_around_the_report_is_kept_and_the_report_read(fake_nvidia_smi: Any, mode: str) -> None:
    facts = collect_nvidia_smi(fake_nvidia_smi.ctx(mode))
    assert facts.get("driver.status") == "ok"
    assert facts.get("gpu[0].name") == "NVIDIA H200"
    assert facts.get("gpu[0].ecc_uncorrected_volatile") == 0  # from the XML, not the CSV
    assert facts.get("gpu[0].compute_capability") == "9.0"
    assert facts.get("driver.smi_notes") == [INFOROM]


@pytest.mark.parametrize("mode", ["utf16", "control"])
def test_odd_encodings_are_read(fake_nvidia_smi: Any, mode: str) -> None:
    facts = collect_nvidia_smi(fake_nvidia_smi.ctx(mode))
    assert facts.get("driver.status") == "ok"
    assert facts.get("driver.version") == "580.159.04"
    assert facts.get("gpu[0].name") == "NVIDIA H200"
    assert facts.get("gpu[0].recovery_action") == "none"


def test_a_cut_short_report_falls_back_to_the_csv_and_says_so(fake_nvidia_smi: Any) -> None:
    facts = collect_nvidia_smi(fake_nvidia_smi.ctx("truncated"))
    assert facts.get("driver.status") == "ok"
    assert (facts.get("driver.version"), facts.get("gpu.count")) == ("580.159.04", 1)
    for name, value in [("name", "NVIDIA H200"), ("compute_capability", "9.0"), ("memory_total_mib", 143771)]:
        assert facts.get(f"gpu[0].{name}") == value
    assert facts.get("gpu[0].clock_event_reason_names") == ["gpu_idle"]
    # what the CSV does not give is unknown, with what was wrong — never "no error"
    reason = facts.unknown["gpu[0].remapped_rows_pending"]
    assert "not valid XML" in reason and "cut short" in reason and "--query-gpu does not give it" in reason
    assert "gpu[0].recovery_action" in facts.unknown
    assert any("come from nvidia-smi --query-gpu" in note for note in facts.get("driver.smi_notes"))


def test_an_old_driver_cut_short_is_asked_again_without_the_newer_fields(fake_nvidia_smi: Any) -> None:
    facts = collect_nvidia_smi(fake_nvidia_smi.ctx("old_truncated"))
    assert facts.get("driver.status") == "ok"
    assert facts.get("driver.version") == "580.159.04"  # the recorded CSV's
    assert "compute_cap" in facts.unknown["gpu[0].compute_capability"]


def test_a_report_printed_with_an_error_status_is_read(fake_nvidia_smi: Any) -> None:
    facts = collect_nvidia_smi(fake_nvidia_smi.ctx("exit_with_xml"))
    assert facts.get("driver.status") == "ok"
    assert facts.get("gpu[0].name") == "NVIDIA H200"
    assert facts.get("driver.smi_notes") == [
        "Unable to determine the device handle for GPU 00000000:00:07.0: Unknown Error",
        "nvidia-smi -q -x exited with status 15",
    ]


def test_the_gpu_probe_keeps_the_verdict_of_an_nvidia_smi_that_answered(
    fake_nvidia_smi: Any, make_nvml: Callable[..., Any]
) -> None:
    import pynvml

    no_library = make_nvml(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND).module()
    facts = GpuProbe(nvml=no_library).collect(fake_nvidia_smi.ctx("garbage_no_csv"))
    assert facts.get("driver.status") == "error"  # not "library_not_found": nvidia-smi ran
    env = {**fake_nvidia_smi.ctx("garbage_no_csv").env, "CUDA_DOCTOR_DISABLE_NVML": "1"}
    facts = GpuProbe().collect(fake_nvidia_smi.ctx("garbage_no_csv").but(env=env))
    assert facts.get("driver.status") == "error"


def test_the_fabric_of_a_pcie_board_is_not_supported(h200_dir: Path) -> None:
    facts = parse_query_xml((h200_dir / "nvidia-smi-q.xml").read_text())
    assert facts.get("gpu[0].fabric_state") == "not_supported"  # <fabric><state>N/A</state>
    assert facts.has("gpu[0].fabric_status") and facts.get("gpu[0].fabric_status") is None
    assert "does not list the NVLinks" in facts.unknown["gpu[0].nvlink_states"]


@pytest.mark.parametrize(
    ("state", "status", "fact_state", "fact_status"),
    [
        ("Completed", "Success", "completed", "success"),
        ("In Progress", "N/A", "in_progress", None),
        ("Not Started", "N/A", "not_started", None),
        ("Completed", "NVML_ERROR_TIMEOUT", "completed", "NVML_ERROR_TIMEOUT"),
        ("Registering", "N/A", "other", None),
    ],
)
def test_fabric_texts(h200_dir: Path, state: str, status: str, fact_state: str, fact_status: str | None) -> None:
    text = (h200_dir / "nvidia-smi-q.xml").read_text()
    text = text.replace(
        "<fabric>\n\t\t\t<state>N/A</state>\n\t\t\t<status>N/A</status>",
        (f"<fabric>\n\t\t\t<state>{state}</state>\n\t\t\t<status>{status}</status>"),
    )
    facts = parse_query_xml(text)
    assert (facts.get("gpu[0].fabric_state"), facts.get("gpu[0].fabric_status")) == (fact_state, fact_status)


def test_a_driver_without_a_fabric_section_does_not_report_it(h200_dir: Path) -> None:
    text = (h200_dir / "nvidia-smi-q.xml").read_text()
    start, end = text.index("\t\t<fabric>"), text.index("</fabric>\n") + len("</fabric>\n")
    facts = parse_query_xml(text[:start] + text[end:])
    assert facts.has("gpu[0].fabric_state") and facts.get("gpu[0].fabric_state") is None


def test_eight_gpus_through_the_fake_executable(fake_nvidia_smi: Any) -> None:
    from tests.conftest import H200X8

    facts = collect_nvidia_smi(fake_nvidia_smi.ctx(fixtures=H200X8))
    assert facts.get("gpu.count") == 8
    assert len({facts.get(f"gpu[{i}].uuid") for i in range(8)}) == 8
    assert [facts.get(f"gpu[{i}].pci_bus_id") for i in (0, 7)] == ["00000000:00:06.0", "00000000:00:0D.0"]
    assert all(facts.get(f"gpu[{i}].compute_capability") == "9.0" for i in range(8))  # joined by UUID
