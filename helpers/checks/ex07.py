"""Checks for the exercises of notebook 07 (a chat model through onnxruntime-genai).

The truth always comes from the model's own files or from a greedy run of the cached SmolLM2 int4 model
(``helpers.llm.genai_model("offline-wheel", "int4")``; built once by notebook 07, reused here).
"""
from __future__ import annotations

import copy
import functools
import json
from pathlib import Path

from helpers.checks._common import require_callable
from helpers.exercises import Wrong


@functools.lru_cache(maxsize=1)
def smollm():
    """(folder, og.Model, og.Tokenizer) of the cached SmolLM2-135M-Instruct int4 genai model, 2 threads."""
    import contextlib
    import io

    import onnxruntime_genai as og

    from helpers import llm

    with contextlib.redirect_stdout(io.StringIO()):  # "reusing cached ..." is not feedback for the learner
        folder = llm.genai_model("offline-wheel", "int4")
    config = og.Config(str(folder))
    config.overlay(json.dumps({"model": {"decoder": {"session_options": {
        "intra_op_num_threads": 2, "inter_op_num_threads": 1, "session.intra_op.allow_spinning": "0"}}}}))
    model = og.Model(config)
    return folder, model, og.Tokenizer(model)


def prompt_ids(tokenizer, messages):
    return tokenizer.encode(tokenizer.apply_chat_template(json.dumps(messages), add_generation_prompt=True))


def _call(fn, what, *args):
    try:
        return fn(*args)
    except Exception as err:  # whatever the learner's function raises is reported, not hidden
        raise Wrong(f"expected your function to run on {what}; it raised {type(err).__name__}: {err}") from err


# --------------------------------------------------------------------------------------------------
# 07.1  KV-cache size from the model's files
# --------------------------------------------------------------------------------------------------
def kv_facts(folder) -> dict:
    """What the KV-cache size depends on, read from ``folder/genai_config.json`` and the decoder graph."""
    import numpy as np
    import onnx

    config = json.loads((Path(folder) / "genai_config.json").read_text())
    decoder = config["model"]["decoder"]
    graph = onnx.load(Path(folder) / decoder["filename"], load_external_data=False).graph
    past_key = decoder["inputs"]["past_key_names"] % 0
    elem_type = next(i for i in graph.input if i.name == past_key).type.tensor_type.elem_type
    return {"layers": decoder["num_hidden_layers"], "kv_heads": decoder["num_key_value_heads"],
            "heads": decoder["num_attention_heads"], "head_size": decoder["head_size"],
            "itemsize": np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)).itemsize,
            "dtype": onnx.TensorProto.DataType.Name(elem_type), "context_length": config["model"]["context_length"]}


def kv_bytes(facts: dict, max_length: int) -> int:
    return 2 * facts["layers"] * facts["kv_heads"] * facts["head_size"] * facts["itemsize"] * max_length


def write_fake_genai_folder(folder, *, layers, heads, kv_heads, head_size, elem_type, context_length,
                            key_pattern="past_key_values.%d.key", value_pattern="past_key_values.%d.value") -> Path:
    """A genai-style folder (genai_config.json + a weightless model.onnx declaring the cache inputs).

    Enough to compute a KV-cache size from; not a runnable model.
    """
    import onnx
    from onnx import TensorProto, helper

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    present = ("present.%d.key", "present.%d.value")
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch_size", "sequence_length"])]
    outputs, nodes = [], []
    for layer in range(layers):
        for past, out in zip((key_pattern, value_pattern), present):
            shape = ["batch_size", kv_heads, "past_sequence_length", head_size]
            inputs.append(helper.make_tensor_value_info(past % layer, elem_type, shape))
            outputs.append(helper.make_tensor_value_info(out % layer, elem_type, shape))
            nodes.append(helper.make_node("Identity", [past % layer], [out % layer]))
    graph = helper.make_graph(nodes, "kv_cache_interface", inputs, outputs)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)]), folder / "model.onnx")
    config = {"model": {"type": "llama", "context_length": context_length, "decoder": {
        "filename": "model.onnx", "head_size": head_size, "hidden_size": heads * head_size,
        "num_attention_heads": heads, "num_hidden_layers": layers, "num_key_value_heads": kv_heads,
        "inputs": {"input_ids": "input_ids", "past_key_names": key_pattern, "past_value_names": value_pattern},
        "outputs": {"present_key_names": present[0], "present_value_names": present[1]}}},
        "search": {"max_length": context_length, "past_present_share_buffer": True}}
    (folder / "genai_config.json").write_text(json.dumps(config, indent=1))
    return folder


def _kv_hint(got: float, facts: dict, max_length: int) -> str:
    right = kv_bytes(facts, max_length)
    candidates = {
        "you counted keys or values, not both (the factor 2)": right / 2,
        "you used num_attention_heads; the cache holds num_key_value_heads heads (grouped-query attention)":
            right / facts["kv_heads"] * facts["heads"],
        f"you assumed 4 bytes per number; this cache is {facts['dtype']} ({facts['itemsize']} bytes): read the "
        "element type of the graph's past-key input": right / facts["itemsize"] * 4,
        "you used context_length; the cache is allocated for max_length": right / max_length * facts["context_length"],
        "you returned MB (1e6 bytes); return bytes": right / 1e6,
        "you returned MiB; return bytes": right / 2**20,
        "you forgot to multiply by max_length": right / max_length,
    }
    for hint, value in candidates.items():
        if value != right and abs(got - value) <= 0.5:
            return f" ({hint})"
    return ""


def check_kv_cache_bytes(answer):
    import tempfile

    from onnx import TensorProto

    require_callable(answer, "kv_cache_bytes(model_dir, max_length)")
    real, _, _ = smollm()
    with tempfile.TemporaryDirectory(prefix="ex07-kv-") as tmp:
        folders = {
            f"the notebook's model ({real.name})": real,
            "a Phi-3-mini-like model (32 layers, 32 KV heads of 96, float16 cache, other tensor names)":
                write_fake_genai_folder(Path(tmp) / "phi3-like", layers=32, heads=32, kv_heads=32, head_size=96,
                                        elem_type=TensorProto.FLOAT16, context_length=4096,
                                        key_pattern="past_key.%d", value_pattern="past_value.%d"),
            "a grouped-query model (28 layers, 28 heads sharing 4 KV heads of 128, float32 cache)":
                write_fake_genai_folder(Path(tmp) / "gqa-like", layers=28, heads=28, kv_heads=4, head_size=128,
                                        elem_type=TensorProto.FLOAT, context_length=32768),
        }
        details = []
        for what, folder in folders.items():
            facts = kv_facts(folder)
            for max_length in (256, 1000, facts["context_length"]):
                try:
                    got = _call(answer, f"{what} with max_length={max_length}", folder, max_length)
                except Wrong as wrong:
                    names = json.loads((folder / "genai_config.json").read_text())["model"]["decoder"]["inputs"]
                    raise Wrong(f"{wrong} (this folder names its cache inputs {names['past_key_names']!r}: read the "
                                "pattern from past_key_names in genai_config.json, and the filename from "
                                "decoder.filename)") from wrong
                if isinstance(got, bool) or not isinstance(got, (int, float)) and not hasattr(got, "__index__"):
                    raise Wrong(f"expected a number of bytes (int), got {type(got).__name__} {got!r}")
                want = kv_bytes(facts, max_length)
                if abs(float(got) - want) > 0.5:
                    raise Wrong(f"for {what}, max_length={max_length}: expected {want:,} bytes, got {got:,}"
                                + _kv_hint(float(got), facts, max_length))
            details.append(f"{what}: {kv_bytes(facts, 1) / 1024:.0f} KiB per token; "
                           f"{kv_bytes(facts, 256) / 1e6:.1f} MB at max_length 256, "
                           f"{kv_bytes(facts, facts['context_length']) / 1e9:.2f} GB at the full context "
                           f"({facts['context_length']})")
    return details + ["so: set max_length to what the conversation needs, prompt plus answer"]


# --------------------------------------------------------------------------------------------------
# 07.2  Trimming a chat history to fit max_length
# --------------------------------------------------------------------------------------------------
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
LONG_HISTORY = [SYSTEM] + [message for user, assistant in [
    ("What is the capital of France?", "The capital of France is Paris."),
    ("What is a famous museum in that city?",
     "The Louvre is the most famous museum in Paris. It holds thousands of works of art, from ancient "
     "Egyptian statues to Italian paintings, and it is the most visited museum in the world."),
    ("Which painting is the most famous there?", "The Mona Lisa by Leonardo da Vinci."),
    ("How old is it?",
     "Leonardo da Vinci painted the Mona Lisa in the early sixteenth century, so it is more than five "
     "hundred years old."),
    ("Thanks! Any tip for visiting?", "Go early in the morning and buy your ticket online."),
] for message in ({"role": "user", "content": user}, {"role": "assistant", "content": assistant})] + [
    {"role": "user", "content": "And what should I see after the Mona Lisa?"}]


def fitted_history(tokenizer, history, max_length, answer_budget):
    """The system message plus the longest suffix of whole exchanges that fits; None if nothing fits."""
    for start in range(1, len(history), 2):   # history[start] is a user message
        kept = [history[0]] + history[start:]
        if len(prompt_ids(tokenizer, kept)) + answer_budget <= max_length:
            return kept
    return None


def check_fit_history(answer):
    require_callable(answer, "fit_history(history, tokenizer, max_length, answer_budget)")
    _, _, tokenizer = smollm()
    history = LONG_HISTORY
    full = len(prompt_ids(tokenizer, history))
    minimal = len(prompt_ids(tokenizer, [history[0], history[-1]]))
    budget = 48
    cases = sorted({full + budget, full + budget - 1, (full + minimal) // 2 + budget, minimal + budget + 12,
                    minimal + budget})
    details = []
    for max_length in cases:
        given = copy.deepcopy(history)
        what = f"a {len(history)}-message history ({full} prompt tokens), max_length={max_length}, " \
               f"answer_budget={budget}"
        got = _call(answer, what, given, tokenizer, max_length, budget)
        if given != history:
            raise Wrong(f"expected the history passed in to stay as it was (return a new list); on {what} your "
                        f"function changed it to {len(given)} messages")
        if not isinstance(got, list) or not all(isinstance(m, dict) for m in got):
            raise Wrong(f"expected a list of message dicts, got {type(got).__name__}")
        want = fitted_history(tokenizer, history, max_length, budget)
        if not got or got[0] != history[0]:
            raise Wrong(f"on {what}: expected the system message kept first, got {got[:1]}")
        if got[-1] != history[-1]:
            raise Wrong(f"on {what}: expected the latest user message kept last, got {got[-1]}")
        n = len(prompt_ids(tokenizer, got))
        if n + budget > max_length:
            raise Wrong(f"on {what}: expected prompt tokens + {budget} <= {max_length}, got a templated prompt of "
                        f"{n} tokens ({n + budget} in all); count the tokens of the chat-templated prompt "
                        "(apply_chat_template with add_generation_prompt=True, then encode), not of the messages")
        suffix_ok = got[1:] == history[len(history) - len(got) + 1:]
        if not suffix_ok:
            raise Wrong(f"on {what}: expected the most recent messages kept in order, dropping the oldest; got "
                        f"{len(got)} messages that are not the system message plus the last {len(got) - 1}")
        if got[1]["role"] != "user":
            raise Wrong(f"on {what}: expected whole exchanges dropped (a user message with its answer): after the "
                        f"system message the kept part should start with a user message, got {got[1]['role']!r}")
        if len(got) < len(want):
            raise Wrong(f"on {what}: expected {len(want)} messages ({len(prompt_ids(tokenizer, want))} prompt "
                        f"tokens fit), got {len(got)}: you dropped more than needed")
        details.append(f"max_length {max_length}: kept {len(got)} of {len(history)} messages, "
                       f"{n} prompt tokens + {budget} for the answer")
    too_small = minimal + budget - 1
    try:
        got = answer(copy.deepcopy(history), tokenizer, too_small, budget)
    except ValueError as err:
        details.append(f"max_length {too_small} (the latest message alone does not fit): ValueError: {err}")
    except Exception as err:  # any other type is reported to the learner
        raise Wrong(f"with max_length={too_small} expected a ValueError (system + latest message need {minimal} "
                    f"tokens + {budget}), got {type(err).__name__}: {err}") from err
    else:
        raise Wrong(f"with max_length={too_small} expected a ValueError (system + latest message need {minimal} "
                    f"tokens + {budget}), got a result of {len(got) if isinstance(got, list) else got!r} messages")
    return details


# --------------------------------------------------------------------------------------------------
# 07.3  Greedy generation with a token budget and a stop string
# --------------------------------------------------------------------------------------------------
STOP_CASES = (  # (question, max_new_tokens, stop)
    ("Give three tips for staying healthy.", 100, "\n\n2."),
    ("Give three tips for staying healthy.", 12, None),
    ("What is the capital of France?", 40, "\n"),
    ("Give three tips for staying healthy.", 100, "diet"),
)


def reference_ids(model, tokenizer, ids, max_new_tokens, stop):
    """The checker's own greedy run: up to max_new_tokens, cut after the token that completes ``stop``."""
    import onnxruntime_genai as og

    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(ids) + max_new_tokens, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(ids)
    out = []
    while not generator.is_done():
        generator.generate_next_token()
        out.append(int(generator.get_next_tokens()[0]))
        if stop is not None and stop in tokenizer.decode(out):
            break
    return out


def check_generate(answer):
    require_callable(answer, "generate(model, tokenizer, prompt_ids, max_new_tokens, stop=None)")
    _, model, tokenizer = smollm()
    eos = set(int(t) for t in tokenizer.eos_token_ids)
    details = []
    for question, max_new_tokens, stop in STOP_CASES:
        ids = prompt_ids(tokenizer, [SYSTEM, {"role": "user", "content": question}])
        what = f"{question!r} with max_new_tokens={max_new_tokens}, stop={stop!r}"
        got = _call(answer, what, model, tokenizer, ids, max_new_tokens, stop)
        try:
            got = [int(t) for t in got]
        except (TypeError, ValueError) as err:
            raise Wrong(f"expected a list of token ids (ints) on {what}, got {type(got).__name__}") from err
        want = reference_ids(model, tokenizer, ids, max_new_tokens, stop)
        if got == want:
            ended = ("the end-of-turn token" if want[-1] in eos else f"the stop text {stop!r}"
                     if stop is not None and stop in tokenizer.decode(want) else f"{max_new_tokens} tokens")
            details.append(f"{what}: {len(want)} tokens, ended by {ended}: {tokenizer.decode(want)[-40:]!r}")
            continue
        if len(got) >= len(ids) and [int(t) for t in ids] == got[:len(ids)]:
            raise Wrong(f"on {what}: expected only the new tokens, got the prompt ({len(ids)} tokens) in front")
        if got == want[:len(got)]:
            hint = ""
            if len(got) == max_new_tokens - len(ids):
                hint = " (max_length counts prompt plus answer: len(prompt_ids) + max_new_tokens)"
            elif stop is not None and stop in tokenizer.decode(got + want[len(got):len(got) + 1]):
                hint = " (keep the token that completes the stop text)"
            raise Wrong(f"on {what}: expected {len(want)} tokens, got the first {len(got)} of them: you stopped "
                        f"too early{hint}")
        if want == got[:len(want)]:
            hint = ""
            if stop is not None and stop in tokenizer.decode(want):
                hint = (f" (stop as soon as the text decoded so far contains {stop!r}, "
                        "even when the stop text spans several tokens)")
            elif len(got) > max_new_tokens:
                hint = " (at most max_new_tokens new tokens)"
            raise Wrong(f"on {what}: expected {len(want)} tokens, got {len(got)}: you went on after the end{hint}")
        first = next(i for i, (a, b) in enumerate(zip(got, want)) if a != b) if len(got) and len(want) else 0
        raise Wrong(f"on {what}: expected the greedy tokens {want[:first + 3]}..., got {got[:first + 3]}...: "
                    f"they differ at new token {first} (greedy: do_sample=False; feed the prompt with append_tokens)")
    return details + ["greedy decoding is deterministic, so a generation can be tested token for token"]


# exercise id -> checker (helpers.exercises.check looks answers up here)
CHECKS = {
    "07.1": check_kv_cache_bytes,
    "07.2": check_fit_history,
    "07.3": check_generate,
}
