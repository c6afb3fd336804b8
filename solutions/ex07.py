"""Solutions for notebook 07's exercises (onnxruntime-genai; notebook 07's cached int4 model)."""

from __future__ import annotations

from pathlib import Path


def answer_each(generator, tokenizer, prefix_len: int, questions_ids, max_new_tokens: int) -> list:
    """Answer each question after the shared prefix, reusing its KV cache: rewind to the prefix every time."""
    answers = []
    for question in questions_ids:
        generator.rewind_to(prefix_len)  # back to just after the shared prefix
        generator.append_tokens(question)  # only the question goes through the model
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
    params.set_search_options(
        max_length=len(prompt_ids) + max_new_tokens, do_sample=False
    )  # prompt + answer
    generator = og.Generator(model, params)
    generator.append_tokens(prompt_ids)
    stream, text, new_ids = tokenizer.create_stream(), "", []
    while not generator.is_done():
        generator.generate_next_token()
        token = int(generator.get_next_tokens()[0])
        new_ids.append(token)
        text += stream.decode(token)
        if stop is not None and stop in text:  # the stop text may span tokens, or end inside one
            break
    return new_ids


def solve_2(workdir: Path):
    return answer_each


def solve_3(workdir: Path):
    return generate
