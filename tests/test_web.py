"""The .onnx files in Node.js (``web/classify.mjs``, ONNX Runtime Web) against Python onnxruntime, the page's
``web/preprocess.js`` against its twin ``helpers.preprocess``, ``helpers.classify_drawing`` on drawn digits,
``helpers.webserver``.

Node.js 18+ and ``npm ci`` (both part of ``make setup``) are required: without them these tests fail and say so.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import urllib.error
import urllib.request

import numpy as np
import onnxruntime as ort
import pytest
from PIL import Image  # an independent PNG encoder for the drawings

from helpers import classify_drawing as CD
from helpers import predict as P
from helpers import preprocess as D
from helpers.data.drawings import draw, variants
from helpers.data.mnist import load_mnist
from helpers.data.paths import REPO_ROOT
from helpers.pipeline.artifacts import existing_artifact
from helpers.webserver import ORT_DIST, PageServer

# runs Node.js on every model file
pytestmark = pytest.mark.slow

CLASSIFY = REPO_ROOT / "web" / "classify.mjs"
MNIST_FILES = ["mnist_mlp_pytorch.onnx", "mnist_mlp_keras.onnx", "mnist_cnn_pytorch.onnx"]


@pytest.fixture(scope="module")
def node():
    path = shutil.which("node")
    assert path, "Node.js is not on PATH: `make setup` installs it (Node 18 or newer)"
    version = subprocess.run([path, "--version"], capture_output=True, text=True).stdout.strip()
    assert int(version.lstrip("v").split(".")[0]) >= 18, (
        f"Node.js 18 or newer is required, found {version}"
    )
    assert (ORT_DIST / "ort.node.min.mjs").is_file(), (
        "onnxruntime-web is not installed: run `npm ci` (make setup)"
    )
    return path


def run_node(node, *args, timeout=600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [node, str(CLASSIFY), *map(str, args)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=timeout,
    )


def node_report(node, model, images: np.ndarray, folder, *options) -> dict:
    """classify.mjs's JSON report on ``images`` saved as ``folder/x.npy``; the run must succeed."""
    np.save(folder / "x.npy", images)
    result = run_node(node, model, folder / "x.npy", *options)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def python_logits(model, images: np.ndarray) -> tuple[ort.InferenceSession, np.ndarray]:
    """Python onnxruntime's session and logits on the same uint8 images (divided by 255, as the script does)."""
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    # float32 input
    (logits,) = session.run(None, {session.get_inputs()[0].name: images[:, None] / np.float32(255)})
    return session, logits


@pytest.fixture(scope="module")
def mnist():
    return load_mnist()


# --------------------------------------------------------------------------------------- parity
@pytest.mark.parametrize("name", MNIST_FILES)
def test_node_gives_python_onnxruntime_logits_on_all_test_images(node, mnist, tmp_path, name):
    model = existing_artifact(name)
    report = node_report(node, model, mnist.x_test, tmp_path)  # uint8 [10000, 28, 28]
    session, py = python_logits(model, mnist.x_test)
    assert report["input"]["name"] == session.get_inputs()[0].name
    assert report["output"]["name"] == session.get_outputs()[0].name
    assert report["input"]["dims"] == [10_000, 1, 28, 28]
    js = np.array(report["logits"], dtype=np.float32)
    assert js.shape == py.shape == (10_000, 10)
    np.testing.assert_array_equal(js.argmax(1), py.argmax(1))
    np.testing.assert_allclose(js, py, rtol=0, atol=1e-4)
    assert (js.argmax(1) == mnist.y_test).mean() > 0.97


QUANTIZED = [
    f"quantized/mnist_{key}.{precision}.onnx"
    for key in ("mlp_pytorch", "mlp_keras", "cnn_pytorch")
    for precision in ("fp16", "int8-dynamic", "int8-static", "int4-weights")
]


@pytest.mark.parametrize("name", QUANTIZED)
def test_node_runs_the_quantized_files_like_python(node, mnist, tmp_path, name):
    """Notebook 05's variants, in the page's picker: Python's digit on >= 99 % (kernels round per instruction set)."""
    model = existing_artifact(name)
    js = np.array(
        node_report(node, model, mnist.x_test[:2000], tmp_path)["logits"], dtype=np.float32
    )
    _, py = python_logits(model, mnist.x_test[:2000])
    assert js.shape == py.shape == (2000, 10)
    assert (js.argmax(1) == py.argmax(1)).mean() >= 0.99


def test_node_times_batch_one(node, mnist, tmp_path):
    latency = node_report(
        node, existing_artifact(MNIST_FILES[0]), mnist.x_test[:1], tmp_path, "--time", 50
    )["latency_us"]
    assert latency["runs"] == 50 and latency["median"] > 0


# ------------------------------------------------------------------------------------ bad inputs
def test_node_refuses_files_that_are_not_mnist_classifiers(node, mnist, tmp_path, flat_model):
    np.save(tmp_path / "x.npy", mnist.x_test[:2])
    good = existing_artifact(MNIST_FILES[0]).read_bytes()
    (tmp_path / "text.onnx").write_text("this is not a protobuf")
    (tmp_path / "cut.onnx").write_bytes(good[: len(good) // 3])
    (tmp_path / "empty.onnx").write_bytes(b"")
    cases = {
        name: "is not an ONNX model ONNX Runtime Web can load"
        for name in ("text.onnx", "cut.onnx", "empty.onnx")
    }
    cases |= {
        "absent.onnx": "model file not found",
        "flat.onnx": "shaped [batch, 1, 28, 28], found [batch, 784]",
    }
    for name, message in cases.items():
        result = run_node(node, tmp_path / name, tmp_path / "x.npy")
        assert result.returncode == 3 and message in result.stderr, (
            name,
            result.returncode,
            result.stderr,
        )
        # a message, not a stack trace
        assert result.stdout == "" and "at " not in result.stderr.splitlines()[-1]


def test_node_input_and_usage_errors(node, tmp_path):
    model = existing_artifact(MNIST_FILES[0])
    np.save(tmp_path / "big.npy", np.zeros((2, 32, 32), np.uint8))
    np.save(tmp_path / "int.npy", np.zeros((2, 28, 28), np.int64))
    np.save(tmp_path / "blank.npy", np.zeros((1, 50, 50, 4), np.uint8))
    (tmp_path / "text.npy").write_text("hello")
    cases = [
        ((model, tmp_path / "big.npy"), 4, "expected [N, 28, 28]"),
        ((model, tmp_path / "int.npy"), 4, "dtype <i8 is not supported"),
        ((model, tmp_path / "text.npy"), 4, "not a .npy file"),
        ((model, tmp_path / "absent.npy"), 4, "file not found"),
        ((model, tmp_path / "blank.npy", "--preprocess", "mnist"), 4, "no ink found"),
        ((model, tmp_path / "big.npy", "--preprocess", "mnist"), 4, "expects uint8 RGBA drawings"),
        ((model,), 2, "usage:"),
        ((model, tmp_path / "big.npy", "--preprocess", "fancy"), 2, "usage:"),
    ]
    for args, code, message in cases:
        result = run_node(node, *args)
        assert result.returncode == code and message in result.stderr, (
            args,
            result.returncode,
            result.stderr,
        )


def dark_on_light(digits: np.ndarray, form: str, folder) -> np.ndarray:
    """Test digits in a form people save drawings in (PNGs written by Pillow, read by helpers.predict) as one array."""
    if form == "uint8 .npy":
        return 255 - digits
    rgba = np.zeros((*digits.shape, 4), np.uint8)
    # dark strokes whose opacity is the ink, on a fully transparent background
    rgba[..., 3] = digits
    arrays = {
        "grey PNG": (255 - digits, "L"),
        "RGB PNG": (np.repeat(255 - digits[..., None], 3, axis=-1), "RGB"),
        "dark-on-transparent RGBA PNG": (rgba, "RGBA"),
    }[form]
    for i, image in enumerate(arrays[0]):
        Image.fromarray(image, arrays[1]).save(folder / f"{i}.png")
    return np.stack([P.read_png(folder / f"{i}.png") for i in range(len(digits))])


@pytest.mark.parametrize(
    "form", ["grey PNG", "RGB PNG", "dark-on-transparent RGBA PNG", "uint8 .npy"]
)
def test_node_refuses_dark_digits_on_light_backgrounds_with_pythons_message(
    node, mnist, tmp_path, form, capsys
):
    """classify.mjs refuses them with the exit code and message of helpers.predict, each naming its own way to read
    drawings (``--preprocess mnist`` in Node, helpers.classify_drawing in Python); --invert reads them right."""
    model, digits, labels = (
        existing_artifact(MNIST_FILES[0]),
        mnist.x_test[:200],
        mnist.y_test[:200],
    )
    dark = dark_on_light(digits, form, tmp_path)
    np.save(tmp_path / "dark.npy", dark)
    result = run_node(node, model, tmp_path / "dark.npy")
    assert P.main([str(model), str(tmp_path / "dark.npy")]) == result.returncode == P.EXIT_INPUT, (
        result.stderr
    )
    python_message = capsys.readouterr().err.strip()
    assert P.DRAWINGS in python_message and "--preprocess mnist" not in python_message
    assert result.stderr.strip() == python_message.replace(P.DRAWINGS, "--preprocess mnist"), (
        result.stderr,
        python_message,
    )
    assert "--invert" in python_message and "the background is not dark" in python_message
    inverted = node_report(node, model, dark, tmp_path, "--invert")
    assert (np.array(inverted["logits"]).argmax(1) == labels).mean() >= 0.95


def test_node_invert_on_light_digits_and_with_preprocess_is_refused(node, mnist, tmp_path):
    model = existing_artifact(MNIST_FILES[0])
    np.save(tmp_path / "mnist.npy", mnist.x_test[:5])
    result = run_node(node, model, tmp_path / "mnist.npy", "--invert")
    assert (
        result.returncode == 4 and "the background is not dark after --invert" in result.stderr
    ), result.stderr
    result = run_node(node, model, tmp_path / "mnist.npy", "--invert", "--preprocess", "mnist")
    assert result.returncode == 2 and "drop --invert" in result.stderr, result.stderr


# ----------------------------------------------------------------------- preprocessing JS vs Python
def test_preprocessing_in_js_equals_python_on_the_same_drawings(node, mnist, tmp_path):
    rng = np.random.default_rng(12)
    drawings, pythons = [], []
    for i, index in enumerate(rng.choice(len(mnist.x_test), 24, replace=False)):
        kinds = variants(np.random.default_rng(i))
        name = list(kinds)[i % len(kinds)]
        if name == "light on dark":  # the page's canvas always holds dark strokes: not a JS case
            name = "dark on transparent"
        rgba = draw(mnist.x_test[index], **kinds[name])
        Image.fromarray(rgba, "RGBA").save(tmp_path / f"d{i}.png")
        drawings.append(rgba)
        # helpers.classify_drawing's path: helpers.predict reads the PNG, helpers.preprocess does the steps
        pythons.append(D.mnist_preprocess(D.find_ink(P.read_png(tmp_path / f"d{i}.png"))))
    report = node_report(
        node,
        existing_artifact(MNIST_FILES[0]),
        np.stack(drawings),
        tmp_path,
        "--preprocess",
        "mnist",
        "--show-input",
    )
    js = np.array(report["inputs"], dtype=np.float32).reshape(-1, 28, 28)
    python = np.stack(pythons)
    assert js.shape == python.shape == (24, 28, 28)
    assert np.abs(js - python).max() <= 1 / 255, np.abs(js - python).max()
    assert (python.reshape(24, -1).max(1) > 0.5).all()  # real digits, not empty fields


def test_preprocessing_variants_agree_on_a_centred_test_digit(node, mnist, tmp_path):
    """helpers.preprocess's three centring choices on one drawing, and its refusals of no ink and of mid-gray."""
    digit = mnist.x_test[0]
    rgba = draw(digit, shift=(30, -40))
    Image.fromarray(rgba, "RGBA").save(tmp_path / "d.png")
    ink = D.find_ink(P.read_png(tmp_path / "d.png"))
    for centre in ("mass", "box", "none"):
        image = D.mnist_preprocess(ink, centre=centre)
        assert (
            image.shape == (28, 28)
            and image.dtype == np.float32
            and 0 <= image.min()
            and image.max() <= 1
        )
    with pytest.raises(D.DrawingError, match="no ink found"):
        D.mnist_preprocess(np.zeros((50, 60)))
    with pytest.raises(D.DrawingError, match="mid-gray"):
        D.find_ink(np.full((40, 40), 0.5))


# ------------------------------------------------------------------------- classify_drawing accuracy
def test_classify_drawing_on_drawn_test_digits(mnist, tmp_path):
    """Drawn digits classified through the CLI almost as well as the un-drawn digits themselves."""
    model = existing_artifact(MNIST_FILES[0])
    rng = np.random.default_rng(4)
    picked = rng.choice(len(mnist.x_test), 80, replace=False)
    labels = mnist.y_test[picked]
    undrawn = (python_logits(model, mnist.x_test[picked])[1].argmax(1) == labels).mean()
    names = list(variants(rng))
    files = []
    for k, index in enumerate(picked):
        kinds = variants(np.random.default_rng(k))
        for v, name in enumerate(names):
            path = tmp_path / f"{k:02d}_{v}.png"
            Image.fromarray(draw(mnist.x_test[index], **kinds[name]), "RGBA").save(path)
            files.append(path.name)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "helpers.classify_drawing",
            str(model),
            *files,
            "--json",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    predicted = np.array([p["class"] for p in json.loads(result.stdout)["predictions"]]).reshape(
        len(picked), len(names)
    )
    accuracy = {name: (predicted[:, v] == labels).mean() for v, name in enumerate(names)}
    summary = f"un-drawn {undrawn:.1%}, drawn: " + ", ".join(
        f"{k} {a:.1%}" for k, a in accuracy.items()
    )
    print(summary)
    assert min(accuracy.values()) >= undrawn - 0.10, summary
    assert np.mean(list(accuracy.values())) >= undrawn - 0.05, summary


def test_classify_drawing_refuses_empty_drawings_and_invert(tmp_path, capsys):
    model = str(existing_artifact(MNIST_FILES[0]))
    Image.fromarray(np.full((100, 120), 255, np.uint8)).save(tmp_path / "white.png")
    Image.fromarray(np.zeros((100, 120, 4), np.uint8), "RGBA").save(tmp_path / "clear.png")
    Image.fromarray(np.full((100, 120), 128, np.uint8)).save(tmp_path / "grey.png")
    assert CD.main([model, str(tmp_path / "white.png")]) == P.EXIT_INPUT
    assert "no ink found" in capsys.readouterr().err
    assert CD.main([model, str(tmp_path / "clear.png")]) == P.EXIT_INPUT
    assert "fully transparent" in capsys.readouterr().err
    assert CD.main([model, str(tmp_path / "grey.png")]) == P.EXIT_INPUT
    assert "grey.png: the border is mid-gray" in capsys.readouterr().err
    # helpers.predict takes 28x28 images only, and says which program reads drawings
    assert P.main([model, str(tmp_path / "white.png")]) == P.EXIT_INPUT
    assert "drawings of any size need python -m helpers.classify_drawing" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        CD.main([model, str(tmp_path / "white.png"), "--invert"])
    assert exit_info.value.code == P.EXIT_USAGE
    assert "drop --invert" in capsys.readouterr().err


# ------------------------------------------------------------------------------------ the server
def test_page_server_serves_page_runtime_and_listed_models_only():
    name = MNIST_FILES[0]
    existing_artifact(name)
    with PageServer([{"label": "PyTorch MLP", "file": name}]) as server:

        def get(path):
            with urllib.request.urlopen(server.url + path, timeout=10) as response:
                return response.status, response.headers["Content-Type"], response.read()

        assert server.url.startswith("http://127.0.0.1:")
        status, kind, body = get("")
        assert status == 200 and kind.startswith("text/html") and b'src="app.js"' in body
        status, kind, body = get("ort/ort-wasm-simd-threaded.wasm")
        assert kind == "application/wasm" and body[:4] == b"\x00asm"
        assert get("preprocess.js")[1].startswith("text/javascript")
        assert json.loads(get("models.json")[2]) == [
            {"label": "PyTorch MLP", "url": f"models/{name}"}
        ]
        assert get(f"models/{name}")[2] == existing_artifact(name).read_bytes()
        for path in (
            "models/mnist_mlp_keras.onnx",
            "ort/../../../README.md",
            "../README.md",
            "nothing.js",
        ):
            with pytest.raises(urllib.error.HTTPError) as error:
                get(path)
            assert error.value.code == 404, path
    with pytest.raises(OSError):  # stopped: nothing listens any more
        urllib.request.urlopen(server.url, timeout=2)
    with pytest.raises(FileNotFoundError, match="no file artifacts/absent.onnx"):
        PageServer([{"label": "x", "file": "absent.onnx"}])


def test_page_server_command_line_prints_its_address_and_serves(tmp_path):
    """`python -m helpers.webserver --port 0`, the README's one command, with the picker list notebook 04 wrote."""
    import os
    import signal

    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    (artifacts / MNIST_FILES[0]).write_bytes(existing_artifact(MNIST_FILES[0]).read_bytes())
    (artifacts / "web_models.json").write_text(
        json.dumps(
            [
                {"label": "mine", "file": MNIST_FILES[0]},
                {"label": "deleted since", "file": "gone.onnx"},
            ]
        )
    )
    # Run as a terminal runs it, Ctrl+C not ignored: a shell's background job (`nohup make test &`) ignores
    # SIGINT, its children inherit that, and a Python started so installs no KeyboardInterrupt handler.
    server = subprocess.Popen(
        [sys.executable, "-m", "helpers.webserver", "--port", "0"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "ONNX_PDF_ARTIFACTS": str(artifacts)},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        line = server.stdout.readline()
        assert "serving the page at http://127.0.0.1:" in line and "with 1 models (mine)" in line, (
            line
        )
        url = line.split(" at ")[1].split()[0]
        with urllib.request.urlopen(url + "models.json", timeout=10) as response:
            assert json.loads(response.read()) == [
                {"label": "mine", "url": f"models/{MNIST_FILES[0]}"}
            ]
    finally:
        server.send_signal(signal.SIGINT)  # Ctrl+C
        try:
            assert server.wait(timeout=10) == 0
        finally:
            server.kill()  # nothing left listening if Ctrl+C did not stop it (a no-op once it has exited)
            server.stdout.close()
