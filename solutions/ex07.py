"""Solutions for notebook 07's exercises (onnxruntime-genai; the cached SmolLM2 int4 model)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def kv_cache_bytes(model_dir, max_length: int) -> int:
    """Bytes of the KV cache onnxruntime-genai allocates for ``max_length`` tokens (batch 1)."""
    import onnx

    config = json.loads((Path(model_dir) / "genai_config.json").read_text())
    decoder = config["model"]["decoder"]
    # The number type is not in the config: the decoder graph's first past-key input has it.
    graph = onnx.load(Path(model_dir) / decoder["filename"], load_external_data=False).graph
    past_key = decoder["inputs"]["past_key_names"] % 0
    elem_type = next(i for i in graph.input if i.name == past_key).type.tensor_type.elem_type
    itemsize = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)).itemsize
    per_token = 2 * decoder["num_hidden_layers"] * decoder["num_key_value_heads"] * decoder["head_size"] * itemsize
    return per_token * int(max_length)


def fit_history(history, tokenizer, max_length: int, answer_budget: int) -> list:
    """System message + the most recent whole exchanges + the latest user message, fitting max_length."""
    def n_tokens(messages):
        prompt = tokenizer.apply_chat_template(json.dumps(messages), add_generation_prompt=True)
        return len(tokenizer.encode(prompt))

    kept = list(history)                                   # a new list: the caller's history is untouched
    while n_tokens(kept) + answer_budget > max_length and len(kept) > 2:
        kept = kept[:1] + kept[3:]                         # drop the oldest user message and its answer
    if n_tokens(kept) + answer_budget > max_length:
        raise ValueError(f"the system message and the latest message need {n_tokens(kept)} prompt tokens + "
                         f"{answer_budget} for the answer, more than max_length={max_length}")
    return kept


def generate(model, tokenizer, prompt_ids, max_new_tokens: int, stop: str | None = None) -> list:
    """Greedy new token ids: at most max_new_tokens, ending at end-of-turn or with the token completing ``stop``."""
    import onnxruntime_genai as og

    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt_ids) + max_new_tokens, do_sample=False)  # prompt + answer
    generator = og.Generator(model, params)
    generator.append_tokens(prompt_ids)
    stream, text, new_ids = tokenizer.create_stream(), "", []
    while not generator.is_done():
        generator.generate_next_token()
        token = int(generator.get_next_tokens()[0])
        new_ids.append(token)
        text += stream.decode(token)
        if stop is not None and stop in text:              # the stop text may span several tokens
            break
    return new_ids


def solve_1(workdir: Path):
    return kv_cache_bytes


def solve_2(workdir: Path):
    return fit_history


def solve_3(workdir: Path):
    return generate
