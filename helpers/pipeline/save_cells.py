"""The lessons' ``#@save`` cells collected into importable modules (d2l's build step), as text."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import nbformat

# the first line of a saved cell: d2l writes #@save, ruff format (run on the notebooks) writes "# @save"
MARK = re.compile(r"#\s*@save")
# cells that import a framework go to its own module, so helpers.lessons stays numpy-only (d2l: d2l/torch.py)
FRAMEWORK_MODULES = {"torch": "lessons_torch"}
PLAIN_MODULE = "lessons"
HEADER = '''"""{what}, collected from the notebooks' ``#@save`` cells (generated: don't edit it directly).

Edit the notebook cell named above each definition, then run ``python -m helpers.series sync``.
"""'''


def save_cells(notebook: Path) -> list[str]:
    """Source of ``notebook``'s code cells whose first line is the mark (``#@save``), without it, in order."""
    cells = []
    for cell in nbformat.read(notebook, as_version=4).cells:
        first, _, rest = cell.source.lstrip().partition("\n")
        if cell.cell_type == "code" and MARK.fullmatch(first.strip()):
            cells.append(rest)
    return cells


def _split(source: str, where: str) -> tuple[list[str], str, set[str], set[str]]:
    """(top-level import statements, the rest, names it defines, names it reads) of one cell."""
    try:
        tree = ast.parse(source)
    except SyntaxError as err:
        raise SyntaxError(
            f"{where}: a #@save cell must be plain Python ({err.msg}, line {err.lineno})"
        ) from err
    imports, drop, defined = [], set(), set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports.append(ast.get_source_segment(source, node))
            drop.update(range(node.lineno - 1, node.end_lineno))
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Assign):
            defined.update(
                n.id for t in node.targets for n in ast.walk(t) if isinstance(n, ast.Name)
            )
    read = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    body = "\n".join(line for i, line in enumerate(source.splitlines()) if i not in drop).strip(
        "\n"
    )
    return imports, body, defined, read


def _module_of(imports: list[str]) -> str:
    roots = {stmt.split()[1].split(".")[0] for stmt in imports}
    return next(
        (module for framework, module in FRAMEWORK_MODULES.items() if framework in roots),
        PLAIN_MODULE,
    )


def _imported(statements: list[str]) -> set[str]:
    return {
        alias.asname or alias.name.split(".")[0]
        for stmt in statements
        for node in ast.parse(stmt).body
        for alias in node.names
    }


def lesson_modules(notebooks: list[Path], package: str = "helpers") -> dict[str, str]:
    """Module name -> generated text: every ``#@save`` cell of ``notebooks`` (in order), imports hoisted."""
    parts: dict[str, dict] = {}
    for path in notebooks:
        for k, source in enumerate(save_cells(path)):
            imports, body, defined, read = _split(source, f"{path.name} #@save cell {k + 1}")
            module = _module_of(imports)
            part = parts.setdefault(
                module, {"imports": [], "blocks": [], "reads": set(), "defines": set()}
            )
            part["imports"] += [i for i in imports if i not in part["imports"]]
            part["blocks"].append(f"# Defined in notebooks/{path.name}\n{body}")
            part["reads"] |= read
            part["defines"] |= defined
    plain = parts.get(PLAIN_MODULE, {"defines": set()})["defines"]
    texts = {}
    for module, part in parts.items():
        imports = [
            i for i in part["imports"] if not i.startswith(f"from {package}.{module} import")
        ]
        needed = (part["reads"] & plain) - part["defines"] - _imported(imports)
        if needed:  # a name an earlier cell of the notebook defined (notebook 01's constants)
            imports.append(f"from {package}.{PLAIN_MODULE} import {', '.join(sorted(needed))}")
        what = (
            "The lessons' own code"
            if module == PLAIN_MODULE
            else f"The lessons' {module.split('_')[1]} code"
        )
        head = HEADER.format(what=what) + ("\n\n" + "\n".join(imports) if imports else "")
        text = head + "\n\n\n" + "\n\n\n".join(part["blocks"]) + "\n"
        texts[module] = formatted(text, f"helpers/{module}.py")
    return texts


def formatted(text: str, filename: str) -> str:
    """``text`` with its imports sorted and laid out by ruff, as the project's own files are."""
    for command in (["check", "--select", "I", "--fix", "--quiet"], ["format"]):
        text = subprocess.run(
            [sys.executable, "-m", "ruff", *command, "--stdin-filename", filename, "-"],
            input=text,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    return text
