"""How the suite runs, for every path under the repository (a conftest at the root is loaded whatever pytest is
given, so `pytest notebooks` alone and pytest-isolated's child pytests get it too): the tiers of the notebooks,
the notebooks making artifacts first under the build lock, and TensorFlow apart. The tests' fixtures live in
tests/conftest.py."""

from __future__ import annotations

import functools
import os
import sys

import pytest

from helpers.pipeline.artifacts import LOCK_HELD, build_lock, series_meta

# Tiers (markers registered in pyproject.toml). A test file declares its own (``pytestmark``), a test or a
# parameter its own (tests/test_grading.py takes each exercise's from its ``Exercise.marks``); a notebook is slow
# and has the "markers" of its notebooks/series.json entry, and "artifacts" if it makes files others read.
# `make test` runs the "artifacts" notebooks first, then the rest on both cores (pytest-xdist, a file to a worker)
# but for the "solo" ones, run last, alone: the notebooks that measure speed, the test that starts a Ray cluster,
# and the tensorflow tests (pytest-isolated starts its child from the main process only, not from an xdist
# worker).
# With the pinned builds, a process that loaded TensorFlow before PyTorch's dynamo exporter segfaults (as torch
# imports triton). So every tensorflow test of tests/ runs in one child pytest that pytest-isolated starts (one
# group: TensorFlow is imported once); a notebook runs in a kernel of its own anyway. That no other pytest process
# (the main one, every pytest-xdist worker) imports TensorFlow is checked once, after every test, by
# pytest_runtest_makereport below; tests/test_tensorflow_apart.py shows that check passing and failing.
TENSORFLOW_GROUP = pytest.mark.isolated(group="tensorflow", timeout=3600)
# pytest-isolated runs its groups before every other test, in the order of their first items: the notebooks
# making artifacts are a group too, sorted first, so that the files exist before the TensorFlow child and the
# rest read them, however pytest is launched (each runs once, under the build lock: pytest_runtest_protocol).
ARTIFACTS_GROUP = pytest.mark.isolated(group="artifacts", timeout=3600)
TENSORFLOW_MODULES = ("tensorflow", "keras", "tf2onnx")
# pytest-isolated sets it in the child pytest it starts
ISOLATED_CHILD = "PYTEST_RUNNING_IN_SUBPROCESS"


def runs_tensorflow(item) -> bool:
    """A tensorflow test of tests/ (a notebook runs in a kernel of its own, so it needs no child)."""
    return item.get_closest_marker("tensorflow") is not None and item.path.suffix != ".ipynb"


@pytest.hookimpl(tryfirst=True)  # before pytest-isolated groups the items it finds marked
def pytest_collection_modifyitems(items):
    """Mark each notebook with its tiers; the notebooks making artifacts, then the tensorflow tests of tests/, go
    to pytest-isolated's child pytests."""
    meta = series_meta()
    for item in items:
        if item.path.suffix == ".ipynb":
            names = ["slow", *meta.get(item.path.name, {}).get("markers", [])]
            for name in names + ["artifacts"] * makes_artifacts(item):
                item.add_marker(name)
            if makes_artifacts(item):
                item.add_marker(ARTIFACTS_GROUP)
        if runs_tensorflow(item):
            item.add_marker(TENSORFLOW_GROUP)
            item.add_marker("solo")
    # the notebooks making artifacts first, in the series' order (a stable sort)
    items.sort(key=lambda item: not makes_artifacts(item))


@functools.cache
def artifact_makers() -> frozenset[str]:
    """The notebooks with "makes" in notebooks/series.json: they write files other notebooks and tests read."""
    return frozenset(nb for nb, entry in series_meta().items() if entry.get("makes"))


def makes_artifacts(item) -> bool:
    """A cell of a notebook that makes artifacts."""
    return item.path.suffix == ".ipynb" and item.path.name in artifact_makers()


_build: list = []  # the build lock while this process runs the notebooks making artifacts


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """While nbval runs the notebooks making artifacts, this process holds the lock ``make artifacts`` and every
    ``ensure_artifact`` take: nobody else builds those files meanwhile, and their kernels (started inside,
    inheriting LOCK_HELD) build their inputs themselves. Released after the last of them (its kernel shut down)."""
    if makes_artifacts(item) and not _build and not os.environ.get(LOCK_HELD):
        _build.append(build_lock())
        _build[0].acquire()
        os.environ[LOCK_HELD] = "1"
    try:
        return (yield)
    finally:
        if _build and not (nextitem is not None and makes_artifacts(nextitem)):
            os.environ.pop(LOCK_HELD, None)
            _build.pop().release()


def tensorflow_loaded() -> list[str]:
    """The TensorFlow modules this process has imported."""
    return [name for name in TENSORFLOW_MODULES if name in sys.modules]


_tensorflow_blamed: list[str] = []  # the test after which this process first held TensorFlow


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Outside the TensorFlow child, the test after which TensorFlow is first found loaded fails, named (xdist too)."""
    report = yield
    loaded = tensorflow_loaded()
    if (
        call.when == "teardown"
        and loaded
        and not _tensorflow_blamed
        and os.environ.get(ISOLATED_CHILD) != "1"
    ):
        _tensorflow_blamed.append(item.nodeid)
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} left {loaded} imported in this pytest process: TensorFlow must run in "
            "pytest-isolated's child (a tensorflow marker, see tests/conftest.py), or PyTorch's exporter "
            "segfaults later in this process"
        )
    return report
