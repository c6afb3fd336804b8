"""The drawing page in headless Chromium: real MNIST test digits drawn on its canvas give Python onnxruntime's
input and probabilities for every model of the picker; bad files and an unreachable model give clear messages.
Saves ``artifacts/screenshots/draw_page.png`` (notebook 04 shows it); skipped, saying why, without Chromium.
"""

from __future__ import annotations

import base64
import time

import numpy as np
import onnxruntime as ort
import pytest

from helpers import predict as P
from helpers import preprocess as D
from helpers.data.atomic import atomic_path
from helpers.data.drawings import draw
from helpers.data.mnist import load_mnist
from helpers.data.paths import artifacts_dir
from helpers.pipeline.artifacts import existing_artifact
from helpers.webserver import FP32_MODELS, PageServer

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def server():
    models = [{"label": label, "file": existing_artifact(name).name} for label, name in FP32_MODELS]
    with PageServer(models) as running:
        yield running


@pytest.fixture(scope="module")
def browser(tmp_path_factory, chromium):
    driver = chromium(tmp_path_factory.mktemp("chromium-profile"), window="900,640")
    yield driver  # pytest runs the rest after the module's tests, passed or failed
    driver.quit()


def wait_for(driver, what: str, script: str, timeout: float = 60):
    """Poll a JS expression until it is truthy; fail with what the page says after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = driver.execute_script(f"return {script}")
        if value:
            return value
        if time.monotonic() > deadline:
            shown = driver.execute_script("return document.getElementById('message').textContent")
            raise AssertionError(
                f"timed out after {timeout:.0f} s waiting for {what}; the page says: {shown!r}"
            )
        time.sleep(0.2)


def open_page(driver, server):
    driver.get(server.url)
    wait_for(
        driver,
        "the first model to open",
        "window.digitPage && (window.digitPage.ready || window.digitPage.error)",
    )
    assert driver.execute_script("return window.digitPage.error") is None


def paint(driver, rgba: np.ndarray) -> dict:
    """Put a drawing onto the canvas as if drawn there, classify, and return what the page computed."""
    height, width = rgba.shape[:2]
    return driver.execute_async_script(
        """
        const [pixels, width, height, done] = arguments;
        const pad = document.getElementById('pad');
        const context = pad.getContext('2d');
        context.clearRect(0, 0, pad.width, pad.height);
        context.putImageData(new ImageData(new Uint8ClampedArray(pixels), width, height), 0, 0);
        window.digitPage.classifyNow().then(() => {
          const s = window.digitPage;
          done({input: s.input, probabilities: s.probabilities, prediction: s.prediction, model: s.model,
                shown: document.getElementById('prediction').textContent,
                bars: [...Array(10).keys()].map(d => document.getElementById('p' + d).textContent),
                png: pad.toDataURL('image/png')});
        });
    """,
        rgba.ravel().tolist(),
        width,
        height,
    )


def pick(driver, label: str) -> None:
    driver.execute_script(
        """const p = document.getElementById('model');
        p.value = [...p.options].find(o => o.text === arguments[0]).value;
        p.dispatchEvent(new Event('change'));""",
        label,
    )


def test_page_classifies_drawn_test_digits_like_python_onnxruntime(browser, server):
    open_page(browser, server)
    mnist = load_mnist()
    picked = np.random.default_rng(7).choice(len(mnist.x_test), 6, replace=False)
    labels = [label for label, _ in FP32_MODELS]
    assert (
        browser.execute_script(
            "return [...document.getElementById('model').options].map(o => o.text)"
        )
        == labels
    )
    correct = total = 0
    for label, name in FP32_MODELS:
        pick(browser, label)
        wait_for(
            browser,
            f"{label} to open",
            f"window.digitPage.ready && window.digitPage.model === {label!r}",
        )
        session = ort.InferenceSession(existing_artifact(name), providers=["CPUExecutionProvider"])
        for k, index in enumerate(picked):
            shift = (int(40 * np.sin(k)), int(40 * np.cos(k)))
            shown = paint(
                browser,
                draw(
                    mnist.x_test[index], scale=7 + k % 3, shift=shift, style="dark-on-transparent"
                ),
            )
            assert shown["model"] == label
            # Python's preprocessing of the canvas' own PNG export (dark strokes on transparent)
            png = base64.b64decode(shown["png"].split(",", 1)[1])
            python_input = D.mnist_preprocess(
                D.find_ink(P.decode_png(png, "canvas.png", max_side=4096))
            )
            page_input = np.array(shown["input"], np.float32).reshape(28, 28)
            assert np.abs(page_input - python_input).max() <= 1 / 255
            # Python onnxruntime on the page's input: same probabilities, same digit shown
            (logits,) = session.run(None, {session.get_inputs()[0].name: page_input[None, None]})
            np.testing.assert_allclose(
                shown["probabilities"], P.softmax(logits.astype(np.float64))[0], rtol=0, atol=1e-5
            )
            assert shown["prediction"] == int(logits.argmax()) and shown["shown"] == str(
                shown["prediction"]
            )
            assert (
                shown["bars"][shown["prediction"]]
                == f"{100 * shown['probabilities'][shown['prediction']]:.1f} %"
            )
            correct += shown["prediction"] == mnist.y_test[index]
            total += 1
    assert correct / total >= 0.8, f"{correct} of {total} drawn test digits recognised"

    # the screenshot the notebook shows: a test digit drawn on the canvas, classified by the first model
    pick(browser, labels[0])
    wait_for(
        browser,
        f"{labels[0]} to open",
        f"window.digitPage.ready && window.digitPage.model === {labels[0]!r}",
    )
    paint(
        browser,
        draw(
            mnist.x_test[picked[0]], scale=8, shift=(-20, 25), stroke=2, style="dark-on-transparent"
        ),
    )
    path = artifacts_dir() / "screenshots" / "draw_page.png"
    with atomic_path(path) as tmp:  # it creates the folder
        tmp.write_bytes(browser.get_screenshot_as_png())
    assert path.stat().st_size > 10_000


def test_drawing_with_the_mouse_and_clear(browser, server):
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    open_page(browser, server)
    pad = browser.find_element(By.ID, "pad")
    # a vertical stroke through the middle of the canvas (offsets are from the element's centre)
    ActionChains(browser).move_to_element_with_offset(pad, 0, -90).click_and_hold().move_by_offset(
        3, 60
    ).move_by_offset(0, 60).move_by_offset(-3, 60).release().perform()
    wait_for(browser, "a prediction after drawing", "window.digitPage.prediction !== null")
    browser.execute_async_script("window.digitPage.classifyNow().then(arguments[0])")
    state = browser.execute_script("return window.digitPage")
    assert state["prediction"] == 1, f"a vertical stroke was read as {state['prediction']}"
    assert max(state["input"]) > 0.5 and browser.find_element(By.ID, "prediction").text == "1"
    browser.find_element(By.ID, "clear").click()
    wait_for(browser, "Clear to empty the prediction", "window.digitPage.input === null")
    assert browser.find_element(By.ID, "prediction").text == "–"


def test_opening_files_that_are_not_digit_classifiers_says_why(
    browser, server, tmp_path, flat_model
):
    from selenium.webdriver.common.by import By

    open_page(browser, server)
    (tmp_path / "notes.onnx").write_text("this is a text file, not a model")
    cases = {
        "notes.onnx": "notes.onnx is not an ONNX model ONNX Runtime Web can open",
        "flat.onnx": "flat.onnx is not an MNIST digit classifier [batch, 1, 28, 28] → [batch, 10]: expected "
        "input 'x' shaped [batch, 1, 28, 28], found [batch, 784]",
    }
    for name, expected in cases.items():
        browser.find_element(By.ID, "own").send_keys(str(tmp_path / name))
        wait_for(
            browser, f"a message about {name}", f"(window.digitPage.error || '').includes({name!r})"
        )
        message = browser.find_element(By.ID, "message")
        assert expected in message.text and "error" in message.get_attribute("class"), message.text
        assert message.is_displayed()
        browser.execute_script("document.getElementById('own').value = ''")
    # the page still works with the model it had
    assert browser.execute_script("return window.digitPage.ready")
    shown = paint(browser, draw(load_mnist().x_test[0], style="dark-on-transparent"))
    assert shown["prediction"] == 7


def test_a_model_that_cannot_be_fetched_is_not_called_a_bad_model(browser):
    """A model missing (404) or its server stopped (kernel gone) is said so; the picker returns to the one in use."""
    models = [
        {"label": label, "file": existing_artifact(name).name} for label, name in FP32_MODELS[:2]
    ]
    first, second = (m["label"] for m in models)
    server = PageServer(models).start()
    try:
        open_page(browser, server)
        browser.execute_script(
            "document.getElementById('model').add(new Option('absent', 'models/absent.onnx'))"
        )
        pick(browser, "absent")
        wait_for(browser, "the 404 message", "(window.digitPage.error || '').includes('absent')")
        assert "the server answered HTTP 404" in browser.execute_script(
            "return window.digitPage.error"
        )
    finally:
        server.stop()
    pick(browser, second)
    wait_for(
        browser,
        "the message about the stopped server",
        f"(window.digitPage.error || '').includes({second!r})",
    )
    message = browser.execute_script("return window.digitPage.error")
    assert "server is not running" in message and "python -m helpers.webserver" in message, message
    assert "not an ONNX model" not in message and f"Still using {first}" in message, message
    assert (
        browser.execute_script("return document.getElementById('model').selectedOptions[0].text")
        == first
    )
    shown = paint(browser, draw(load_mnist().x_test[0], style="dark-on-transparent"))
    assert shown["model"] == first and shown["prediction"] == 7
    assert browser.execute_script(
        "return document.getElementById('status').textContent"
    ).startswith(first)
