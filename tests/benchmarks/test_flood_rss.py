"""benchmarks/flood_rss.py as a test: check --fast under an nvidia-smi that floods its output or
hangs stays small and says what happened.  The memory bound is asserted; wall time never is
(the benchmark prints it)."""

from __future__ import annotations

from pathlib import Path

from benchmarks import flood_rss


def driver_finding(stdout: str) -> str:
    """The first finding of the checklist: CD101's, under "NVIDIA driver"."""
    assert stdout.startswith("[✗] NVIDIA driver\n"), stdout[:300]
    return stdout.splitlines()[1].strip()


def test_a_flooding_nvidia_smi_is_cut_off_and_named(tmp_path: Path) -> None:
    got = flood_rss.run_mode("flood", 3.0, tmp_path)
    assert got.peak_rss <= flood_rss.RSS_TARGET, f"peak RSS {got.peak_rss / 1e6:.0f} MB"
    assert got.returncode == 1, got.stderr
    assert driver_finding(got.stdout).startswith("✗ nvidia-smi produced more than 8 MiB of output and was stopped")
    assert "$ command -v nvidia-smi" in got.stdout
    assert "Install the NVIDIA driver" not in got.stdout


def test_a_hanging_nvidia_smi_points_at_a_wedged_gpu(tmp_path: Path) -> None:
    got = flood_rss.run_mode("hang", 1.0, tmp_path)
    assert got.peak_rss <= flood_rss.RSS_TARGET
    assert got.returncode == 1, got.stderr
    assert driver_finding(got.stdout) == (
        "✗ the NVIDIA driver did not answer (nvidia-smi did not answer in 1 s): the GPU or its driver may be wedged"
    )
    assert "$ sudo dmesg | grep -i xid" in got.stdout and "$ sudo reboot" in got.stdout
    assert "Install the NVIDIA driver" not in got.stdout
