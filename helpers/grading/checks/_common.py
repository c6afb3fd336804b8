"""Pieces shared by the checkers (answer shapes, models, sessions, test digits); only the stdlib at import."""

from __future__ import annotations

import functools
import os
import re
import tempfile
from pathlib import Path


class Wrong(Exception):
    """Raised inside a checker with a message telling the learner what is not right yet."""


def as_model_path(answer) -> Path:
    """The answer must be a path to an existing .onnx file."""
    if not isinstance(answer, (str, os.PathLike)):
        raise Wrong(
            f"expected the path of your .onnx file (a str or Path), got {type(answer).__name__}"
        )
    path = Path(answer)
    if not path.is_file():
        raise Wrong(f"expected an existing .onnx file, but there is no file at {path}")
    return path


def load_model(answer):
    """Accept a ModelProto or a path to one; return the ModelProto (weights loaded)."""
    import onnx

    if isinstance(answer, onnx.ModelProto):
        return answer
    path = as_model_path(answer)
    try:
        return onnx.load(path)
    except Exception as err:  # protobuf raises DecodeError and others for a non-ONNX file
        raise Wrong(
            f"{path.name} is not a readable ONNX model: {type(err).__name__}: {err}"
        ) from err


def session(model, options=None):
    """An ONNX Runtime CPU session for a path or serialized bytes; a Wrong if it cannot be loaded."""
    import onnxruntime as ort

    source = model if isinstance(model, bytes) else str(model)
    name = "the model" if isinstance(model, bytes) else Path(model).name
    try:
        return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    except Exception as err:  # onnxruntime raises its own exception types for unloadable models
        raise Wrong(
            f"expected a file ONNX Runtime can load; {name} fails: {type(err).__name__}: {err}"
        ) from err


def contract_input(digits_uint8):
    """uint8 digits [N, 28, 28] -> the contract's input: float32 [N, 1, 28, 28] in 0..1."""
    import numpy as np

    return (np.asarray(digits_uint8).astype(np.float32) / 255.0)[:, None]


def test_images(n: int):
    """The first ``n`` MNIST test images in the contract's layout, and their labels."""
    import numpy as np

    from helpers.data.mnist import load_mnist

    data = load_mnist()
    return contract_input(data.x_test[:n]), data.y_test[:n].astype(np.int64)


def reference_logits(filename: str, images):
    """Logits of the series' own file ``artifacts/<filename>`` (built by `make artifacts`) on contract ``images``."""
    from helpers.pipeline.artifacts import existing_artifact

    return session(existing_artifact(filename)).run(["logits"], {"image": images})[0]


def varied_model(
    model,
    seed: int,
    input_name: str | None = None,
    output_name: str | None = None,
    relative_noise: float = 0.0,
):
    """A copy of ``model`` with new input/output names and every weight moved by noise (needs ``onnx``)."""
    import numpy as np
    import onnx
    from onnx import numpy_helper

    copy = onnx.ModelProto.FromString(model.SerializeToString())
    graph, rng = copy.graph, np.random.default_rng(seed)
    if relative_noise:
        for tensor in graph.initializer:
            weight = numpy_helper.to_array(tensor)
            if weight.dtype.kind == "f" and weight.size > 1:
                moved = weight + rng.normal(0, relative_noise * float(weight.std()), weight.shape)
                tensor.CopyFrom(numpy_helper.from_array(moved.astype(weight.dtype), tensor.name))
    renames = {
        old.name: new
        for old, new in ((graph.input[0], input_name), (graph.output[0], output_name))
        if new
    }
    for value in [*graph.input, *graph.output, *graph.value_info]:
        value.name = renames.get(value.name, value.name)
    for node in graph.node:
        node.input[:] = [renames.get(name, name) for name in node.input]
        node.output[:] = [renames.get(name, name) for name in node.output]
    onnx.checker.check_model(copy, full_check=True)
    return copy


def write_varied_copy(
    source, target, seed: int, input_name: str, output_name: str, relative_noise: float
) -> Path:
    """``varied_model`` of ``source`` written to ``target`` by another process (``onnx`` stays out), verified."""
    import json
    import subprocess
    import sys

    spec = json.dumps([str(source), str(target), seed, input_name, output_name, relative_noise])
    result = subprocess.run(
        [sys.executable, "-m", "helpers.grading.checks._common", spec],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        # a checker bug
        raise RuntimeError(f"could not build a varied copy of {source}:\n{result.stderr}")
    built = session(target)
    if [i.name for i in built.get_inputs()] != [input_name] or [
        o.name for o in built.get_outputs()
    ] != [output_name]:
        raise RuntimeError(
            f"the varied copy of {source} does not have the names {input_name}, {output_name}"
        )
    return Path(target)


# python -m helpers.grading.checks._common '[source, target, seed, input, output, noise]'
if __name__ == "__main__":
    import json
    import sys

    import onnx

    _source, _target, _seed, _input, _output, _noise = json.loads(sys.argv[1])
    onnx.save(varied_model(onnx.load(_source), _seed, _input, _output, _noise), _target)


# --- known answers' files, made on first use (the generic test's rows; never during a learner's check) --------

_KNOWN_FOLDERS: dict[str, tempfile.TemporaryDirectory] = {}


def known_folder(owner: str) -> Path:
    """The process's temporary folder for ``owner``'s (a checks module's) known answers' files."""
    if owner not in _KNOWN_FOLDERS:
        _KNOWN_FOLDERS[owner] = tempfile.TemporaryDirectory(prefix=f"{owner}-")
    return Path(_KNOWN_FOLDERS[owner].name)


class Exported(os.PathLike):
    """A known answer's file, exported by ``build(path)`` the first time its path is read, once per process,
    into the folder of the checks module that defines ``build``."""

    def __init__(self, name: str, build):
        self.__name__, self._build, self._path = name, build, None

    def __fspath__(self) -> str:
        if self._path is None:
            stem = re.sub(r"\W+", "_", self.__name__)
            owner = getattr(self._build, "__module__", "checks").rsplit(".", 1)[-1]
            self._path = self._build(known_folder(owner) / f"{stem}.onnx")
        return str(self._path)

    def __repr__(self) -> str:
        return f"Exported({self.__name__!r})"


def exported_once(reference):
    """The reference, exporting once per process into the folder of the checks module that defines it: the
    examiner evaluates its answer line on every row of the generic test. Its name and source stay the
    reference's (the teacher's notebook prints them)."""
    built: list = []

    @functools.wraps(reference)
    def once(*args):
        if not built:
            owner = reference.__module__.rsplit(".", 1)[-1]
            built.append(reference(str(known_folder(owner) / f"{reference.__name__}.onnx")))
        return built[0]

    return once
