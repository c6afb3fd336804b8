"""Checks for notebook 07's exercises against the checker's own greedy runs of the int4 model on unseen prompts."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from helpers.grading.checks import _common
from helpers.grading.checks._common import Wrong, require_callable


@functools.lru_cache(maxsize=1)
def smollm():
    import onnxruntime_genai as og

    from helpers.lessons import int4_command  # notebook 07's builder command
    from helpers.pipeline import llm

    folder = llm.cached_int4_model(
        int4_command, log=lambda message: None if message.startswith("reusing") else print(message)
    )
    config = og.Config(str(folder))
    config.overlay(
        json.dumps(
            {
                "model": {
                    "decoder": {
                        "session_options": {
                            "intra_op_num_threads": 2,
                            "inter_op_num_threads": 1,
                            "session.intra_op.allow_spinning": "0",
                        }
                    }
                }
            }
        )
    )
    model = og.Model(config)
    return model, og.Tokenizer(model)


def prompt_ids(tokenizer, messages, add_generation_prompt=True) -> list[int]:
    text = tokenizer.apply_chat_template(
        json.dumps(messages), add_generation_prompt=add_generation_prompt
    )
    return [int(t) for t in tokenizer.encode(text)]


def fresh_generator(model, ids, max_length, guidance=None):
    """A greedy ``og.Generator`` holding ``ids``, guided by the JSON schema text ``guidance`` if one is given."""
    import numpy as np
    import onnxruntime_genai as og

    params = og.GeneratorParams(model)
    params.set_search_options(max_length=max_length, do_sample=False)
    if guidance is not None:
        params.set_guidance("json_schema", guidance)
    generator = og.Generator(model, params)
    generator.append_tokens(np.array(ids, dtype=np.int32))
    return generator


def greedy(model, ids, max_new_tokens, stop=None, tokenizer=None) -> list[int]:
    """A fresh generator, at most ``max_new_tokens``, cut after ``stop`` appears in the answer's decoded text."""
    generator = fresh_generator(model, ids, len(ids) + max_new_tokens)
    out = []
    while not generator.is_done():
        generator.generate_next_token()
        out.append(int(generator.get_next_tokens()[0]))
        if stop is not None and stop in tokenizer.decode(out):
            break
    return out


def _ids(got, what) -> list[int]:
    try:
        return [int(t) for t in got]
    except (TypeError, ValueError) as err:
        raise Wrong(
            f"expected a list of token ids (ints) for {what}, got {type(got).__name__}"
        ) from err


def _differs(tokenizer, got, want, label, eos) -> None:
    """A Wrong naming the mistake, or where ``got`` leaves ``want`` (never ``want`` itself)."""
    if got == want[:-1] and want[-1] in eos:
        raise Wrong(
            f"on {label}: your answer lacks its last token, the end-of-turn token: keep it, it is one of "
            "the new tokens"
        )
    if got == want[: len(got)]:
        raise Wrong(
            f"on {label}: your {len(got)} tokens are the start of the greedy answer, but it goes on: you "
            "stopped too early"
        )
    first = next((k for k, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
    yours = tokenizer.decode(got[first : first + 4])
    raise Wrong(
        f"on {label}: your tokens leave the greedy answer to that prompt alone at new token {first} (yours "
        f"go on with {yours!r})"
    )


def _repeated(got, objects, wants, what, eos, max_new) -> None:
    """A Wrong if two answers hold the same tokens though the greedy answers to their questions differ;
    the cause named when the tokens are the first one's answer, or one list kept for every answer."""
    bare = [ids[:-1] if ids and ids[-1] in eos else ids for ids in got]  # end-of-turn: either way
    right = [ids[:-1] if ids and ids[-1] in eos else ids for ids in wants]
    for i in range(len(got)):
        for j in range(i):
            if bare[i] != bare[j] or right[i] == right[j]:
                continue
            cause = (
                f"answer {j + 1} is repeated as answer {i + 1}: each question gets its own answer"
                if bare[j] == right[j]
                else "they are one list object, filled by every question in turn: each answer needs a "
                "list of its own"
                if objects[i] is objects[j] and (bare[i] == right[-1] or len(bare[i]) > max_new)
                else "each question gets its own answer"
            )
            raise Wrong(
                f"on {what}: answers {j + 1} and {i + 1} hold the same tokens, though the greedy answers "
                f"to their questions differ; {cause}"
            )


class Recorder:
    """A real ``og.Generator`` noting each call as ``(name, tokens held before, first argument)``."""

    def __init__(self, generator):
        self._generator, self.calls = generator, []

    def __getattr__(self, name):
        attr = getattr(self._generator, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            held = len(self._generator.get_sequence(0))
            self.calls.append((name, held, args[0] if args else None))
            return attr(*args, **kwargs)

        return call


ROUNDS = [  # (system prompt, questions, range of max_new_tokens): the order and the budget drawn at every check
    (
        "You are a helpful assistant for travellers. Answer in one or two short sentences. Be precise about places, "
        "dates and names. If you do not know, say so. Never invent prices.",
        (
            "What is the capital of Italy?",
            "Which river flows through Paris?",
            "What is the Louvre?",
        ),
        (20, 27),
    ),
    (
        "You are a patient cooking teacher. Keep every answer short and practical, and mention one common mistake.",
        ("How do I boil an egg?", "Why does bread rise?"),
        (5, 10),
    ),
]


def check_answer_each(answer):
    from unittest import mock

    import numpy as np
    import onnxruntime_genai as og

    require_callable(
        answer, "answer_each(generator, tokenizer, prefix_len, questions_ids, max_new_tokens)"
    )
    model, tokenizer = smollm()
    eos = {int(t) for t in tokenizer.eos_token_ids}
    rng, details = _common.rng(), []  # the questions' order and the budget, new with each seed
    for system, questions, budget in ROUNDS:
        questions, max_new = (
            [questions[i] for i in rng.permutation(len(questions))],
            int(rng.integers(*budget)),
        )
        prefix = prompt_ids(
            tokenizer, [{"role": "system", "content": system}], add_generation_prompt=False
        )
        full = [
            prompt_ids(
                tokenizer, [{"role": "system", "content": system}, {"role": "user", "content": q}]
            )
            for q in questions
        ]
        asked = [ids[len(prefix) :] for ids in full]
        wants = [
            greedy(model, ids, max_new) for ids in full
        ]  # a fresh generator per question: no shared cache
        what = f"{len(questions)} questions after a {len(prefix)}-token system prompt, max_new_tokens={max_new}"
        generator, made, real = Recorder(fresh_generator(model, prefix, 1024)), [], og.Generator

        def counted(
            *args, **kwargs
        ):  # og.Generator as the learner calls it: counted, then the real one
            made.append(args)
            return real(*args, **kwargs)

        try:
            with mock.patch.object(og, "Generator", counted):
                got = answer(
                    generator,
                    tokenizer,
                    len(prefix),
                    [np.array(q, dtype=np.int32) for q in asked],
                    max_new,
                )
        except Exception as err:  # whatever the learner's function raises is reported, not hidden
            raise Wrong(
                f"expected your function to run on {what}; it raised {type(err).__name__}: {err}"
            ) from err
        calls, made = generator.calls, len(made)
        if not isinstance(got, (list, tuple)) or len(got) != len(questions):
            shape = (
                f"a list of {len(got)} items"
                if isinstance(got, (list, tuple))
                else type(got).__name__
            )
            raise Wrong(
                f"expected a list of {len(questions)} answers (lists of token ids) for {what}, got {shape}"
            )
        objects, got = got, [_ids(g, f"answer {i + 1}") for i, g in enumerate(got)]
        for i, (g, q) in enumerate(zip(got, asked)):
            for label, ask in (("the prefix and the question", prefix + q), ("the question", q)):
                if len(g) > len(ask) and g[: len(ask)] == ask:
                    raise Wrong(
                        f"on {what}: answer {i + 1} starts with {label}'s own tokens; expected only the new "
                        "tokens"
                    )
        rewound = sum(1 for name, _, _ in calls if name == "rewind_to")
        for i in range(
            1, len(got)
        ):  # the answers of a generator rewound between questions that still pile up
            if (
                rewound
                and got[i - 1]
                and len(got[i]) > len(got[i - 1])
                and got[i][: len(got[i - 1])] == got[i - 1]
            ):
                raise Wrong(
                    f"on {what}: answer {i + 1} starts with answer {i}'s tokens: each answer holds only its "
                    "own new tokens"
                )
        appends = [
            (held, [int(t) for t in ids]) for name, held, ids in calls if name == "append_tokens"
        ]
        together = [
            len(ids)
            for _, ids in appends
            if len(questions) > 1
            and any(
                ids[k : k + sum(map(len, asked))] == sum(asked, []) for k in range(len(ids) - 1)
            )
        ]
        if together:
            raise Wrong(
                f"on {what}: one append_tokens call gave the generator all {len(questions)} questions "
                f"({together[0]} tokens); expected each question appended after the prefix on its own, as if "
                "it were the only one"
            )
        _repeated(got, objects, wants, what, eos, max_new)
        steps = (
            sum(1 for name, _, _ in calls if name == "generate_next_token")
            + sum(  # and tokens picked by hand
                len(ids) for _, ids in appends if ids not in asked and ids[: len(prefix)] != prefix
            )
        )
        if made:
            raise Wrong(
                f"on {what}: you made {made} new og.Generator(s); expected every answer from the generator "
                "you were given, which holds the prefix's KV cache (rewind_to, section 5)"
            )
        if steps < sum(map(len, got)) - len(
            got
        ):  # a token picked by hand last in an answer need not be fed
            raise Wrong(
                f"on {what}: your answers hold {sum(map(len, got))} tokens, but the generator you were given "
                f"made {steps} decode steps: expected every answer to come from that generator"
            )
        below = [n for name, _, n in calls if name == "rewind_to" and n < len(prefix)]
        if below:
            raise Wrong(
                f"on {what}: you rewound to {below[0]} tokens, below prefix_len={len(prefix)}: that throws "
                "away the prefix's cache you were asked to reuse"
            )
        for i, (g, want) in enumerate(zip(got, wants)):
            g, want = [
                ids[:-1] if ids and ids[-1] in eos else ids for ids in (g, want)
            ]  # end-of-turn: either way
            if g == want:
                continue
            label = f"question {i + 1} of {what}"
            if len(g) > max_new:
                raise Wrong(
                    f"on {label}: expected at most max_new_tokens={max_new} new tokens, got {len(g)}"
                )
            if any(ids[: len(prefix)] == prefix for _, ids in appends):
                raise Wrong(
                    f"on {label}: you appended the prefix again, so the generator holds it twice: it is "
                    "already in the cache, append only the question's tokens"
                )
            if any(held > len(prefix) and ids in asked for held, ids in appends):
                raise Wrong(
                    f"on {label}: you appended a question while the generator held more than the prefix "
                    "(earlier questions and answers were still there): rewind_to(prefix_len) first"
                )
            _differs(tokenizer, g, want, label, eos)
        details += [
            f"{q!r}: {tokenizer.decode(np.array(g, dtype=np.int32)).strip()[:50]!r}"
            for q, g in zip(questions, got)
        ]
    return details + ["each prefix went through the model once, not once per question"]


SYSTEM = {"role": "system", "content": "You are a helpful assistant."}


def stop_inside_a_token(model, tokenizer, ids, max_new_tokens=60):
    """A stop text spanning two tokens and ending inside the second (a test on the last token's text misses it)."""
    out = greedy(model, ids, max_new_tokens)
    for i in range(1, len(out)):
        before, after = tokenizer.decode(out[:i]), tokenizer.decode(out[: i + 1])
        piece = after[len(before) :]
        if after.startswith(before) and len(piece.strip()) >= 3 and len(before.strip()) >= 3:
            stop = before[-2:] + piece[:2]
            if (
                stop not in before
                and stop in after
                and not after.endswith(stop)
                and stop not in piece
            ):
                return stop
    raise RuntimeError(
        "no token long enough to end a stop text inside it"
    )  # the model changed: fix the checker


def check_generate(answer):
    import numpy as np

    require_callable(answer, "generate(model, tokenizer, prompt_ids, max_new_tokens, stop=None)")
    model, tokenizer = smollm()
    eos = {int(t) for t in tokenizer.eos_token_ids}

    tips, spain = (
        prompt_ids(tokenizer, [SYSTEM, {"role": "user", "content": q}])
        for q in ("Give three tips for staying healthy.", "What is the capital of Spain?")
    )
    cases = [  # (prompt, what, max_new_tokens, stop)
        (spain, "the Spain question", 60, None),  # ends with the end-of-turn token
        (
            tips,
            "the tips question",
            int(_common.rng(1).integers(9, 15)),
            None,
        ),  # ends at the budget
        (tips, "the tips question", 100, "\n\n2."),  # a stop spanning several tokens
        (tips, "the tips question", 40, "healthy"),  # a stop that is in the prompt too
        (
            spain,
            "the Spain question",
            60,
            stop_inside_a_token(model, tokenizer, spain),
        ),  # ends inside a token
    ]
    details = []
    for ids, question, max_new_tokens, stop in cases:
        what = f"{question} with max_new_tokens={max_new_tokens}, stop={stop!r}"
        args = (model, tokenizer, np.array(ids, dtype=np.int32), max_new_tokens) + (
            () if stop is None else (stop,)
        )
        try:
            got = answer(
                *args
            )  # without a stop text, called as the task writes it: stop=None by default
        except Exception as err:  # whatever the learner's function raises is reported, not hidden
            hint = (
                " (max_length limits every token the generator holds, not only the new ones)"
                if "max length" in str(err).lower() or "max_length" in str(err).lower()
                else " (stop is optional: the task's signature has stop=None)"
                if stop is None and "stop" in str(err)
                else ""
            )
            what = (
                what
                if stop is not None
                else f"{question} with max_new_tokens={max_new_tokens} and no stop"
            )
            raise Wrong(
                f"expected your function to run on {what}; it raised {type(err).__name__}: "
                f"{err}{hint}"
            ) from err
        if isinstance(got, str):
            raise Wrong(f"on {what}: expected the new token ids (a list of ints), got text")
        got = _ids(got, what)
        want = greedy(model, ids, max_new_tokens, stop, tokenizer)
        stopped = stop is not None and stop in tokenizer.decode(want)
        ended = (
            "the end-of-turn token"
            if want[-1] in eos
            else "the stop text"
            if stopped
            else "the token budget"
        )
        if got == want:
            details.append(f"{what}: {len(want)} tokens, ended by {ended}")
            continue
        if got[: len(ids)] == ids:
            raise Wrong(
                f"on {what}: expected only the new tokens, got the prompt ({len(ids)} tokens) in front"
            )
        if len(got) > max_new_tokens:
            raise Wrong(
                f"on {what}: expected at most max_new_tokens={max_new_tokens} new tokens, got {len(got)}"
            )
        in_prompt = (
            stop and stop not in tokenizer.decode(got) and stop in tokenizer.decode(ids + got)
        )
        if got and got == want[: len(got)] and in_prompt:
            raise Wrong(
                f"on {what}: you stopped although your answer does not contain {stop!r}: the prompt "
                "does. Look for the stop text in the answer's text only"
            )
        if got and got == want[: len(got)] and ended == "the token budget":
            raise Wrong(
                f"on {what}: your {len(got)} tokens are the start of the greedy answer, but it goes on to "
                "max_new_tokens: max_length limits every token the generator holds, not only the new ones"
            )
        if got[: len(want)] == want:
            hint = (
                f"stop as soon as the answer's text decoded so far contains {stop!r}, even when it spans "
                "several tokens or ends inside one; a test on the last token's text, or endswith, misses those"
                if ended == "the stop text"
                else f"the greedy answer ends there, with {ended}"
            )
            raise Wrong(f"on {what}: you went on after the end: {hint}")
        _differs(tokenizer, got, want, what, eos)
    return details + [
        "greedy decoding is deterministic, so a generation can be tested token for token"
    ]


# exercise id -> checker (helpers.grading.exercises.check looks answers up here)
CHECKS = {
    "07.2": check_answer_each,
    "07.3": check_generate,
}


# Reference answers (a teacher's; the nbgrader source cells are generated from them)
# onnxruntime-genai and notebook 07's cached int4 model, as in the notebook.


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
