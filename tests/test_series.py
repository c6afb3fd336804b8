"""helpers.series: navigation cells, README index and HTML copy, on tiny series in a temporary folder and a copy
of the real notebooks; test_repository_navigation_and_readme_table_are_in_sync fails `make test` (with the diff
to apply) when a notebook was added, renamed or retitled without `python -m helpers.series sync`."""

from __future__ import annotations

import math
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from helpers import series
from helpers.data.paths import NOTEBOOKS, REPO_ROOT
from helpers.grading.exercises import all_exercises

README = """# A tiny series

Intro text.

## The notebooks

<!-- series-table:start -->
| notebook | what it teaches | run time here |
|---|---|---|
| [old](notebooks/old.ipynb) | hand-written | 1 min |
<!-- series-table:end -->

Text after the table.

## Layout

More.
"""


def make_notebook(
    path: Path,
    number: str,
    title: str,
    purpose: str,
    code: str = "x = 1\nassert x == 1",
    metadata: dict | None = None,
) -> Path:
    """A stripped notebook with the series skeleton's title cell (as the notebook builders write them)."""
    nb = new_notebook()
    nb.metadata = {
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        **(metadata or {}),
    }
    nb.cells = [
        new_markdown_cell(
            f"# {number} · {title}\n\n{purpose}\n\n**What you will learn**\n- things"
        ),
        new_markdown_cell("## Setup"),
        new_code_cell(code),
        new_markdown_cell("## Summary\n\nDone."),
    ]
    for i, cell in enumerate(nb.cells):
        cell["id"] = f"c{i:02d}"
    nbformat.write(nb, path)
    return path


@pytest.fixture
def tiny_series(tmp_path) -> Path:
    (tmp_path / "notebooks").mkdir()
    (tmp_path / "README.md").write_text(README)
    make_notebook(
        tmp_path / "notebooks" / "00_open_things.ipynb",
        "00",
        "Open things",
        "Open a `thing` and look\ninside it.",
    )
    make_notebook(
        tmp_path / "notebooks" / "01_export_things.ipynb", "01", "Export things", "Export a thing."
    )
    make_notebook(
        tmp_path / "notebooks" / "02_run_things.ipynb", "02", "Run things", "Run | the thing."
    )
    return tmp_path


def cli(root: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "helpers.series", "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def nav_cells(path: Path) -> list:
    nb = nbformat.read(path, as_version=4)
    return [(i, c) for i, c in enumerate(nb.cells) if "nav" in c.metadata.get("tags", [])]


def assert_nav_links_exist(notebooks: Path) -> None:
    """Every notebook has its two nav cells, each linking to the Contents and a neighbour, files that exist."""
    for path in series.notebook_paths(notebooks):
        assert len(nav_cells(path)) == 2, path.name
        for _, cell in nav_cells(path):
            targets = re.findall(r"\]\(([^)\s]+)\)", cell.source)
            assert len(targets) >= 2, (
                f"{path.name}: a nav cell without the Contents and a neighbour"
            )
            for target in targets:
                assert (path.parent / target.split("#")[0]).is_file(), (
                    f"{path.name} links to missing {target}"
                )


def test_sync_writes_nav_and_table_then_is_idempotent(tiny_series):
    assert cli(tiny_series, "diff").returncode == 1
    changed = series.sync(tiny_series)
    assert len(changed) == 4  # README + 3 notebooks
    before = snapshot(tiny_series)
    assert series.sync(tiny_series) == []
    assert snapshot(tiny_series) == before, "a second sync changed files"
    result = cli(tiny_series, "diff")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "in sync" in result.stdout

    readme = (tiny_series / "README.md").read_text()
    table = readme.split(series.TABLE_START)[1].split(series.TABLE_END)[0]
    assert (
        "[00 · Open things](notebooks/00_open_things.ipynb) | Open a `thing` and look inside it. |"
        in table
    )
    assert "Run \\| the thing." in table  # a | in the purpose cannot break the table
    assert "hand-written" not in readme, "the old hand-made table must be replaced, not kept"
    assert readme.count("| notebook |") == 1
    assert (
        readme.startswith("# A tiny series")
        and "Text after the table." in readme
        and "## Layout" in readme
    )


def test_nav_cells_are_tagged_stripped_markdown_after_the_title_and_at_the_end(tiny_series):
    series.sync(tiny_series)
    for path in series.notebook_paths(tiny_series / "notebooks"):
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        cells = nav_cells(path)
        assert [i for i, _ in cells] == [1, len(nb.cells) - 1], path.name
        assert all(c.cell_type == "markdown" and "outputs" not in c for _, c in cells)
        assert nb.cells[0].source.startswith("# ")
    middle = nav_cells(tiny_series / "notebooks" / "01_export_things.ipynb")[0][1].source
    assert "‹ [00 · Open things](00_open_things.ipynb)" in middle
    assert "[Contents](../README.md#the-notebooks)" in middle
    assert "[02 · Run things](02_run_things.ipynb) ›" in middle
    first = nav_cells(tiny_series / "notebooks" / "00_open_things.ipynb")[0][1].source
    assert "‹" not in first  # no previous notebook


def test_nav_links_point_to_existing_files(tiny_series):
    series.sync(tiny_series)
    assert_nav_links_exist(tiny_series / "notebooks")


def test_renamed_notebook_makes_check_fail_with_a_clear_message(tiny_series):
    series.sync(tiny_series)
    nbs = tiny_series / "notebooks"
    (nbs / "01_export_things.ipynb").rename(nbs / "01_save_things.ipynb")
    result = cli(tiny_series, "diff")
    assert result.returncode == 1
    out = result.stdout
    assert "README.md: the notebook table differs" in out
    assert "-| [01 · Export things](notebooks/01_export_things.ipynb)" in out
    assert "+| [01 · Export things](notebooks/01_save_things.ipynb)" in out
    assert "notebooks/00_open_things.ipynb: navigation cells differ" in out
    assert "notebooks/02_run_things.ipynb: navigation cells differ" in out
    assert "python -m helpers.series sync" in out
    series.sync(tiny_series)
    assert series.sync_diff(tiny_series) == ""


def test_added_notebook_makes_check_fail_until_synced(tiny_series):
    series.sync(tiny_series)
    make_notebook(
        tiny_series / "notebooks" / "03_quantize_things.ipynb",
        "03",
        "Quantize things",
        "Make it small.",
    )
    report = series.sync_diff(tiny_series)
    assert (
        "+| [03 · Quantize things](notebooks/03_quantize_things.ipynb) | Make it small. |" in report
    )
    assert "notebooks/03_quantize_things.ipynb: navigation cells differ" in report
    # it gains a "next" link
    assert "notebooks/02_run_things.ipynb: navigation cells differ" in report
    assert "notebooks/00_open_things.ipynb" not in report  # untouched neighbours stay quiet
    series.sync(tiny_series)
    assert series.sync_diff(tiny_series) == ""


def test_hand_edited_or_moved_nav_cell_is_detected(tiny_series):
    series.sync(tiny_series)
    path = tiny_series / "notebooks" / "01_export_things.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells.insert(3, nb.cells.pop(1))  # moved below the Setup heading
    nbformat.write(nb, path)
    assert (
        "01_export_things.ipynb: navigation cells are missing or out of place"
        in series.sync_diff(tiny_series)
    )
    series.sync(tiny_series)
    nb = nbformat.read(path, as_version=4)
    nb.cells[1].source = nb.cells[1].source.replace("Contents", "Index")
    nbformat.write(nb, path)
    assert "01_export_things.ipynb: navigation cells differ" in series.sync_diff(tiny_series)


def test_teaches_come_from_the_notebook_and_run_times_from_series_json(tiny_series):
    make_notebook(
        tiny_series / "notebooks" / "01_export_things.ipynb",
        "01",
        "Export things",
        "Export a thing.",
        metadata={"series": {"teaches": "an override"}},
    )
    (tiny_series / "notebooks" / "series.json").write_text(
        '{"01_export_things.ipynb": {"run_time_s": 125.0}}'
    )
    series.sync(tiny_series)
    entries = series.read_series(tiny_series / "notebooks")
    assert [e.teaches for e in entries] == [
        "Open a `thing` and look inside it.",
        "an override",
        "Run | the thing.",
    ]
    assert re.search(
        r"\| an override \| \d+ / \d+ min \| 2\.1 min \|", (tiny_series / "README.md").read_text()
    )
    assert series.format_run_time(None) == "not measured yet"
    assert series.format_run_time(0.2) == "1 s" and series.format_run_time(42.4) == "42 s"


def test_bad_titles_are_reported_clearly(tiny_series):
    path = make_notebook(
        tiny_series / "notebooks" / "01_export_things.ipynb", "07", "Export things", "x"
    )
    result = cli(tiny_series, "diff")
    assert result.returncode == 2
    assert "01_export_things.ipynb: title says notebook 07, the file name says 01" in result.stderr
    nb = nbformat.read(path, as_version=4)
    nb.cells[0].source = "Export things without a title line"
    nbformat.write(nb, path)
    with pytest.raises(series.SeriesError, match="must start with a title line '# NN · Title'"):
        series.read_series(tiny_series / "notebooks")


@pytest.mark.parametrize("drop", [series.TABLE_END, "<!-- series-table:start -->"])
def test_readme_without_both_markers_is_an_error(tiny_series, drop):
    readme = tiny_series / "README.md"
    readme.write_text(README.replace(drop, ""))
    with pytest.raises(series.SeriesError, match="expected the markers"):
        series.sync(tiny_series)
    assert readme.read_text() == README.replace(drop, "")


def test_reading_time_counts_prose_and_code_of_the_core_path_and_of_the_whole(tiny_series):
    path = tiny_series / "notebooks" / "01_export_things.ipynb"
    nb = nbformat.read(path, as_version=4)
    nb.cells = [
        nb.cells[0],
        new_markdown_cell("## 1. Export\n\n" + "word " * 397),  # 400 words
        # 18 lines, blanks skipped
        new_code_cell("\n".join(f"x{i} = {i}" for i in range(18)) + "\n\n\n"),
        new_markdown_cell(
            "## Summary\n\n" + "word " * 198 + "\n\n## Going deeper\n\n" + "deep " * 197
        ),
        new_code_cell("\n".join(["y = 1"] * 10)),
        new_markdown_cell("## Exercises\n\n" + "more " * 98),
    ]
    first_words = len(nb.cells[0].source.split())
    nbformat.write(nb, path)
    expected_core = (first_words + 400 + 200) / 150 + 18 / 6
    expected_whole = expected_core + 200 / 150 + 10 / 6 + 100 / 150
    counts = series.core_counts(nb)
    assert (counts["core_words"], counts["core_lines"], counts["core_long_lines"]) == (
        first_words + 600,
        18,
        0,
    )
    assert series.reading_minutes(nb) == pytest.approx((expected_core, expected_whole))
    series.sync(tiny_series)  # nav cells do not count
    entry = series.read_entry(path)
    assert entry.reading_min == pytest.approx((expected_core, expected_whole))
    row = series.format_reading(entry.reading_min)
    assert row == f"{round(expected_core)} / {round(expected_whole)} min"
    readme = (tiny_series / "README.md").read_text()
    assert f"| Export a thing. | {row} | not measured yet |" in readme
    assert (
        "150 words of prose and 6 lines of code per minute" in readme.split(series.TABLE_START)[1]
    )
    no_deeper = series.read_entry(tiny_series / "notebooks" / "00_open_things.ipynb").reading_min
    assert no_deeper[0] == no_deeper[1] > 0


def test_html_index_without_executing(tiny_series):
    make_notebook(
        tiny_series / "notebooks" / "01_export_things.ipynb",
        "01",
        "Export things",
        "Export a thing, as [notebook 00](00_open_things.ipynb) shows.",
    )
    (tiny_series / "notebooks" / "series.json").write_text(
        '{"01_export_things.ipynb": {"run_time_s": 12.3}}'
    )
    out = tiny_series / "build" / "html"
    out.mkdir(parents=True)
    (out / "stale.html").write_text("from an older build")
    notebooks_before = snapshot(tiny_series / "notebooks")
    result = cli(tiny_series, "html", "--no-execute")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "00_open_things.html",
        "01_export_things.html",
        "02_run_things.html",
        "index.html",
    ]
    assert sorted(p.name for p in (tiny_series / "build").iterdir()) == ["html"], (
        "temporary folders left behind"
    )
    index = (out / "index.html").read_text()
    assert "<title>A tiny series</title>" in index
    assert '<a href="01_export_things.html">01 · Export things</a>' in index
    assert "Open a <code>thing</code> and look inside it." in index
    assert "12 s" in index and "not measured yet" in index
    page = (out / "01_export_things.html").read_text()
    assert 'href="00_open_things.html"' in page and 'href="02_run_things.html"' in page
    assert 'href="index.html"' in page and ".ipynb" not in re.sub(
        r"<script.*?</script>", "", page, flags=re.S
    )
    assert snapshot(tiny_series / "notebooks") == notebooks_before, (
        "html must not touch the notebooks"
    )


def test_html_record_times_executes_in_fresh_kernels(tiny_series):
    """The real thing on tiny notebooks: `html --record-times` embeds outputs and records wall times."""
    make_notebook(
        tiny_series / "notebooks" / "01_export_things.ipynb",
        "01",
        "Export things",
        "Export a thing.",
        code="import time\ntime.sleep(0.5)\nprint('exported', 6 * 7)",
    )
    result = cli(tiny_series, "html", "--out", "build/site", "--record-times")
    assert result.returncode == 0, result.stderr
    page = (tiny_series / "build" / "site" / "01_export_things.html").read_text()
    assert "exported 42" in page
    entries = {e.number: e for e in series.read_series(tiny_series / "notebooks")}
    assert entries["01"].run_time_s >= 0.5 and all(
        e.run_time_s is not None for e in entries.values()
    )
    nb = nbformat.read(entries["01"].path, as_version=4)
    assert all(c.get("outputs", []) == [] for c in nb.cells), (
        "recording must leave the notebook stripped"
    )
    # run times go to series.json, not the notebooks
    recorded = series.series_meta(tiny_series / "notebooks")
    assert "series" not in nb.metadata and sorted(recorded) == sorted(
        e.path.name for e in entries.values()
    )
    assert "not measured" not in (tiny_series / "README.md").read_text()
    assert series.sync_diff(tiny_series) == ""
    # nothing to record
    assert cli(tiny_series, "html", "--no-execute", "--record-times").returncode == 2


def test_failing_notebook_keeps_the_previous_html_build(tiny_series):
    make_notebook(
        tiny_series / "notebooks" / "02_run_things.ipynb",
        "02",
        "Run things",
        "Run it.",
        code="raise ValueError('broken on purpose')",
    )
    out = tiny_series / "build" / "html"
    out.mkdir(parents=True)
    (out / "index.html").write_text("previous build")
    result = cli(tiny_series, "html")
    assert result.returncode != 0
    assert "broken on purpose" in result.stdout + result.stderr
    assert (out / "index.html").read_text() == "previous build"
    assert sorted(p.name for p in (tiny_series / "build").iterdir()) == ["html"]


def test_repository_navigation_and_readme_table_are_in_sync():
    """A sync would change nothing (so the real series is a fixed point of sync), and its nav links all resolve."""
    report = series.sync_diff(REPO_ROOT)
    if report:
        pytest.fail(report, pytrace=False)
    assert_nav_links_exist(NOTEBOOKS)
    readme = (REPO_ROOT / "README.md").read_text()
    assert readme.count(series.TABLE_START) == 1 and readme.count("| notebook |") == 1


def test_teacher_plan_fits_three_hours_and_matches_the_notebooks():
    """TEACHING.md's 3-hour plan: each core-path row is ceil(core reading minutes), the total adds up. Run times
    are a machine's figure: the plan gives them one allowance row, and `series budget` reports the recorded ones."""
    teaching = (REPO_ROOT / "TEACHING.md").read_text()
    assert "\n## A 3-hour class\n" in teaching, "TEACHING.md has no section '## A 3-hour class'"
    plan = teaching.split("\n## A 3-hour class\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| (.+?) \| (\d+) \|$", plan, re.M)
    assert rows, "no plan table under '## A 3-hour class' in TEACHING.md"
    entries = {e.number: e for e in series.read_series(NOTEBOOKS)}
    wanted = {
        f"{n} core path": math.ceil(e.reading_min[0])
        for n, e in entries.items()
        if not series.is_optional(e)
    }
    rows_now = "\n".join(f"| {block} | {minutes} |" for block, minutes in wanted.items())
    total = None
    minutes = in_class = 0
    cores = set()
    for block, value in rows:
        if block == "total":
            total = int(value)
            continue
        minutes += int(value)
        core = re.fullmatch(r"(\d\d) core path", block)
        if core:
            cores.add(core[1])
            assert core[1] in entries and int(value) == wanted.get(block), (
                f"plan says {value} min for {block}; the notebooks give these rows now:\n{rows_now}"
            )
        elif block not in ("questions and breaks", "running the core notebooks"):
            exercise = re.match(r"exercise (\d\d\.\d) in class", block)
            assert exercise, (
                f"plan row {block!r} is neither a core path, an exercise in class nor questions"
            )
            assert exercise[1] in all_exercises(), (
                f"plan names exercise {exercise[1]}, which does not exist"
            )
        if not core:
            in_class += int(value)
    assert total == minutes, f"the plan's total says {total} min, its rows add up to {minutes}"
    assert total <= 180, f"the plan takes {total} min, more than a 3-hour class"
    assert in_class >= 45, (
        f"the plan leaves {in_class} min for exercises and questions, fewer than 45"
    )
    missing = {block[:2] for block in wanted} - cores
    assert not missing, f"the plan has no row for the core path of {sorted(missing)}:\n{rows_now}"


# The core-path budget a class must get through (optional notebooks aside), at the live pace (150 words, 6 code
# lines a minute): 120 minutes leaves an hour of a 3-hour class for exercises, questions and breaks, which
# TEACHING.md's plan holds.
MAX_CORE_MINUTES = 120


def test_core_paths_fit_a_three_hour_class():
    """The core paths a class must get through (optional notebooks aside) read in at most ``MAX_CORE_MINUTES``
    minutes, and hold no code line over 100 characters. Details: ``python -m helpers.series budget``."""
    minutes = 0.0
    for entry in series.read_series(NOTEBOOKS):
        counts = series.core_counts(nbformat.read(entry.path, as_version=4))
        assert counts["core_long_lines"] == 0, (
            f"{entry.path.name}: core-path code lines over 100 characters"
        )
        if not series.is_optional(entry):
            minutes += entry.reading_min[0]
    assert minutes <= MAX_CORE_MINUTES, (
        f"the core paths read in {minutes:.1f} minutes (budget: {MAX_CORE_MINUTES}):\n{series.budget()}"
    )


def test_sync_collects_the_save_cells_into_generated_modules(tiny_series):
    """d2l's build step: every #@save cell, in order, in helpers/lessons.py (torch cells in lessons_torch.py),
    each definition named after its notebook, imports hoisted, other cells left out; sync_diff() sees drift."""
    import importlib.util

    path = tiny_series / "notebooks" / "03_teach_things.ipynb"
    make_notebook(
        path, "03", "Teach things", "Teach it.", code="#@save\nimport math\n\nSCALE = math.pi"
    )
    nb = nbformat.read(path, as_version=4)
    nb.cells += [
        new_code_cell("raise SystemExit('not a #@save cell')"),
        new_code_cell("#@save\nimport torch\n\ndef scaled(x):\n    return torch.tensor(x) * SCALE"),
        new_code_cell("#@save\ndef halve(x):\n    return x / 2"),
    ]
    nbformat.write(nb, path)
    series.sync(tiny_series)
    plain = (tiny_series / "helpers" / "lessons.py").read_text()
    framework = (tiny_series / "helpers" / "lessons_torch.py").read_text()
    assert "generated: don't edit it directly" in plain.splitlines()[0]
    assert (
        plain.count("# Defined in notebooks/03_teach_things.ipynb") == 2
        and "SystemExit" not in plain
    )
    assert "import torch" not in plain and "from helpers.lessons import SCALE" in framework
    spec = importlib.util.spec_from_file_location(
        "tiny_lessons", tiny_series / "helpers" / "lessons.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.halve(module.SCALE) == pytest.approx(1.5707963)
    assert series.sync_diff(tiny_series) == ""
    nb.cells[-1].source = "#@save\ndef halve(x):\n    return x * 0.5"
    nbformat.write(nb, path)
    assert "helpers/lessons.py: differs from the notebooks' #@save cells" in series.sync_diff(
        tiny_series
    )
    nb.cells[-1].source = "#@save\ndef halve(x) return x"
    nbformat.write(nb, path)
    with pytest.raises(
        SyntaxError, match="03_teach_things.ipynb #@save cell 3: a #@save cell must be plain"
    ):
        series.sync(tiny_series)


# An optional notebook is a lesson of its own beside the class: its core path (the cells before `## Going
# deeper`) reads in at most this many minutes at the live pace, like a core notebook's; the rest goes deeper.
MAX_OPTIONAL_CORE_MIN = 30


def test_optional_notebooks_core_paths_fit_half_an_hour():
    """Every optional notebook's core path reads in at most ``MAX_OPTIONAL_CORE_MIN`` minutes
    (``series.reading_minutes``, the figure ``python -m helpers.series budget`` prints)."""
    optional = [e for e in series.read_series(NOTEBOOKS) if series.is_optional(e)]
    assert optional, (
        "no optional notebook found (their teaches line starts '**Optional notebook**')"
    )
    over = {
        e.path.name: round(series.reading_minutes(nbformat.read(e.path, as_version=4))[0], 1)
        for e in optional
    }
    over = {name: minutes for name, minutes in over.items() if minutes > MAX_OPTIONAL_CORE_MIN}
    assert not over, (
        f"core paths over {MAX_OPTIONAL_CORE_MIN} min: {over}; move cells below `## Going deeper`:\n"
        f"{series.budget()}"
    )
