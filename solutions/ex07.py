"""Solutions for notebook 07's exercises (onnxruntime-genai; the cached SmolLM2 int4 model)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def largest_max_length(model_dir, budget_bytes: int) -> int:
    """The largest max_length whose KV cache fits in ``budget_bytes`` (at most the model's context length).

    Phi-3-mini by hand: 2 x 32 layers x 32 KV heads x 96 x 2 bytes = 393,216 bytes per token; 1e9 / 393,216 = 2,543.
    """
    import onnx

    config = json.loads((Path(model_dir) / "genai_config.json").read_text())
    decoder = config["model"]["decoder"]
    # The number type is not in the config: the decoder graph's first past-key input has it.
    graph = onnx.load(Path(model_dir) / decoder["filename"], load_external_data=False).graph
    past_key = decoder["inputs"]["past_key_names"] % 0
    elem_type = next(i for i in graph.input if i.name == past_key).type.tensor_type.elem_type
    itemsize = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)).itemsize
    per_token = 2 * decoder["num_hidden_layers"] * decoder["num_key_value_heads"] * decoder["head_size"] * itemsize
    return min(int(budget_bytes) // per_token, config["model"]["context_length"])


def answer_each(generator, tokenizer, prefix_len: int, questions_ids, max_new_tokens: int) -> list:
    """Answer each question after the shared prefix, reusing its KV cache: rewind to the prefix every time."""
    answers = []
    for question in questions_ids:
        generator.rewind_to(prefix_len)                 # back to just after the shared prefix
        generator.append_tokens(question)               # only the question goes through the model
        ids = []
        while not generator.is_done() and len(ids) < max_new_tokens:
            generator.generate_next_token()
            ids.append(int(generator.get_next_tokens()[0]))
        answers.append(ids)
    return answers


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
        if stop is not None and stop in text:              # the stop text may span tokens, or end inside one
            break
    return new_ids


def solve_1(workdir: Path):
    return largest_max_length


def solve_2(workdir: Path):
    return answer_each


def solve_3(workdir: Path):
    return generate
