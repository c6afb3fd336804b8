"""The checks of notebook 07's exercises: right answers written otherwise than the references are accepted;
realistic wrong answers fail with feedback naming the mistake and never showing the expected tokens.
The checks use notebook 07's cached int4 model (built once if missing)."""

from __future__ import annotations

import re

import numpy as np
import onnxruntime_genai as og
import pytest
from tables import accepted, refused, right, rows

from helpers.grading.checks import ex07


def feedback(exercise, answer):
    message = refused(exercise, answer).message
    assert not re.search(r"\[\d+, \d+", message), f"token ids in the feedback: {message}"
    return message


def decode_steps(generator, max_new_tokens):
    ids = []
    while not generator.is_done() and len(ids) < max_new_tokens:
        generator.generate_next_token()
        ids.append(int(generator.get_next_tokens()[0]))
    return ids


def rewind_after_each_answer(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    """Right: rewinds after answering instead of before asking."""
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


def notebook_chat_reuse(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    """Right: notebook 07's Chat.ask applied to the task: keep what the generator holds in common with prefix +
    question (the question's first tokens, <|im_start|>user, may be shared too), rewind to there, append the rest."""
    prefix = [int(t) for t in generator.get_sequence(0)[:prefix_len]]
    answers = []
    for question in questions_ids:
        target = prefix + [int(t) for t in question]
        held = [int(t) for t in generator.get_sequence(0)]
        keep = next(
            (n for n, (a, b) in enumerate(zip(held, target)) if a != b), min(len(held), len(target))
        )
        if keep < len(held):
            generator.rewind_to(keep)
        generator.append_tokens(np.array(target[keep:], dtype=np.int32))
        answers.append(decode_steps(generator, max_new_tokens))
    return answers


def argmax_by_hand(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    """Right: greedy by hand, the most likely token read from the logits and appended."""
    answers = []
    for question in questions_ids:
        generator.rewind_to(prefix_len)
        generator.append_tokens(question)
        ids = []
        while len(ids) < max_new_tokens:
            token = int(np.argmax(generator.get_logits()[0, -1]))
            ids.append(token)
            if token in tokenizer.eos_token_ids:
                break
            generator.append_tokens(np.array([token], dtype=np.int32))
        answers.append(ids)
    return answers


def no_rewind(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    answers = []
    for question in questions_ids:
        generator.append_tokens(question)  # mistake: the previous question and answer stay
        answers.append(decode_steps(generator, max_new_tokens))
    return answers


def prefix_appended_again(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    prefix = generator.get_sequence(0)[:prefix_len].copy()
    answers = []
    for question in questions_ids:
        generator.rewind_to(prefix_len)
        generator.append_tokens(
            np.concatenate([prefix, question])
        )  # mistake: the prefix is already there
        answers.append(decode_steps(generator, max_new_tokens))
    return answers


def rewind_to_zero(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    prefix = generator.get_sequence(0)[:prefix_len].copy()
    answers = []
    for question in questions_ids:
        generator.rewind_to(0)  # mistake: the prefix's cache is recomputed every time
        generator.append_tokens(np.concatenate([prefix, question]))
        answers.append(decode_steps(generator, max_new_tokens))
    return answers


def new_generator_each_time(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    model, _ = ex07.smollm()  # the learner's notebook has the same model
    prefix = generator.get_sequence(0)[:prefix_len].copy()
    return [
        ex07.generate(model, tokenizer, np.concatenate([prefix, q]), max_new_tokens)
        for q in questions_ids
    ]


def one_token_short(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    return ex07.answer_each(generator, tokenizer, prefix_len, questions_ids, max_new_tokens - 1)


def budget_ignored(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    return ex07.answer_each(generator, tokenizer, prefix_len, questions_ids, 2 * max_new_tokens)


def with_question_tokens(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    """Returns the sequence after the prefix: the question's tokens, then the answer."""
    answers = []
    for question in questions_ids:
        generator.rewind_to(prefix_len)
        generator.append_tokens(question)
        decode_steps(generator, max_new_tokens)
        answers.append(
            generator.get_sequence(0)[prefix_len:].tolist()
        )  # mistake: the question is in there
    return answers


def one_list_object(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    answers, ids = [], []  # mistake: one list for every answer
    for question in questions_ids:
        generator.rewind_to(prefix_len)
        generator.append_tokens(question)
        ids.clear()
        while not generator.is_done() and len(ids) < max_new_tokens:
            generator.generate_next_token()
            ids.append(int(generator.get_next_tokens()[0]))
        answers.append(ids)
    return answers


def first_answer_repeated(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    answers = ex07.answer_each(generator, tokenizer, prefix_len, questions_ids[:1], max_new_tokens)
    return answers * len(questions_ids)  # mistake: the first question's answer for every question


def list_never_emptied(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    answers, ids = [], []  # mistake: each answer goes on from the previous one's tokens
    for question in questions_ids:
        generator.rewind_to(prefix_len)
        generator.append_tokens(question)
        for _ in range(max_new_tokens):
            if generator.is_done():
                break
            generator.generate_next_token()
            ids.append(int(generator.get_next_tokens()[0]))
        answers.append(list(ids))
    return answers


def all_questions_at_once(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    generator.append_tokens(np.concatenate(questions_ids))  # mistake: every question in one go
    return [decode_steps(generator, max_new_tokens) for _ in questions_ids]


def decoded_text(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    return [
        tokenizer.decode(ids)
        for ids in ex07.answer_each(generator, tokenizer, prefix_len, questions_ids, max_new_tokens)
    ]


def first_answer_only(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    return ex07.answer_each(generator, tokenizer, prefix_len, questions_ids, max_new_tokens)[0]


def second_best_token(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    """Not greedy: picks the runner-up token from the logits (the generator then goes on from that one)."""
    answers = []
    for question in questions_ids:
        generator.rewind_to(prefix_len)
        generator.append_tokens(question)
        ids = []
        while not generator.is_done() and len(ids) < max_new_tokens:
            logits = generator.get_logits()[0, -1]
            token = int(np.argsort(logits)[-2])
            generator.append_tokens(np.array([token], dtype=np.int32))
            ids.append(token)
        answers.append(ids)
    return answers


REQUIREMENTS_07_2 = [
    ("a function answer_each(...)", [[1, 2]], "expected your function answer_each"),
    ("a list: one answer per question", first_answer_only, "expected a list of 3 answers"),
    ("each answer a list of token ids", decoded_text, "expected a list of token ids"),
    ("each answer a list of its own", one_list_object, "one list object, filled by every question"),
    ("each question its own answer", first_answer_repeated, "answer 1 is repeated as answer 2"),
    (
        "only the answer's new tokens, not the question's",
        with_question_tokens,
        "starts with the question's own",
    ),
    ("each answer only its own new tokens", list_never_emptied, "starts with answer 1's tokens"),
    (
        "each question on its own, after the prefix",
        all_questions_at_once,
        "one append_tokens call gave the generator all",
    ),
    ("as if that question were the only one", no_rewind, "rewind_to(prefix_len) first"),
    (
        "reusing the generator given, not a new one",
        new_generator_each_time,
        "you made 3 new og.Generator",
    ),
    ("reusing its cache: the prefix not thrown away", rewind_to_zero, "below prefix_len"),
    ("... nor appended again", prefix_appended_again, "holds it twice"),
    ("at most max_new_tokens", budget_ignored, "at most max_new_tokens="),
    ("the greedy answer, whole", one_token_short, "you stopped too early"),
]


OTHER_MISTAKES_07_2 = [(second_best_token, "leave the greedy answer")]


def generate_variant(
    max_length=lambda prompt, new: prompt + new, stop_test="text", keep_eos=True, sample=False
):
    """The solution with one mistake: in max_length, in the stop test, or dropping the end-of-turn token."""

    def generate(model, tokenizer, prompt_ids, max_new_tokens, stop=None):
        params = og.GeneratorParams(model)
        params.set_search_options(
            max_length=max_length(len(prompt_ids), max_new_tokens),
            do_sample=sample,
            **({"temperature": 1.5, "random_seed": 3} if sample else {}),
        )
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
            if (
                stop is not None
                and {
                    "text": stop in text,
                    "last-token": stop in piece,
                    "endswith": text.endswith(stop),
                    "prompt-too": stop in whole,
                    "every-other-token": stop in text and len(new_ids) % 2 == 0,
                }[stop_test]
            ):
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
        if out[-1] in tokenizer.eos_token_ids or (
            stop is not None and stop in tokenizer.decode(out)
        ):
            break
    return out


def notebook_loop_as_numpy(model, tokenizer, prompt_ids, max_new_tokens, stop=None):
    """Right: notebook 07's section-3 loop (token stream, answer_ids) with the budget in max_length and a stop test
    on the streamed text; returns a numpy array read back from the generator's sequence."""
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt_ids) + max_new_tokens, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(prompt_ids)
    stream, text = tokenizer.create_stream(), ""
    while not generator.is_done():
        generator.generate_next_token()
        text += stream.decode(int(generator.get_next_tokens()[0]))
        if stop is not None and stop in text:
            break
    sequence = generator.get_sequence(0)
    new = sequence[len(prompt_ids) :]
    last = int(generator.get_next_tokens()[0])
    return (
        new if len(new) and new[-1] == last else np.append(new, last)
    )  # get_sequence may leave out the last


@pytest.mark.parametrize(
    "exercise, answer",
    [
        *right(
            "07.2",
            ex07.answer_each,
            rewind_after_each_answer,
            read_back_from_the_sequence,
            notebook_chat_reuse,
            argmax_by_hand,
        ),
        *right(
            "07.3",
            ex07.generate,
            decode_everything_each_step,
            large_max_length_and_own_count,
            notebook_loop_as_numpy,
        ),
    ],
)
def test_right_answers_pass(exercise, answer):
    accepted(exercise, answer)


def stop_without_default(model, tokenizer, prompt_ids, max_new_tokens, stop):
    return ex07.generate(
        model, tokenizer, prompt_ids, max_new_tokens, stop
    )  # mistake: stop is not optional


def returns_text(model, tokenizer, prompt_ids, max_new_tokens, stop=None):
    return tokenizer.decode(ex07.generate(model, tokenizer, prompt_ids, max_new_tokens, stop))


def whole_sequence(model, tokenizer, prompt_ids, max_new_tokens, stop=None):
    return list(prompt_ids) + ex07.generate(model, tokenizer, prompt_ids, max_new_tokens, stop)


def stop_token_dropped(model, tokenizer, prompt_ids, max_new_tokens, stop=None):
    """Stops at the stop text but leaves out the token that completed it."""
    ids = ex07.generate(model, tokenizer, prompt_ids, max_new_tokens, stop)
    return ids[:-1] if stop is not None and stop in tokenizer.decode(ids) else ids


def fixed_loop_without_is_done(model, tokenizer, prompt_ids, max_new_tokens, stop=None):
    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt_ids) + max_new_tokens, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(prompt_ids)
    out = []
    for _ in range(max_new_tokens):  # mistake: goes on after the end-of-turn token
        generator.generate_next_token()
        out.append(int(generator.get_next_tokens()[0]))
        if stop and stop in tokenizer.decode(out):
            break
    return out


REQUIREMENTS_07_3 = [
    ("a function generate(...)", [1, 2, 3], "expected your function generate"),
    ("stop is optional (stop=None)", stop_without_default, "stop is optional"),
    ("returns token ids", returns_text, "expected the new token ids (a list of ints), got text"),
    ("only the new token ids", whole_sequence, "expected only the new tokens"),
    ("greedy", generate_variant(sample=True), "leave the greedy answer"),
    (
        "the end-of-turn token included if it comes",
        generate_variant(keep_eos=False),
        "the end-of-turn token: keep it",
    ),
    (
        "at most max_new_tokens",
        generate_variant(max_length=lambda prompt, new: prompt + new + 1),
        "at most max_new_tokens",
    ),
    (
        "max_length: prompt plus max_new_tokens",
        generate_variant(max_length=lambda prompt, new: new),
        "max_length limits every token the generator holds",
    ),
    (
        "a stop text spanning several tokens",
        generate_variant(stop_test="last-token"),
        "spans several tokens",
    ),
    (
        "a stop text ending inside a token",
        generate_variant(stop_test="endswith"),
        "ends inside one",
    ),
    (
        "the stop text looked for in the answer only",
        generate_variant(stop_test="prompt-too"),
        "the prompt does",
    ),
    (
        "stops right after the token completing stop",
        generate_variant(stop_test="every-other-token"),
        "you went on after the end",
    ),
    ("... that token included", stop_token_dropped, "you stopped too early"),
]


OTHER_MISTAKES_07_3 = [
    (
        generate_variant(max_length=lambda prompt, new: prompt + new - 1),
        "max_length limits every token the generator holds",
    ),
    (fixed_loop_without_is_done, ("it raised", "you went on after the end")),
]


@pytest.mark.parametrize(
    "exercise, wrong, named",
    [
        *rows("07.2 requirement", REQUIREMENTS_07_2, "07.2"),
        *rows("07.2 mistake", OTHER_MISTAKES_07_2, "07.2", ids=["runner-up-token"]),
        *rows("07.3 requirement", REQUIREMENTS_07_3, "07.3"),
        *rows("07.3 mistake", OTHER_MISTAKES_07_3, "07.3", ids=["off-by-one", "no-is-done"]),
    ],
)
def test_each_requirement_broken_alone_and_each_other_mistake_is_named(exercise, wrong, named):
    message = feedback(exercise, wrong)
    assert any(n in message for n in ((named,) if isinstance(named, str) else named)), message
    if exercise == "07.2" and wrong is not new_generator_each_time:
        assert "new generator" not in message and "og.Generator" not in message, message
    if wrong is first_answer_repeated:  # the cause is the repeated answer, not a shared list
        assert "list object" not in message, message
    assert "len(prompt_ids)" not in message, message  # the max_length formula the task asks for


def test_07_3_stop_cases_defeat_the_wrong_stop_tests():
    """The stop text that ends inside a token defeats a test on the last token's text; "healthy" is in the prompt,
    and the answer goes on after where a search of the prompt would stop."""
    model, tokenizer = ex07.smollm()
    ids = ex07.prompt_ids(
        tokenizer, [ex07.SYSTEM, {"role": "user", "content": "What is the capital of Spain?"}]
    )
    stop = ex07.stop_inside_a_token(model, tokenizer, ids)
    out = ex07.greedy(model, ids, 60, stop, tokenizer)
    text, last = tokenizer.decode(out), tokenizer.decode(out[-1:])
    assert stop in text and not text.endswith(stop) and stop not in last
    tips = ex07.prompt_ids(
        tokenizer,
        [ex07.SYSTEM, {"role": "user", "content": "Give three tips for staying healthy."}],
    )
    assert len(ex07.greedy(model, tips, 40, "healthy", tokenizer)) > 1
