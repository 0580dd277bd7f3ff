"""A real headless Chromium for the page tests: its command-line modes (``--screenshot``,
``--dump-dom``) and a small DevTools-protocol client over ``--remote-debugging-pipe``.

The pipe protocol is JSON messages ended by a NUL byte, read from the browser's fd 4 and
written to its fd 3.  Clicks go through ``Input.dispatchMouseEvent``, the path a real mouse
takes (hit testing, then the page's own listeners), not a script calling ``click()``.  Every
wait is bounded; the browser runs in its own process group and is killed with it at the end.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

#: Flags known to work here: no sandbox (root in CI), no GPU, no network of its own.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
)
NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find() -> str | None:
    """``$CUDA_DOCTOR_CHROMIUM``, else the first of ``NAMES`` on PATH."""
    given = os.environ.get("CUDA_DOCTOR_CHROMIUM")
    if given:
        return given
    return next((found for name in NAMES if (found := shutil.which(name))), None)


def run_cli(binary: str, profile: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    """One command-line run (``--screenshot=FILE URL``, ``--dump-dom URL``)."""
    argv = [binary, *FLAGS, f"--user-data-dir={profile}", *args]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        _kill_group(proc)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def _kill_group(proc: subprocess.Popen[Any]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)  # the renderer and zygote processes too
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


class DevTools:
    """One browser, one page; ``call`` sends a command and returns its result."""

    def __init__(self, binary: str, profile: Path, width: int = 1280, height: int = 900, timeout: float = 30) -> None:
        self.timeout = timeout
        self.events: list[dict[str, Any]] = []
        self._buffer = b""
        self._next = 0
        to_browser, self._write = os.pipe()
        self._read, from_browser = os.pipe()
        # The browser reads fd 3 and writes fd 4; a shim puts the pipe ends there and execs it.
        shim = (
            "import os, sys; os.dup2(int(sys.argv[1]), 3); os.dup2(int(sys.argv[2]), 4); "
            "os.execv(sys.argv[3], sys.argv[3:])"
        )
        program = shutil.which(binary) or binary
        flags = [*FLAGS, f"--user-data-dir={profile}", f"--window-size={width},{height}", "--remote-debugging-pipe"]
        profile.mkdir(parents=True, exist_ok=True)
        self._log = profile.with_name(profile.name + ".log").open("w")  # beside the profile, not in it
        self.proc = subprocess.Popen(
            [sys.executable, "-c", shim, str(to_browser), str(from_browser), program, *flags],
            pass_fds=(to_browser, from_browser),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=self._log,
            start_new_session=True,
        )
        os.close(to_browser)
        os.close(from_browser)
        try:
            target = self.call("Target.createTarget", url="about:blank")["targetId"]
            self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
            for domain in ("Page", "Runtime", "Network", "Log"):
                self.call(f"{domain}.enable", session=True)
            self.call(
                "Emulation.setDeviceMetricsOverride",
                session=True,
                width=width,
                height=height,
                deviceScaleFactor=1,
                mobile=False,
            )
        except BaseException:
            self.close()
            raise

    def call(self, method: str, session: bool = False, **params: Any) -> dict[str, Any]:
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = self.session
        os.write(self._write, json.dumps(message).encode() + b"\0")
        reply = self._until(lambda m: m.get("id") == self._next, method)
        if "error" in reply:
            raise RuntimeError(f"{method}: {reply['error']}")
        return reply.get("result", {})

    def wait_event(self, name: str) -> dict[str, Any]:
        for event in self.events:
            if event.get("method") == name:
                self.events.remove(event)
                return event
        return self._until(lambda m: m.get("method") == name, name, keep=False)

    def _until(self, wanted: Any, what: str, keep: bool = True) -> dict[str, Any]:
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\0" in self._buffer:
                raw, self._buffer = self._buffer.split(b"\0", 1)
                message = json.loads(raw)
                if wanted(message):
                    return message
                if "method" in message:
                    self.events.append(message)
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self._read], [], [], max(left, 0))
            if not ready:
                raise TimeoutError(f"no answer from Chromium to {what} within {self.timeout} s")
            chunk = os.read(self._read, 1 << 20)
            if not chunk:
                raise EOFError(f"Chromium ended while waiting for {what}: {self.log()}")
            self._buffer += chunk

    # -- what the tests do ------------------------------------------------------------------------

    def open(self, url: str) -> float:
        """Navigate and wait for the load event; returns the seconds it took."""
        start = time.monotonic()
        self.call("Page.navigate", session=True, url=url)
        self.wait_event("Page.loadEventFired")
        return time.monotonic() - start

    def evaluate(self, expression: str) -> Any:
        result = self.call("Runtime.evaluate", session=True, expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def click(self, selector: str) -> None:
        """A left click at the centre of the element, as the mouse gives it."""
        where = self.evaluate(
            f"(() => {{ const e = document.querySelector({json.dumps(selector)});"
            " e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();"
            " return [r.left + r.width / 2, r.top + r.height / 2]; })()"
        )
        x, y = where
        self.call("Input.dispatchMouseEvent", session=True, type="mouseMoved", x=x, y=y)
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", session=True, type=kind, x=x, y=y, button="left", clickCount=1)

    def screenshot(self, path: Path, full_page: bool = False, clip: dict[str, float] | None = None) -> None:
        params: dict[str, Any] = {"format": "png", "captureBeyondViewport": full_page}
        if clip:
            params["clip"] = {**clip, "scale": 1}
        path.write_bytes(base64.b64decode(self.call("Page.captureScreenshot", session=True, **params)["data"]))

    def requests(self) -> list[str]:
        return [e["params"]["request"]["url"] for e in self.events if e.get("method") == "Network.requestWillBeSent"]

    def problems(self) -> list[str]:
        """Script exceptions, console errors and browser log errors (a CSP refusal is one)."""
        out = []
        for e in self.events:
            method, params = e.get("method"), e.get("params", {})
            if method == "Runtime.exceptionThrown":
                out.append(json.dumps(params.get("exceptionDetails", {}))[:300])
            elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "warning"):
                out.append(json.dumps(params.get("args", []))[:300])
            elif method == "Log.entryAdded" and params.get("entry", {}).get("level") in ("error", "warning"):
                out.append(params["entry"].get("text", "")[:300])
        return out

    def log(self) -> str:
        self._log.flush()
        return Path(self._log.name).read_text(errors="replace")[-2000:]

    def close(self) -> None:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):  # it is killed just below
            os.write(self._write, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
            self.proc.wait(timeout=10)
        _kill_group(self.proc)
        for fd in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)
        self._log.close()

    def __enter__(self) -> DevTools:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def png_size(path: Path) -> tuple[int, int]:
    """(width, height) from a PNG's IHDR chunk."""
    data = path.read_bytes()[:24]
    if data[:8] != b"\x89PNG\r\n\x1a\n" or data[12:16] != b"IHDR":
        raise ValueError(f"{path} is not a PNG")
    return int.from_bytes(data[16:20], "big"), int.from_bytes(data[20:24], "big")
