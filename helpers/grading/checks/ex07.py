"""Notebook 07's exercises: many questions after one cached prefix, and a greedy loop with a stop text and a token
budget, both judged against the checker's own greedy runs of the notebook's int4 model on prompts the learner never
saw.

Every known mistake here is spotted from the answer's outcomes (``Mistake.spots``) rather than by running its
wrong answer: running one decodes again (a second or more of the two shared cores per mistake tried). Most spots
are their requirement's own judge (``_judged``), where that mistake is the one known cause of what it finds; the
others test what tells their mistake apart (said beside each).
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from typing import Any
from unittest import mock

import numpy as np

from helpers.grading.examiner import Case, Exercise, Mistake, Raised, Requirement

# --- the model and the checker's own greedy runs -------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def smollm():
    import onnxruntime_genai as og

    from helpers.lessons import int4_command  # notebook 07's builder command
    from helpers.pipeline import llm

    folder = llm.cached_int4_model(
        int4_command, log=lambda message: None if message.startswith("reusing") else print(message)
    )
    config = og.Config(str(folder))
    options = {
        "intra_op_num_threads": 2,
        "inter_op_num_threads": 1,
        "session.intra_op.allow_spinning": "0",
    }
    config.overlay(json.dumps({"model": {"decoder": {"session_options": options}}}))
    model = og.Model(config)
    return model, og.Tokenizer(model)


def prompt_ids(tokenizer, messages, add_generation_prompt=True) -> tuple[int, ...]:
    text = tokenizer.apply_chat_template(
        json.dumps(messages), add_generation_prompt=add_generation_prompt
    )
    return tuple(int(t) for t in tokenizer.encode(text))


def fresh_generator(model, ids, max_length, guidance=None):
    """A greedy ``og.Generator`` holding ``ids``, guided by the JSON schema text ``guidance`` if one is given."""
    import onnxruntime_genai as og

    params = og.GeneratorParams(model)
    params.set_search_options(max_length=max_length, do_sample=False)
    if guidance is not None:
        params.set_guidance("json_schema", guidance)
    generator = og.Generator(model, params)
    generator.append_tokens(np.array(ids, dtype=np.int32))
    return generator


@functools.cache
def greedy(ids: tuple[int, ...], max_new_tokens: int, stop: str | None = None) -> tuple[int, ...]:
    """The greedy answer to ``ids`` from a fresh generator: at most ``max_new_tokens``, cut after the token that
    completes ``stop`` in the answer's decoded text (the same for every check: cached)."""
    model, tokenizer = smollm()
    generator = fresh_generator(model, ids, len(ids) + max_new_tokens)
    out: list[int] = []
    while not generator.is_done():
        generator.generate_next_token()
        out.append(int(generator.get_next_tokens()[0]))
        if stop is not None and stop in tokenizer.decode(out):
            break
    return tuple(out)


def _decoded(ids) -> str:
    return smollm()[1].decode(np.array(ids, dtype=np.int32))


def _bare(ids, eos) -> tuple:
    """The tokens without a final end-of-turn token (kept or not, either way)."""
    return tuple(ids[:-1]) if ids and ids[-1] in eos else tuple(ids)


def _leaves(got, want) -> str:
    """Where ``got`` leaves ``want``, never ``want`` itself."""
    if tuple(got) == tuple(want[: len(got)]):
        return f"your {len(got)} tokens are the start of the greedy answer, but it goes on: you stopped too early"
    if _extends(got, want):
        return "you went on after the greedy answer's end"
    first = next(k for k, (a, b) in enumerate(zip(got, want)) if a != b) if got else 0
    yours = _decoded(got[first : first + 4])
    return f"yours leave the greedy answer at new token {first} (yours go on with {yours!r})"


def _extends(got, want) -> bool:
    return len(got) > len(want) and tuple(got[: len(want)]) == tuple(want)


def _short(got, want) -> bool:
    return len(got) < len(want) and tuple(got) == tuple(want[: len(got)])


def _judged(judge, unless=()):
    """A spot (see the module's docstring): the cases on which ``judge`` finds what it tests (none of the kinds
    ``unless``: there the judge's own words name another cause than the mistake's)."""

    def spots(cases, outcomes) -> bool:
        for case, got in zip(cases, outcomes):
            if isinstance(got, Raised) or getattr(case.data, "kind", None) in unless:
                continue
            try:
                if judge(case, got, None) is not None:
                    return True
            except Exception:  # an outcome this judge cannot read is not the mistake it spots
                continue
        return False

    return spots


def _secrets(outcomes) -> list[str]:
    """The reference's answers as text and as the start of their token lists."""
    found = []
    for outcome in outcomes:
        for ids in outcome.answers if isinstance(outcome, Asked) else [outcome.ids]:
            found += [_decoded(ids).strip(), str(list(ids[:2]))[:-1]] if len(ids) > 1 else []
    return [text for text in found if len(text) > 6]


# --- 07.1 One shared prefix, many questions ------------------------------------------------------------------


@dataclass(frozen=True)
class Round:
    """One round of questions after a shared system prompt, and the checker's greedy answer to each alone."""

    prefix: tuple[int, ...]
    asked: tuple[tuple[int, ...], ...]  # the tokens following the prefix, one entry per question
    wants: tuple[tuple[int, ...], ...]  # without a final end-of-turn token
    max_new: int
    eos: frozenset[int]


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


def rounds(rng) -> list[Case]:
    """Each round's questions in an order drawn from the seed, and the cooking ones again in the other order (an
    answer that reorders the questions the same way whatever their order returns one of the two wrong)."""
    _, tokenizer = smollm()
    eos = frozenset(int(t) for t in tokenizer.eos_token_ids)
    cases = []
    for (system, questions, budget), again in zip(ROUNDS, (False, True)):
        order, max_new = rng.permutation(len(questions)), int(rng.integers(*budget))
        for reordered in [order, order[::-1]][: 1 + again]:
            messages = [{"role": "system", "content": system}]
            prefix = prompt_ids(tokenizer, messages, add_generation_prompt=False)
            full = [
                prompt_ids(tokenizer, [*messages, {"role": "user", "content": questions[i]}])
                for i in reordered
            ]
            # a fresh generator per question: no shared cache
            wants = tuple(_bare(greedy(ids, max_new), eos) for ids in full)
            asked = tuple(ids[len(prefix) :] for ids in full)
            name = f"{len(asked)} questions after a {len(prefix)}-token system prompt, max_new_tokens={max_new}"
            name += ", the same questions in the other order" if reordered is not order else ""
            cases.append(Case(name, data=Round(prefix, asked, wants, max_new, eos)))
    return cases


@dataclass(frozen=True)
class Asked:
    """What ``answer_each`` did on a round: what it returned, and each call it made to the generator given."""

    shape: str | None  # what it returned, when not a list with one entry per question
    not_ids: str | None  # the first entry that is not a list of token ids
    answers: tuple[tuple[int, ...], ...]
    shared: tuple[tuple[int, int], ...]  # answers (j, i) that are one list object
    calls: tuple[tuple[str, int, Any], ...]  # (method, tokens held before, its first argument)
    made: int  # og.Generator objects it made


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
            first = args[0] if args else None
            if name == "append_tokens":
                first = tuple(int(t) for t in np.asarray(first).ravel())
            self.calls.append((name, held, first))
            return attr(*args, **kwargs)

        return call


def run_answer_each(answer, case: Case) -> Asked:
    """``answer`` called on a fresh generator holding the round's prefix; og.Generator counted while it runs."""
    import onnxruntime_genai as og

    model, tokenizer = smollm()
    r = case.data
    generator, made, real = Recorder(fresh_generator(model, r.prefix, 1024)), [], og.Generator

    # og.Generator as the learner calls it: counted, then the real one
    def counted(*args, **kwargs):
        made.append(args)
        return real(*args, **kwargs)

    questions = [np.array(q, dtype=np.int32) for q in r.asked]
    with mock.patch.object(og, "Generator", counted):
        got = answer(generator, tokenizer, len(r.prefix), questions, r.max_new)
    calls = tuple(generator.calls)
    if not isinstance(got, (list, tuple)):
        return Asked(type(got).__name__, None, (), (), calls, len(made))
    if got and all(isinstance(t, (int, np.integer)) for t in got):
        return Asked(f"one list of {len(got)} token ids", None, (), (), calls, len(made))
    if len(got) != len(r.asked):
        return Asked(f"a list of {len(got)} items", None, (), (), calls, len(made))
    answers = []
    for i, entry in enumerate(got):
        try:
            if isinstance(entry, str):
                raise TypeError
            answers.append(tuple(int(t) for t in entry))
        except (TypeError, ValueError):
            wrong = f"answer {i + 1} is {type(entry).__name__}, not a list of token ids (ints)"
            return Asked(None, wrong, (), (), calls, len(made))
    shared = tuple((j, i) for i in range(len(got)) for j in range(i) if got[i] is got[j])
    return Asked(None, None, tuple(answers), shared, calls, len(made))


def _one_per_question(case, got, _):
    if got.shape is None:
        return None
    return (
        f"expected a list of {len(case.data.asked)} answers (lists of token ids), got {got.shape}"
    )


def _token_ids(case, got, _):
    return got.not_ids


def _new_tokens_only(case, got, _):
    r = case.data
    for i, (ids, question) in enumerate(zip(got.answers, r.asked)):
        for label, asked in (
            ("the prefix and the question", r.prefix + question),
            ("the question", question),
        ):
            if len(ids) > len(asked) and ids[: len(asked)] == asked:
                return (
                    f"answer {i + 1} starts with {label}'s own tokens; expected only the new tokens"
                )
    return None


def _lists_of_their_own(case, got, _):
    """Two answers are one list object, which a later question's answer overwrote."""
    r = case.data
    for j, i in got.shared:
        if r.wants[i] != r.wants[j] and _bare(got.answers[i], r.eos) == r.wants[i]:
            return f"answers {j + 1} and {i + 1} are one list object"
    return None


def _answers_of_their_own(case, got, _):
    r = case.data
    bare = [_bare(ids, r.eos) for ids in got.answers]
    for i in range(len(bare)):
        for j in range(i):
            if bare[i] == bare[j] and r.wants[i] != r.wants[j]:
                return f"answers {j + 1} and {i + 1} hold the same tokens, though the greedy answers to their questions differ"
    return None


def _in_order(case, got, _):
    bare = [_bare(ids, case.data.eos) for ids in got.answers]
    if sorted(bare) == sorted(case.data.wants) and bare != list(case.data.wants):
        return "yours are the answers to the questions in another order than they were passed"
    return None


def _not_piled_up(case, got, _):
    rewound = any(name == "rewind_to" for name, _, _ in got.calls)
    for i in range(1, len(got.answers)):
        earlier, ids = got.answers[i - 1], got.answers[i]
        if (
            rewound
            and earlier
            and _extends(ids, earlier)
            and _bare(ids, case.data.eos) != case.data.wants[i]
        ):
            return f"answer {i + 1} starts with answer {i}'s tokens"
    return None


def _appends(got):
    return [(held, ids) for name, held, ids in got.calls if name == "append_tokens"]


def _each_on_its_own(case, got, _):
    asked = case.data.asked
    together = sum(asked, ())
    for _, ids in _appends(got):
        if len(asked) > 1 and any(ids[k : k + len(together)] == together for k in range(len(ids))):
            return f"one append_tokens call gave the generator all {len(asked)} questions ({len(ids)} tokens)"
    return None


def _after_the_prefix_alone(case, got, _):
    r = case.data
    for held, ids in _appends(got):
        if held > len(r.prefix) and ids in r.asked:
            return (
                f"you appended question {r.asked.index(ids) + 1} while the generator held {held} tokens, more "
                f"than the prefix's {len(r.prefix)}"
            )
    return None


def _the_generator_given(case, got, _):
    if got.made:
        return f"you made {got.made} new og.Generator(s)"
    r = case.data
    steps = sum(1 for name, _, _ in got.calls if name == "generate_next_token")
    # and tokens picked by hand, appended: neither a question nor the prefix
    steps += sum(
        len(ids)
        for _, ids in _appends(got)
        if ids not in r.asked and ids[: len(r.prefix)] != r.prefix
    )
    tokens = sum(map(len, got.answers))
    # a token picked by hand last in an answer need not be fed
    if steps < tokens - len(got.answers):
        return f"your answers hold {tokens} tokens, but the generator you were given made {steps} decode steps"
    return None


def _prefix_kept(case, got, _):
    prefix_len = len(case.data.prefix)
    below = [n for name, _, n in got.calls if name == "rewind_to" and n < prefix_len]
    return f"you rewound to {below[0]} tokens, below prefix_len={prefix_len}" if below else None


def _prefix_once(case, got, _):
    prefix = case.data.prefix
    if any(held >= len(prefix) and ids[: len(prefix)] == prefix for held, ids in _appends(got)):
        return "you appended the prefix while the generator held it, so it holds it twice"
    return None


def _within_budget(case, got, _):
    r = case.data
    longest = max(len(_bare(ids, r.eos)) for ids in got.answers)
    return (
        f"got an answer of {longest} new tokens, max_new_tokens={r.max_new}"
        if longest > r.max_new
        else None
    )


def _cut_question(case, got, only=None) -> str:
    """What the calls show when a question (any, or number ``only``) never went in whole: its first tokens left
    out of every append (its answer then differs from the first token on, as a token other than the most likely
    one would make it)."""
    appended = [ids for _, ids in _appends(got)]
    for k, question in enumerate(case.data.asked):
        if only is not None and k != only:
            continue
        if any(question == ids[-len(question) :] for ids in appended if len(ids) >= len(question)):
            continue
        for cut in range(1, len(question)):
            if question[cut:] in appended:
                return f": you appended question {k + 1} without its first {cut} token(s)"
    return ""


def _greedy_answers(case, got, _):
    r = case.data
    for i, (ids, want) in enumerate(zip(got.answers, r.wants)):
        if _bare(ids, r.eos) != want:
            return (
                f"answer {i + 1}: {_leaves(_bare(ids, r.eos), want)}{_cut_question(case, got, i)}"
            )
    return None


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


def _decode_steps(generator, max_new_tokens):
    ids = []
    while not generator.is_done() and len(ids) < max_new_tokens:
        generator.generate_next_token()
        ids.append(int(generator.get_next_tokens()[0]))
    return ids


# rewinds after answering instead of before asking
def rewind_after_each_answer(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    answers = []
    for question in questions_ids:
        generator.append_tokens(question)
        answers.append(_decode_steps(generator, max_new_tokens))
        generator.rewind_to(prefix_len)
    return answers


# a counted loop, the answer read back from get_sequence (which leaves out a final end-of-turn)
def read_back_from_the_sequence(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
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


# notebook 07's Chat.ask applied to the task: keep what the generator holds in common with prefix + question (the
# question's first tokens, <|im_start|>user, may be shared too), rewind to there, append the rest
def notebook_chat_reuse(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
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
        answers.append(_decode_steps(generator, max_new_tokens))
    return answers


# greedy by hand: the most likely token read from the logits and appended
def argmax_by_hand(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
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


def _with_question_tokens(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    answers = []
    for question in questions_ids:
        generator.rewind_to(prefix_len)
        generator.append_tokens(question)
        _decode_steps(generator, max_new_tokens)
        answers.append(generator.get_sequence(0)[prefix_len:].tolist())  # the question is in there
    return answers


def _one_list_object(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    answers, ids = [], []  # one list for every answer
    for question in questions_ids:
        generator.rewind_to(prefix_len)
        generator.append_tokens(question)
        ids.clear()
        while not generator.is_done() and len(ids) < max_new_tokens:
            generator.generate_next_token()
            ids.append(int(generator.get_next_tokens()[0]))
        answers.append(ids)
    return answers


def _list_never_emptied(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    answers, ids = [], []  # each answer goes on from the previous one's tokens
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


def _all_questions_at_once(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    generator.append_tokens(np.concatenate(questions_ids))
    return [_decode_steps(generator, max_new_tokens) for _ in questions_ids]


def _no_rewind(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    answers = []
    for question in questions_ids:
        generator.append_tokens(question)  # the previous question and answer stay
        answers.append(_decode_steps(generator, max_new_tokens))
    return answers


def _new_generator_each_time(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    model, _ = smollm()  # the learner's notebook has the same model
    prefix = generator.get_sequence(0)[:prefix_len].copy()
    return [
        generate(model, tokenizer, np.concatenate([prefix, q]), max_new_tokens)
        for q in questions_ids
    ]


def _rewind_to_zero(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    prefix = generator.get_sequence(0)[:prefix_len].copy()
    answers = []
    for question in questions_ids:
        generator.rewind_to(0)  # the prefix's cache is computed again every time
        generator.append_tokens(np.concatenate([prefix, question]))
        answers.append(_decode_steps(generator, max_new_tokens))
    return answers


def _prefix_appended_again(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    prefix = generator.get_sequence(0)[:prefix_len].copy()
    answers = []
    for question in questions_ids:
        generator.rewind_to(prefix_len)
        generator.append_tokens(np.concatenate([prefix, question]))  # the prefix is already there
        answers.append(_decode_steps(generator, max_new_tokens))
    return answers


def _second_best_token(generator, tokenizer, prefix_len, questions_ids, max_new_tokens):
    """Not greedy: the runner-up token from the logits (the generator then goes on from that one)."""
    answers = []
    for question in questions_ids:
        generator.rewind_to(prefix_len)
        generator.append_tokens(question)
        ids = []
        while not generator.is_done() and len(ids) < max_new_tokens:
            token = int(np.argsort(generator.get_logits()[0, -1])[-2])
            generator.append_tokens(np.array([token], dtype=np.int32))
            ids.append(token)
        answers.append(ids)
    return answers


def _answer_is_flat(cases, outcomes) -> bool:
    return any(isinstance(o, Asked) and (o.shape or "").startswith("one list of") for o in outcomes)


def _one_answer_for_all(cases, outcomes) -> bool:
    return any(
        isinstance(o, Asked)
        and o.answers
        and len(set(c.data.wants)) > 1
        and all(_bare(ids, c.data.eos) == c.data.wants[0] for ids in o.answers)
        for c, o in zip(cases, outcomes)
    )


def _all_short(cases, outcomes) -> bool:
    pairs = [
        (_bare(ids, c.data.eos), want)
        for c, o in zip(cases, outcomes)
        if isinstance(o, Asked)
        for ids, want in zip(o.answers, c.data.wants)
    ]
    return all(g == w or _short(g, w) for g, w in pairs) and any(_short(g, w) for g, w in pairs)


def _first_token_other(cases, outcomes) -> bool:
    # not when a question went in cut short: the judge's words name that cause
    if any(isinstance(o, Asked) and _cut_question(c, o) for c, o in zip(cases, outcomes)):
        return False
    return any(
        isinstance(o, Asked) and ids and want and ids[0] != want[0]
        for c, o in zip(cases, outcomes)
        for ids, want in zip(o.answers, c.data.wants)
    )


ANSWER_EACH = Exercise(
    id="07.1",
    expects="your function answer_each(generator, tokenizer, prefix_len, questions_ids, max_new_tokens)",
    reference=answer_each,
    cases=rounds,
    run=run_answer_each,
    # the expected answers are the checker's own greedy runs, which the cases hold for the spots; running the
    # reference as well would decode every answer a second time
    judged_alone=True,
    requirements=[
        Requirement("a list: one answer per question", _one_per_question),
        Requirement("each answer a list of token ids", _token_ids),
        Requirement("only the answer's new tokens, not the question's", _new_tokens_only),
        # what the questions went in with first: appended together, or after earlier ones, they make answers
        # that are empty or alike, which the requirements after would name
        Requirement("each question on its own, after the prefix", _each_on_its_own),
        Requirement("as if that question were the only one", _after_the_prefix_alone),
        Requirement("each answer a list of its own", _lists_of_their_own),
        Requirement("each question its own answer", _answers_of_their_own),
        Requirement("the answers in the questions' order", _in_order),
        Requirement("each answer only its own new tokens", _not_piled_up),
        Requirement("reusing the generator given, not a new one", _the_generator_given),
        Requirement("reusing its cache: the prefix not thrown away", _prefix_kept),
        Requirement("the prefix not appended again", _prefix_once),
        Requirement("at most max_new_tokens", _within_budget),
        Requirement("the greedy answer, whole", _greedy_answers),
    ],
    mistakes=[
        Mistake(
            "the first answer alone",
            lambda g, t, n, questions, m: answer_each(g, t, n, questions, m)[0],
            "yours is one answer: return a list holding one answer per question",
            "a list: one answer per question",
            spots=_answer_is_flat,  # one list of ints
        ),
        Mistake(
            "decoded text",
            lambda g, t, n, questions, m: [
                t.decode(ids) for ids in answer_each(g, t, n, questions, m)
            ],
            "yours are texts: return each answer's token ids, not their decoded text",
            "each answer a list of token ids",
            spots=lambda cases, outcomes: any(
                isinstance(o, Asked) and o.not_ids and " str," in o.not_ids for o in outcomes
            ),
        ),
        Mistake(
            "the question's tokens too",
            _with_question_tokens,
            "yours start with the question's own tokens, read back from the generator's sequence: keep only "
            "the tokens it generated",
            "only the answer's new tokens, not the question's",
            spots=_judged(_new_tokens_only),  # an answer holding a question's tokens
        ),
        Mistake(
            "one list object for every answer",
            _one_list_object,
            "they are one list object, emptied and filled by every question in turn: each answer needs a list "
            "of its own",
            "each answer a list of its own",
            spots=_judged(_lists_of_their_own),  # one object returned as two answers
        ),
        Mistake(
            "the first answer repeated",
            lambda g, t, n, questions, m: answer_each(g, t, n, questions[:1], m) * len(questions),
            "the first question's answer is repeated for every question: each question gets its own answer",
            "each question its own answer",
            spots=_one_answer_for_all,  # every answer is the first question's greedy answer
        ),
        Mistake(
            "the questions sorted",
            lambda g, t, n, questions, m: answer_each(g, t, n, sorted(questions, key=list), m),
            "the right answers, in another order: answer k must answer questions_ids[k], whatever their order",
            "the answers in the questions' order",
            spots=_judged(_in_order),  # the greedy answers, in another order
        ),
        Mistake(
            "one list never emptied",
            _list_never_emptied,
            "each answer goes on from the previous answer's tokens: start each answer with an empty list",
            "each answer only its own new tokens",
            spots=_judged(_not_piled_up),  # an answer starting with the one before it
        ),
        Mistake(
            "all questions at once",
            _all_questions_at_once,
            "one append_tokens call gave the generator every question: append each question after the prefix "
            "on its own, as if it were the only one",
            "each question on its own, after the prefix",
            spots=_judged(_each_on_its_own),  # the questions appended together
        ),
        Mistake(
            "no rewind",
            _no_rewind,
            "you appended a question while the generator still held earlier questions and answers: "
            "rewind_to(prefix_len) first",
            "as if that question were the only one",
            # a question appended after more than the prefix
            spots=_judged(_after_the_prefix_alone),
        ),
        Mistake(
            "a new generator per question",
            _new_generator_each_time,
            "every answer must come from the generator you were given, which holds the prefix's KV cache "
            "(rewind_to, section 5), not from a new og.Generator",
            "reusing the generator given, not a new one",
            spots=lambda cases, outcomes: any(isinstance(o, Asked) and o.made for o in outcomes),
        ),
        Mistake(
            "rewound to zero",
            _rewind_to_zero,
            "you rewound below prefix_len: that throws away the prefix's cache you were asked to reuse",
            "reusing its cache: the prefix not thrown away",
            spots=_judged(_prefix_kept),  # a rewind below the prefix
        ),
        Mistake(
            "the prefix appended again",
            _prefix_appended_again,
            "you appended the prefix again, so the generator holds it twice: it is already in the cache, "
            "append only the question's tokens",
            "the prefix not appended again",
            spots=_judged(_prefix_once),  # the prefix appended onto itself
        ),
        Mistake(
            "the budget ignored",
            lambda g, t, n, questions, m: answer_each(g, t, n, questions, 2 * m),
            "an answer holds more than max_new_tokens new tokens",
            "at most max_new_tokens",
            spots=_judged(_within_budget),  # an answer over the budget
        ),
        Mistake(
            "one token short",
            lambda g, t, n, questions, m: answer_each(g, t, n, questions, m - 1),
            "your answers are the start of the greedy answers, but they go on: you stopped too early",
            "the greedy answer, whole",
            spots=_all_short,  # every answer the greedy one or its start
        ),
        Mistake(
            "the runner-up token",
            _second_best_token,
            "yours leave the greedy answer at its first token: take the most likely token at every step",
            "the greedy answer, whole",
            spots=_first_token_other,  # an answer whose first token is not the greedy one
        ),
    ],
    alternatives=[
        rewind_after_each_answer,
        read_back_from_the_sequence,
        notebook_chat_reuse,
        argmax_by_hand,
    ],
    praise=lambda cases: (
        [c.name for c in cases] + ["each prefix went through the model once, not once per question"]
    ),
    secrets=_secrets,
    marks=("llm",),
)


# --- 07.2 Stop text and token budget -------------------------------------------------------------------------

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}


@dataclass(frozen=True)
class Expect:
    """A prompt, its budget and stop text, what the case tests (``kind``), and the checker's greedy answer."""

    prompt: tuple[int, ...]
    max_new: int
    stop: str | None
    kind: str
    want: tuple[int, ...]
    eos: frozenset[int]


@dataclass(frozen=True)
class Generated:
    """What ``generate`` returned: its token ids, or None and what it was."""

    ids: tuple[int, ...] | None
    returned: str = "token ids"


def stop_inside_a_token(ids, rng) -> str:
    """A stop text spanning two tokens of the greedy answer and ending inside the second (a test on the last
    token's text, or endswith, misses it), one of those the answer holds drawn from ``rng``."""
    out, found = greedy(ids, 60), []
    for i in range(1, len(out)):
        before, after = _decoded(out[:i]), _decoded(out[: i + 1])
        piece = after[len(before) :]
        if after.startswith(before) and len(piece.strip()) >= 3 and len(before.strip()) >= 3:
            stop = before[-2:] + piece[:2]
            if (
                stop not in before
                and stop in after
                and not after.endswith(stop)
                and stop not in piece
            ):
                found.append(stop)
    if not found:  # the model changed: fix the checker
        raise RuntimeError("no token long enough to end a stop text inside it")
    return str(rng.choice(found))


def stop_in_another_case(ids, rng) -> str:
    """A word of the greedy answer in another case, which neither the answer nor the prompt holds as written (a
    stop text matched whatever its case ends the answer there), drawn from ``rng``."""
    text, prompt = _decoded(greedy(ids, 60)), _decoded(ids)
    words = sorted({w.upper() for w in re.findall(r"[A-Za-z]{4,}", text)})
    found = [w for w in words if w not in text and w not in prompt]
    if not found:  # the model changed: fix the checker
        raise RuntimeError("no word of the answer to write in another case")
    return str(rng.choice(found))


def stop_at_the_start(ids) -> str:
    """The greedy answer's first word: a stop text at index 0 of the answer (a test ``text.find(stop) > 0``, or
    one looking only past the first token, misses it)."""
    text = _decoded(greedy(ids, 60))
    first = re.match(r"[A-Za-z]+", text)
    if first is None:  # the model changed: fix the checker
        raise RuntimeError(f"the answer does not start with a word: {text[:20]!r}")
    return first.group()


# a stop text holding characters a pattern reads otherwise (. any character, ? optional, ( a group), never in the
# answer as written: matched as a regular expression, it matches at once
PATTERN_STOP = "(...)?"


def generations(rng) -> list[Case]:
    """Two questions; an answer ended by the end-of-turn token, one by a budget drawn from the seed, and five ended
    by a stop text: spanning tokens, in the prompt too, ending inside a token, and in another case in the answer
    (these two drawn from the seed), and at index 0 of the answer; and a stop text of regular expression
    characters the answer does not hold."""
    _, tokenizer = smollm()
    eos = frozenset(int(t) for t in tokenizer.eos_token_ids)
    tips, spain = (
        prompt_ids(tokenizer, [SYSTEM, {"role": "user", "content": q}])
        for q in ("Give three tips for staying healthy.", "What is the capital of Spain?")
    )
    drawn = [  # (prompt, question, max_new_tokens, stop, what the case tests)
        (spain, "the Spain question", 60, None, "end-of-turn"),
        (tips, "the tips question", int(rng.integers(9, 15)), None, "budget"),
        (tips, "the tips question", 100, "\n\n2.", "spans"),
        (tips, "the tips question", 40, "healthy", "in the prompt"),
        (spain, "the Spain question", 60, stop_inside_a_token(spain, rng), "inside"),
        (spain, "the Spain question", 60, stop_in_another_case(spain, rng), "case"),
        (spain, "the Spain question", 60, stop_at_the_start(spain), "first"),
        (spain, "the Spain question", 60, PATTERN_STOP, "pattern"),
    ]
    return [
        Case(
            f"{question} with max_new_tokens={n}, " + (f"stop={stop!r}" if stop else "no stop"),
            data=Expect(ids, n, stop, kind, greedy(ids, n, stop), eos),
        )
        for ids, question, n, stop, kind in drawn
    ]


def run_generate(answer, case: Case) -> Generated:
    """``answer`` on the case's prompt; without a stop text, called as the task writes it: stop=None by default."""
    model, tokenizer = smollm()
    e = case.data
    stop = () if e.stop is None else (e.stop,)
    got = answer(model, tokenizer, np.array(e.prompt, dtype=np.int32), e.max_new, *stop)
    if isinstance(got, str):
        return Generated(None, "text")
    try:
        return Generated(tuple(int(t) for t in got))
    except (TypeError, ValueError):
        return Generated(None, type(got).__name__)


def _stop_optional(case, got, _):
    # met by every answer that runs: one without the default raises on the cases without a stop text, which the
    # examiner reports (naming the mistake) before any judge
    return None


def _ids_returned(case, got, _):
    return (
        None
        if got.ids is not None
        else f"expected the new token ids (a list of ints), got {got.returned}"
    )


def _only_new(case, got, _):
    prompt = case.data.prompt
    if got.ids[: len(prompt)] == prompt:
        return f"expected only the new tokens, got the prompt ({len(prompt)} tokens) in front"
    return None


def _at_most(case, got, _):
    n = case.data.max_new
    return (
        f"expected at most max_new_tokens={n} new tokens, got {len(got.ids)}"
        if len(got.ids) > n
        else None
    )


def _budget_used(case, got, _):
    e = case.data
    if e.kind == "budget" and _short(got.ids, e.want):
        return f"your {len(got.ids)} tokens are the start of the greedy answer, but it goes on to max_new_tokens"
    return None


def _eos_dropped(case, got, _):
    e = case.data
    return (
        "your answer lacks its last token, the end-of-turn token"
        if got.ids == e.want[:-1] and e.want[-1] in e.eos
        else None
    )


def _past_eos(case, got, _):
    e = case.data
    return (
        "you went on after the end-of-turn token"
        if e.want[-1] in e.eos and _extends(got.ids, e.want)
        else None
    )


def _end_of_turn(case, got, want):
    return _eos_dropped(case, got, want) or _past_eos(case, got, want)


def _never_stopped(kind):
    """On the case testing ``kind``: the answer went on past the stop text to its end (a stop test missing it)."""

    def judge(case, got, _):
        e = case.data
        ended = got.ids and (got.ids[-1] in e.eos or len(got.ids) >= e.max_new)
        if e.kind == kind and ended and _extends(got.ids, e.want):
            return f"your answer holds {e.stop!r}, yet goes on to its end"
        return None

    return judge


def _stopped_without(case, got, _, where):
    """The answer stopped early, though its text holds ``stop`` only ``where`` (in the prompt, in another case)."""
    e = case.data
    text = _decoded(got.ids)
    if not e.stop or not _short(got.ids, e.want) or e.stop in text:
        return None
    found = {
        "prompt": e.stop in _decoded(e.prompt + got.ids),
        "case": e.stop.casefold() in text.casefold() or e.kind == "pattern",
    }[where]
    if not found:
        return None
    if e.kind == "pattern":
        return (
            f"you stopped, though your answer does not hold {e.stop!r} as written: its ( . ? are characters to "
            "find, not a pattern"
        )
    return f"you stopped, though your answer does not hold {e.stop!r}"


def _answer_only(case, got, _):
    return _stopped_without(case, got, _, "prompt")


def _case_and_all(case, got, _):
    return _stopped_without(case, got, _, "case")


def _right_after(case, got, _):
    e = case.data
    if e.stop and e.stop in _decoded(e.want) and _extends(got.ids, e.want):
        where = " (here the stop text starts the answer, at index 0)" if e.kind == "first" else ""
        return f"you went on after the token completing the stop text{where}"
    return None


def _completing_token(case, got, _):
    e = case.data
    if e.stop and e.stop in _decoded(e.want) and got.ids == e.want[:-1]:
        return "your answer lacks the token that completes the stop text"
    return None


def _greedy(case, got, _):
    return None if got.ids == case.data.want else _leaves(got.ids, case.data.want)


def generate(model, tokenizer, prompt_ids, max_new_tokens: int, stop: str | None = None) -> list:
    """Greedy new token ids: at most max_new_tokens, ending at end-of-turn or with the token completing ``stop``."""
    import onnxruntime_genai as og

    params = og.GeneratorParams(model)
    # the prompt and the answer
    params.set_search_options(max_length=len(prompt_ids) + max_new_tokens, do_sample=False)
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


# no token stream: the answer decoded whole at every step, the budget counted by hand
def decode_everything_each_step(model, tokenizer, prompt_ids, max_new_tokens, stop=None):
    import onnxruntime_genai as og

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


# a generous max_length, the budget and the end-of-turn token handled by the loop itself
def large_max_length_and_own_count(model, tokenizer, prompt_ids, max_new_tokens, stop=None):
    import onnxruntime_genai as og

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


# notebook 07's section-3 loop (token stream, answer_ids) with the budget in max_length and a stop test on the
# streamed text; a numpy array read back from the generator's sequence
def notebook_loop_as_numpy(model, tokenizer, prompt_ids, max_new_tokens, stop=None):
    import onnxruntime_genai as og

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
    new = generator.get_sequence(0)[len(prompt_ids) :]
    last = int(generator.get_next_tokens()[0])
    # get_sequence may leave out the last
    return new if len(new) and new[-1] == last else np.append(new, last)


def generate_variant(
    max_length=lambda prompt, new: prompt + new, stop_test="text", keep_eos=True, sample=False
):
    """The reference with one mistake: in max_length, in the stop test, dropping the end-of-turn token, or
    sampling."""

    def generate(model, tokenizer, prompt_ids, max_new_tokens, stop=None):
        import onnxruntime_genai as og

        params = og.GeneratorParams(model)
        options = {"temperature": 1.5, "random_seed": 3} if sample else {}
        params.set_search_options(
            max_length=max_length(len(prompt_ids), max_new_tokens), do_sample=sample, **options
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
            if (
                stop is not None
                and {
                    "text": lambda: stop in text,
                    "last-token": lambda: stop in piece,
                    "endswith": lambda: text.endswith(stop),
                    "prompt-too": lambda: stop in tokenizer.decode(generator.get_sequence(0)),
                    "any-case": lambda: stop.casefold() in text.casefold(),
                    "every-other-token": lambda: stop in text and len(new_ids) % 2 == 0,
                }[stop_test]()
            ):
                break
        return new_ids

    return generate


def _fixed_loop_without_is_done(model, tokenizer, prompt_ids, max_new_tokens, stop=None):
    import onnxruntime_genai as og

    params = og.GeneratorParams(model)
    params.set_search_options(max_length=len(prompt_ids) + max_new_tokens, do_sample=False)
    generator = og.Generator(model, params)
    generator.append_tokens(prompt_ids)
    out = []
    for _ in range(max_new_tokens):  # goes on after the end-of-turn token
        generator.generate_next_token()
        out.append(int(generator.get_next_tokens()[0]))
        if stop and stop in tokenizer.decode(out):
            break
    return out


def _stop_token_dropped(model, tokenizer, prompt_ids, max_new_tokens, stop=None):
    ids = generate(model, tokenizer, prompt_ids, max_new_tokens, stop)
    return ids[:-1] if stop is not None and stop in tokenizer.decode(ids) else ids


def _raised_on(cases, outcomes, words, stopless=False) -> bool:
    return any(
        isinstance(o, Raised)
        and (not stopless or c.data.stop is None)
        and all(w in str(o).lower() for w in words)
        for c, o in zip(cases, outcomes)
    )


def _leaves_every_answer(cases, outcomes) -> bool:
    # an answer of one token (a stop text at index 0) is the start of many another answer: left out
    pairs = [(o, c.data.want) for c, o in zip(cases, outcomes) if len(c.data.want) > 1]
    return all(
        isinstance(o, Generated)
        and o.ids is not None
        and o.ids != w
        and not _short(o.ids, w)
        and not _extends(o.ids, w)
        for o, w in pairs
    )


def _ending(e: Expect) -> str:
    if e.want[-1] in e.eos:
        return "the end-of-turn token"
    return "the stop text" if e.stop and e.stop in _decoded(e.want) else "the token budget"


GENERATE = Exercise(
    id="07.2",
    expects="your function generate(model, tokenizer, prompt_ids, max_new_tokens, stop=None)",
    reference=generate,
    cases=generations,
    run=run_generate,
    # the expected answers are the checker's own greedy runs, which the cases hold for the spots; running the
    # reference as well would decode every answer a second time
    judged_alone=True,
    requirements=[
        Requirement("stop is optional (stop=None)", _stop_optional),
        Requirement("returns the new token ids", _ids_returned),
        Requirement("only the new token ids", _only_new),
        Requirement("at most max_new_tokens", _at_most),
        Requirement("max_length leaving room for max_new_tokens", _budget_used),
        Requirement("ends with the end-of-turn token if it comes, kept", _end_of_turn),
        Requirement("a stop text spanning several tokens", _never_stopped("spans")),
        Requirement("a stop text ending inside a token", _never_stopped("inside")),
        Requirement("stops right after the token completing stop", _right_after),
        Requirement("the token completing stop kept", _completing_token),
        Requirement("the stop text looked for in the answer only", _answer_only),
        Requirement("the stop text matched as written, case and all", _case_and_all),
        Requirement("greedy", _greedy),
    ],
    mistakes=[
        Mistake(
            "stop without a default",
            lambda model, t, ids, n, stop: generate(model, t, ids, n, stop),
            "called without a stop text it raised: stop is optional, the task's signature has stop=None",
            "stop is optional (stop=None)",
            spots=lambda cases, outcomes: _raised_on(cases, outcomes, ["stop"], stopless=True),
        ),
        Mistake(
            "decoded text",
            lambda model, t, ids, n, stop=None: t.decode(generate(model, t, ids, n, stop)),
            "yours is text: return the new token ids, a list of ints",
            "returns the new token ids",
            spots=lambda cases, outcomes: any(
                isinstance(o, Generated) and o.returned == "text" for o in outcomes
            ),
        ),
        Mistake(
            "the whole sequence",
            lambda model, t, ids, n, stop=None: [*ids, *generate(model, t, ids, n, stop)],
            "yours start with the prompt's tokens: return only the new ones",
            "only the new token ids",
            spots=_judged(_only_new),  # the prompt in front
        ),
        Mistake(
            "max_length one too many",
            generate_variant(max_length=lambda prompt, new: prompt + new + 1),
            "an answer holds more than max_new_tokens new tokens: what does that make max_length?",
            "at most max_new_tokens",
            spots=_judged(_at_most),  # over the budget
        ),
        Mistake(
            "max_length: the new tokens alone",
            generate_variant(max_length=lambda prompt, new: new),
            "it raised about the maximum length: max_length limits every token the generator holds, not only "
            "the new ones",
            "max_length leaving room for max_new_tokens",
            spots=lambda cases, outcomes: _raised_on(cases, outcomes, ["max", "length"]),
        ),
        Mistake(
            "max_length one too few",
            generate_variant(max_length=lambda prompt, new: prompt + new - 1),
            "yours stop before max_new_tokens though the greedy answer goes on: max_length limits every token "
            "the generator holds, not only the new ones",
            "max_length leaving room for max_new_tokens",
            spots=_judged(_budget_used),  # short of the budget on the case the budget ends
        ),
        Mistake(
            "the end-of-turn token dropped",
            generate_variant(keep_eos=False),
            "your answer lacks its last token, the end-of-turn token: keep it, it is one of the new tokens",
            "ends with the end-of-turn token if it comes, kept",
            spots=_judged(_eos_dropped),  # all but the final end-of-turn token
        ),
        Mistake(
            "no is_done()",
            _fixed_loop_without_is_done,
            "you went on after the end-of-turn token: the greedy answer ends there (generator.is_done())",
            "ends with the end-of-turn token if it comes, kept",
            spots=_judged(_past_eos),  # tokens after the end-of-turn token
        ),
        Mistake(
            "the last token's text tested",
            generate_variant(stop_test="last-token"),
            "you went on after the stop text, which spans several tokens: look for it in the answer's text "
            "decoded so far, not in the last token's",
            "a stop text spanning several tokens",
            spots=_judged(_never_stopped("spans")),  # past a stop text spanning tokens, to the end
        ),
        Mistake(
            "endswith",
            generate_variant(stop_test="endswith"),
            "you went on after the stop text, which ends inside a token: look for it anywhere in the answer's "
            "text decoded so far, not at its end",
            "a stop text ending inside a token",
            # past a stop text ending inside a token, to the end
            spots=_judged(_never_stopped("inside")),
        ),
        Mistake(
            "the prompt searched too",
            generate_variant(stop_test="prompt-too"),
            "you stopped although your answer does not hold the stop text: the prompt does. Look for it in the "
            "answer's text only",
            "the stop text looked for in the answer only",
            spots=_judged(_answer_only),  # stopped on the prompt's text
        ),
        Mistake(
            "any case",
            generate_variant(stop_test="any-case"),
            "you stopped although your answer holds the stop text only in another case: match it as written",
            "the stop text matched as written, case and all",
            spots=_judged(_case_and_all, unless=("pattern",)),  # stopped on it in another case
        ),
        Mistake(
            "tested every other token",
            generate_variant(stop_test="every-other-token"),
            "you went on after the token completing the stop text: test for it after every token",
            "stops right after the token completing stop",
            spots=_judged(_right_after, unless=("first",)),  # past the token completing stop
        ),
        Mistake(
            "the completing token dropped",
            _stop_token_dropped,
            "your answer lacks the token that completes the stop text: keep it, it is one of the new tokens",
            "the token completing stop kept",
            spots=_judged(_completing_token),  # all but the token completing the stop text
        ),
        Mistake(
            "sampled",
            generate_variant(sample=True),
            "yours leave the greedy answer on every prompt: take the most likely token at every step "
            "(do_sample=False)",
            "greedy",
            spots=_leaves_every_answer,  # on every case, neither the greedy answer, its start, nor more
        ),
    ],
    alternatives=[
        decode_everything_each_step,
        large_max_length_and_own_count,
        notebook_loop_as_numpy,
    ],
    praise=lambda cases: (
        [f"{c.name}: ended by {_ending(c.data)}" for c in cases]
        + ["greedy decoding is deterministic, so a generation can be tested token for token"]
    ),
    secrets=_secrets,
    marks=("llm",),
    setup="import onnxruntime_genai as og",
)

EXERCISES = [ANSWER_EACH, GENERATE]
