"""Checks for the exercises of notebook 07 (a chat model through onnxruntime-genai).

The truth comes from the model's files or from the checker's own greedy runs of the cached SmolLM2 int4 model
(``helpers.llm.cached_int4_model()``: the one notebook 07 built, or built from the wheel if there is none). The
references are computed another way than the worked solutions: 07.1 reads the cache's shape from the ONNX graph
and searches for the length, 07.2 runs a fresh generator per question, 07.3 decodes the whole text at every step.
A check changes nothing in the learner's kernel (no output redirection, no logging levels, no global state
beyond the loaded model, kept for the next check).
"""
from __future__ import annotations

import functools
import json
from pathlib import Path

from helpers.checks._common import require_callable
from helpers.checks._common import Wrong


@functools.lru_cache(maxsize=1)
def smollm():
    """(folder, og.Model, og.Tokenizer) of the cached SmolLM2-135M-Instruct int4 genai model, 2 threads."""
    import onnxruntime_genai as og

    from helpers import llm

    # Only "reusing cached ..." is left out: a first build still shows its progress and what it built.
    folder = llm.cached_int4_model(log=lambda message: None if message.startswith("reusing") else print(message))
    config = og.Config(str(folder))
    config.overlay(json.dumps({"model": {"decoder": {"session_options": {
        "intra_op_num_threads": 2, "inter_op_num_threads": 1, "session.intra_op.allow_spinning": "0"}}}}))
    model = og.Model(config)
    return folder, model, og.Tokenizer(model)


def prompt_ids(tokenizer, messages, add_generation_prompt=True):
    return tokenizer.encode(tokenizer.apply_chat_template(json.dumps(messages),
                                                          add_generation_prompt=add_generation_prompt))


def _call(fn, what, *args):
    try:
        return fn(*args)
    except Exception as err:  # whatever the learner's function raises is reported, not hidden
        raise Wrong(f"expected your function to run on {what}; it raised {type(err).__name__}: {err}") from err


def _ids(got, what) -> list[int]:
    try:
        return [int(t) for t in got]
    except (TypeError, ValueError) as err:
        raise Wrong(f"expected a list of token ids (ints) on {what}, got {type(got).__name__}") from err


def greedy(model, ids, max_new_tokens, stop=None, tokenizer=None):
    """The checker's greedy run: a fresh generator, at most ``max_new_tokens``, cut after ``stop`` appears in the
    decoded text (the whole text decoded again at every step)."""
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


# --------------------------------------------------------------------------------------------------
# 07.1  The largest max_length that fits a memory budget
# --------------------------------------------------------------------------------------------------
def cache_facts(folder) -> dict:
    """Bytes per token of the KV cache, read from the decoder graph: every past key/value input's per-token shape
    and element size (genai_config.json only names the inputs), and the context length."""
    import re

    import numpy as np
    import onnx

    config = json.loads((Path(folder) / "genai_config.json").read_text())
    decoder = config["model"]["decoder"]
    graph = onnx.load(Path(folder) / decoder["filename"], load_external_data=False).graph
    patterns = [re.escape(decoder["inputs"][key]).replace("%d", r"\d+") for key in ("past_key_names", "past_value_names")]
    per_token, tensor, itemsize = 0, None, 0
    for value in graph.input:
        if any(re.fullmatch(p, value.name) for p in patterns):
            tensor = value.type.tensor_type
            dims = [d.dim_value for d in tensor.shape.dim]  # [batch, kv heads, past length, head size]
            kv_heads = dims[1] or decoder["num_key_value_heads"]  # a symbolic dimension has no value: the config's
            head_size = dims[3] or decoder["head_size"]
            itemsize = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(tensor.elem_type)).itemsize
            per_token += kv_heads * head_size * itemsize
    if not per_token:
        raise RuntimeError(f"{folder}: no cache input named like {patterns}")  # the checker's own folders have them
    return {"per_token": per_token, "context_length": config["model"]["context_length"],
            "layers": decoder["num_hidden_layers"], "heads": decoder["num_attention_heads"],
            "kv_heads": decoder["num_key_value_heads"], "itemsize": itemsize,
            "dtype": onnx.TensorProto.DataType.Name(tensor.elem_type)}


def fits(facts: dict, budget: int) -> int:
    """The largest n <= context_length with n * per_token <= budget, found by bisection."""
    low, high = 0, facts["context_length"]
    while low < high:
        mid = (low + high + 1) // 2
        if mid * facts["per_token"] <= budget:
            low = mid
        else:
            high = mid - 1
    return low


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


def _budget_hint(got: int, facts: dict, budget: int) -> str:
    per_token, context = facts["per_token"], facts["context_length"]
    mistakes = {  # what a wrong per-token size or a forgotten cap would give
        "you counted keys or values, not both (the factor 2)": per_token // 2,
        "you used num_attention_heads; the cache holds num_key_value_heads heads (grouped-query attention)":
            per_token // facts["kv_heads"] * facts["heads"],
        f"you assumed 4 bytes per number; this cache is {facts['dtype']} ({facts['itemsize']} bytes): read the element "
        "type of the graph's past-key input": per_token // facts["itemsize"] * 4,
        "you used the size of one layer; every layer has its own cache": per_token // facts["layers"],
    }
    for hint, size in mistakes.items():
        if size != per_token and got in (budget // size, min(budget // size, context)):
            return f" ({hint})"
    if got == budget // per_token and got > context:
        return f" (the model cannot use more than its context_length, {context}: cap the answer there)"
    if got == fits(facts, budget) + 1:
        return " (one token too many: the cache for that length is larger than the budget; round down)"
    if got == budget // 2**20 or got == budget // 10**6:
        return " (you returned a size; return a number of tokens)"
    return ""


def check_largest_max_length(answer):
    import tempfile

    from onnx import TensorProto

    require_callable(answer, "largest_max_length(model_dir, budget_bytes)")
    real, _, _ = smollm()
    with tempfile.TemporaryDirectory(prefix="ex07-kv-") as tmp:
        folders = {  # folder, budgets (bytes)
            f"the notebook's model ({real.name})": (real, [50_000_000, 2**30]),
            "a Phi-3-mini-like model (32 layers, 32 KV heads of 96, float16 cache, other input names, context 4096)":
                (write_fake_genai_folder(Path(tmp) / "phi3-like", layers=32, heads=32, kv_heads=32, head_size=96,
                                         elem_type=TensorProto.FLOAT16, context_length=4096,
                                         key_pattern="past_key.%d", value_pattern="past_value.%d"),
                 [10**9, 3 * 2**30]),
            "a grouped-query model (28 layers, 28 heads sharing 4 KV heads of 128, float32 cache, context 32768)":
                (write_fake_genai_folder(Path(tmp) / "gqa-like", layers=28, heads=28, kv_heads=4, head_size=128,
                                         elem_type=TensorProto.FLOAT, context_length=32768),
                 [10**9, 123_456_789, 6 * 10**9]),
        }
        details = []
        for what, (folder, budgets) in folders.items():
            facts = cache_facts(folder)
            for budget in budgets:
                got = _call(answer, f"{what} with a budget of {budget:,} bytes", folder, budget)
                if isinstance(got, bool) or not hasattr(got, "__index__") and not (
                        isinstance(got, float) and got.is_integer()):
                    raise Wrong(f"expected a whole number of tokens (int), got {type(got).__name__} {got!r}")
                got, want = int(got), fits(facts, budget)
                if got != want:
                    raise Wrong(f"for {what} and a budget of {budget:,} bytes: expected max_length {want:,}, got "
                                f"{got:,}" + _budget_hint(got, facts, budget))
            details.append(f"{what}: {facts['per_token'] / 1024:.0f} KiB per token, so "
                           + ", ".join(f"{b / 1e9:.2f} GB -> {fits(facts, b):,} tokens" for b in budgets))
    return details + ["the KV cache, not the weights, is what a long max_length costs"]


# --------------------------------------------------------------------------------------------------
# 07.2  One shared prefix, many questions: rewind_to instead of a new generator
# --------------------------------------------------------------------------------------------------
LONG_SYSTEM = {"role": "system", "content": (
    "You are a helpful assistant for travellers. Answer in one or two short sentences. Be precise about places, "
    "dates and names. If you do not know, say so. Never invent prices.")}
QUESTIONS = ("What is the capital of France?", "Which river flows through Paris?", "What is the Louvre?")
MAX_NEW = 24


def check_answer_each(answer):
    import onnxruntime_genai as og

    require_callable(answer, "answer_each(generator, tokenizer, prefix_len, questions_ids, max_new_tokens)")
    _, model, tokenizer = smollm()
    prefix = [int(t) for t in prompt_ids(tokenizer, [LONG_SYSTEM], add_generation_prompt=False)]
    full = [[int(t) for t in prompt_ids(tokenizer, [LONG_SYSTEM, {"role": "user", "content": q}])] for q in QUESTIONS]
    assert all(ids[:len(prefix)] == prefix for ids in full), "the chat template no longer starts with the system block"
    questions_ids = [ids[len(prefix):] for ids in full]
    wants = [greedy(model, ids, MAX_NEW) for ids in full]  # a fresh generator per question: no shared cache

    params = og.GeneratorParams(model)
    params.set_search_options(max_length=1024, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(prefix)
    what = f"{len(QUESTIONS)} questions after a {len(prefix)}-token system prompt, max_new_tokens={MAX_NEW}"
    import numpy as np

    got = _call(answer, what, generator, tokenizer, len(prefix),
                [np.array(q, dtype=np.int32) for q in questions_ids], MAX_NEW)
    if not isinstance(got, (list, tuple)) or len(got) != len(QUESTIONS):
        raise Wrong(f"expected a list of {len(QUESTIONS)} answers (one list of token ids per question), got "
                    f"{type(got).__name__}" + (f" of length {len(got)}" if hasattr(got, '__len__') else ""))
    got = [_ids(g, f"answer {i + 1}") for i, g in enumerate(got)]
    held = [int(t) for t in generator.get_sequence(0)]
    if held[:len(prefix)] != prefix or len(held) <= len(prefix):
        raise Wrong("expected your function to use the generator it was given (it holds the prefix's KV cache); it "
                    "still holds only the prefix: rewind_to(prefix_len), then append_tokens the question's tokens")
    just_last = len(prefix) + len(questions_ids[-1]) + len(got[-1])  # what it holds after a rewind per question
    for i, (g, want) in enumerate(zip(got, wants)):
        label = f"question {i + 1} ({QUESTIONS[i]!r})"
        if g == want:
            continue
        if g == want[:-1] and want[-1] in tokenizer.eos_token_ids:
            raise Wrong(f"on {label}: expected {len(want)} tokens ending with the end-of-turn token, got all but "
                        "that last one: keep the end-of-turn token, it is part of the answer")
        if len(g) > MAX_NEW:
            raise Wrong(f"on {label}: expected at most max_new_tokens={MAX_NEW} new tokens, got {len(g)}")
        if len(held) >= 2 * len(prefix) and held[len(prefix):2 * len(prefix)] == prefix:
            raise Wrong(f"on {label}: the generator holds the prefix twice: it is already in the cache, append only "
                        "the question's tokens")
        if i > 0 and len(held) > just_last + 1:
            raise Wrong(f"on {label}: expected the answer the question gets alone, got another one: the generator "
                        f"holds {len(held)} tokens, more than the prefix, the last question and its answer "
                        f"({just_last}): the earlier questions and answers were still there. rewind_to(prefix_len) "
                        "before each question")
        if g == want[:len(g)]:
            raise Wrong(f"on {label}: expected {len(want)} tokens, got the first {len(g)} of them: stop at the "
                        f"end-of-turn token (is_done) or after max_new_tokens, not before")
        first = next((k for k, (a, b) in enumerate(zip(g, want)) if a != b), min(len(g), len(want)))
        raise Wrong(f"on {label}: expected the greedy tokens {want[:first + 3]}..., got {g[:first + 3]}...: they "
                    f"differ at new token {first}. After rewind_to(prefix_len) the generator must hold exactly the "
                    "prefix; then append_tokens the question and decode greedily")
    return [f"{q!r}: {tokenizer.decode(np.array(g, dtype=np.int32)).strip()[:50]!r}" for q, g in zip(QUESTIONS, got)] + [
        f"the {len(prefix)}-token prefix went through the model once, not {len(QUESTIONS)} times"]


# --------------------------------------------------------------------------------------------------
# 07.3  Greedy generation with a token budget and a stop text
# --------------------------------------------------------------------------------------------------
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}


def stop_inside_a_token(model, tokenizer, ids, max_new_tokens=60):
    """A stop text that spans two tokens and ends inside the second: a test on the last token's text, or on
    whether the text ends with the stop, misses it. Built from the checker's own greedy answer."""
    out = greedy(model, ids, max_new_tokens)
    for i in range(1, len(out)):
        before, after = tokenizer.decode(out[:i]), tokenizer.decode(out[:i + 1])
        piece = after[len(before):]
        if after.startswith(before) and len(piece.strip()) >= 3 and len(before.strip()) >= 3:
            stop = before[-2:] + piece[:2]
            if stop not in before and stop in after and not after.endswith(stop) and stop not in piece:
                return stop
    raise RuntimeError("no token long enough to end a stop text inside it")  # the model changed: fix the checker


def check_generate(answer):
    require_callable(answer, "generate(model, tokenizer, prompt_ids, max_new_tokens, stop=None)")
    _, model, tokenizer = smollm()
    eos = {int(t) for t in tokenizer.eos_token_ids}
    tips = prompt_ids(tokenizer, [SYSTEM, {"role": "user", "content": "Give three tips for staying healthy."}])
    france = prompt_ids(tokenizer, [SYSTEM, {"role": "user", "content": "What is the capital of France?"}])
    cases = [  # (prompt, what, max_new_tokens, stop)
        (france, "the France question", 60, None),                           # ends with the end-of-turn token
        (tips, "the tips question", 12, None),                               # ends at the token budget
        (tips, "the tips question", 100, "\n\n2."),                          # a stop spanning several tokens
        (france, "the France question", 60, stop_inside_a_token(model, tokenizer, france)),  # ends inside a token
    ]
    details = []
    for ids, question, max_new_tokens, stop in cases:
        what = f"{question} with max_new_tokens={max_new_tokens}, stop={stop!r}"
        try:
            got = answer(model, tokenizer, ids, max_new_tokens, stop)
        except Exception as err:  # whatever the learner's function raises is reported, not hidden
            hint = (" (max_length counts prompt plus answer: len(prompt_ids) + max_new_tokens)"
                    if "max length" in str(err).lower() or "max_length" in str(err).lower() else "")
            raise Wrong(f"expected your function to run on {what}; it raised {type(err).__name__}: {err}{hint}") from err
        got = _ids(got, what)
        want = greedy(model, ids, max_new_tokens, stop, tokenizer)
        ended = ("the end-of-turn token" if want[-1] in eos else f"the stop text {stop!r}"
                 if stop is not None and stop in tokenizer.decode(want) else f"{max_new_tokens} new tokens")
        if got == want:
            details.append(f"{what}: {len(want)} tokens, ended by {ended}")
            continue
        if len(got) >= len(ids) and got[:len(ids)] == [int(t) for t in ids]:
            raise Wrong(f"on {what}: expected only the new tokens, got the prompt ({len(ids)} tokens) in front")
        if got == want[:-1] and want[-1] in eos:
            raise Wrong(f"on {what}: expected {len(want)} tokens ending with the end-of-turn token, got all but that "
                        "last one: keep the end-of-turn token, it is one of the new tokens")
        if got == want[:len(got)]:
            if ended == f"{max_new_tokens} new tokens":
                hint = (" (max_length counts prompt plus answer: len(prompt_ids) + max_new_tokens)")
            elif ended.startswith("the stop text"):
                hint = " (keep the token that completes the stop text, then stop)"
            else:
                hint = ""
            raise Wrong(f"on {what}: expected {len(want)} tokens, got the first {len(got)} of them: you stopped too "
                        f"early{hint}")
        if got[:len(want)] == want:
            if ended.startswith("the stop text"):
                hint = (f" (the answer ended by {ended}: stop as soon as the text decoded so far contains it, even when "
                        "it spans several tokens or ends inside one; a test on the last token's text, or endswith, "
                        "misses those)")
            elif len(got) > max_new_tokens:
                hint = f" (at most max_new_tokens={max_new_tokens} new tokens)"
            else:
                hint = ""
            raise Wrong(f"on {what}: expected {len(want)} tokens, got {len(got)}: you went on after the end{hint}")
        first = next(k for k, (a, b) in enumerate(zip(got, want)) if a != b)
        raise Wrong(f"on {what}: expected the greedy tokens {want[:first + 3]}..., got {got[:first + 3]}...: they "
                    f"differ at new token {first} (greedy: do_sample=False; feed the prompt with append_tokens)")
    return details + ["greedy decoding is deterministic, so a generation can be tested token for token"]


# exercise id -> checker (helpers.exercises.check looks answers up here)
CHECKS = {
    "07.1": check_largest_max_length,
    "07.2": check_answer_each,
    "07.3": check_generate,
}
