"""helpers must stay importable without torch or tensorflow (notebook 03 relies on it), and its plumbing never
imports the lessons' generated modules (lessons flow one way: plumbing never depends on them)."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import helpers
from helpers.pipeline.save_cells import FRAMEWORK_MODULES, PLAIN_MODULE


def test_importing_every_helper_module_loads_no_framework():
    # generated from torch cells: they import torch, by design
    framework_lessons = set(FRAMEWORK_MODULES.values())
    modules = ["helpers"] + [
        m.name
        for m in pkgutil.walk_packages(helpers.__path__, "helpers.")
        if m.name.rsplit(".", 1)[1] not in framework_lessons
    ]
    code = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        "heavy = sorted(m for m in ('torch', 'tensorflow', 'keras', 'transformers') if m in sys.modules)\n"
        "print(heavy)\n"
        "assert not heavy, heavy\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr + result.stdout
    assert len(modules) >= 30  # every module of every role package, the checks included


LESSON_MODULES = {f"helpers.{m}" for m in (PLAIN_MODULE, *FRAMEWORK_MODULES.values())}


def imported_modules(source: str, module: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every import in ``source`` (the text of ``module``), wherever it stands: top level,
    inside a function (a lazy import), ``from helpers import lessons``, relative, or ``importlib.import_module("...")``
    with a written-out name."""
    # helpers.pipeline.llm and helpers.pipeline.__init__: helpers.pipeline
    package = module.rsplit(".", 1)[0]
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # from ..lessons import X: resolved against this module's package
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and (getattr(node.func, "attr", None) or getattr(node.func, "id", None))
            in ("import_module", "__import__")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.append((node.lineno, node.args[0].value))
    return found


def lesson_imports(source: str, module: str) -> list[tuple[int, str]]:
    """``(line, lesson module)`` of each import of a generated lesson module in ``source``, once per line."""
    found = []
    for line, name in imported_modules(source, module):
        lesson = next((m for m in LESSON_MODULES if name == m or name.startswith(f"{m}.")), None)
        if lesson and (line, lesson) not in found:
            found.append((line, lesson))
    return found


@pytest.mark.parametrize(
    "source, module, found",
    [
        ("from helpers.lessons import MNIST_MEAN", "helpers.benchmark", ["helpers.lessons"]),
        (
            "def main():\n    import helpers.lessons_torch as lt\n",
            "helpers.keras_timing",
            ["helpers.lessons_torch"],
        ),
        ("from helpers import lessons, series", "helpers.benchmark", ["helpers.lessons"]),
        ("from ..lessons import int4_command", "helpers.pipeline.llm", ["helpers.lessons"]),
        ("from .. import lessons_torch", "helpers.pipeline.llm", ["helpers.lessons_torch"]),
        ("from . import lessons", "helpers.__init__", ["helpers.lessons"]),
        (
            "import importlib\nimportlib.import_module('helpers.lessons')",
            "helpers.x",
            ["helpers.lessons"],
        ),
        ("from helpers.lessons_extra import x\nimport helpers.series", "helpers.x", []),
        ("from helpers.pipeline import lessons", "helpers.x", []),  # another module of that name
    ],
)
def test_the_lesson_import_finder_sees_every_spelling(source, module, found):
    assert [name for _, name in lesson_imports(source, module)] == found


def test_no_plumbing_module_imports_the_lessons():
    """Lessons flow one way: notebooks (and grading) import the modules generated from their #@save cells,
    never the plumbing, which would then depend on the notebooks at run time. Plumbing: every module of
    helpers/ but helpers/grading/ and the generated modules; every import counts, lazy ones included."""
    root = Path(helpers.__file__).parent
    offenders, plumbing = [], 0
    for path in sorted(root.rglob("*.py")):
        module = ".".join(("helpers", *path.relative_to(root).with_suffix("").parts))
        if module in LESSON_MODULES or module.startswith("helpers.grading"):
            continue
        plumbing += 1
        offenders += [
            f"{path.relative_to(root.parent)}:{line}: imports {name}"
            for line, name in lesson_imports(path.read_text(encoding="utf-8"), module)
        ]
    assert plumbing >= 25, f"only {plumbing} plumbing modules found under {root}"
    assert not offenders, "plumbing imports the lessons' generated code:\n" + "\n".join(offenders)
