"""How the notebooks are kept (nbval runs them): committed *stripped* of outputs and execution counts, so diffs
stay readable and no stale output contradicts the code, and in the series' skeleton.
"""

from __future__ import annotations

import re

import nbformat
import pytest

from helpers.data.paths import NOTEBOOKS
from helpers.pipeline.artifacts import notebook_paths

NOTEBOOK_PATHS = notebook_paths()
IDS = [p.name for p in NOTEBOOK_PATHS]


def test_series_is_not_empty_and_named_in_order():
    assert NOTEBOOK_PATHS, "no notebooks found"
    for path in NOTEBOOK_PATHS:
        assert re.fullmatch(r"\d\d_[a-z0-9]+(_[a-z0-9]+)+\.ipynb", path.name), path.name
    assert sorted(NOTEBOOKS.glob("*.ipynb")) == NOTEBOOK_PATHS, (
        "a notebook outside the NN_verb_object scheme"
    )


@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=IDS)
def test_committed_stripped(path):
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "code":
            assert cell.outputs == [], f"{path.name} cell {i} has committed outputs"
            assert cell.execution_count is None, f"{path.name} cell {i} has an execution count"
    assert nb.metadata["kernelspec"]["name"] == "onnx-pdf"


@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=IDS)
def test_follows_the_series_skeleton(path):
    nb = nbformat.read(path, as_version=4)
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    number = path.name[:2]
    assert re.search(rf"^# {number} · \S", markdown, re.M), (
        f"{path.name}: title '# {number} · ...' missing"
    )
    for needed in (
        "What you will learn",
        "Prerequisites",
        "Expected run time",
        "## Setup",
        "## Summary",
        "## Exercises",
    ):
        assert needed in markdown, f"{path.name}: section {needed!r} missing"
    assert re.search(r"^## 1\. ", markdown, re.M), f"{path.name}: numbered sections missing"
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "assert" in code, f"{path.name} checks nothing"


@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=IDS)
def test_at_most_40_cells_besides_navigation(path):
    """A notebook a class can get through: at most 40 cells (the generated nav cells not counted)."""
    nb = nbformat.read(path, as_version=4)
    cells = [c for c in nb.cells if "nav" not in c.get("metadata", {}).get("tags", [])]
    assert len(cells) <= 40, (
        f"{path.name} has {len(cells)} cells (navigation excluded); the limit is 40"
    )


@pytest.mark.parametrize("path", NOTEBOOK_PATHS, ids=IDS)
def test_lessons_use_the_libraries_idioms(path):
    """Learners copy what they see: no project plumbing (atomic_path), no NBVAL_ markers (inert under --nbval-lax),
    ensure_artifact where the file is needed, a Going deeper that opens with its own list of what it adds."""
    nb = nbformat.read(path, as_version=4)
    heading = None
    for i, cell in enumerate(nb.cells):
        assert "NBVAL_" not in cell.source, f"{path.name} cell {i}: an NBVAL_ marker"
        if cell.cell_type == "markdown":
            headings = re.findall(r"^#{2,3} .*$", cell.source, re.M)
            heading = (headings[-1], i) if headings else heading
            if "## Going deeper" in cell.source:
                opening = cell.source.split("## Going deeper", 1)[1].lstrip().split("\n\n")[0]
                assert "What this part adds" in opening or re.match(r"[-*] ", opening), (
                    f"{path.name}: Going deeper opens without its list of what it adds"
                )
        elif "atomic_path" in cell.source:
            pytest.fail(
                f"{path.name} cell {i}: atomic_path in a lesson (use the library's own save)"
            )
        elif "ensure_artifact(" in cell.source:
            where_ok = (
                heading
                and (heading[0] == "## Setup" or heading[0].startswith("### "))
                and heading[1] == i - 1
            )
            assert where_ok, (
                f"{path.name} cell {i}: ensure_artifact outside Setup or a Going deeper subsection's top"
            )
