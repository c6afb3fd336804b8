"""The series' central promise, proven: an environment holding only requirements-inference.txt runs the models.

``python -m helpers.predict`` runs in ``footprint.bare_env()`` (the pinned inference packages, nothing else) on both
MNIST files and on real test digits written as PNG and ``.npy``; its predictions equal the full environment's.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from importlib import metadata

import numpy as np
import onnxruntime as ort
import pytest

# writes the sample PNGs here; the bare env reads them with its own pinned Pillow
from PIL import Image

from helpers.data.mnist import load_mnist
from helpers.data.paths import REPO_ROOT
from helpers.measure import footprint
from helpers.pipeline.artifacts import existing_artifact

# builds notebook 03's bare environment and the training stacks
pytestmark = pytest.mark.slow

PIN = re.compile(r"^(?P<name>[A-Za-z0-9_.\-]+)==(?P<version>[^\s#]+)\s+#\s*(?P<why>\S.*)$")
MODELS = ["mnist_mlp_pytorch.onnx", "mnist_mlp_keras.onnx"]


def inference_pins() -> dict[str, str]:
    pins = {}
    for line in footprint.INFERENCE_REQUIREMENTS.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            match = PIN.match(line)
            assert match, (
                f"requirements-inference.txt line must be 'name==version  # why': {line!r}"
            )
            pins[match["name"].lower()] = match["version"]
    return pins


@pytest.fixture(scope="session")
def bare():
    """(env folder, its python) of the cached bare inference environment, built on first use."""
    env = footprint.bare_env()
    return env, footprint.python_of(env)


@pytest.fixture(scope="session")
def samples(tmp_path_factory):
    """Real MNIST test digits as files: PNGs of several kinds and .npy batches, plus the uint8 originals."""
    folder = tmp_path_factory.mktemp("digits")
    mnist = load_mnist()
    images, labels = mnist.x_test[:40], mnist.y_test[:40]
    files = []
    for i, mode in enumerate(["L", "RGB", "RGBA", "P", "I;16", "L", "RGB", "L"]):
        pil = (
            Image.fromarray(images[i].astype(np.uint16) * 257)
            if mode == "I;16"
            else Image.fromarray(images[i])
        )
        pil = pil if mode in ("L", "I;16") else pil.convert(mode)
        if mode == "P":  # an explicit gray ramp: index i -> (i, i, i)
            pil.putpalette([v for gray in range(256) for v in (gray, gray, gray)])
        files.append(f"digit_{i:02d}_{mode.replace(';', '')}.png")
        pil.save(folder / files[-1])
    np.save(folder / "batch_uint8.npy", images[8:32])  # [24, 28, 28] uint8
    # [8, 1, 28, 28]
    np.save(folder / "batch_float.npy", (images[32:40, None] / 255.0).astype(np.float32))
    files += ["batch_uint8.npy", "batch_float.npy"]
    # in the files' order
    return {
        "folder": folder,
        "files": files,
        "images": images,
        "labels": labels,
    }


def run_cli(python, *args, cwd=None, by_path=False, program="helpers.predict"):
    """Run the program with the repository on PYTHONPATH only (nothing of it is installed in the bare env)."""
    env = footprint.clean_environ() | {"PYTHONPATH": str(REPO_ROOT)}
    entry = [str(REPO_ROOT / "helpers" / "predict.py")] if by_path else ["-m", program]
    return footprint.run_python(python, [*entry, *map(str, args)], cwd=cwd, env=env)


# ---------------------------------------------------------------------------------- the pins
def test_inference_requirements_are_exact_pins_matching_the_main_environment():
    pins = inference_pins()
    assert {"numpy", "onnxruntime", "pillow"} <= set(pins)  # what helpers/predict.py imports
    assert not {"torch", "tensorflow", "keras", "onnx", "matplotlib"} & set(pins)
    for name, version in pins.items():
        assert metadata.version(name) == version, (
            f"{name}: main env has {metadata.version(name)}, pinned {version}"
        )
    main = {
        PIN.match(line)["name"].lower(): PIN.match(line)["version"]
        for line in (REPO_ROOT / "requirements.txt").read_text().splitlines()
        if PIN.match(line)
    }
    for name in set(pins) & set(main):
        assert pins[name] == main[name], f"{name} pinned differently in requirements.txt"


def test_bare_env_holds_exactly_the_pins_and_nothing_else(bare):
    env, python = bare
    assert footprint.installed(env) == inference_pins()
    assert python.is_file() and str(env).startswith(str(footprint.cache_dir()))
    prefix = footprint.run_python(
        python, ["-c", "import sys; print(sys.prefix == sys.base_prefix)"]
    )
    assert prefix.stdout.strip() == "False", "not a virtual environment"


@pytest.mark.parametrize("module", ["torch", "tensorflow", "keras", "onnx", "matplotlib", "pip"])
def test_frameworks_are_absent_in_the_bare_env(bare, module):
    result = footprint.run_python(bare[1], ["-I", "-c", f"import {module}"])
    assert result.returncode != 0
    assert f"No module named '{module}'" in result.stderr


def test_predict_py_imports_numpy_onnxruntime_and_pillow_there(bare, tmp_path):
    """A lone copy of predict.py, imported in the bare env, loads exactly these packages beside the standard library."""
    shutil.copy(REPO_ROOT / "helpers" / "predict.py", tmp_path / "predict.py")
    code = (
        "import sys, predict; print(sorted({m.split('.')[0] for m in sys.modules} "
        "- set(sys.stdlib_module_names) - {'__main__', 'predict'}))"
    )
    result = footprint.run_python(bare[1], ["-c", code], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    print(f"predict.py imports, in the bare environment: {result.stdout.strip()}")
    assert result.stdout.strip() == "['PIL', 'numpy', 'onnxruntime']"


def test_stack_costs_measure_the_bare_env_smaller_than_each_training_stack(bare):
    costs = footprint.stack_costs(bare[0])
    assert list(costs) == [
        "onnxruntime + numpy + Pillow (bare env)",
        "torch + torchvision",
        "tensorflow",
        *footprint.ENGINES,
    ]
    (bare_mb, bare_s), *stacks = costs.values()
    assert 10 < bare_mb < min(costs["torch + torchvision"][0], costs["tensorflow"][0]), costs
    assert all(mb > 1 for mb, _ in stacks), costs
    assert all(seconds > 0 for _, seconds in costs.values()), costs


def test_bare_env_is_cached_and_keyed_on_the_requirements(bare, tmp_path, monkeypatch):
    def no_rebuild(*args, **kwargs):
        raise AssertionError("the cached environment was rebuilt")

    monkeypatch.setattr(footprint.venv, "EnvBuilder", no_rebuild)  # a cached call never builds
    assert footprint.bare_env() == bare[0]
    edited = tmp_path / "requirements-inference.txt"
    edited.write_text(
        footprint.INFERENCE_REQUIREMENTS.read_text() + "# a comment changes the key\n"
    )
    assert footprint.bare_env_key(edited) != footprint.bare_env_key()
    assert bare[0].name == f"venv-inference-{footprint.bare_env_key()}"


# --------------------------------------------------------------------------- the predictions
@pytest.mark.parametrize("model_name", MODELS)
def test_bare_env_predictions_match_the_full_environment(bare, samples, model_name):
    model = existing_artifact(model_name)
    result = run_cli(bare[1], model, *samples["files"], "--json", cwd=samples["folder"])
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    got = np.array([p["probabilities"] for p in report["predictions"]])
    assert got.shape == (40, 10)
    assert [p["source"] for p in report["predictions"]][:8] == samples["files"][:8]

    # Reference: the full environment, a plain session.run on the original uint8 digits / 255.
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    (logits,) = session.run(
        ["logits"], {"image": (samples["images"][:, None] / 255.0).astype(np.float32)}
    )
    reference = np.exp(logits - logits.max(1, keepdims=True))
    reference /= reference.sum(1, keepdims=True)
    np.testing.assert_array_equal(got.argmax(1), logits.argmax(1))
    np.testing.assert_allclose(got, reference, rtol=1e-5, atol=1e-6)
    assert (got.argmax(1) == samples["labels"]).mean() >= 0.9

    # The same program in the full environment prints exactly the same thing.
    full = run_cli(sys.executable, model, *samples["files"], "--json", cwd=samples["folder"])
    assert full.returncode == 0 and full.stdout == result.stdout


def test_bare_env_runs_the_program_by_path_and_as_a_lone_copy(bare, samples, tmp_path):
    model = existing_artifact(MODELS[0])
    as_module = run_cli(bare[1], model, *samples["files"], cwd=samples["folder"])
    by_path = run_cli(bare[1], model, *samples["files"], cwd=samples["folder"], by_path=True)
    assert as_module.returncode == by_path.returncode == 0, as_module.stderr + by_path.stderr
    assert as_module.stdout == by_path.stdout
    # A learner copies one file next to the model: no repository, no PYTHONPATH.
    shutil.copy(REPO_ROOT / "helpers" / "predict.py", tmp_path / "predict.py")
    shutil.copy(model, tmp_path / "model.onnx")
    lone = footprint.run_python(
        bare[1],
        [str(tmp_path / "predict.py"), str(tmp_path / "model.onnx"), *samples["files"]],
        cwd=samples["folder"],
    )
    assert lone.returncode == 0, lone.stderr
    assert lone.stdout == as_module.stdout


def test_bare_env_reports_bad_inputs_with_the_documented_exit_codes(bare, samples, tmp_path):
    model = existing_artifact(MODELS[0])
    Image.fromarray(np.zeros((32, 32), np.uint8)).save(tmp_path / "big.png")
    (tmp_path / "model.onnx").write_bytes(b"\x00not a model")
    cases = [
        ([model, tmp_path / "big.png"], 4, "image is 32x32 pixels; the model expects 28x28"),
        ([tmp_path / "model.onnx", tmp_path / "big.png"], 3, "not a valid ONNX model"),
        ([model], 2, "the following arguments are required"),
    ]
    for args, code, message in cases:
        result = run_cli(bare[1], *args)
        assert result.returncode == code and message in result.stderr, (
            args,
            result.returncode,
            result.stderr,
        )


def test_bare_env_preprocesses_canvas_drawings_like_the_full_environment(bare, tmp_path):
    """helpers.classify_drawing (notebook 04) on canvas exports of any size: the same output as in the full one."""
    from helpers.data.drawings import draw

    data = load_mnist()
    files = [f"canvas_{k}.png" for k in range(6)]
    for k, name in enumerate(files):
        Image.fromarray(
            draw(
                data.x_test[k],
                scale=6 + k % 3,
                shift=(10 * k - 25, 20 - 8 * k),
                style="dark-on-transparent",
            ),
            "RGBA",
        ).save(tmp_path / name)
    args = [existing_artifact(MODELS[0]), *files, "--json"]
    in_bare, in_full = (
        run_cli(python, *args, cwd=tmp_path, program="helpers.classify_drawing")
        for python in (bare[1], sys.executable)
    )
    assert in_bare.returncode == 0 and in_full.returncode == 0, in_bare.stderr + in_full.stderr
    assert in_bare.stdout == in_full.stdout
    predicted = [p["class"] for p in json.loads(in_bare.stdout)["predictions"]]
    assert np.mean(np.array(predicted) == data.y_test[:6]) >= 5 / 6, (predicted, data.y_test[:6])
