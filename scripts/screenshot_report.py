"""Screenshot an audit report.html in headless Chromium, to look at it as a reader would.

Usage: python scripts/screenshot_report.py datasets/VERSION/report/report.html [out.png]
       [--width 1400] [--height 6000]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def find_browser() -> str | None:
    """The first headless-capable Chromium on PATH, or None."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def screenshot(html: Path, out: Path, width: int = 1400, height: int = 6000,
               timeout: float = 120.0) -> Path:
    """Render ``html`` (a local file, no network) to the PNG ``out``; return ``out``."""
    if not html.is_file():
        raise RuntimeError(f"{html} does not exist (run `sokoforge audit VERSION` first)")
    browser = find_browser()
    if browser is None:
        raise RuntimeError("no chromium on PATH (Debian: apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="sokoforge-shot-") as profile:
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run", "--hide-scrollbars",
               f"--user-data-dir={profile}", f"--screenshot={out.resolve()}",
               f"--window-size={width},{height}", html.resolve().as_uri()]
        subprocess.run(cmd, check=True, capture_output=True, timeout=timeout)
    if not out.is_file():
        raise RuntimeError(f"chromium wrote no screenshot to {out}")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html", type=Path)
    parser.add_argument("out", type=Path, nargs="?")
    parser.add_argument("--width", type=int, default=1400)
    parser.add_argument("--height", type=int, default=6000)
    args = parser.parse_args()
    out = args.out or args.html.with_suffix(".png")
    try:
        screenshot(args.html, out, args.width, args.height)
    except (RuntimeError, subprocess.SubprocessError, OSError) as e:
        print(f"screenshot failed: {e}", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
