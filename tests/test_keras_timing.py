"""helpers.keras_timing: it times the model notebook 02 saved with ``model.save(....keras)``, checked on loading."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

# imports Keras: run in the TensorFlow child pytest (conftest.py)
pytestmark = pytest.mark.tensorflow


def tiny_model(input_shape=(1, 28, 28), outputs=10):
    """A small classifier with its normalization inside, as notebook 02's (not trained: its weights are seeded)."""
    import keras

    keras.utils.set_random_seed(0)
    return keras.Sequential(
        [
            keras.Input(shape=input_shape, name="image"),
            keras.layers.Rescaling(scale=1 / 0.3, offset=-0.1 / 0.3),
            keras.layers.Flatten(),
            keras.layers.Dense(outputs),
        ]
    )


def test_a_saved_model_loads_with_its_normalization(tmp_path):
    from helpers.keras_timing import load_keras_model

    model, path = tiny_model(), tmp_path / "mlp.keras"
    model.save(path)
    x = np.random.default_rng(0).random((3, 1, 28, 28), dtype=np.float32)
    loaded = load_keras_model(path)
    np.testing.assert_allclose(loaded(x).numpy(), model(x).numpy(), rtol=1e-6, atol=1e-6)
    assert loaded.layers[0].get_config()["offset"] == pytest.approx(-0.1 / 0.3)


def test_a_missing_file_names_the_notebook_that_saves_it(tmp_path):
    from helpers.keras_timing import load_keras_model

    with pytest.raises(
        FileNotFoundError, match=r"missing\.keras: no Keras model there; run .*02_export"
    ):
        load_keras_model(tmp_path / "missing.keras")


@pytest.mark.parametrize("damage", ["not a zip file", "truncated"])
def test_a_damaged_file_is_refused_clearly(tmp_path, damage):
    from helpers.keras_timing import load_keras_model

    path = tmp_path / "mlp.keras"
    if damage == "truncated":  # an interrupted save
        tiny_model().save(path)
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:
        path.write_text("weights, honestly")
    with pytest.raises(
        ValueError, match=r"mlp\.keras: Keras cannot load it \(.*\); run .*02_export"
    ):
        load_keras_model(path)


@pytest.mark.parametrize(
    "shape, outputs, seen",
    [
        ((28, 28), 10, r"\[None, 28, 28\] -> \[None, 10\]"),
        ((1, 28, 28), 3, r"\[None, 1, 28, 28\] -> \[None, 3\]"),
    ],
)
def test_a_model_that_is_no_digit_classifier_is_refused(tmp_path, shape, outputs, seen):
    from helpers.keras_timing import load_keras_model

    path = tmp_path / "other.keras"
    tiny_model(shape, outputs).save(path)
    with pytest.raises(
        ValueError, match=r"expected a digit classifier \[None, 1, 28, 28\].*got " + seen
    ):
        load_keras_model(path)


def test_the_command_reports_a_model_it_cannot_load_without_a_traceback(tmp_path):
    path = tmp_path / "mlp.keras"
    path.write_bytes(b"PK\x03\x04 cut short")
    run = subprocess.run(
        [sys.executable, "-m", "helpers.keras_timing", str(path), str(tmp_path / "mlp.onnx")],
        capture_output=True,
        text=True,
    )
    assert run.returncode == 1 and run.stdout == ""
    assert "keras_timing: " in run.stderr and "Keras cannot load it" in run.stderr
    assert "Traceback" not in run.stderr
