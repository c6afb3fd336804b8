"""TensorFlow never enters the main pytest process: its tests run in pytest-isolated's child (tests/conftest.py).

With the pinned builds, a process that loaded TensorFlow before PyTorch's dynamo exporter segfaults, so the suite
keeps them apart. Proven here twice: in this very session (the check below runs after every other test of a
serial run), and on a small real session of TensorFlow tests, with and without the child.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers.data.paths import REPO_ROOT

TENSORFLOW_MODULES = ("tensorflow", "keras", "tf2onnx")
# one tensorflow test that imports Keras (and so TensorFlow): the whole file runs in the suite's own child
KERAS_TEST = "tests/test_keras_timing.py::test_a_saved_model_loads_with_its_normalization"
THIS_PROCESS_CHECK = (
    "tests/test_tensorflow_apart.py::test_this_pytest_process_never_imported_tensorflow"
)


def test_this_pytest_process_never_imported_tensorflow(request):
    """Runs last in a serial run (tests/conftest.py orders it), so after every tensorflow test of the session."""
    loaded = [name for name in TENSORFLOW_MODULES if name in sys.modules]
    assert not loaded, f"this pytest process (pid {os.getpid()}) imported {loaded}"
    for item in request.session.items:
        if item.get_closest_marker("tensorflow") and item.path.suffix == ".py":
            isolated = item.get_closest_marker("isolated")
            assert isolated and isolated.kwargs.get("group") == "tensorflow", (
                f"{item.nodeid} is a tensorflow test but would run in this process"
            )


def run_pytest(*args: str) -> subprocess.CompletedProcess:
    """A fresh pytest session of the repository (serial, whatever launched this one)."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTEST_XDIST", "PYTEST_RUNNING_IN", "PYTEST_SUBPROCESS"))
        and key not in ("PYTEST_ADDOPTS", "PYTEST_CURRENT_TEST")
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rfE", "-p", "no:xdist", *args],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )


@pytest.mark.slow
def test_tensorflow_tests_pass_in_the_child_and_the_main_process_stays_clean():
    result = run_pytest(KERAS_TEST, THIS_PROCESS_CHECK)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout and "failed" not in result.stdout, result.stdout[-2000:]


@pytest.mark.slow
def test_without_the_child_the_same_session_fails_naming_the_test():
    """The check can fail: with pytest-isolated switched off, the Keras tests import TensorFlow here."""
    result = run_pytest("--no-isolation", KERAS_TEST, THIS_PROCESS_CHECK)
    assert result.returncode == 1, result.stdout[-4000:]
    assert "imported in this pytest process" in result.stdout, result.stdout[-4000:]
    assert f"FAILED {THIS_PROCESS_CHECK}" in result.stdout, result.stdout[-4000:]
