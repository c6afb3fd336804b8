"""The checks of notebook 07's exercises, fed realistic wrong answers: each must fail and name the mistake.

The right answers (solutions/ex07.py) are run by tests/test_exercises.py; here each wrong answer is the worked
solution with one mistake a learner makes. The checks use the cached SmolLM2 int4 model (built once if missing).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers.exercises import check

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from solutions import ex07  # noqa: E402


def feedback(exercise, answer):
    result = check(exercise, answer)
    assert not result, f"{exercise} accepted a wrong answer: {result}"
    return result.message


# ---------------------------------------------------------------- 07.1 largest max_length for a budget
def per_token_variant(heads_key="num_key_value_heads", factor=2, itemsize=None, layers=True, cap=True):
    """The solution with one mistake in the per-token size or the cap."""
    def largest_max_length(model_dir, budget_bytes):
        import onnx

        config = json.loads((Path(model_dir) / "genai_config.json").read_text())
        decoder = config["model"]["decoder"]
        graph = onnx.load(Path(model_dir) / decoder["filename"], load_external_data=False).graph
        past_key = decoder["inputs"]["past_key_names"] % 0
        elem_type = next(i for i in graph.input if i.name == past_key).type.tensor_type.elem_type
        size = itemsize or np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type)).itemsize
        n_layers = decoder["num_hidden_layers"] if layers else 1
        per_token = factor * n_layers * decoder[heads_key] * decoder["head_size"] * size
        n = budget_bytes // per_token
        return min(n, config["model"]["context_length"]) if cap else n
    return largest_max_length


@pytest.mark.parametrize("wrong, named", [
    (per_token_variant(heads_key="num_attention_heads"), "num_key_value_heads"),
    (per_token_variant(itemsize=4), "4 bytes per number"),
    (per_token_variant(factor=1), "the factor 2"),
    (per_token_variant(layers=False), "every layer has its own cache"),
    (per_token_variant(cap=False), "context_length"),
], ids=["attention-heads", "float32-assumed", "keys-only", "one-layer", "no-context-cap"])
def test_07_1_names_the_mistake(wrong, named):
    assert named in feedback("07.1", wrong)


def test_07_1_rejects_a_size_instead_of_a_length():
    message = feedback("07.1", lambda model_dir, budget: float(budget) / 3.5)
    assert "expected max_length" in message or "whole number" in message


# ---------------------------------------------------------------- 07.2 one prefix, many questions
def greedy(generator, max_new_tokens):
    """The answer loop every wrong answer below shares (their mistakes are in what they append)."""
    ids = []
    while not generator.is_done() and len(ids) < max_new_tokens:
        generator.generate_next_token()
        ids.append(int(generator.get_next_tokens()[0]))
    return ids


def no_rewind(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    answers = []
    for question in questions_ids:
        generator.append_tokens(question)              # mistake: the previous question and answer stay
        answers.append(greedy(generator, max_new_tokens))
    return answers


def prefix_appended_again(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    prefix = generator.get_sequence(0)[:prefix_len].copy()
    answers = []
    for question in questions_ids:
        generator.rewind_to(prefix_len)
        generator.append_tokens(np.concatenate([prefix, question]))   # mistake: the prefix is already there
        answers.append(greedy(generator, max_new_tokens))
    return answers


def new_generator_each_time(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    _, model, _ = __import__("helpers.checks.ex07", fromlist=["smollm"]).smollm()
    prefix = generator.get_sequence(0)[:prefix_len].copy()
    return [ex07.generate(model, tokenizer, np.concatenate([prefix, q]), max_new_tokens) for q in questions_ids]


def end_of_turn_dropped(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    answers = ex07.answer_each(generator, tokenizer, prefix_len, questions_ids, max_new_tokens)
    return [[t for t in ids if t not in tokenizer.eos_token_ids] for ids in answers]


@pytest.mark.parametrize("wrong, named", [
    (no_rewind, "rewind_to(prefix_len) before each question"),
    (prefix_appended_again, "holds the prefix twice"),
    (new_generator_each_time, "use the generator it was given"),
    (end_of_turn_dropped, "keep the end-of-turn token"),
], ids=["no-rewind", "prefix-twice", "new-generators", "end-of-turn-dropped"])
def test_07_2_names_the_mistake(wrong, named):
    assert named in feedback("07.2", wrong)


# ---------------------------------------------------------------- 07.3 stop text and token budget
def generate_variant(max_length=lambda prompt, new: prompt + new, stop_test="text", keep_eos=True):
    """The solution with one mistake: in max_length, in the stop test, or dropping the end-of-turn token."""
    def generate(model, tokenizer, prompt_ids, max_new_tokens, stop=None):
        import onnxruntime_genai as og

        params = og.GeneratorParams(model)
        params.set_search_options(max_length=max_length(len(prompt_ids), max_new_tokens), do_sample=False)
        generator = og.Generator(model, params)
        generator.append_tokens(prompt_ids)
        stream, text, new_ids = tokenizer.create_stream(), "", []
        while not generator.is_done():
            generator.generate_next_token()
            token = int(generator.get_next_tokens()[0])
            if not keep_eos and token in tokenizer.eos_token_ids:
                break
            new_ids.append(token)
            piece = stream.decode(token)
            text += piece
            if stop is not None and {"text": stop in text, "last-token": stop in piece,
                                     "endswith": text.endswith(stop)}[stop_test]:
                break
        return new_ids
    return generate


@pytest.mark.parametrize("wrong, named", [
    (generate_variant(stop_test="last-token"), "spans several tokens or ends inside one"),
    (generate_variant(stop_test="endswith"), "ends inside one"),
    (generate_variant(keep_eos=False), "keep the end-of-turn token"),
    (generate_variant(max_length=lambda prompt, new: new), "max_length counts prompt plus answer"),
    (generate_variant(max_length=lambda prompt, new: prompt + new - 1), "max_length counts prompt plus answer"),
], ids=["stop-on-last-token", "stop-endswith", "end-of-turn-dropped", "max-length-without-prompt", "off-by-one"])
def test_07_3_names_the_mistake(wrong, named):
    assert named in feedback("07.3", wrong)


def test_07_3_stop_case_really_ends_inside_a_token():
    """The check's own stop text must defeat a test on the last token's text (what issue 11 found missing)."""
    from helpers.checks import ex07 as checks

    _, model, tokenizer = checks.smollm()
    ids = checks.prompt_ids(tokenizer, [checks.SYSTEM, {"role": "user", "content": "What is the capital of France?"}])
    stop = checks.stop_inside_a_token(model, tokenizer, ids)
    out = checks.greedy(model, ids, 60, stop, tokenizer)
    text, last = tokenizer.decode(out), tokenizer.decode(out[-1:])
    assert stop in text and not text.endswith(stop) and stop not in last
