"""JupyterLab in headless Chromium: *Run All Cells* on a temporary copy of notebook 00, clicked from the menu, and
what a learner sees; saves ``artifacts/screenshots/jupyterlab.png``; skipped, saying why, without Chromium.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import nbformat
import pytest

from helpers.data.paths import NOTEBOOKS, artifacts_dir
from helpers.pipeline.artifacts import existing_artifact

pytestmark = pytest.mark.browser

NOTEBOOK = "00_inspect_onnx_file.ipynb"
# Printed by a late cell of notebook 00 (section 2, the external-data round trip): seeing it means the cells
# before it ran, including the one that loads notebook 01's model.
EXPECTED_OUTPUT = "ONNX Runtime and the reference evaluator agree with the opset-20 logits"
SERVER_START_TIMEOUT_S = 300  # hang guards, not speed limits: a busy machine may be slow
# about 10 s with notebook 01's file present; notebook 01 is run first if it is missing
RUN_ALL_TIMEOUT_S = 600
# JupyterLab user settings for the test server: every cell in the DOM (no virtual scrolling), no news/update
# requests (the server has no internet, and a toast would cover the screenshot).
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false",
        "checkForUpdates": False,
    },
}


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url: str, method: str = "GET", timeout: float = 5.0) -> tuple[int, bytes]:
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.status, response.read()


def kernel_for_copy() -> tuple[str, str]:
    """(name, display name): the series' kernel if ``make setup`` registered it, else this Python's own."""
    from jupyter_client.kernelspec import KernelSpecManager

    specs = KernelSpecManager()
    name = "onnx-pdf" if "onnx-pdf" in specs.find_kernel_specs() else "python3"
    return name, specs.get_kernel_spec(name).display_name


@contextlib.contextmanager
def running_lab(root: Path, tmp_path: Path, env: dict | None = None):
    """A JupyterLab serving ``root`` on a free loopback port with a fresh token and its own settings, runtime
    and config folders under ``tmp_path``: yields ``{"base", "token", "log"}``; stopped (with its kernels)
    afterwards. ``env`` adds to this process's environment."""
    settings = tmp_path / "lab-settings"
    for name, values in LAB_SETTINGS.items():
        (settings / name).parent.mkdir(parents=True, exist_ok=True)
        (settings / name).write_text(json.dumps(values))
    env = {
        **os.environ,
        "JUPYTERLAB_SETTINGS_DIR": str(settings),
        "JUPYTERLAB_WORKSPACES_DIR": str(tmp_path / "lab-workspaces"),
        "JUPYTER_RUNTIME_DIR": str(tmp_path / "jupyter-runtime"),
        "JUPYTER_CONFIG_DIR": str(tmp_path / "jupyter-config"),
        **(env or {}),
    }
    port, token = free_loopback_port(), secrets.token_hex(16)
    log_path = tmp_path / "jupyterlab.log"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jupyter",
                "lab",
                "--no-browser",
                f"--IdentityProvider.token={token}",
                f"--port={port}",
                "--ServerApp.port_retries=0",
                "--ServerApp.ip=127.0.0.1",
                f"--ServerApp.root_dir={root}",
                "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            ]
            + (["--allow-root"] if os.geteuid() == 0 else []),  # CI runs as root
            cwd=root,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + SERVER_START_TIMEOUT_S
            while True:
                assert server.poll() is None, (
                    f"JupyterLab exited with {server.returncode}:\n"
                    f"{log_path.read_text(errors='replace')[-4000:]}"
                )
                try:
                    ready = http(f"{base}/api/status?token={token}")[0] == 200
                except OSError:  # not listening yet: poll again until the deadline
                    ready = False
                if ready:
                    break
                assert time.monotonic() < deadline, (
                    f"JupyterLab did not answer in {SERVER_START_TIMEOUT_S} s"
                )
                time.sleep(0.5)
            yield {"base": base, "token": token, "log": log_path}
        finally:
            try:  # a clean shutdown also shuts the kernels down
                http(f"{base}/api/shutdown?token={token}", method="POST")
                server.wait(timeout=20)
            except (OSError, subprocess.TimeoutExpired) as err:
                print(f"clean JupyterLab shutdown failed ({err!r}); terminating its process group")
            if server.poll() is None:
                # the server's own process group (started above)
                os.killpg(server.pid, signal.SIGTERM)
                try:
                    server.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    os.killpg(server.pid, signal.SIGKILL)
                    server.wait(timeout=10)


@pytest.fixture
def lab(tmp_path):
    """A running JupyterLab serving a copy of notebook 00; stopped (with its kernels) afterwards."""
    root = tmp_path / "root"
    root.mkdir()
    nb = nbformat.read(NOTEBOOKS / NOTEBOOK, as_version=4)
    kernel, display_name = kernel_for_copy()
    nb.metadata["kernelspec"].update(name=kernel, display_name=display_name)
    nbformat.write(nb, root / NOTEBOOK)
    with running_lab(root, tmp_path) as server:
        yield {**server, "root": root, "kernel": kernel, "display_name": display_name}


@pytest.fixture
def browser(tmp_path, chromium):
    driver = chromium(
        tmp_path / "chromium-profile", window="1400,1000", log=tmp_path / "chromedriver.log"
    )
    yield driver  # pytest runs the rest after the test, passed or failed
    driver.quit()


def wait_for(driver, what: str, condition, timeout: float):
    """Poll ``condition(driver)`` until it returns something truthy; fail with ``what`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition(driver)
        if value:
            return value
        if time.monotonic() > deadline:
            screenshot(driver, "jupyterlab-timeout.png")
            state = page_state(driver) or {}
            raise AssertionError(
                f"timed out after {timeout:.0f} s waiting for {what}; the page shows: prompts "
                f"{state.get('prompts')}, kernel {state.get('status')!r} "
                f"({state.get('kernel')!r}), outputs:\n{state.get('text', '')[-3000:]}"
            )
        time.sleep(0.5)


def screenshot(driver, name: str) -> Path:
    path = artifacts_dir() / "screenshots" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(path))
    return path


def kernel_idle(lab) -> bool:
    """The server's word that the notebook's kernel (of the expected spec) is idle: the page's indicators are not
    enough (the toolbar says idle before a kernel is attached, not every Chromium shows the status bar's)."""
    sessions = json.loads(http(f"{lab['base']}/api/sessions?token={lab['token']}")[1])
    return any(
        s["path"].endswith(NOTEBOOK)
        and s["kernel"]["name"] == lab["kernel"]
        and s["kernel"]["execution_state"] == "idle"
        for s in sessions
    )


def page_state(driver) -> dict:
    """What the notebook panel shows: prompts, kernel status, outputs (read with one script call)."""
    return driver.execute_script(r"""
        const panel = document.querySelector('.jp-NotebookPanel:not(.lm-mod-hidden)');
        if (!panel) return null;
        const cells = [...panel.querySelectorAll('.jp-Notebook .jp-CodeCell')];
        const indicator = panel.querySelector('.jp-Notebook-ExecutionIndicator');
        const outputs = [...panel.querySelectorAll('.jp-OutputArea-output')];
        return {
          prompts: cells.map(c => (c.querySelector('.jp-InputArea-prompt') || {}).textContent || ''),
          status: indicator ? indicator.getAttribute('data-status') : null,
          toolbar_kernel: ((panel.querySelector('.jp-Toolbar-kernelName') || {}).textContent || '').trim(),
          kernel: ([...document.querySelectorAll('.jp-StatusBar-Item')].map(e => e.textContent.trim())
                     .find(t => / \| [A-Z][a-z]+$/.test(t)) || ''),
          stderr: outputs.filter(o => o.getAttribute('data-mime-type') === 'application/vnd.jupyter.stderr')
                         .map(o => o.textContent),
          text: outputs.map(o => o.textContent).join('\n'),
          images: panel.querySelectorAll('.jp-OutputArea-output img').length,
        };
    """)


# browser first: no browser, skip before starting a server
def test_run_all_cells_in_jupyterlab(browser, lab):
    from selenium.webdriver.common.by import By

    # notebook 00 reads it: missing, this fails naming notebook 01
    existing_artifact("mnist_mlp_pytorch.onnx")
    t0 = time.monotonic()
    browser.get(f"{lab['base']}/lab/tree/{NOTEBOOK}?token={lab['token']}")
    n_code = sum(
        c.cell_type == "code" for c in nbformat.read(lab["root"] / NOTEBOOK, as_version=4).cells
    )
    wait_for(
        browser,
        f"the notebook to open with its {n_code} code cells and an idle kernel",
        lambda d: (
            (s := page_state(d))
            and s["toolbar_kernel"] == lab["display_name"]
            and s["status"] == "idle"
            and len(s["prompts"]) == n_code
            and kernel_idle(lab)
        ),
        90,
    )
    opened_s = time.monotonic() - t0

    # Run -> Run All Cells, clicked like a person would
    next(
        e
        for e in browser.find_elements(By.CSS_SELECTOR, ".lm-MenuBar-item")
        if e.text.strip() == "Run"
    ).click()

    def run_all_item(driver):
        items = driver.find_elements(By.CSS_SELECTOR, ".lm-Menu .lm-Menu-item")
        return next((i for i in items if i.text.split("\n")[0].strip() == "Run All Cells"), None)

    wait_for(browser, "'Run All Cells' in the Run menu", run_all_item, 10).click()
    t_run = time.monotonic()

    def finished(driver):
        s = page_state(driver)
        if s and any("Traceback" in e for e in s["stderr"]):
            return s  # stop waiting: Run All stops at an error (asserted below)
        ran = s and all(p.strip() not in ("", "[ ]:", "[*]:") for p in s["prompts"])
        return s if ran and s["status"] == "idle" and kernel_idle(lab) else None

    state = wait_for(browser, "Run All Cells to finish", finished, RUN_ALL_TIMEOUT_S)
    run_s = time.monotonic() - t_run

    errors = [e for e in state["stderr"] if "Traceback" in e]
    assert not errors, "an error is shown in the notebook:\n" + "\n---\n".join(errors)
    assert all(p.strip()[1:-2].isdigit() for p in state["prompts"]), (
        f"a cell did not run: {state['prompts']}"
    )
    assert EXPECTED_OUTPUT in state["text"], "notebook 00's output is not on the page"
    assert state["images"] >= 3, (
        f"expected the bar chart and two graph pictures, found {state['images']} images"
    )

    # Save (Ctrl+S) and check the file JupyterLab wrote: every code cell executed, no error output
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    saved_before = (lab["root"] / NOTEBOOK).stat().st_mtime_ns
    ActionChains(browser).key_down(Keys.CONTROL).send_keys("s").key_up(Keys.CONTROL).perform()
    wait_for(
        browser,
        "the notebook to be saved",
        lambda d: (lab["root"] / NOTEBOOK).stat().st_mtime_ns != saved_before,
        20,
    )
    saved = nbformat.read(lab["root"] / NOTEBOOK, as_version=4)
    code = [c for c in saved.cells if c.cell_type == "code"]
    assert not [o for c in code for o in c.outputs if o.output_type == "error"], (
        "the saved notebook has errors"
    )
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), (
        "unexecuted or out-of-order cells"
    )

    # the screenshot for the report: the cell that printed the expected line
    browser.execute_script(
        """
        const out = [...document.querySelectorAll('.jp-OutputArea-output')]
                      .find(o => o.textContent.includes(arguments[0]));
        out.closest('.jp-Cell').scrollIntoView({block: 'center'});
    """,
        EXPECTED_OUTPUT,
    )
    time.sleep(0.5)
    path = screenshot(browser, "jupyterlab.png")
    assert path.stat().st_size > 10_000
    print(
        f"JupyterLab: notebook open in {opened_s:.1f} s, Run All Cells {run_s:.1f} s, "
        f"{len(code)} code cells, kernel {lab['kernel']}; screenshot {path}"
    )
