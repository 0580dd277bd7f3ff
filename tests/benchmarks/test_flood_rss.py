"""benchmarks/flood_rss.py as a test: check --fast under an nvidia-smi that floods its output or
hangs stays small and says what happened.  The memory bound is asserted; wall time never is
(the benchmark prints it)."""

from __future__ import annotations

from pathlib import Path

from benchmarks import flood_rss


def test_a_flooding_nvidia_smi_is_cut_off_and_named(tmp_path: Path) -> None:
    got = flood_rss.run_mode("flood", 3.0, tmp_path)
    assert got.peak_rss <= flood_rss.RSS_TARGET, f"peak RSS {got.peak_rss / 1e6:.0f} MB"
    assert got.returncode == 1, got.stderr
    assert "nvidia-smi produced more than 8 MiB of output" in got.stdout
    assert "command -v nvidia-smi" in got.stdout
    for wrong in ("Install the NVIDIA driver", "could not check", "could not be queried"):
        assert wrong not in got.stdout


def test_a_hanging_nvidia_smi_points_at_a_wedged_gpu(tmp_path: Path) -> None:
    got = flood_rss.run_mode("hang", 1.0, tmp_path)
    assert got.peak_rss <= flood_rss.RSS_TARGET
    assert got.returncode == 1, got.stderr
    assert "nvidia-smi did not answer in 1 s" in got.stdout and "may be wedged" in got.stdout
    assert "sudo dmesg | grep -i xid" in got.stdout and "sudo reboot" in got.stdout
    for wrong in ("Install the NVIDIA driver", "could not check", "could not be queried"):
        assert wrong not in got.stdout
