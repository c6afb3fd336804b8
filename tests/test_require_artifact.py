"""helpers.notebooks.require_artifact: a missing file is rebuilt by running its notebook, or the error says
which notebook failed and why. Real kernels run tiny notebooks in a temporary folder."""
from __future__ import annotations

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from helpers import notebooks


@pytest.fixture
def producers(tmp_path, monkeypatch):
    """A notebooks folder with three tiny producers, artifacts in an empty temporary folder."""
    artifacts = tmp_path / "artifacts"
    monkeypatch.setenv("ONNX_PDF_ARTIFACTS", str(artifacts))
    monkeypatch.setattr(notebooks, "NOTEBOOKS", tmp_path)
    code = {
        "10_writes.ipynb": ("from onnx import helper, TensorProto, save\n"
                            "io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in 'xy']\n"
                            "g = helper.make_graph([helper.make_node('Relu', ['x'], ['y'])], 'g', io[:1], io[1:])\n"
                            f"save(helper.make_model(g), {str(artifacts / 'good.onnx')!r})"),
        "11_fails.ipynb": "x = 1\nassert x == 2, 'the accuracy gate failed'",
        "12_forgets.ipynb": "print('wrote nothing')",
    }
    for name, source in code.items():
        nbformat.write(new_notebook(cells=[new_code_cell(source)]), tmp_path / name)
    monkeypatch.setattr(notebooks, "PRODUCERS", {"good.onnx": "10_writes.ipynb", "bad.bin": "11_fails.ipynb",
                                                 "lost.bin": "12_forgets.ipynb"})
    return artifacts


def test_a_missing_artifact_is_rebuilt_by_its_notebook(producers, capsys):
    path = notebooks.require_artifact("good.onnx")
    assert path == producers / "good.onnx" and notebooks.loads(path) is None
    assert "running 10_writes.ipynb" in capsys.readouterr().out
    assert notebooks.require_artifact("good.onnx") == path  # present: nothing runs
    assert "running" not in capsys.readouterr().out


def test_a_half_written_artifact_is_rebuilt(producers, capsys):
    """A save cut short (an interrupted kernel) leaves a file that does not load: it is never used."""
    path = notebooks.require_artifact("good.onnx")
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    assert notebooks.loads(path) is not None
    assert notebooks.require_artifact("good.onnx") == path
    captured = capsys.readouterr()
    assert "ONNX Runtime cannot load it" in captured.err and "running 10_writes.ipynb" in captured.out
    assert path.read_bytes() == whole


def test_a_failing_notebook_is_named_with_its_error(producers):
    with pytest.raises(RuntimeError, match="11_fails.ipynb failed while rebuilding") as info:
        notebooks.require_artifact("bad.bin")
    assert "the accuracy gate failed" in str(info.value)
    assert not (producers / "bad.bin").exists()


def test_a_notebook_that_does_not_write_its_artifact(producers):
    with pytest.raises(FileNotFoundError, match="12_forgets.ipynb ran but .*lost.bin: it is missing"):
        notebooks.require_artifact("lost.bin")


def test_an_unknown_artifact(producers):
    with pytest.raises(FileNotFoundError, match="no notebook is registered to produce it"):
        notebooks.require_artifact("nobody.bin")
