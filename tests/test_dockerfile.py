"""Issue 39 item 4: the Dockerfile serves the app with the shipped scenarios (docker itself is not
run here).  The quick tests read the Dockerfile; the slow one builds the image's /app by hand —
exactly the files its COPY lines copy — and runs its CMD there: the page is served and the app's
script computes the default scenario from those files alone."""
from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
import urllib.request
from fnmatch import fnmatch

import pytest

from browser_support import free_port
from conftest import ROOT

DOCKERFILE = (ROOT / "Dockerfile").read_text(encoding="utf-8")


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per line of the Dockerfile, continuation lines joined."""
    out: list[tuple[str, str]] = []
    for line in DOCKERFILE.replace("\\\n", " ").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def copies() -> list[tuple[str, str]]:
    return [tuple(shlex.split(args)) for word, args in instructions() if word == "COPY"]


def cmd() -> list[str]:
    return json.loads(next(args for word, args in instructions() if word == "CMD"))


def test_the_image_is_python_3_11_slim_with_the_pinned_requirements():
    ins = instructions()
    assert ins[0] == ("FROM", "python:3.11-slim")
    assert ("RUN", "pip install -r requirements.txt") in ins
    assert ("COPY", "requirements.txt ./") in ins


def test_it_copies_the_app_the_package_and_the_shipped_scenarios():
    copied = {src for src, _ in copies()}
    assert {"app.py", "explorer", "scenarios", ".streamlit", "requirements.txt"} <= copied
    for src, dst in copies():
        assert (ROOT / src).exists(), src
        assert dst in ("./", f"./{src}"), (src, dst)
    # .dockerignore leaves out nothing a COPY line needs.
    ignored = [p.strip() for p in (ROOT / ".dockerignore").read_text().splitlines()
               if p.strip() and not p.startswith("#")]
    assert not [src for src in copied for pat in ignored if fnmatch(src, pat)]


def test_it_serves_the_app_headless_on_8501_from_every_interface():
    assert cmd()[:3] == ["streamlit", "run", "app.py"]
    args = dict(zip(cmd()[3::2], cmd()[4::2], strict=True))
    assert args == {"--server.headless": "true", "--server.port": "8501", "--server.address": "0.0.0.0"}
    assert ("EXPOSE", "8501") in instructions()


@pytest.mark.slow
def test_the_images_files_alone_serve_the_app(tmp_path):
    """/app as the COPY lines make it; its CMD on a free port; the page and the health check answer;
    the app's script, run by AppTest from those files (not the repository), shows the cards."""
    app = tmp_path / "app"
    app.mkdir()
    for src, _ in copies():
        if (ROOT / src).is_dir():
            shutil.copytree(ROOT / src, app / src, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(ROOT / src, app / src)
    port = free_port()
    command = cmd()
    command[command.index("--server.port") + 1] = str(port)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["STREAMLIT_BROWSER_GATHER_USAGE_STATS"] = "false"
    proc = subprocess.Popen([sys.executable, "-m", *command], cwd=app, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.time() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as r:
                    assert r.read() == b"ok"
                    break
            except OSError:
                assert proc.poll() is None and time.time() < deadline, "streamlit did not start"
                time.sleep(0.3)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=5) as r:
            assert r.status == 200 and b"<div id=\"root\">" in r.read()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    probe = ("import explorer, sys; from streamlit.testing.v1 import AppTest\n"
             "at = AppTest.from_file('app.py', default_timeout=120); at.run()\n"
             "print(explorer.__file__); print([m.label for m in at.metric]); print(len(at.exception))")
    run = subprocess.run([sys.executable, "-c", probe], cwd=app, env=env, capture_output=True, text=True,
                         timeout=300)
    where, labels, exceptions = run.stdout.strip().splitlines()[-3:]
    assert where == str(app / "explorer" / "__init__.py")
    assert "Iteration time" in labels and "Memory per GPU" in labels and exceptions == "0"
