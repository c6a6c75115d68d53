"""Load test: several concurrent browser users against one app server, and the server's memory.

Each user is its own process with its own Debian Chromium (Playwright) and loops for
``--seconds``, as a person exploring would: mostly it changes a sidebar control on the page it has
(the NIC speed, typed into the number input and committed with Enter), and one action in four it
opens a share link drawn from a fixed, seeded mix — shipped scenarios, changed controls, the heavy
links of issue 8 (a 1,024-stage pipeline, 100,000 layers, hostile values).  For each action it
records the time until the page has settled (tests/browser_support.wait_ready) and what went
wrong, if anything, as one kind: ``timeout`` (the page did not settle), ``exception`` (a Python
exception box or a traceback on the page), ``internal`` (the app's own "Internal error while ..."
message, explorer/ui/page.internal_error: an unexpected exception it caught and logged) or ``js``
(a JavaScript error).  The main process samples the server's
resident memory (/proc/PID/status, VmRSS of the server and its children) twice a second.

Only loopback traffic: the server runs on 127.0.0.1 and is stopped at the end.

Usage: python bench/load.py [--users 8] [--seconds 180] [--seed 0]
Prints: loads, errors (and how many of each kind), latency median / p90 / p99, server memory at
start / peak / end.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (ROOT, ROOT / "tests"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from browser_support import CHROMIUM_ARGS, chromium_path, free_port, wait_ready  # noqa: E402

SCENARIOS = sorted(p.stem for p in (ROOT / "scenarios").glob("*.yaml"))
# Links that stress the server (issue 8, items 9-11) next to ordinary ones.
HEAVY = [
    "?scenario=teaching-8gpu&model.layers=1024&cluster.nodes=128&parallelism.pp=1024&training.global_batch=256",
    "?scenario=teaching-8gpu&model.layers=100000&training.global_batch=2048&view=scenario",
    "?scenario=megatron-gpt3-175b&training.global_batch=16384",
    "?scenario=llama3-405b-16k&parallelism.pp=8&view=topology",
    "?scenario=teaching-8gpu&parallelism.tp=!!int%20abc",
    "?scenario=teaching-8gpu&cluster.scale_up.bandwidth_GBps=5e-324",
]
CONTROLS = [("parallelism.pp", ["2", "4", "8"]), ("cluster.scale_out.nic_Gbps", ["100", "200", "400", "800"]),
            ("training.global_batch", ["512", "1024", "2048"]),
            ("communication.dp_overlap", ["true", "false"]),
            ("view", ["timeline", "memory", "traffic", "topology", "scenario"])]


def links(rng: random.Random) -> str:
    if rng.random() < 0.2:
        return rng.choice(HEAVY)
    query = f"?scenario={rng.choice(SCENARIOS)}"
    for key, values in rng.sample(CONTROLS, k=rng.randint(0, 2)):
        query += f"&{key}={rng.choice(values)}"
    return query


NIC_VALUES = ["100", "200", "400", "800", "1600"]


def change_control(page, rng: random.Random) -> str:
    """Type a new NIC speed into its sidebar input (opening its section if needed)."""
    key = ".st-key-cluster-scale_out-nic_Gbps"
    box = page.locator(f'{key} input[data-testid="stNumberInputField"]')
    if not box.is_visible():
        page.locator('[data-testid="stExpander"]', has=box).locator("summary").click()
        box.wait_for(state="visible", timeout=30_000)
    value = rng.choice([v for v in NIC_VALUES if v != box.input_value().split(".")[0]])
    box.fill(value)
    box.press("Enter")
    page.wait_for_timeout(100)
    return f"change nic_Gbps={value}"


def user(base: str, seconds: float, seed: int, out: mp.Queue) -> None:
    from playwright.sync_api import sync_playwright

    rng = random.Random(seed)
    rows = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        js_errors: list[str] = []
        page.on("pageerror", lambda exc: js_errors.append(str(exc)))
        end = time.time() + seconds
        opened = False
        while time.time() < end:
            js_errors.clear()
            t0 = time.perf_counter()
            ok = True
            action = "?"
            try:
                if opened and rng.random() < 0.75:
                    action = change_control(page, rng)
                else:
                    action = links(rng)
                    page.goto(base + action, timeout=120_000)
                    opened = True
                wait_ready(page, timeout_s=120)
            except Exception:  # noqa: BLE001 - a time-out is a failed action, counted
                ok = False
            dt = time.perf_counter() - t0
            rows.append((action, dt, failure(page, ok, js_errors)))
        browser.close()
    out.put(rows)


INTERNAL_ERROR = "Internal error while"     # explorer/ui/page.internal_error's message


def failure(page, settled: bool, js_errors: list[str]) -> str:
    """What went wrong with the action just done ("" when nothing did): timeout, exception,
    internal or js (module docstring)."""
    if not settled:
        return "timeout"
    text = page.content()
    if page.locator('[data-testid="stException"]').count() > 0 or "Traceback" in text:
        return "exception"
    if INTERNAL_ERROR in text:
        return "internal"
    return "js" if js_errors else ""


def rss_kb(pid: int) -> int:
    """Resident memory of ``pid`` and its children, in kB."""
    total = 0
    pids = [pid] + [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()] \
        if Path(f"/proc/{pid}/task/{pid}/children").exists() else [pid]
    for p in pids:
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--users", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=180)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"),
                               "--server.headless", "true", "--server.port", str(port),
                               "--server.address", "127.0.0.1"], cwd=ROOT,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false"))
    base = f"http://127.0.0.1:{port}/"
    try:
        import urllib.request
        for _ in range(300):
            try:
                urllib.request.urlopen(base + "_stcore/health", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        start_kb = rss_kb(server.pid)
        q: mp.Queue = mp.Queue()
        procs = [mp.Process(target=user, args=(base, args.seconds, args.seed * 1000 + i, q))
                 for i in range(args.users)]
        for p in procs:
            p.start()
        peak_kb = start_kb
        results = []
        while len(results) < len(procs):
            peak_kb = max(peak_kb, rss_kb(server.pid))
            while not q.empty():
                results.append(q.get())
            time.sleep(0.5)
        for p in procs:
            p.join()
        end_kb = rss_kb(server.pid)
    finally:
        server.terminate()
        server.wait(timeout=20)
    rows = [r for rs in results for r in rs]
    times = sorted(dt for _, dt, _ in rows)
    bad = [(q, dt, kind) for q, dt, kind in rows if kind]
    kinds = {k: sum(1 for *_, kind in bad if kind == k) for k in ("timeout", "exception", "internal", "js")}

    def pct(x: float) -> float:
        return times[min(len(times) - 1, int(x * len(times)))]
    print(f"{args.users} users x {args.seconds:.0f} s: {len(rows)} actions, {len(bad)} with an error ("
          + ", ".join(f"{k} {n}" for k, n in kinds.items()) + ")")
    for label, sel in (("control changes", [dt for q, dt, _ in rows if q.startswith("change")]),
                       ("link opens", [dt for q, dt, _ in rows if not q.startswith("change")])):
        if sel:
            sel.sort()
            print(f"{label} ({len(sel)}): median {statistics.median(sel):.2f} s, "
                  f"p90 {sel[min(len(sel) - 1, int(0.9 * len(sel)))]:.2f} s, "
                  f"p99 {sel[min(len(sel) - 1, int(0.99 * len(sel)))]:.2f} s, max {sel[-1]:.2f} s")
    print(f"all actions: median {statistics.median(times):.2f} s, p99 {pct(0.99):.2f} s")
    print(f"server memory: start {start_kb / 1024:.0f} MB, peak {peak_kb / 1024:.0f} MB, "
          f"end {end_kb / 1024:.0f} MB")
    for query, dt, kind in bad[:10]:
        print(f"  {kind} after {dt:.1f} s: {query[:120]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
