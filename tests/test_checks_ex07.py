"""The checks of notebook 07's exercises: right answers written otherwise than solutions/ex07.py are accepted;
realistic wrong answers fail with feedback naming the mistake and never showing the expected tokens.
The checks use notebook 07's cached int4 model (built once if missing)."""
from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import onnxruntime_genai as og
import pytest

from helpers.exercises import check

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from solutions import ex07  # noqa: E402


def feedback(exercise, answer):
    result = check(exercise, answer)
    assert not result, f"{exercise} accepted a wrong answer: {result}"
    assert not re.search(r"\[\d+, \d+", result.message), f"token ids in the feedback: {result.message}"
    return result.message


def accepted(exercise, answer):
    result = check(exercise, answer)
    assert result, result.message


def decode_steps(generator, max_new_tokens):
    ids = []
    while not generator.is_done() and len(ids) < max_new_tokens:
        generator.generate_next_token()
        ids.append(int(generator.get_next_tokens()[0]))
    return ids


# ---------------------------------------------------------------- 07.2 one prefix, many questions
def rewind_after_each_answer(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    """Right: rewinds after answering instead of before asking (the issue's refused right answer)."""
    answers = []
    for question in questions_ids:
        generator.append_tokens(question)
        answers.append(decode_steps(generator, max_new_tokens))
        generator.rewind_to(prefix_len)
    return answers


def read_back_from_the_sequence(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    """Right: a counted loop, the answer read back from get_sequence (which leaves out a final end-of-turn)."""
    answers = []
    for question in questions_ids:
        if len(generator.get_sequence(0)) > prefix_len:
            generator.rewind_to(prefix_len)
        generator.append_tokens(list(map(int, question)))
        start = len(generator.get_sequence(0))
        for _ in range(max_new_tokens):
            if generator.is_done():
                break
            generator.generate_next_token()
        answers.append(generator.get_sequence(0)[start:].tolist())
    return answers


@pytest.mark.parametrize("right", [ex07.answer_each, rewind_after_each_answer, read_back_from_the_sequence],
                         ids=["solution", "rewind-after", "counted-loop"])
def test_07_2_accepts_right_answers(right):
    accepted("07.2", right)


def no_rewind(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    answers = []
    for question in questions_ids:
        generator.append_tokens(question)              # mistake: the previous question and answer stay
        answers.append(decode_steps(generator, max_new_tokens))
    return answers


def prefix_appended_again(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    prefix = generator.get_sequence(0)[:prefix_len].copy()
    answers = []
    for question in questions_ids:
        generator.rewind_to(prefix_len)
        generator.append_tokens(np.concatenate([prefix, question]))   # mistake: the prefix is already there
        answers.append(decode_steps(generator, max_new_tokens))
    return answers


def rewind_to_zero(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    prefix = generator.get_sequence(0)[:prefix_len].copy()
    answers = []
    for question in questions_ids:
        generator.rewind_to(0)                         # mistake: the prefix's cache is recomputed every time
        generator.append_tokens(np.concatenate([prefix, question]))
        answers.append(decode_steps(generator, max_new_tokens))
    return answers


def new_generator_each_time(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    from helpers.checks.ex07 import smollm

    model, _ = smollm()                                # the learner's notebook has the same model
    prefix = generator.get_sequence(0)[:prefix_len].copy()
    return [ex07.generate(model, tokenizer, np.concatenate([prefix, q]), max_new_tokens) for q in questions_ids]


def one_token_short(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    return ex07.answer_each(generator, tokenizer, prefix_len, questions_ids, max_new_tokens - 1)


def budget_ignored(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    return ex07.answer_each(generator, tokenizer, prefix_len, questions_ids, 2 * max_new_tokens)


@pytest.mark.parametrize("wrong, named", [
    (no_rewind, "rewind_to(prefix_len) first"),
    (prefix_appended_again, "holds it twice"),
    (rewind_to_zero, "below prefix_len"),
    (new_generator_each_time, "instead of a new generator"),
    (one_token_short, "you stopped too early"),
    (budget_ignored, "at most max_new_tokens="),
], ids=["no-rewind", "prefix-twice", "rewind-to-zero", "new-generators", "one-token-short", "budget"])
def test_07_2_names_the_mistake(wrong, named):
    assert named in feedback("07.2", wrong)


# ---------------------------------------------------------------- 07.3 stop text and token budget
def generate_variant(max_length=lambda prompt, new: prompt + new, stop_test="text", keep_eos=True, sample=False):
    """The solution with one mistake: in max_length, in the stop test, or dropping the end-of-turn token."""
    def generate(model, tokenizer, prompt_ids, max_new_tokens, stop=None):
        params = og.GeneratorParams(model)
        params.set_search_options(max_length=max_length(len(prompt_ids), max_new_tokens), do_sample=sample,
                                  **({"temperature": 1.5, "random_seed": 3} if sample else {}))
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
            whole = tokenizer.decode(generator.get_sequence(0))
            if stop is not None and {"text": stop in text, "last-token": stop in piece,
                                     "endswith": text.endswith(stop), "prompt-too": stop in whole}[stop_test]:
                break
        return new_ids
    return generate


def decode_everything_each_step(model, tokenizer, prompt_ids, max_new_tokens, stop=None):
    """Right: no token stream; the answer decoded whole at every step, the budget counted by hand."""
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt_ids) + max_new_tokens, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(prompt_ids)
    out = []
    for _ in range(max_new_tokens):
        if generator.is_done():
            break
        generator.generate_next_token()
        out += generator.get_next_tokens().tolist()
        if stop and stop in tokenizer.decode(out):
            break
    return out


def large_max_length_and_own_count(model, tokenizer, prompt_ids, max_new_tokens, stop=None):
    """Right: a generous max_length, the budget and the end-of-turn token handled by the loop itself."""
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt_ids) + max_new_tokens + 50, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(prompt_ids)
    out = []
    while len(out) < max_new_tokens:
        generator.generate_next_token()
        out.append(int(generator.get_next_tokens()[0]))
        if out[-1] in tokenizer.eos_token_ids or (stop is not None and stop in tokenizer.decode(out)):
            break
    return out


@pytest.mark.parametrize("right", [ex07.generate, decode_everything_each_step, large_max_length_and_own_count],
                         ids=["solution", "decode-whole", "own-count"])
def test_07_3_accepts_right_answers(right):
    accepted("07.3", right)


@pytest.mark.parametrize("wrong, named", [
    (generate_variant(stop_test="last-token"), "spans several tokens or ends inside one"),
    (generate_variant(stop_test="endswith"), "ends inside one"),
    (generate_variant(stop_test="prompt-too"), "the prompt does"),
    (generate_variant(keep_eos=False), "the end-of-turn token: keep it"),
    (generate_variant(max_length=lambda prompt, new: new), "max_length counts prompt plus answer"),
    (generate_variant(max_length=lambda prompt, new: prompt + new - 1), "max_length counts prompt plus answer"),
    (generate_variant(max_length=lambda prompt, new: prompt + new + 1), "at most max_new_tokens"),
    (generate_variant(sample=True), "greedy means do_sample=False"),
], ids=["stop-on-last-token", "stop-endswith", "stop-searched-in-prompt", "end-of-turn-dropped",
        "max-length-without-prompt", "off-by-one", "one-too-many", "sampled"])
def test_07_3_names_the_mistake(wrong, named):
    assert named in feedback("07.3", wrong)


def test_07_3_stop_cases_defeat_the_wrong_stop_tests():
    """The stop text that ends inside a token defeats a test on the last token's text; "healthy" is in the prompt,
    and the answer goes on after where a search of the prompt would stop."""
    from helpers.checks import ex07 as checks

    model, tokenizer = checks.smollm()
    ids = checks.prompt_ids(tokenizer, [checks.SYSTEM, {"role": "user", "content": "What is the capital of Spain?"}])
    stop = checks.stop_inside_a_token(model, tokenizer, ids)
    out = checks.greedy(model, ids, 60, stop, tokenizer)
    text, last = tokenizer.decode(out), tokenizer.decode(out[-1:])
    assert stop in text and not text.endswith(stop) and stop not in last
    tips = checks.prompt_ids(tokenizer, [checks.SYSTEM, {"role": "user",
                                                         "content": "Give three tips for staying healthy."}])
    assert len(checks.greedy(model, tips, 40, "healthy", tokenizer)) > 1
