"""Notebook 08's exercises: a bounded JSON schema for a new extraction task, and time per layer from profiles.

08.1's answer is a schema. Its outcome on a case is what jsonschema makes of an answer the case holds (accepted or
refused), or what SmolLM2 writes guided by it (``set_guidance``) on a sentence or on a prompt inviting runs of
whitespace. Generation runs only for a schema meeting what the exercise states of right and wrong answers, so that
a schema refusing a right answer (and each known mistake of that kind) is judged without the model. 08.2's cases
are profiles the check writes, as ``enable_profiling`` writes them.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from helpers.grading.examiner import Case, Exercise, Mistake, Requirement, fresh_folder

# --- 08.1 A schema for a new task -----------------------------------------------------------------------------


def bounded_person_schema() -> dict:
    """The person named in a sentence: every string, number and whitespace bounded."""
    return {
        "type": "object",
        "properties": {
            "name": {"type": "string", "maxLength": 40},  # bounded: cannot loop
            "age": {"type": "integer", "minimum": 0, "maximum": 120},
        },
        "required": ["name", "age"],
        "additionalProperties": False,
        "x-guidance": {"whitespace_flexible": False},  # no free whitespace
    }


NAMES_40 = [
    "Maximilian Alexander von Hohenberg-Riedl",
    "Anna-Katharina Wilhelmina Oppenheimer-Ru",
    "Jean-Baptiste Emmanuel Rousseau-Delacroi",
    "Ngozi Adaeze Chukwuemeka-Okonkwo Obioraa",
]
SENTENCES = [
    "Yusuf Demir turned 29 in March.",
    "At 83, Helga Braun still swims in the lake every day.",
    "The youngest player, Lucas Moreau, is 17.",
    "Mei Chen, 41, runs the bookshop on the corner.",
    "Our neighbour Tomás Ruiz celebrated his 65th birthday yesterday.",
    "Priya Nair, aged 34, won the chess tournament.",
]
SYSTEM = 'You extract the name and the age of the person named in a sentence, as JSON with the keys "name" and "age".'
TASK = {  # what every answer generated on a sentence must be, whatever the schema's bounds
    "type": "object",
    "required": ["name", "age"],
    "additionalProperties": False,
    "properties": {
        "name": {"type": "string", "maxLength": 200},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
    },
}
LONG_NAME = 200  # characters: a name this long could fill MAX_NEW tokens on its own
MAX_NEW = 200  # new tokens for an answer on a sentence
WHITESPACE_PROBES = [  # (where, the whitespace, an example answer with a long run of it there): prompts inviting it
    ("after '{'", "spaces", "{" + " " * 48 + '"name":"{n}","age":{a}}'),
    ("before ','", "newlines", '{"name":"{n}"' + "\n" * 48 + ',"age":{a}}'),
    ("before ':'", "newlines", '{"name"' + "\n" * 48 + ':"{n}","age":{a}}'),
    ("after ','", "newlines", '{"name":"{n}",' + "\n" * 48 + '"age":{a}}'),
]
# whitespace characters in a row: more than any bounded JSON layout of this answer needs
WHITESPACE_RUN = 16
WHITESPACE_NEW = 32  # new tokens on a whitespace prompt

R1 = dict(
    valid="a valid JSON schema",
    object="an object of a name and an age, both required",
    only="no other key",
    name_string="the name a string",
    name_fits="any name up to 40 characters fits",
    whole="the age a whole number",
    ages="ages 0 to 120",
    bounded="the name bounded",
    usable="usable by onnxruntime-genai's set_guidance",
    answers="answers to unseen sentences: JSON of a name and an age, ending by themselves",
    whitespace="whitespace bounded",
)


def person_cases(rng):
    """Answers a schema must accept or refuse (names and ages drawn), then three unseen sentences and four prompts
    inviting whitespace, which the model answers guided by the schema."""
    name40, short = str(rng.choice(NAMES_40)), str(rng.choice(["Bo", "Li", "Al"]))
    # an age any bound from 0 to 120 holds: a probe of another requirement never trips over the age's bounds
    age = int(rng.integers(18, 90))
    typical = str(rng.choice(["Ida Berg", "Tom Okafor", "Ana Lind"]))
    probes = [  # (requirement, what the answer is, the answer, accepted by a right schema?)
        (R1["object"], "a right answer", {"name": typical, "age": age}, True),
        (R1["object"], 'an answer without "name"', {"age": age}, False),
        (R1["object"], 'an answer without "age"', {"name": name40}, False),
        (
            R1["only"],
            "an answer with one more key",
            {"name": name40, "age": age, "city": "Oslo"},
            False,
        ),
        (R1["name_string"], "the name null", {"name": None, "age": age}, False),
        (R1["name_string"], "a number as the name", {"name": 7, "age": age}, False),
        (R1["name_fits"], f"a {len(name40)}-character name", {"name": name40, "age": age}, True),
        (
            R1["name_fits"],
            "a name with accents, an apostrophe and a hyphen",
            {"name": "Zoë O'Brien-Núñez", "age": age},
            True,
        ),
        (R1["whole"], "the age as a string", {"name": short, "age": str(age)}, False),
        (R1["whole"], f"the age {age + 0.5}", {"name": short, "age": age + 0.5}, False),
        (R1["whole"], "the age null", {"name": short, "age": None}, False),
        (R1["ages"], "the age 0", {"name": short, "age": 0}, True),
        (R1["ages"], "the age 120", {"name": short, "age": 120}, True),
        (R1["ages"], "the age -1", {"name": short, "age": -1}, False),
        (R1["ages"], "the age 121", {"name": short, "age": 121}, False),
        (
            R1["bounded"],
            f"a {LONG_NAME}-character name",
            {"name": "Ana " * (LONG_NAME // 4), "age": age},
            False,
        ),
    ]
    # the probes of one requirement in an order new with each seed
    order = sorted(
        rng.permutation(len(probes)), key=lambda i: list(R1.values()).index(probes[i][0])
    )
    probes = [probes[i] for i in order]
    stated = [(answer, accept) for _, _, answer, accept in probes]
    cases = [
        Case(what, data=dict(kind="probe", requirement=requirement, answer=answer, accept=accept))
        for requirement, what, answer, accept in probes
    ]
    for sentence in rng.choice(SENTENCES, 3, replace=False):
        messages = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": str(sentence)},
        ]
        data = dict(kind="sentence", messages=json.dumps(messages), probes=stated)
        cases.append(Case(f"the unseen sentence {str(sentence)!r}", data=data))
    names = [str(n) for n in rng.choice(["Bo", "Li", "Al", "Ida", "Tom"], 2, replace=False)]
    for where, label, example in WHITESPACE_PROBES:
        prompt = "".join(
            example.replace("{n}", n).replace("{a}", str(int(rng.integers(5, 90)))) + "\n"
            for n in names
        )
        data = dict(kind="whitespace", prompt=prompt, where=where, label=label, probes=stated)
        cases.append(Case(f"a prompt inviting {label} {where}", data=data))
    return cases


@dataclass(frozen=True)
class Invalid:
    """jsonschema refuses the schema itself."""

    message: str


@dataclass(frozen=True)
class Skipped:
    """Not generated: the schema accepts or refuses an answer against what the exercise states."""


@dataclass(frozen=True)
class Generated:
    """What the model wrote guided by the schema (``refused``: what the grammar library said instead)."""

    text: str = ""
    tokens: int = 0
    refused: str = ""
    options: tuple = ()  # the schema's x-guidance options other than whitespace_flexible


class Named(dict):
    """A schema with a name (a right one written otherwise, named in the tests' rows)."""

    def __init__(self, name: str, schema: dict):
        super().__init__(schema)
        self.__name__ = name


def is_schema(answer) -> bool:
    return isinstance(answer, dict)


@functools.cache
def _smollm():
    """Notebook 07's int4 SmolLM2, loaded once per process."""
    from helpers.grading.checks.ex07 import smollm

    return smollm()


@functools.lru_cache(maxsize=512)
def _generate(schema_json: str, prompt: str, chat: bool, max_new: int) -> Generated:
    """Greedy new tokens guided by the schema, at most ``max_new`` (cut after a long run of whitespace): greedy
    generation repeats itself, so a schema's answer on a case is kept (a check run again, the reference in tests)."""
    from helpers.grading.checks.ex07 import fresh_generator

    model, tokenizer = _smollm()
    ids = tokenizer.encode(
        tokenizer.apply_chat_template(prompt, add_generation_prompt=True) if chat else prompt
    )
    try:
        generator = fresh_generator(model, ids, len(ids) + max_new, schema_json)
    except Exception as err:  # the grammar library refuses what it cannot compile: said, not hidden
        return Generated(
            refused=" ".join(line.strip() for line in str(err).splitlines() if line.strip())
        )
    new, text = [], ""
    while not generator.is_done() and (chat or _longest_whitespace(text) < WHITESPACE_RUN):
        generator.generate_next_token()
        new.append(int(generator.get_next_tokens()[0]))
        text = tokenizer.decode(np.array(new, dtype=np.int32))
    return Generated(text, len(new))


def _longest_whitespace(text: str) -> int:
    return max((len(run) for run in re.findall(r"\s+", text)), default=0)


def run_schema(schema, case: Case):
    import jsonschema

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as err:
        return Invalid(err.message)
    validator = jsonschema.validators.validator_for(schema)(schema)
    data = case.data
    if data["kind"] == "probe":
        return validator.is_valid(data["answer"])
    if any(validator.is_valid(answer) != accept for answer, accept in data["probes"]):
        return Skipped()
    options = tuple(sorted(set(schema.get("x-guidance") or {}) - {"whitespace_flexible"}))
    if data["kind"] == "sentence":
        made = _generate(json.dumps(schema), data["messages"], True, MAX_NEW)
    else:
        made = _generate(json.dumps(schema), data["prompt"], False, WHITESPACE_NEW)
    return Generated(made.text, made.tokens, made.refused, options)


def _valid(case, got, want):
    return f"jsonschema says: {got.message}" if isinstance(got, Invalid) else None


def _probe(requirement: str):
    """The schema accepts or refuses each answer of ``requirement``'s probes as the exercise states."""

    def judge(case, got, want):
        data = case.data
        if data["kind"] != "probe" or data["requirement"] != requirement:
            return None
        if not isinstance(got, bool):
            raise ValueError("not judged: the schema is not valid")
        if got == data["accept"]:
            return None
        shown = json.dumps(data["answer"], ensure_ascii=False)
        return f"your schema {'refuses' if data['accept'] else 'accepts'} {shown[:80]}"

    return judge


def _generated(kind: str, refused_too=False):
    """A judge of what the model wrote on cases of ``kind`` (not judged when nothing was generated)."""

    def wrap(judge):
        @functools.wraps(judge)
        def judged(case, got, want):
            if case.data["kind"] not in kind:
                return None
            if not isinstance(got, Generated) or (got.refused and not refused_too):
                raise ValueError("not judged: nothing was generated")
            return judge(case, got)

        return judged

    return wrap


@_generated("sentence whitespace", refused_too=True)
def _usable(case, got):
    return (
        f"onnxruntime-genai's grammar library refuses it: {got.refused[:300]}"
        if got.refused
        else None
    )


@_generated("sentence")
def _answers(case, got):
    import jsonschema

    if got.tokens >= MAX_NEW:
        return f"the answer ran until max_length: {got.text[:60]!r}...; bound every string, number and whitespace"
    try:
        parsed = json.loads(got.text)
    except ValueError:
        return f"your schema let the model answer {got.text!r}, which is not JSON"
    if not jsonschema.Draft202012Validator(TASK).is_valid(parsed):
        return f"your schema let the model answer {got.text!r}"
    return None


@_generated("whitespace")
def _whitespace(case, got):
    run = _longest_whitespace(got.text)
    if run < WHITESPACE_RUN:
        return None
    unapplied = (
        f" (your schema's x-guidance has {', '.join(got.options)}: the grammar library inside this "
        "onnxruntime-genai did not apply it that way)"
        if got.options
        else ""
    )
    return (
        f"invited by a prompt, the model wrote {run} {case.data['label']} or more in a row {case.data['where']} "
        f"with your schema ({got.text[:24]!r}...): whitespace that can go on can run until max_length{unapplied}"
    )


def _wrote(kind: str, test):
    """Spotted from what the model wrote: running a mistake's schema would generate again (seconds per check)."""
    return lambda cases, got: any(
        c.data["kind"] == kind and isinstance(g, Generated) and not g.refused and test(g)
        for c, g in zip(cases, got)
    )


_WHITESPACE_FREE = _wrote(
    "whitespace", lambda g: _longest_whitespace(g.text) >= WHITESPACE_RUN and not g.options
)
_OPTION_UNAPPLIED = _wrote(
    "whitespace", lambda g: _longest_whitespace(g.text) >= WHITESPACE_RUN and bool(g.options)
)


def _not_json(g) -> bool:
    try:
        json.loads(g.text)
    except ValueError:
        return True
    return False


_SEPARATOR_NOT_JSON = _wrote(
    "sentence", lambda g: _not_json(g) and {"item_separator", "key_separator"} & set(g.options)
)


def _schema(change) -> dict:
    """The reference with one change a learner makes."""
    schema = bounded_person_schema()
    change(schema)
    return schema


def _name(**spec):
    return _schema(lambda s: s["properties"]["name"].update(spec))


def _age(**spec):
    return _schema(lambda s: s["properties"]["age"].update(spec))


def _without(*path):
    def change(schema):
        *parents, key = path
        for parent in parents:
            schema = schema[parent]
        del schema[key]

    return _schema(change)


TOO_SHORT = "it refuses a name of 40 characters: names up to 40 characters must fit"
AGE_120 = "it refuses the age 120: ages are 0 to 120"
UNBOUNDED = (
    f"it accepts a {LONG_NAME}-character name: a string that long could fill the answer until max_length on its "
    "own; bound it"
)
WHITESPACE_FREE = (
    "invited by a prompt, the model writes long runs of whitespace with your schema: the grammar library lets "
    "whitespace go on between JSON's tokens unless told otherwise, and whitespace that can go on can run until "
    "max_length"
)

PERSON = Exercise(
    id="08.1",
    expects="your JSON schema as a dict",
    reference=bounded_person_schema,
    answer="answer = bounded_person_schema()",
    cases=person_cases,
    accepts=is_schema,
    run=run_schema,
    # what is right is stated in the cases (accepted or refused; answers of the task; bounded whitespace), and the
    # reference's own generations would double a check's time
    judged_alone=True,
    requirements=[
        Requirement(R1["valid"], _valid),
        *(Requirement(R1[key], _probe(R1[key])) for key in list(R1)[1:8]),
        Requirement(R1["usable"], _usable),
        Requirement(R1["answers"], _answers),
        Requirement(R1["whitespace"], _whitespace),
    ],
    mistakes=[
        Mistake(
            "an int type",
            _age(type="int"),
            "'int' is not a type of JSON Schema: a whole number is an \"integer\"",
            R1["valid"],
        ),
        Mistake(
            "an array",
            _schema(lambda s: s.update(type="array")),
            "your schema refuses a right answer: the answer is a JSON object",
            R1["object"],
        ),
        Mistake(
            "the name not required",
            _schema(lambda s: s.update(required=["age"])),
            'it accepts an answer without "name": both keys are required',
            R1["object"],
        ),
        Mistake(
            "the age not required",
            _schema(lambda s: s.update(required=["name"])),
            'it accepts an answer without "age": both keys are required',
            R1["object"],
        ),
        Mistake(
            "nothing required",
            _without("required"),
            'it accepts answers without "name" or "age": both keys are required',
            R1["object"],
        ),
        Mistake(
            "other keys allowed",
            _without("additionalProperties"),
            "it accepts an answer with one more key: nothing else than the name and the age",
            R1["only"],
        ),
        Mistake(
            "a null name",
            _name(type=["string", "null"]),
            "it accepts null as the name: a name is a string",
            R1["name_string"],
        ),
        Mistake(
            "a number as the name",
            _name(type=["string", "integer"]),
            "it accepts a number as the name: a name is a string",
            R1["name_string"],
        ),
        Mistake("a name one too short", _name(maxLength=39), TOO_SHORT, R1["name_fits"]),
        Mistake(
            "a name far too short",
            _name(maxLength=12),
            "it refuses names far shorter than 40 characters: names up to 40 characters must fit",
            R1["name_fits"],
        ),
        Mistake(
            "letters only",
            _name(pattern="^[A-Za-z -]+$"),
            "it refuses a name with accents, an apostrophe and a hyphen: a name is any string",
            R1["name_fits"],
        ),
        Mistake(
            "any number as the age",
            _age(type="number"),
            "it accepts an age with a fraction of a year: the age is a whole number",
            R1["whole"],
        ),
        Mistake(
            "the age as a string",
            _age(type=["integer", "string"]),
            "it accepts the age as a string: the age is a whole number",
            R1["whole"],
        ),
        Mistake(
            "a null age",
            _age(type=["integer", "null"]),
            "it accepts null as the age: the age is a whole number",
            R1["whole"],
        ),
        Mistake(
            "ages from 1", _age(minimum=1), "it refuses the age 0: ages are 0 to 120", R1["ages"]
        ),
        Mistake(
            "no lowest age",
            _without("properties", "age", "minimum"),
            "it accepts the age -1: ages are 0 to 120",
            R1["ages"],
        ),
        Mistake("ages to 119", _age(maximum=119), AGE_120, R1["ages"]),
        Mistake("ages to 99", _age(maximum=99), AGE_120, R1["ages"]),
        Mistake(
            "ages to 121",
            _age(maximum=121),
            "it accepts the age 121: ages are 0 to 120",
            R1["ages"],
        ),
        Mistake(
            "an unbounded name",
            _without("properties", "name", "maxLength"),
            UNBOUNDED,
            R1["bounded"],
        ),
        Mistake("a name of 500", _name(maxLength=500), UNBOUNDED, R1["bounded"]),
        Mistake(
            "a look-ahead",
            _name(pattern="^(?!\\d).*$"),
            "onnxruntime-genai's grammar library has no look-ahead or look-behind in a pattern (and a name is any "
            "string)",
            R1["usable"],
        ),
        Mistake(
            "separators as regexes",
            _schema(lambda s: s["x-guidance"].update(item_separator="\\s*,\\s*")),
            "with your x-guidance separators, the model's answers are not JSON: the grammar library writes a "
            "separator as it stands, not as a regex",
            R1["answers"],
            _SEPARATOR_NOT_JSON,
        ),
        Mistake(
            "whitespace left free",
            _without("x-guidance"),
            WHITESPACE_FREE,
            R1["whitespace"],
            _WHITESPACE_FREE,
        ),
        Mistake(
            "whitespace flexible",
            _schema(lambda s: s["x-guidance"].update(whitespace_flexible=True)),
            WHITESPACE_FREE,
            R1["whitespace"],
            _WHITESPACE_FREE,
        ),
        Mistake(
            "a whitespace pattern",
            _schema(lambda s: s.update({"x-guidance": {"whitespace_pattern": "[ ]{0,4}"}})),
            "your schema's x-guidance bounds whitespace in a way the grammar library inside this onnxruntime-genai "
            "does not apply: invited by a prompt, the model still writes long runs of it",
            R1["whitespace"],
            _OPTION_UNAPPLIED,
        ),
    ],
    alternatives=[
        Named(
            "draft_2020_exclusive_bounds",
            {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "required": ["age", "name"],
                "properties": {
                    "age": {"type": "integer", "exclusiveMinimum": -1, "exclusiveMaximum": 121},
                    "name": {"type": "string", "minLength": 1, "maxLength": 80},
                },
                "additionalProperties": False,
                "x-guidance": {"whitespace_flexible": False},
            },
        ),
        Named(
            "built_with_dict_and_titles",
            dict(
                type="object",
                title="person",
                additionalProperties=False,
                required=["name", "age"],
                properties=dict(
                    name=dict(type="string", description="full name", maxLength=50),
                    age=dict(type="integer", description="years", minimum=0, maximum=120),
                ),
                **{"x-guidance": dict(whitespace_flexible=False, key_separator=":")},
            ),
        ),
        Named(
            "literal_separators_with_spaces",
            {
                "type": "object",
                "required": ["name", "age"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "minLength": 1, "maxLength": 64},
                    "age": {"type": "integer", "minimum": 0, "maximum": 120},
                },
                "x-guidance": {
                    "whitespace_flexible": False,
                    "item_separator": ", ",
                    "key_separator": ": ",
                },
            },
        ),
    ],
    praise=lambda cases: [
        f"{sum(c.data['kind'] == 'probe' for c in cases)} answers accepted or refused as the exercise states",
        "on 3 unseen sentences, every answer parsed and validated, and ended by itself",
        "whitespace stayed bounded where a prompt invited long runs of it",
        "right values are the model's job, not the schema's",
    ],
    # the reference's code, whatever its layout
    secrets=lambda outcomes: ["whitespace_flexible", "maxLength"],
    marks=("llm",),
)


# --- 08.2 Time per layer --------------------------------------------------------------------------------------


def time_per_layer(profile_files) -> dict:
    """Mean kernel time per decode step (µs) of each /model/layers.N/ node group, keyed by N."""
    import json
    import re
    from collections import defaultdict
    from pathlib import Path

    total = defaultdict(float)
    for path in profile_files:
        for event in json.loads(Path(path).read_text()):
            match = re.match(r"/model/layers\.(\d+)/", event["name"])
            if event.get("cat") == "Node" and event["name"].endswith("_kernel_time") and match:
                total[int(match.group(1))] += event["dur"]
    return {layer: us / len(profile_files) for layer, us in total.items()}


LAYER_NODES = [
    ("input_layernorm/SimplifiedLayerNormalization", "SimplifiedLayerNormalization"),
    ("attn/qkv_proj/MatMul_Q4", "MatMulNBits"),
    ("attn/GroupQueryAttention", "GroupQueryAttention"),
    ("attn/o_proj/MatMul_Q4", "MatMulNBits"),
    ("mlp/gate_proj/MatMul_Q4", "MatMulNBits"),
    ("mlp/down_proj/MatMul_Q4", "MatMulNBits"),
]
OUTSIDE_NODES = [
    ("embed_tokens/GatherBlockQuantized", "GatherBlockQuantized"),
    ("norm/SkipSimplifiedLayerNorm", "SkipSimplifiedLayerNormalization"),
    ("lm_head/MatMul_Q4", "MatMulNBits"),
]


def _profiles(rng, layers: int, steps: int, *, alike: bool, fences: bool) -> list[str]:
    """``steps`` profile files as ``enable_profiling`` writes them, durations drawn by ``rng``: ``alike``, each step
    the same durations; ``fences``, fence events of some µs (else 0 µs)."""
    folder = fresh_folder("profiles-")
    nodes = OUTSIDE_NODES + [
        (f"layers.{n}/{node}", op) for n in range(layers) for node, op in LAYER_NODES
    ]
    kinds = (("fence_before", 2), ("kernel_time", 40), ("fence_after", 1))

    def durations():
        return {
            (node, kind): int(rng.integers(low, low * 20)) * (fences or kind == "kernel_time")
            for node, _ in nodes
            for kind, low in kinds
        }

    first, paths = durations(), []
    for step in range(steps):
        dur = first if alike or step == 0 else durations()
        run = dict(cat="Session", name="model_run", ph="X", dur=int(rng.integers(60_000, 90_000)))
        events = [run] + [
            {
                "cat": "Node",
                "name": f"/model/{node}_{kind}",
                "ph": "X",
                "dur": dur[node, kind],
                "args": {"op_name": op},
            }
            for node, op in nodes
            for kind, _ in kinds
        ]
        paths.append(folder / f"decode_{step}_{rng.integers(10**6)}.json")
        paths[-1].write_text(json.dumps(events))
    return [str(p) for p in paths]


def profile_cases(rng):
    """Three runs, their depths, steps and durations new with each seed: each makes one aspect of the answer show
    alone. Fences: the steps alike, under 11 layers. The slash and the units: the steps alike, no fence time, 12
    layers or more. The mean over the files: 3 to 5 steps that differ, no fence time, under 11 layers, a number of
    steps other than the second run's (a divisor fixed to one run's steps shows)."""
    depths = (int(rng.integers(6, 11)), int(rng.integers(12, 19)), int(rng.integers(6, 11)))
    mean_steps = int(rng.integers(3, 6))  # a median over 2 files is their mean
    steps = [
        int(rng.integers(2, 6)),
        int(rng.choice(sorted({2, 3, 4, 5} - {mean_steps}))),
        mean_steps,
    ]
    runs = [
        dict(alike=True, fences=True),
        dict(alike=True, fences=False),
        dict(alike=False, fences=False),
    ]
    cases = []
    for aspect, layers, count, run in zip(("fences", "slash", "mean"), depths, steps, runs):
        files = _profiles(rng, layers, count, **run)
        cases.append(Case(f"{count} profile files of a {layers}-layer model", (files,), aspect))
    return cases


def _layers(got) -> dict:
    """The answer's entries whose key reads as a layer number (an int, or a string of digits)."""
    out = {}
    for key, value in got.items():
        try:
            out[int(key)] = value
        except (TypeError, ValueError):
            continue
    return out


def _a_dict(case, got, want):
    return None if isinstance(got, dict) else f"got a {type(got).__name__}"


def _int_keys(case, got, want):
    if not isinstance(got, dict):
        raise TypeError("not judged: not a dict")
    other = [k for k in got if isinstance(k, bool) or not isinstance(k, (int, np.integer))]
    return f"keys such as {other[0]!r} ({type(other[0]).__name__}), not ints" if other else None


def _every_layer(case, got, want):
    missing = sorted(set(want) - set(_layers(got)))
    return f"no entry for the layers {missing}" if missing else None


def _only_layers(case, got, want):
    extra = [
        k
        for k in got
        if k not in want and not (isinstance(k, str) and k.isdigit() and int(k) in want)
    ]
    return (
        f"entries for {sorted(extra, key=repr)}, which are not layers of this model"
        if extra
        else None
    )


def _on(aspect: str):
    """A judge of the layers' times (each over the reference's, on the layers both have), on the run made for
    ``aspect`` alone."""

    def wrap(judge):
        @functools.wraps(judge)
        def judged(case, got, want):
            if case.data != aspect:
                return None
            ratios = {}
            for n, value in sorted(_layers(got).items()):
                if n not in want:
                    continue
                if isinstance(value, bool) or not isinstance(value, (int, float, np.number)):
                    return f"layer {n}'s time is a {type(value).__name__}, not a number of µs"
                ratios[n] = float(value) / want[n]
            return judge(ratios) if ratios else None

        return judged

    return wrap


def _beside(ratios, scale) -> str | None:
    off = [n for n, r in ratios.items() if abs(r - scale) > 1e-6 * abs(scale)]
    if not off:
        return None
    return f"layer {off[0]}'s time is too {'high' if ratios[off[0]] > scale else 'low'}"


@_on("slash")
def _per_step(ratios):
    """Only the scale can differ on this run (alike steps, no fence time): most layers' times say it."""
    scale = float(np.median(list(ratios.values())))
    return None if abs(scale - 1) <= 1e-6 else f"the times are too {'high' if scale > 1 else 'low'}"


def _in_proportion(aspect: str):
    """The layers' times beside each other as the reference's, on the run where ``aspect`` alone changes them."""

    @_on(aspect)
    def judge(ratios):
        differs = _beside(ratios, float(np.median(list(ratios.values()))))
        return differs and f"{differs} beside the other layers'"

    return judge


@_on("mean")
def _the_mean(ratios):
    return _beside(ratios, 1.0)


def _events(files):
    return [e for f in files for e in json.loads(Path(f).read_text())]


def _layer_of(name):
    match = re.match(r"/model/layers\.(\d+)/", name)
    return int(match.group(1)) if match else None


def _kernel_mean(files, layer_of=_layer_of, kernel_only=True, over=None):
    """The mean over the files of each layer's time (``over``: another statistic of the per-file sums)."""
    per_file = []
    for f in files:
        step: dict = {}
        for e in json.loads(Path(f).read_text()):
            n = layer_of(e["name"]) if e["cat"] == "Node" else None
            if n is not None and (e["name"].endswith("_kernel_time") or not kernel_only):
                step[n] = step.get(n, 0) + e["dur"]
        per_file.append(step)
    return {n: float((over or np.mean)([s[n] for s in per_file])) for n in per_file[0]}


def _prefix_matched(files):
    mean = time_per_layer(files)
    return {n: sum(v for m, v in mean.items() if str(m).startswith(str(n))) for n in mean}


def _mean_per_kernel(files):
    durations: dict = {}
    for e in _events(files):
        n = _layer_of(e["name"])
        if e["cat"] == "Node" and e["name"].endswith("_kernel_time") and n is not None:
            durations.setdefault(n, []).append(e["dur"])
    return {n: sum(d) / len(d) for n, d in durations.items()}


def _counter_split(files):
    """Counters per step, the layer number split out of the name."""
    from collections import Counter

    per_step = []
    for f in files:
        with open(f) as handle:
            step = Counter()
            for e in json.load(handle):
                name = e["name"]
                if (
                    e.get("cat") == "Node"
                    and name.startswith("/model/layers.")
                    and name.endswith("_kernel_time")
                ):
                    step[int(name.split("/")[2].split(".")[1])] += e["dur"]
            per_step.append(step)
    layers = set().union(*per_step)
    return {n: sum(s[n] for s in per_step) / len(per_step) for n in layers}


def _one_regex(files):
    """One regex for the layer and the kernel suffix."""
    pattern = re.compile(r"^/model/layers\.(\d+)/.*_kernel_time$")
    hits = [
        (int(m[1]), e["dur"])
        for f in files
        for e in json.loads(Path(f).read_text())
        if e["cat"] == "Node" and (m := pattern.match(e["name"]))
    ]
    return {n: sum(d for k, d in hits if k == n) / len(files) for n in {k for k, _ in hits}}


def _notebook_loop(files):
    """Notebook 08's per-operator loop, keyed by layer instead (numpy ints as keys, a Counter)."""
    from collections import Counter

    per_layer = Counter()
    for e in [e for f in files for e in json.load(open(f))]:
        n = _layer_of(e["name"])
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time") and n is not None:
            per_layer[np.int64(n)] += e["dur"] / len(files)  # µs per decode step
    return per_layer


R2 = dict(
    a_dict="a dict",
    keys="keyed by the layer number N, an int",
    every="one entry per layer, whatever the model's depth",
    only="nodes outside a layer do not count",
    per_step="in µs per step (not ms, not the total over the steps)",
    slash="N up to the slash of /model/layers.N/",
    kernel="kernel time: fence events are not",
    mean="the mean over all the files",
)
ONE_FILE = "it is one file's time: take the mean over all the files, one per decode step"

LAYERS = Exercise(
    id="08.2",
    expects="your function time_per_layer(profile_files)",
    reference=time_per_layer,
    cases=profile_cases,
    requirements=[
        Requirement(R2["a_dict"], _a_dict),
        Requirement(R2["keys"], _int_keys),
        Requirement(R2["every"], _every_layer),
        Requirement(R2["only"], _only_layers),
        Requirement(R2["per_step"], _per_step),
        Requirement(R2["slash"], _in_proportion("slash")),
        Requirement(R2["kernel"], _in_proportion("fences")),
        Requirement(R2["mean"], _the_mean),
    ],
    mistakes=[
        Mistake(
            "a list",
            lambda files: [v for _, v in sorted(time_per_layer(files).items())],
            "a list has no layer numbers: return a dict, layer number -> µs per step",
            R2["a_dict"],
        ),
        Mistake(
            "string keys",
            lambda files: {str(n): us for n, us in time_per_layer(files).items()},
            "the keys are strings: key each layer by its number, an int",
            R2["keys"],
        ),
        Mistake(
            "twelve layers",
            lambda files: {n: time_per_layer(files).get(n, 0.0) for n in range(12)},
            "a fixed list of layers: the check's models have other depths, read the layers from the profiles",
            R2["every"],
        ),
        Mistake(
            "one digit",
            lambda files: _kernel_mean(
                files, lambda name: (m := re.match(r"/model/layers\.(\d)/", name)) and int(m[1])
            ),
            "no entry for the layers from 10 on: a layer's number may have two digits",
            R2["every"],
        ),
        Mistake(
            "outside nodes too",
            lambda files: _kernel_mean(
                files, lambda name: -1 if _layer_of(name) is None else _layer_of(name)
            ),
            "an entry for the nodes outside the layers (the embedding, the final norm, the lm_head): only the "
            "/model/layers.N/ nodes count",
            R2["only"],
        ),
        Mistake(
            "in ms",
            lambda files: {n: us / 1000 for n, us in time_per_layer(files).items()},
            "the times are in ms: the profile's durations are in µs, and so is the answer",
            R2["per_step"],
        ),
        Mistake(
            "the total",
            lambda files: {n: us * len(files) for n, us in time_per_layer(files).items()},
            "the times are the total over the steps: divide by the number of files, one per step",
            R2["per_step"],
        ),
        Mistake(
            "the mean per kernel",
            _mean_per_kernel,
            "the times are the mean per kernel event: sum each layer's kernels in a step, then take the mean over "
            "the steps",
            R2["per_step"],
        ),
        Mistake(
            "a prefix match",
            _prefix_matched,
            "layers.1/ matched layers.10/ and on too: read the number up to its slash",
            R2["slash"],
        ),
        Mistake(
            "fences counted",
            lambda files: _kernel_mean(files, kernel_only=False),
            "fence events are counted too: they are not kernel time",
            R2["kernel"],
        ),
        Mistake("the last file", lambda files: time_per_layer(files[-1:]), ONE_FILE, R2["mean"]),
        Mistake("the first file", lambda files: time_per_layer(files[:1]), ONE_FILE, R2["mean"]),
        Mistake(
            "the median",
            lambda files: _kernel_mean(files, over=np.median),
            "the median over the files: take their mean",
            R2["mean"],
        ),
    ],
    alternatives=[_counter_split, _one_regex, _notebook_loop],
)

EXERCISES = [PERSON, LAYERS]
