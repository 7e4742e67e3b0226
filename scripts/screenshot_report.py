"""Screenshot a whole audit report.html in headless Chromium, to look at it as a reader would.

Usage: python scripts/screenshot_report.py datasets/VERSION/report/report.html [out.png]
       [--width 1400]

The page is measured after it loads and captured at its full height, through the DevTools
protocol over a pipe (no network port, nothing beyond Python and Debian's chromium).
"""

from __future__ import annotations

import argparse
import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_browser() -> str | None:
    """The first headless-capable Chromium on PATH, or None."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


class DevTools:
    """Chromium's DevTools protocol over ``--remote-debugging-pipe``: JSON messages, each
    ended by a NUL byte, written to the browser's fd 3 and read from its fd 4."""

    def __init__(self, browser: str, profile: str, deadline: float) -> None:
        self.deadline, self.next_id, self.buffer = deadline, 0, b""
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()
        # the child's fds 3 and 4 must be exactly these pipe ends; copy them out of the way
        # first so that placing one cannot overwrite the other
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 10) for fd in (to_browser_r, from_browser_w)]

        def place() -> None:
            os.dup2(high[0], 3)
            os.dup2(high[1], 4)

        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run", "--hide-scrollbars", "--mute-audio",
               f"--user-data-dir={profile}", "--remote-debugging-pipe", "about:blank"]
        self.process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL, preexec_fn=place,
                                        close_fds=False)
        for fd in (to_browser_r, from_browser_w, *high):
            os.close(fd)

    def send(self, method: str, params: dict[str, Any] | None = None,
             session: str | None = None) -> dict[str, Any]:
        """Send one command and return its result (events before the answer are skipped)."""
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method,
                                   "params": params or {}}
        if session:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        while True:
            reply = self.receive()
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise RuntimeError(f"chromium: {method}: {reply['error'].get('message')}")
                return reply.get("result", {})

    def wait_for(self, event: str) -> dict[str, Any]:
        """Read messages until ``event`` arrives; return its parameters."""
        while True:
            message = self.receive()
            if message.get("method") == event:
                return message.get("params", {})

    def receive(self) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            left = self.deadline - time.monotonic()
            if left <= 0 or not select.select([self.from_browser], [], [], left)[0]:
                raise RuntimeError("chromium did not answer in time")
            chunk = os.read(self.from_browser, 1 << 20)
            if not chunk:
                raise RuntimeError("chromium exited before answering")
            self.buffer += chunk
        raw, self.buffer = self.buffer.split(b"\0", 1)
        return json.loads(raw)

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (RuntimeError, OSError):
            pass
        for fd in (self.to_browser, self.from_browser):
            os.close(fd)
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def screenshot(html: Path, out: Path, width: int = 1400, timeout: float = 120.0) -> Path:
    """Render ``html`` (a local file, no network) at ``width`` CSS pixels and its full height
    to the PNG ``out``; return ``out``."""
    if not html.is_file():
        raise RuntimeError(f"{html} does not exist (run `sokoforge audit VERSION` first)")
    browser = find_browser()
    if browser is None:
        raise RuntimeError("no chromium on PATH (Debian: apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="sokoforge-shot-") as profile:
        tools = DevTools(browser, profile, time.monotonic() + timeout)
        try:
            target = tools.send("Target.createTarget", {"url": "about:blank"})["targetId"]
            session = tools.send("Target.attachToTarget",
                                 {"targetId": target, "flatten": True})["sessionId"]
            tools.send("Page.enable", session=session)
            metrics = {"width": width, "height": 800, "deviceScaleFactor": 1, "mobile": False}
            tools.send("Emulation.setDeviceMetricsOverride", metrics, session=session)
            tools.send("Page.navigate", {"url": html.resolve().as_uri()}, session=session)
            tools.wait_for("Page.loadEventFired")
            size = tools.send("Page.getLayoutMetrics", session=session)["cssContentSize"]
            metrics["height"] = int(size["height"] + 0.999)
            tools.send("Emulation.setDeviceMetricsOverride", metrics, session=session)
            shot = tools.send("Page.captureScreenshot",
                              {"format": "png", "captureBeyondViewport": True},
                              session=session)
        finally:
            tools.close()
    out.write_bytes(base64.b64decode(shot["data"]))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html", type=Path)
    parser.add_argument("out", type=Path, nargs="?")
    parser.add_argument("--width", type=int, default=1400, help="page width in CSS pixels")
    args = parser.parse_args()
    out = args.out or args.html.with_suffix(".png")
    try:
        screenshot(args.html, out, args.width)
    except (RuntimeError, subprocess.SubprocessError, OSError, ValueError, KeyError) as e:
        print(f"screenshot failed: {e}", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
