"""Screenshots of every view, normal and presentation mode, at a projector's 1280x720 (docs/).

Starts the app on a free loopback port, opens each view's share link in Debian's Chromium, waits
until the run is over and every chart is drawn (tests/browser_support.wait_ready), and saves
``docs/<scenario>-<view>[-present].png``.  Look at them before calling UI work done.

Usage: python bench/screenshots.py [--scenario NAME ...] [--width 1280 --height 720] [--out docs]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from explorer.share import VIEWS  # noqa: E402

from browser_support import CHROMIUM_ARGS, chromium_path, streamlit_server, wait_ready  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scenario", action="append", default=None)
    ap.add_argument("--view", action="append", default=None, choices=VIEWS)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=720)
    ap.add_argument("--out", default=str(ROOT / "docs"))
    ap.add_argument("--modes", default="normal,present")
    ap.add_argument("--extra", default="", help="extra query parameters, e.g. parallelism.pp=8")
    args = ap.parse_args()
    from playwright.sync_api import sync_playwright

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    scenarios = args.scenario or ["teaching-8gpu"]
    with streamlit_server() as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": args.width, "height": args.height})
        for name in scenarios:
            for view in args.view or VIEWS:
                for mode in args.modes.split(","):
                    query = f"?scenario={name}&view={view}" + ("&present=1" if mode == "present" else "")
                    if args.extra:
                        query += "&" + args.extra
                    page.goto(base + query)
                    wait_ready(page)
                    page.wait_for_timeout(500)      # Plotly's transitions
                    path = out / f"{name}-{view}{'-present' if mode == 'present' else ''}.png"
                    page.screenshot(path=str(path))
                    print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
        browser.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
