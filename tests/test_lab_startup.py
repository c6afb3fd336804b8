"""The first screen a class sees: ``make lab``'s JupyterLab starts without an error on its console."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers.data.paths import REPO_ROOT

# starts JupyterLab
pytestmark = pytest.mark.slow

START_TIMEOUT_S = 300  # a hang guard, not a speed limit


def test_no_package_json_above_the_venv_makes_its_javascript_es_modules():
    """``.venv/`` is inside the repository: a root ``"type": "module"`` makes Node load JupyterLab's yarn.js as ESM."""
    assert "type" not in json.loads((REPO_ROOT / "package.json").read_text())
    assert json.loads((REPO_ROOT / "web" / "package.json").read_text())["type"] == "module"


def test_jupyterlab_starts_with_no_error_on_its_console(tmp_path):
    """The command of ``make lab`` (without opening a browser), from the repository root; stopped once it serves."""
    jupyter = Path(sys.executable).with_name("jupyter")
    log = tmp_path / "lab.log"
    cmd = [
        str(jupyter),
        "lab",
        "notebooks/",
        "--no-browser",
        "--port=0",
        f"--IdentityProvider.token={secrets.token_hex(8)}",
    ]
    if os.geteuid() == 0:
        cmd.append("--allow-root")
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(tmp_path / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "rt"),
    }
    with open(log, "w") as out:
        server = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while "http://127.0.0.1:" not in log.read_text() and time.monotonic() < deadline:
                assert server.poll() is None, (
                    f"jupyter lab exited with {server.returncode}:\n{log.read_text()}"
                )
                time.sleep(1)
            # what JupyterLab prints right after it serves (the build check) belongs to its start-up
            time.sleep(3)
        finally:
            server.terminate()
            server.wait(timeout=30)
    text = log.read_text()
    assert "http://127.0.0.1:" in text, (
        f"JupyterLab did not start within {START_TIMEOUT_S} s:\n{text}"
    )
    errors = [line for line in text.splitlines() if "Error" in line]
    assert not errors, "JupyterLab's start-up output holds errors:\n" + "\n".join(
        line[:300] for line in errors
    )
