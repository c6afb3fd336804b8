"""helpers.pipeline.artifacts: a notebook's ``ensure_artifact`` rebuilds a missing file by running the notebook
notebooks/series.json names (once, under a lock, even with two processes asking at once), or says which notebook
failed and why; ``existing_artifact`` (checkers, solutions, tests) never runs one, it names it. Real kernels run
tiny notebooks in a temporary folder."""

from __future__ import annotations

import functools
import json
import re
import subprocess
import sys
import time
from fnmatch import fnmatch

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_notebook

from helpers.pipeline import artifacts


def model_code(path) -> str:
    return (
        "from onnx import helper, TensorProto, save\n"
        "io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in 'xy']\n"
        "g = helper.make_graph([helper.make_node('Relu', ['x'], ['y'])], 'g', io[:1], io[1:])\n"
        f"save(helper.make_model(g), {str(path)!r})\n"
    )


@pytest.fixture
def producers(tmp_path, monkeypatch):
    """A notebooks folder with tiny producers declared in its series.json, artifacts in an empty folder."""
    made = tmp_path / "artifacts"
    monkeypatch.setenv("ONNX_PDF_ARTIFACTS", str(made))
    monkeypatch.setattr(artifacts, "NOTEBOOKS", tmp_path)
    monkeypatch.setattr(
        artifacts, "run_notebook", functools.partial(artifacts.run_notebook, timeout=120)
    )
    wait_for_go = (
        f"import pathlib, time\nroot = pathlib.Path({str(tmp_path)!r})\n"
        "with open(root / 'runs.txt', 'a') as runs:\n    runs.write('run\\n')\n(root / 'started').touch()\n"
        "while not (root / 'go').exists():\n    time.sleep(0.1)\n"
    )
    nested = (
        "import pathlib, shutil\nfrom helpers.pipeline import artifacts\n"
        f"artifacts.NOTEBOOKS = pathlib.Path({str(tmp_path)!r})\n"
        f"shutil.copy(artifacts.ensure_artifact('good.onnx'), {str(made / 'nested.onnx')!r})"
    )
    # reads good.onnx without declaring it: its kernel builds it, no deadlock
    code = {
        "10_writes.ipynb": model_code(made / "good.onnx"),
        "11_fails.ipynb": "x = 1\nassert x == 2, 'the accuracy gate failed'",
        "12_forgets.ipynb": "print('wrote nothing')",
        "13_waits.ipynb": wait_for_go + model_code(made / "slow.onnx"),
        "14_nested.ipynb": nested,
    }
    for name, source in code.items():
        nbformat.write(new_notebook(cells=[new_code_cell(source)]), tmp_path / name)
    makes = {
        "10_writes.ipynb": "good.onnx",
        "11_fails.ipynb": "bad.bin",
        "12_forgets.ipynb": "lost.bin",
        "13_waits.ipynb": "slow.onnx",
        "14_nested.ipynb": "nested.onnx",
    }
    (tmp_path / "series.json").write_text(
        json.dumps({nb: {"makes": [name]} for nb, name in makes.items()})
    )
    return made


def test_a_missing_artifact_is_rebuilt_by_its_notebook(producers, capsys):
    path = artifacts.ensure_artifact("good.onnx")
    assert path == producers / "good.onnx" and artifacts.loads(path) is None
    assert "running 10_writes.ipynb" in capsys.readouterr().out
    assert artifacts.ensure_artifact("good.onnx") == path  # present: nothing runs
    assert "running" not in capsys.readouterr().out


def test_a_half_written_artifact_is_rebuilt(producers, capsys):
    """A save cut short (an interrupted kernel) leaves a file that does not load: it is never used."""
    path = artifacts.ensure_artifact("good.onnx")
    whole = path.read_bytes()
    path.write_bytes(whole[: len(whole) // 2])
    assert artifacts.loads(path) is not None
    assert artifacts.ensure_artifact("good.onnx") == path
    captured = capsys.readouterr()
    assert (
        "ONNX Runtime cannot load it" in captured.err and "running 10_writes.ipynb" in captured.out
    )
    assert path.read_bytes() == whole


def test_existing_artifact_never_runs_a_notebook_it_names_it(producers, capsys):
    with pytest.raises(
        FileNotFoundError,
        match=r"good.onnx: it is missing\. Run notebooks/10_writes.ipynb "
        r"\(or `make artifacts`\) first",
    ):
        artifacts.existing_artifact("good.onnx")
    assert not (producers / "good.onnx").exists() and "running" not in capsys.readouterr().out
    assert (
        artifacts.build("good.onnx") == ["10_writes.ipynb"] and artifacts.build("good.onnx") == []
    )
    assert artifacts.existing_artifact("good.onnx") == producers / "good.onnx"


def test_a_checker_without_the_series_file_names_the_notebook_to_run(tmp_path, monkeypatch):
    """The real checkers' path: notebook 01's file missing fails at once, naming notebook 01; nothing trains."""
    from helpers.grading.checks._common import reference_logits, test_images

    monkeypatch.setenv("ONNX_PDF_ARTIFACTS", str(tmp_path))
    images, _ = test_images(4)
    with pytest.raises(
        FileNotFoundError,
        match=r"Run notebooks/01_export_pytorch_mlp.ipynb \(or `make artifacts`\)",
    ):
        reference_logits("mnist_mlp_pytorch.onnx", images)
    assert list(tmp_path.iterdir()) == []


def test_two_processes_building_at_once_run_the_notebook_once(producers, tmp_path):
    """The second process waits for the lock (filelock logs it), then finds the file built and runs nothing."""
    child = (
        "import logging, pathlib, sys\nfrom helpers.pipeline import artifacts\nlogging.basicConfig()\n"
        "logging.getLogger('filelock').setLevel(logging.DEBUG)\nartifacts.NOTEBOOKS = pathlib.Path(sys.argv[1])\n"
        "print('ran', artifacts.build('slow.onnx'))"
    )

    def start(name):
        log = open(tmp_path / f"{name}.err", "w")
        return subprocess.Popen(
            [sys.executable, "-c", child, str(tmp_path)],
            stdout=subprocess.PIPE,
            stderr=log,
            text=True,
        )

    def wait_until(condition, what):
        for _ in range(3000):
            if condition():
                return
            if first.poll() is not None:  # a child that died says why at once
                raise AssertionError(
                    f"{what}: the first build exited: {(tmp_path / 'first.err').read_text()}"
                )
            time.sleep(0.1)
        raise AssertionError(f"{what} did not happen within 300 s")

    first = second = start("first")
    try:
        wait_until((tmp_path / "started").exists, "the first build starting the notebook")
        second = start("second")
        wait_until(
            lambda: (
                "not acquired"
                in (tmp_path / "second.err").read_text()  # waiting, or (no lock) running
                or (tmp_path / "runs.txt").read_text().count("run") > 1
            ),
            "the second waiting for the lock",
        )
    finally:
        (tmp_path / "go").touch()  # whatever happened, the notebooks finish and the processes end
        outs = [p.communicate(timeout=300)[0] for p in dict.fromkeys((first, second))]
    assert [p.returncode for p in (first, second)] == [0, 0], [
        (tmp_path / f"{n}.err").read_text() for n in ("first", "second")
    ]
    assert "ran ['13_waits.ipynb']" in outs[0] and "ran []" in outs[1], outs
    assert (tmp_path / "runs.txt").read_text() == "run\n" and artifacts.loads(
        producers / "slow.onnx"
    ) is None


def test_a_notebook_needing_another_artifact_builds_it_under_the_same_lock(producers):
    assert artifacts.build("nested.onnx") == ["14_nested.ipynb"]
    assert (
        artifacts.loads(producers / "good.onnx") is None
        and artifacts.loads(producers / "nested.onnx") is None
    )


def test_a_failing_notebook_is_named_with_its_error(producers):
    with pytest.raises(RuntimeError, match="11_fails.ipynb failed while rebuilding") as info:
        artifacts.ensure_artifact("bad.bin")
    assert "the accuracy gate failed" in str(info.value)
    assert not (producers / "bad.bin").exists()


def test_a_notebook_that_does_not_write_its_artifact(producers):
    with pytest.raises(
        FileNotFoundError, match="12_forgets.ipynb ran but .*lost.bin: it is missing"
    ):
        artifacts.ensure_artifact("lost.bin")


def test_an_unknown_artifact(producers):
    for function in (artifacts.ensure_artifact, artifacts.existing_artifact):
        with pytest.raises(LookupError, match="no notebook is registered to produce nobody.bin"):
            function("nobody.bin")


def test_the_metadata_declares_what_each_notebook_reads():
    """Every ensure_artifact of a notebook names a file its entry in notebooks/series.json reads, made by another."""
    meta, made = artifacts.series_meta(), artifacts.producers()
    assert [p.name for p in artifacts.notebook_paths()] == list(meta)
    for path in artifacts.notebook_paths():
        text = "\n".join(
            c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"
        )
        for name in re.findall(r'ensure_artifact\(f?"([^"]+)"', text):
            pattern = re.sub(r"\{[^}]*\}", "*", name)
            reads = meta[path.name].get("reads", [])
            assert any(fnmatch(pattern, r) for r in reads), (
                f"{path.name} reads {name}: not in series.json ({reads})"
            )
            assert any(fnmatch(f, pattern) and made[f] != path.name for f in made), (
                f"nobody else makes {name}"
            )
