"""TensorFlow never enters another pytest process than pytest-isolated's child (conftest.py).

With the pinned builds, a process that loaded TensorFlow before PyTorch's dynamo exporter segfaults, so the suite
keeps them apart, and conftest's ``pytest_runtest_makereport`` fails the first test after which a process other
than the child holds TensorFlow. Shown here on a small real session of a TensorFlow test, with and without the
child: the check passes, then fails naming the test.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from helpers.data.paths import REPO_ROOT

pytestmark = pytest.mark.slow

# one tensorflow test that imports Keras (and so TensorFlow)
KERAS_TEST = "tests/test_keras_timing.py::test_a_saved_model_loads_with_its_normalization"


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


def test_a_tensorflow_test_passes_in_the_child_and_leaves_this_process_clean():
    result = run_pytest(KERAS_TEST)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert "1 passed" in result.stdout, result.stdout[-2000:]


def test_without_the_child_the_same_test_fails_named():
    """The check can fail: with pytest-isolated switched off, the Keras test imports TensorFlow here."""
    result = run_pytest("--no-isolation", KERAS_TEST)
    assert result.returncode == 1, result.stdout[-4000:]
    assert f"{KERAS_TEST} left ['tensorflow'" in result.stdout, result.stdout[-4000:]
    assert "imported in this pytest process" in result.stdout, result.stdout[-4000:]
