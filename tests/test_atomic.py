"""helpers.data.atomic: a file or folder is complete or absent, whatever happens and whoever else builds it.

Crashes are real: a child process is killed (``os._exit``) at each step of a folder's swap; then the next
call must find a complete folder (old or new) and nothing else beside it. Races are real too: two processes
build the same folder at the same moment.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from helpers.data.atomic import atomic_dir, atomic_path, cached_dir
from helpers.data.paths import REPO_ROOT


def run_child(code: str, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code), *map(str, args)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def version_of(folder: Path) -> str:
    """'old' or 'new' when the folder holds that complete version (two files that must agree)."""
    a, b = (folder / "a.txt").read_text(), (folder / "b.txt").read_text()
    assert a == b, f"{folder} mixes versions: {a} / {b}"
    return a


def write_version(folder: Path, version: str) -> None:
    (folder / "a.txt").write_text(version)
    (folder / "b.txt").write_text(version)


# The child counts the renames and deletions of the swap and dies (no clean-up, no finally) at step `crash_at`.
CRASHING_BUILD = """
    import os, shutil, sys
    from pathlib import Path
    from helpers.data import atomic

    dest, crash_at = Path(sys.argv[1]), int(sys.argv[2])
    steps = 0
    def dying(fn):
        def step(*args, **kwargs):
            global steps
            if steps == crash_at:
                os._exit(17)
            steps += 1
            return fn(*args, **kwargs)
        return step
    atomic.os.rename, atomic.shutil.rmtree = dying(os.rename), dying(shutil.rmtree)
    with atomic.atomic_dir(dest) as tmp:
        (tmp / "a.txt").write_text("new")
        if crash_at == -1:
            os._exit(17)  # killed while building
        (tmp / "b.txt").write_text("new")
    print("finished after", steps, "steps")
"""


@pytest.mark.parametrize("crash_at", [-1, 0, 1, 2, 3])
def test_a_crash_at_any_step_leaves_a_complete_folder_and_the_next_call_tidies_up(
    tmp_path, crash_at
):
    dest = tmp_path / "model"
    dest.mkdir()
    write_version(dest, "old")
    child = run_child(CRASHING_BUILD, dest, crash_at)
    out, err = child.communicate(timeout=300)
    assert child.returncode == 17, out + err  # it really died mid-way
    if dest.exists():  # right after the crash: the old or the new version, complete, or nothing yet
        assert version_of(dest) in {"old", "new"}

    # The next caller needs the folder: it finishes or discards what the dead process left, then proceeds.
    built = []
    result = cached_dir(dest, lambda tmp: built.append(write_version(tmp, "rebuilt")))
    assert version_of(result) in {"old", "new", "rebuilt"}
    # steps: 0 rename .tmp -> .new, 1 rename dest -> .old, 2 rename .new -> dest, 3 delete .old
    expected = {-1: "old", 0: "old", 1: "new", 2: "new", 3: "new"}[crash_at]
    assert version_of(result) == expected and built == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"], "leftovers beside the folder"


def test_atomic_dir_cleans_up_after_an_exception_and_replaces_whole(tmp_path):
    dest = tmp_path / "html"
    with pytest.raises(RuntimeError):
        with atomic_dir(dest) as tmp:
            write_version(tmp, "half")
            raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []
    with atomic_dir(dest) as tmp:
        write_version(tmp, "old")
        (tmp / "stale.txt").write_text("only in the old copy")
    with atomic_dir(dest) as tmp:
        write_version(tmp, "new")
    assert version_of(dest) == "new" and not (dest / "stale.txt").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["html"]


def test_leftovers_of_the_first_version_are_cleaned(tmp_path):
    dest = tmp_path / "venv"
    (tmp_path / ".venv.old-12345").mkdir()  # a crash between two renames may leave this too
    cached_dir(dest, lambda tmp: write_version(tmp, "new"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["venv"]


def test_cached_dir_refuses_a_build_that_is_not_ready(tmp_path):
    dest = tmp_path / "env"
    ready = lambda folder: (folder / "bin" / "python").exists()  # noqa: E731
    with pytest.raises(RuntimeError, match="finished without"):
        cached_dir(dest, lambda tmp: write_version(tmp, "no python"), ready)
    assert list(tmp_path.iterdir()) == []


CONCURRENT = """
    import sys, time
    from pathlib import Path
    from helpers.data.atomic import atomic_dir, cached_dir

    dest, log, mode = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
    start = float(sys.argv[4])
    time.sleep(max(0.0, start - time.time()))  # both processes start building at the same moment
    def build(tmp):
        with open(log, "a") as f:
            f.write("built\\n")
        (tmp / "a.txt").write_text("v")
        time.sleep(1.0)
        (tmp / "b.txt").write_text("v")
    if mode == "cached":
        print(cached_dir(dest, build))
    else:
        with atomic_dir(dest) as tmp:
            build(tmp)
        print(dest)
"""


@pytest.mark.parametrize("mode", ["cached", "replace"])
def test_two_processes_building_the_same_folder_both_succeed(tmp_path, mode):
    import time

    dest, log = tmp_path / "build" / "model", tmp_path / "log.txt"
    start = time.time() + 2.0
    children = [run_child(CONCURRENT, dest, log, mode, start) for _ in range(2)]
    results = [child.communicate(timeout=300) for child in children]
    for child, (out, err) in zip(children, results):
        assert child.returncode == 0, err
        assert out.strip() == str(dest)
    assert version_of(dest) == "v"
    builds = log.read_text().count("built")
    assert builds == (1 if mode == "cached" else 2), (
        "cached: one builds, the other waits and reuses it"
    )
    assert sorted(p.name for p in dest.parent.iterdir()) == ["model"], "leftovers beside the folder"


def test_atomic_path_leaves_nothing_on_failure_and_usual_permissions(tmp_path):
    dest = tmp_path / "out.bin"
    with pytest.raises(RuntimeError):
        with atomic_path(dest) as tmp:
            tmp.write_bytes(b"half")
            raise RuntimeError("interrupted")
    assert list(tmp_path.iterdir()) == []
    with atomic_path(dest) as tmp:
        tmp.write_bytes(b"whole")
    assert dest.read_bytes() == b"whole" and list(tmp_path.iterdir()) == [dest]
    assert dest.stat().st_mode & 0o044 == 0o044, "readable by others like any file (umask 022)"
