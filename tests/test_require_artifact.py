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
        "10_writes.ipynb": f"from pathlib import Path\nPath({str(artifacts)!r}, 'good.bin').write_bytes(b'ok')",
        "11_fails.ipynb": "x = 1\nassert x == 2, 'the accuracy gate failed'",
        "12_forgets.ipynb": "print('wrote nothing')",
    }
    for name, source in code.items():
        nbformat.write(new_notebook(cells=[new_code_cell(source)]), tmp_path / name)
    monkeypatch.setattr(notebooks, "PRODUCERS", {"good.bin": "10_writes.ipynb", "bad.bin": "11_fails.ipynb",
                                                 "lost.bin": "12_forgets.ipynb"})
    return artifacts


def test_a_missing_artifact_is_rebuilt_by_its_notebook(producers, capsys):
    path = notebooks.require_artifact("good.bin")
    assert path == producers / "good.bin" and path.read_bytes() == b"ok"
    assert "running 10_writes.ipynb" in capsys.readouterr().out
    assert notebooks.require_artifact("good.bin") == path  # present: nothing runs
    assert "running" not in capsys.readouterr().out


def test_a_failing_notebook_is_named_with_its_error(producers):
    with pytest.raises(RuntimeError, match="11_fails.ipynb failed while rebuilding") as info:
        notebooks.require_artifact("bad.bin")
    assert "the accuracy gate failed" in str(info.value)
    assert not (producers / "bad.bin").exists()


def test_a_notebook_that_does_not_write_its_artifact(producers):
    with pytest.raises(FileNotFoundError, match="12_forgets.ipynb ran but did not write .*lost.bin"):
        notebooks.require_artifact("lost.bin")


def test_an_unknown_artifact(producers):
    with pytest.raises(FileNotFoundError, match="no notebook is registered to produce it"):
        notebooks.require_artifact("nobody.bin")
