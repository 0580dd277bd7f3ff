"""``explain``: Markdown rendered on a terminal, the Markdown source when piped or with --no-color."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from cuda_doctor.cli import cli
from cuda_doctor.commands.explain import rendered

REPO = Path(__file__).resolve().parents[2]
ESCAPE = re.compile(r"\x1b\[[0-9;]*m|\x1b\]8;[^\x1b]*\x1b\\")


def on_a_terminal(*args: str, **extra: str) -> str:
    """``cuda-doctor ARGS`` with its stdout on a pseudo-terminal: what a person sees."""
    leader, follower = pty.openpty()
    env = {key: value for key, value in os.environ.items() if key != "NO_COLOR"}
    env.update(PYTHONPATH=str(REPO), COLUMNS="100", **extra)
    proc = subprocess.Popen([sys.executable, "-m", "cuda_doctor", *args], stdout=follower, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 1 << 16)
        except OSError:  # the terminal's other end closed: the process is done writing
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    assert proc.wait(timeout=60) == 0
    return b"".join(chunks).decode("utf-8", errors="replace").replace("\r\n", "\n")


def test_a_terminal_gets_it_rendered() -> None:
    shown = on_a_terminal("explain", "CD102")
    plain = ESCAPE.sub("", shown)
    assert "\x1b[" in shown  # styled
    assert "CD102: Driver supports the CUDA version the framework was built with" in plain
    assert "## CD102" not in plain and "**" not in plain and "`derived." not in plain  # no Markdown syntax left
    assert "https://docs.nvidia.com/cuda/cuda-toolkit-release-notes/index.html#id6" in plain


def test_no_color_and_a_pipe_get_the_markdown_source() -> None:
    for shown in (on_a_terminal("explain", "CD102", "--no-color"), on_a_terminal("explain", "CD102", NO_COLOR="1")):
        assert shown.startswith("## CD102: Driver supports")
        assert "\x1b[" not in shown
    piped = CliRunner().invoke(cli, ["explain", "cd102"], catch_exceptions=False)
    assert piped.exit_code == 0
    assert piped.output.startswith("## CD102: Driver supports")


def test_rendering_keeps_every_word() -> None:
    text = rendered("## A title\n\n*rule · `category`*\n\n- **pass** when `x`: fine\n", width=80)
    plain = ESCAPE.sub("", text)
    for word in ("A title", "rule · category", "pass when x: fine"):
        assert word in plain, plain
