"""A stand-in ``nvidia-smi`` executable for tests (installed by the ``fake_nvidia_smi`` fixture).

It answers from recordings of a real machine.  Behaviour comes from the environment:

FAKE_NVIDIA_SMI_MODE      ok | old | hang | not_loaded | mismatch | no_devices | garbage |
                          warn_before | warn_after | truncated | old_truncated | utf16 | control |
                          exit_with_xml | garbage_no_csv | flood
                          (flood: becomes ``yes``, printing lines without end, as a driver
                          stuck in a loop could)
FAKE_NVIDIA_SMI_FIXTURES  folder holding nvidia-smi-q*.xml and query-gpu.csv (and topo-m.txt for
                          ``nvidia-smi topo -m``)
FAKE_NVIDIA_SMI_PIDFILE   (hang) where to write "<own pid> <child pid>" before sleeping
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

#: What a driver prints about a GPU whose infoROM is damaged, before its report.
INFOROM = "WARNING: infoROM is corrupted at gpu 00000000:00:06.0\n"

NOT_LOADED = (
    "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
    "Make sure that the latest NVIDIA driver is installed and running.\n"
)


def query_csv(fixtures: Path, argv: list[str], allowed_missing: set[str]) -> int:
    """Print the requested columns of the recorded ``--query-gpu`` CSV."""
    fields = next(a.split("=", 1)[1] for a in argv if a.startswith("--query-gpu=")).split(",")
    fmt = next((a.split("=", 1)[1] for a in argv if a.startswith("--format=")), "csv")
    lines = (fixtures / "query-gpu.csv").read_text().splitlines()
    header = [re.sub(r"\s*\[.*\]$", "", cell.strip()) for cell in lines[0].split(",")]
    for field in fields:
        if field not in header or field in allowed_missing:
            sys.stdout.write(f'Field "{field}" is not a valid field to query.\n\n')
            return 2
    if "noheader" not in fmt:
        sys.stdout.write(", ".join(fields) + "\n")
    for line in lines[1:]:
        cells = [cell.strip() for cell in line.split(",")]
        sys.stdout.write(", ".join(cells[header.index(field)] for field in fields) + "\n")
    return 0


def query_xml(fixtures: Path, mode: str) -> int:
    """``nvidia-smi -q -x`` as a real driver may print it, whole or not."""
    if mode in ("garbage", "garbage_no_csv"):
        sys.stdout.write('<?xml version="1.0" ?>\n<nvidia_smi_log>\n\t<driver_version>580')
        return 0
    old = mode.startswith("old")
    text = (fixtures / ("nvidia-smi-q-old-driver.xml" if old else "nvidia-smi-q.xml")).read_text()
    if mode == "warn_before":
        text = INFOROM + text
    elif mode == "warn_after":
        text += INFOROM
    elif mode.endswith("truncated"):  # the output ends half-way through the GPU's section
        text = text[: text.index("<temperature>")]
    elif mode == "control":  # a stray escape and a NUL inside values
        text = text.replace("<product_name>NVIDIA H200", "<product_name>NVIDIA H200\x1b\x00")
    elif mode == "utf16":
        sys.stdout.buffer.write(text.encode("utf-16"))
        return 0
    elif mode == "exit_with_xml":  # one GPU could not be read, the report is still printed
        sys.stdout.write(text)
        sys.stderr.write("Unable to determine the device handle for GPU 00000000:00:07.0: Unknown Error\n")
        return 15
    sys.stdout.write(text)
    return 0


def main(argv: list[str]) -> int:
    mode = os.environ.get("FAKE_NVIDIA_SMI_MODE", "ok")
    fixtures = Path(os.environ["FAKE_NVIDIA_SMI_FIXTURES"])
    if mode == "hang":
        child = subprocess.Popen(["sleep", "60"])
        Path(os.environ["FAKE_NVIDIA_SMI_PIDFILE"]).write_text(f"{os.getpid()} {child.pid}\n")
        child.wait()
        return 0
    if mode == "flood":
        os.execvp("yes", ["yes", "nvidia-smi flooding its output"])
    if mode == "not_loaded":
        sys.stdout.write(NOT_LOADED)
        return 9
    if mode == "mismatch":
        sys.stdout.write("Failed to initialize NVML: Driver/library version mismatch\n")
        sys.stdout.write("NVML library version: 580.159\n")
        return 18
    if mode == "no_devices":
        sys.stdout.write("No devices were found\n")
        return 6
    if argv[:2] == ["topo", "-m"] and (fixtures / "topo-m.txt").is_file():
        sys.stdout.write((fixtures / "topo-m.txt").read_text())
        return 0
    if "-q" in argv and "-x" in argv:
        return query_xml(fixtures, mode)
    if any(a.startswith("--query-gpu=") for a in argv):
        if mode == "garbage_no_csv":
            sys.stdout.write("Unable to determine the device handle for GPU 00000000:00:06.0: Unknown Error\n")
            return 15
        # compute_cap is a newer query field than the 470 drivers know
        return query_csv(fixtures, argv, {"compute_cap"} if mode.startswith("old") else set())
    sys.stderr.write(f"fake nvidia-smi: unsupported arguments {argv}\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
