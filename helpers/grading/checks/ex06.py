"""Notebook 06's exercises: timing a stand-in model on a simulated clock, counting a model's multiply-adds.

06.1 never sleeps: the stand-in model advances a simulated clock by its next call's duration, and while the answer
runs ``time.perf_counter`` reads that clock exactly, ``time.time`` and ``time.monotonic`` read it in ticks of
15.6 ms (as some systems' clocks do) and the CPU-time clocks do not move (the model waits, using no CPU). What the
answer timed, and with which clock, is read from when it read the clocks, so a verdict is the same on any machine,
however loaded.
"""

from __future__ import annotations

import inspect
import math
import threading
import time
import timeit
from contextlib import ExitStack, contextmanager
from numbers import Integral, Real
from time import perf_counter  # bound before any check: nearest_rank's clock
from unittest import mock

import numpy as np

from helpers.grading.checks.ex05 import checked_model, cnn_nodes
from helpers.grading.examiner import Case, Exercise, Mistake, Raised, Requirement, fresh_folder

# --- 06.1 A fair stopwatch -------------------------------------------------------------------------------------

SLOW_FIRST_CALLS = 3  # the stand-in model's first calls are slow, as a real model's are (allocation, kernel choice)
# time.time() and time.monotonic() advance in steps of 15.6 ms on some systems, as here
TICK_S = 1 / 64
MAX_CALLS = 10_000  # a loop calling fn more often is stopped (one that never ends, say)
MAX_READS = 200_000  # ... and one reading a clock more often
# the series' loops, ruled out
HELPER_MODULES = ("helpers.measure.timing", "helpers.measure.side_by_side")

# A quick model and a slower one, durations (ms) drawn in ranges no single answer can match. The first calls are
# the slowest; every 4th call hiccups, over a spread of 1 to HICCUP_SPREAD times its shortest (golden-ratio steps,
# so that the slowest tenth differs from the next and a p90 without the slowest calls comes out too low); now and
# then a long pause (a garbage collection).
MODELS = {
    "a quick model": {"fast": (1.5, 2.2), "hiccup": (6, 8), "pause": (60, 70), "first": (90, 100)},
    "a slower model": {
        "fast": (4.0, 5.5),
        "hiccup": (12, 16),
        "pause": (110, 130),
        "first": (150, 170),
    },
}
HICCUP_SPREAD = 4
GOLDEN = (math.sqrt(5) - 1) / 2
# the time module's clocks: exact, coarse (wall and monotonic), or CPU time (still while the model waits)
CLOCKS = {
    "perf_counter": "exact",
    "perf_counter_ns": "exact",
    "time": "wall",
    "time_ns": "wall",
    "monotonic": "coarse",
    "monotonic_ns": "coarse",
    "process_time": "cpu",
    "process_time_ns": "cpu",
    "thread_time": "cpu",
    "thread_time_ns": "cpu",
}
WALL_CLOCK_EPOCH = 1.7e9  # time.time() reads seconds since 1970


def timing_cases(rng):
    """The two models in an order drawn by ``rng``, each call's duration drawn, and the clocks' first reading."""
    cases = []
    for kind in rng.permutation(list(MODELS)):
        spec = {k: rng.uniform(*v) for k, v in MODELS[str(kind)].items()}
        phase, gc_at, offset = int(rng.integers(4)), int(rng.integers(5, 12)), rng.random()
        i = np.arange(MAX_CALLS)
        ms = spec["fast"] * (1 + 0.04 * rng.random(MAX_CALLS))
        hiccups = spec["hiccup"] * HICCUP_SPREAD ** ((offset + GOLDEN * (i // 4)) % 1)
        ms = np.where(i % 4 == phase, hiccups, ms)
        ms = np.where(i % 25 == gc_at, spec["pause"], ms)
        ms[:SLOW_FIRST_CALLS] = spec["first"] * (1 + 0.1 * rng.random(SLOW_FIRST_CALLS))
        start = {"exact": rng.uniform(1e2, 1e5), "cpu": rng.uniform(0.5, 50)}
        cases.append(Case(str(kind), data={"seconds": ms / 1e3, "start": start}))
    return cases


class _Stopped(BaseException):
    """Ends an answer's loop that calls fn or reads a clock without end (not an Exception: ``except`` misses it)."""


class _SimulatedRun:
    """fn and the clocks for one run of an answer: fn advances the simulated time by its next call's duration;
    the clocks read it (on this thread; another thread, a kernel's own, reads the real clocks)."""

    def __init__(self, case: Case):
        self.seconds, self.now = case.data["seconds"], case.data["start"]["exact"]
        self.cpu = case.data["start"]["cpu"]
        # the clocks read between fn's calls: gaps[i] before call i, gaps[i + 1] after it
        self.gaps: list[set] = [set()]
        self.reads, self.arguments, self.helpers = 0, False, []
        self.thread = threading.get_ident()

    def fn(self, *args, **kwargs):
        """The stand-in model (it takes no arguments; given some, it notes it and runs)."""
        self.arguments = self.arguments or bool(args or kwargs)
        calls = len(self.gaps) - 1
        if calls >= MAX_CALLS:
            raise _Stopped(
                f"fn was called {calls} times: the check stopped your loop there; does it end?"
            )
        self.now += self.seconds[calls]
        self.gaps.append(set())

    def clock(self, name: str, real):
        kind = CLOCKS[name]

        def read():
            if threading.get_ident() != self.thread:
                return real()
            self.reads += 1
            if self.reads > MAX_READS:
                raise _Stopped(
                    f"time.{name}() was read {MAX_READS} times: the check stopped your loop there; does it end?"
                )
            self.gaps[-1].add(kind)
            seconds = {
                "exact": self.now,
                "wall": WALL_CLOCK_EPOCH + math.floor(self.now / TICK_S) * TICK_S,
                "coarse": math.floor(self.now / TICK_S) * TICK_S,
                "cpu": self.cpu,
            }[kind]
            return round(seconds * 1e9) if name.endswith("_ns") else seconds

        read.__name__ = name
        return read

    def helper(self, name: str, real):
        def recorded(*args, **kwargs):
            self.helpers.append(name)
            return real(*args, **kwargs)

        return recorded

    def timed_by(self) -> tuple:
        """For each call of fn, the clock read right before and right after it ("" for none)."""
        both = [self.gaps[i] & self.gaps[i + 1] for i in range(len(self.gaps) - 1)]
        return tuple("exact" if "exact" in clocks else min(clocks, default="") for clocks in both)


def _functions_of(answer) -> list:
    """The functions whose globals, defaults and closures may hold a clock the answer bound before the check."""
    found = [answer, vars(type(answer)).get("__call__")]  # a function, or an object called as one
    return [
        getattr(f, "__func__", f) for f in found if inspect.isfunction(getattr(f, "__func__", f))
    ]


@contextmanager
def _rebound(functions, stand_ins: dict):
    """Meanwhile, where ``functions``' globals, default arguments and closures hold an original (``stand_ins``:
    id of the original -> its stand-in), they hold its stand-in: ``from time import perf_counter`` reads the
    simulated clock too."""
    undo = []
    try:
        for f in functions:
            namespace = f.__globals__
            for key, value in list(namespace.items()):
                if id(value) in stand_ins:
                    undo.append(lambda ns=namespace, k=key, v=value: ns.__setitem__(k, v))
                    namespace[key] = stand_ins[id(value)]
            if f.__defaults__:
                undo.append(lambda f=f, d=f.__defaults__: setattr(f, "__defaults__", d))
                f.__defaults__ = tuple(stand_ins.get(id(v), v) for v in f.__defaults__)
            if f.__kwdefaults__:
                undo.append(lambda f=f, d=f.__kwdefaults__: setattr(f, "__kwdefaults__", d))
                f.__kwdefaults__ = {k: stand_ins.get(id(v), v) for k, v in f.__kwdefaults__.items()}
            for cell in f.__closure__ or ():
                try:
                    value = cell.cell_contents
                except ValueError:  # a cell not filled yet
                    continue
                if id(value) in stand_ins:
                    undo.append(lambda c=cell, v=value: setattr(c, "cell_contents", v))
                    cell.cell_contents = stand_ins[id(value)]
        yield
    finally:
        for step in reversed(undo):
            step()


@contextmanager
def _simulated(run: _SimulatedRun, answer):
    """While the answer runs: the time module's clocks (and timeit's) read the simulated time, and each function
    of the series' timing helpers notes its use."""
    import importlib

    stand_ins = {}
    with ExitStack() as stack:
        for name in CLOCKS:
            real = getattr(time, name)
            stand_ins[id(real)] = run.clock(name, real)
            stack.enter_context(mock.patch.object(time, name, stand_ins[id(real)]))
        for module_name in HELPER_MODULES:
            module = importlib.import_module(module_name)
            for name, real in inspect.getmembers(module, inspect.isfunction):
                if real.__module__ == module_name:
                    stand_ins[id(real)] = run.helper(f"{module_name}.{name}", real)
                    stack.enter_context(mock.patch.object(module, name, stand_ins[id(real)]))
        # timeit's default timer is time.perf_counter, bound when timeit was imported
        timer_functions = [timeit.Timer.__init__, timeit.timeit, timeit.repeat]
        stack.enter_context(_rebound([*timer_functions, *_functions_of(answer)], stand_ins))
        yield


def run_fair_time(answer, case: Case):
    """The answer on the case's model: what it returned, how often fn was called, with which arguments, which
    clock timed each call, which helpers it used. A loop that does not end is stopped (a :class:`Raised`)."""
    run = _SimulatedRun(case)
    with _simulated(run, answer):
        try:
            returned = answer(run.fn)
        except _Stopped as stopped:
            return Raised("Stopped", str(stopped))
    return {
        "returned": returned,
        "calls": len(run.gaps) - 1,
        "timed by": run.timed_by(),
        "arguments": run.arguments,
        "helpers": tuple(dict.fromkeys(run.helpers)),
    }


def _own_loop(case, got, want):
    if not got["helpers"]:
        return None
    return f"fn was timed by {got['helpers'][0]}: write the loop yourself (warm-up, timed calls, statistics)"


def _no_arguments(case, got, want):
    return "fn was given arguments: it takes none, call it as fn()" if got["arguments"] else None


def _a_dict(case, got, want):
    returned = got["returned"]
    if not isinstance(returned, dict):
        return f"expected a dict, got {type(returned).__name__}"
    missing = [k for k in ("p50_us", "p90_us", "n") if k not in returned]
    if missing:
        return f"missing {missing} (got keys {list(returned)})"
    for key in ("p50_us", "p90_us"):
        value = returned[key]
        if isinstance(value, bool) or not isinstance(value, Real) or not math.isfinite(value):
            return f"{key!r} is not a number of microseconds (got {type(value).__name__})"
    n = returned["n"]
    if isinstance(n, bool) or not isinstance(n, Integral):
        return f"'n', the number of timed calls, is not an integer (got {type(n).__name__})"
    return None


def _ten_timed(case, got, want):
    n = got["returned"]["n"]
    return None if n >= 10 else f"'n' says {n}"


def _warm_up(case, got, want):
    n, calls = got["returned"]["n"], got["calls"]
    if n > calls:
        return f"'n' says {n} timed calls, but fn was called {calls} times"
    if calls - n >= SLOW_FIRST_CALLS:
        return None
    return (
        f"fn was called {calls} times and 'n' says {n} were timed: {calls - n} warm-up call(s); the first calls "
        "are slow and say nothing of what a call costs later"
    )


def _timed_calls(case, got, want):
    n, calls = got["returned"]["n"], got["calls"]
    untimed = sum(1 for clock in got["timed by"][calls - n :] if not clock)
    if not untimed:
        return None
    return (
        f"{untimed} of fn's last {n} calls had no clock read right before and after it: the timed calls come "
        "after the warm-up, each between two clock reads"
    )


CLOCK_WORDS = {
    "wall": "your calls were timed with time.time(), which ticks every 15.6 ms on some systems, as here",
    "coarse": "your calls were timed with time.monotonic(), which ticks every 15.6 ms on some systems, as here",
    "cpu": "your calls were timed with a CPU-time clock, which stands still while a call waits, as this model's do",
}


def _perf_counter(case, got, want):
    n, calls = got["returned"]["n"], got["calls"]
    clocks = set(got["timed by"][calls - n :]) - {"exact"}
    return CLOCK_WORDS[min(clocks)] if clocks else None


def _timed_us(case, got) -> np.ndarray:
    n, calls = got["returned"]["n"], got["calls"]
    return np.sort(case.data["seconds"][calls - n : calls] * 1e6)


def _within(value: float, us: np.ndarray, q: float) -> bool:
    """Is ``value`` the q-th percentile of ``us`` by some usual definition (np.percentile's methods, nearest
    rank, statistics.quantiles'): between the ranks they take, give or take 1 %?"""
    n = len(us)
    low, high = us[math.floor(q / 100 * (n - 1))], us[min(n - 1, math.ceil(q / 100 * (n + 1) - 1))]
    return 0.99 * low - 1 <= value <= 1.01 * high + 1


def _microseconds(case, got, want):
    us = _timed_us(case, got)
    for key, q in (("p50_us", 50), ("p90_us", 90)):
        value = got["returned"][key]
        for unit, factor in (("milliseconds", 1e3), ("seconds", 1e6), ("nanoseconds", 1e-3)):
            if not _within(value, us, q) and _within(value * factor, us, q):
                return f"{key!r} is in {unit}"
    return None


def _percentile(key: str, q: float):
    def judge(case, got, want):
        value = got["returned"][key]
        us = _timed_us(case, got)
        if _within(value, us, q):
            return None
        high = value > np.percentile(us, q)
        return f"too {'high' if high else 'low'} for the {len(us)} calls after your warm-up"

    return judge


def fair_time(fn, warmup: int = 5, calls: int = 30) -> dict:
    """Warm up (not timed), then time ``calls`` calls; median and 90th percentile in microseconds."""
    for _ in range(warmup):
        fn()
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    us = np.array(samples) * 1e6
    return {
        "p50_us": float(np.median(us)),
        "p90_us": float(np.percentile(us, 90)),
        "n": len(samples),
    }


def stopwatch(
    warmup=5, calls=30, clock="perf_counter", scale=1e6, statistic=np.median, q=90, **slip
):
    """The reference's loop with one change (a known mistake): the warm-up, the calls, the clock (a name in the
    time module, read through it), the unit, the statistics; ``warm_after``: the warm-up after the timed calls;
    ``n``: what 'n' says of the calls; ``kept``: how many of the fastest calls the statistics keep."""

    def fair_time_variant(fn):
        for _ in range(0 if slip.get("warm_after") else warmup):
            fn()
        samples = []
        for _ in range(calls):
            start = getattr(time, clock)()
            fn()
            samples.append(getattr(time, clock)() - start)
        for _ in range(warmup if slip.get("warm_after") else 0):
            fn()
        values = np.sort(np.array(samples) * scale)[: slip.get("kept", len)(samples)]
        return {
            "p50_us": float(statistic(values)),
            "p90_us": float(np.percentile(values, q)),
            "n": slip.get("n", len)(samples),
        }

    return fair_time_variant


def with_timeit(fn):
    """Right: timeit.repeat (its default timer is perf_counter), the first 4 timed calls dropped as the warm-up,
    statistics.quantiles."""
    import statistics

    us = [t * 1e6 for t in timeit.repeat(fn, number=1, repeat=40)[4:]]
    return {
        "p50_us": statistics.median(us),
        "p90_us": statistics.quantiles(us, n=10, method="inclusive")[-1],
        "n": len(us),
    }


def with_ns_clock_and_a_budget(fn):
    """Right: perf_counter_ns, as many calls as fit in 0.2 s (at least 20)."""
    for _ in range(4):
        fn()
    ns, start = [], time.perf_counter_ns()
    while len(ns) < 20 or time.perf_counter_ns() - start < 0.2e9:
        t0 = time.perf_counter_ns()
        fn()
        ns.append(time.perf_counter_ns() - t0)
    return {"p50_us": np.median(ns) / 1e3, "p90_us": np.quantile(ns, 0.9) / 1e3, "n": len(ns)}


def notebook_loop(fn, clock=time.perf_counter):
    """Right: section 1's loop (5 warm-up calls, at least 10 within 0.4 s), the clock bound as a default
    argument before the check, and a real pause between calls to let the machine settle (which changes
    nothing: only the calls are timed)."""
    for _ in range(5):
        fn()
    times_us, start = [], clock()
    while len(times_us) < 10 or clock() - start < 0.4:
        time.sleep(1e-4)
        t0 = clock()
        fn()
        times_us.append((clock() - t0) * 1e6)
    return {
        "p50_us": np.median(times_us),
        "p90_us": np.percentile(times_us, 90),
        "n": len(times_us),
    }


def nearest_rank(fn):
    """Right: exactly 3 warm-up calls and 10 timed ones (the minimums), p90 by nearest rank, n a numpy int, the
    clock bound by name before the check (``from time import perf_counter`` at the top of this module)."""
    for _ in range(3):
        fn()
    us = []
    for _ in range(10):
        t0 = perf_counter()
        fn()
        us.append((perf_counter() - t0) * 1e6)
    us.sort()
    return {
        "p50_us": float(np.percentile(us, 50)),
        "p90_us": us[math.ceil(0.9 * len(us)) - 1],
        "n": np.int64(10),
    }


def exclusive_quantiles(fn):
    """Right: 3 warm-up calls, 12 timed ones, statistics.quantiles' default (exclusive) method."""
    import statistics

    for _ in range(3):
        fn()
    us = []
    for _ in range(12):
        t0 = time.perf_counter()
        fn()
        us.append((time.perf_counter() - t0) * 1e6)
    return {"p50_us": statistics.median(us), "p90_us": statistics.quantiles(us, n=10)[-1], "n": 12}


def with_helpers(fn):
    from helpers.measure.timing import measure

    return measure(fn, repeat=30, warmup=5)


def given_an_argument(fn):
    for _ in range(35):
        fn(np.zeros(3))
    return {"p50_us": 1.0, "p90_us": 2.0, "n": 30}


def numbers_known_in_advance(fn):
    """Calls fn, times nothing: numbers measured once, not on these calls."""
    for _ in range(35):
        fn()
    return {"p50_us": 2300.0, "p90_us": 11000.0, "n": 30}


def _with(**changes):
    def changed(fn):
        return {**stopwatch()(fn), **changes}

    return changed


OWN_LOOP, NO_ARGUMENTS, A_DICT = (
    "your own loop, without helpers",
    "fn called with no arguments",
    "a dict: p50_us and p90_us numbers, n an integer",
)
TEN_TIMED, WARM_UP, TIMED_CALLS = (
    "at least 10 timed calls",
    "at least 3 warm-up calls, not timed",
    "then each call timed between two clock reads",
)
PERF_COUNTER, MICROSECONDS, MEDIAN, P90 = (
    "with time.perf_counter()",
    "in microseconds",
    "p50_us: the median of the timed calls",
    "p90_us: the 90th percentile of every timed call",
)

STOPWATCH = Exercise(
    id="06.1",
    expects="your function fair_time(fn)",
    reference=fair_time,
    cases=timing_cases,
    run=run_fair_time,
    # an answer is judged on the calls it timed, whose durations the case knows; the reference's calls are others
    judged_alone=True,
    requirements=[
        Requirement(OWN_LOOP, _own_loop),
        Requirement(NO_ARGUMENTS, _no_arguments),
        Requirement(A_DICT, _a_dict),
        Requirement(TEN_TIMED, _ten_timed),
        Requirement(WARM_UP, _warm_up),
        Requirement(TIMED_CALLS, _timed_calls),
        Requirement(PERF_COUNTER, _perf_counter),
        Requirement(MICROSECONDS, _microseconds),
        Requirement(MEDIAN, _percentile("p50_us", 50)),
        Requirement(P90, _percentile("p90_us", 90)),
    ],
    mistakes=[
        Mistake(
            "the series' helpers",
            with_helpers,
            "fn was timed by helpers.measure.timing: write the loop yourself (warm-up, timed calls, statistics)",
            OWN_LOOP,
        ),
        Mistake(
            "fn given an argument",
            given_an_argument,
            "fn takes no arguments: call it as fn()",
            NO_ARGUMENTS,
        ),
        Mistake("no 'n'", lambda fn: {"p50_us": 1.0, "p90_us": 2.0}, "missing ['n']", A_DICT),
        Mistake(
            "'n' a float", stopwatch(n=float), "'n', the number of timed calls, is a float", A_DICT
        ),
        Mistake(
            "p50 a string",
            _with(p50_us="2 ms"),
            "'p50_us' is a str: give a number of microseconds",
            A_DICT,
        ),
        Mistake("6 timed calls", stopwatch(calls=6), "'n' says 6", TEN_TIMED),
        Mistake(
            "1 warm-up call",
            stopwatch(warmup=1),
            "one warm-up call: the first calls are slow and say nothing of what a call costs later",
            WARM_UP,
        ),
        Mistake(
            "no warm-up",
            stopwatch(warmup=0),
            "no call before the timed ones: warm up first",
            WARM_UP,
        ),
        Mistake(
            "'n' counting the warm-up",
            stopwatch(n=lambda samples: len(samples) + 5),
            "'n' counts the warm-up calls too: n is the number of timed calls",
            WARM_UP,
        ),
        Mistake(
            "warm-up after the timed calls",
            stopwatch(warm_after=True),
            "your timed calls come first, the slow first calls among them: warm up first, then time",
            TIMED_CALLS,
        ),
        Mistake(
            "nothing timed",
            numbers_known_in_advance,
            "no call of fn had a clock read right before and after it: time each call",
            TIMED_CALLS,
        ),
        Mistake("time.time()", stopwatch(clock="time"), CLOCK_WORDS["wall"], PERF_COUNTER),
        Mistake(
            "time.monotonic()", stopwatch(clock="monotonic"), CLOCK_WORDS["coarse"], PERF_COUNTER
        ),
        Mistake("CPU time", stopwatch(clock="process_time"), CLOCK_WORDS["cpu"], PERF_COUNTER),
        Mistake("milliseconds", stopwatch(scale=1e3), "'p50_us' is in milliseconds", MICROSECONDS),
        Mistake("seconds", stopwatch(scale=1), "'p50_us' is in seconds", MICROSECONDS),
        Mistake(
            "nanoseconds",
            stopwatch(clock="perf_counter_ns", scale=1),
            "'p50_us' is in nanoseconds: perf_counter_ns() counts nanoseconds",
            MICROSECONDS,
        ),
        Mistake(
            "the mean",
            stopwatch(statistic=np.mean),
            "that is the mean: one slow call in four pulls it up, the median stays put",
            MEDIAN,
        ),
        Mistake(
            "the slowest call",
            stopwatch(q=100),
            "that is the slowest call: 90 % of the calls take at most the 90th percentile",
            P90,
        ),
        Mistake(
            "q=0.9",
            stopwatch(q=0.9),
            "that is about the fastest call: np.percentile takes 90, not 0.9",
            P90,
        ),
        Mistake(
            "the slowest left out",
            stopwatch(kept=lambda samples: len(samples) - len(samples) // 10),
            "that is the 90th percentile with the slowest calls left out: take it over every timed call",
            P90,
        ),
    ],
    alternatives=[
        with_timeit,
        with_ns_clock_and_a_budget,
        notebook_loop,
        nearest_rank,
        exclusive_quantiles,
    ],
    praise=lambda cases: [
        f"{case.name}: your median and p90 match the calls you timed" for case in cases
    ],
    setup="import time\nimport numpy as np",
)


# --- 06.2 Multiply-adds of one image ---------------------------------------------------------------------------


def _model_file(rng, what: str, nodes: list, weights: dict):
    """An .onnx file of the check's own, new name each check: input 'pixels' [batch, 1, 28, 28], output 'scores'
    [batch, 10], ``weights`` drawn as float32 ('flat': the int64 shape of a Reshape), checked by onnx."""
    import onnx

    model = checked_model(what, nodes, weights, "scores", 10)
    path = fresh_folder("model-") / f"{int(rng.integers(10**6)):06d}.onnx"
    onnx.save(model, path)
    return str(path)


def _head(rng, op: str, width: int) -> tuple[list, dict]:
    """'scores' from 'h' [batch, width]: a Gemm (its weight stored either way) or a MatMul and an Add."""
    from onnx.helper import make_node

    if op == "Gemm":
        trans_b = int(rng.integers(2))
        w = rng.normal(0, 0.1, (10, width) if trans_b else (width, 10))
        nodes = [make_node("Gemm", ["h", "w3", "b3"], ["scores"], transB=trans_b)]
    else:
        w = rng.normal(0, 0.1, (width, 10))
        nodes = [
            make_node("MatMul", ["h", "w3"], ["m3"]),
            make_node("Add", ["m3", "b3"], ["scores"]),
        ]
    return nodes, {"w3": w, "b3": np.zeros(10)}


def random_mlp(rng) -> str:
    """An MLP of the check's own: Reshape, Gemm (its weight stored either way), Relu, MatMul + Add."""
    from onnx.helper import make_node

    hidden, trans_b = int(rng.integers(20, 120)), int(rng.integers(2))
    nodes = [
        make_node("Reshape", ["pixels", "flat"], ["x"]),
        make_node("Gemm", ["x", "w1", "b1"], ["g1"], transB=trans_b),
        make_node("Relu", ["g1"], ["h"]),
    ]
    head, head_weights = _head(rng, "MatMul", hidden)
    weights = {
        "flat": [-1, 784],
        "w1": rng.normal(0, 0.1, (hidden, 784) if trans_b else (784, hidden)),
    }
    return _model_file(
        rng, "check_mlp", nodes + head, {**weights, "b1": np.zeros(hidden), **head_weights}
    )


def _bare(nodes: list) -> list:
    """The Conv nodes without their optional attributes: kernel_shape (the spec infers it from the weight), and
    pads, strides and group where they hold their defaults."""
    defaults = {"pads": 0, "strides": 1, "group": 1}
    for node in nodes:
        if node.op_type != "Conv":
            continue
        kept = [
            a
            for a in node.attribute
            if a.name != "kernel_shape"
            and not (a.name in defaults and set(a.ints or [a.i]) == {defaults[a.name]})
        ]
        del node.attribute[:]
        node.attribute.extend(kept)
    return nodes


def random_cnn(rng, head: str = "Gemm", groups: str = "", bare: bool = False) -> str:
    """A CNN of the check's own: Conv (kernel 3, 5 or 7, padded or not), Relu, Conv (3x3, stride 2 or 3, pad 1;
    ``groups`` "grouped": 2 or 3 groups, "depthwise": one per channel), Relu, Reshape, ``head``; ``bare``: its
    Convs without their optional attributes (kernel_shape among them)."""
    k1, stride2 = int(rng.choice([3, 5, 7])), int(rng.choice([2, 3]))
    pad1 = int(rng.integers(k1 // 2 + 1))  # from none to the output as large as the input
    group = {"": 1, "grouped": int(rng.choice([2, 3])), "depthwise": 0}[groups]
    c1 = int(rng.integers(3, 9)) * (group or 1)
    group = group or c1
    c2 = group * int(rng.integers(1, 4)) if groups else int(rng.integers(4, 12))
    side = (28 + 2 * pad1 - k1) + 1
    side = (side + 2 - 3) // stride2 + 1
    nodes = (
        _bare(cnn_nodes(k1, pad1, stride2, group)) if bare else cnn_nodes(k1, pad1, stride2, group)
    )
    head_nodes, head_weights = _head(rng, head, c2 * side * side)
    weights = {
        "w1": rng.normal(0, 0.3, (c1, 1, k1, k1)),
        "b1": rng.normal(0, 0.1, c1),
        "w2": rng.normal(0, 0.3, (c2, c1 // group, 3, 3)),
        "b2": rng.normal(0, 0.1, c2),
        "flat": [-1, c2 * side * side],
        **head_weights,
    }
    return _model_file(rng, "check_cnn", nodes + head_nodes, weights)


MLP_CASES = ("the series' MLP", "an MLP of the check's own (Gemm, MatMul + Add)")
CNN_CASES = (
    "the series' CNN",
    "a CNN of the check's own (Conv, Conv, Gemm)",
    "a CNN of the check's own (Conv, Conv, MatMul + Add)",
    "a CNN of the check's own whose Convs leave out their optional attributes (kernel_shape among them)",
)
GROUPED_CASES = ("a CNN with a grouped Conv", "a CNN with a depthwise Conv (a group per channel)")


def count_cases(rng):
    """The series' MLP and CNN, and models of the check's own, new with each seed, in an order drawn too."""
    from helpers.pipeline.artifacts import existing_artifact

    files = {
        MLP_CASES[0]: lambda: str(existing_artifact("mnist_mlp_pytorch.onnx")),
        MLP_CASES[1]: lambda: random_mlp(rng),
        CNN_CASES[0]: lambda: str(existing_artifact("mnist_cnn_pytorch.onnx")),
        CNN_CASES[1]: lambda: random_cnn(rng, "Gemm"),
        CNN_CASES[2]: lambda: random_cnn(rng, "MatMul"),
        CNN_CASES[3]: lambda: random_cnn(rng, str(rng.choice(["Gemm", "MatMul"])), bare=True),
        GROUPED_CASES[0]: lambda: random_cnn(rng, str(rng.choice(["Gemm", "MatMul"])), "grouped"),
        GROUPED_CASES[1]: lambda: random_cnn(rng, str(rng.choice(["Gemm", "MatMul"])), "depthwise"),
    }
    return [Case(name, (files[name](),)) for name in rng.permutation(list(files))]


def _whole(case, got, want):
    if isinstance(got, bool) or not isinstance(got, Real):
        return f"expected a whole number of multiply-adds, got {type(got).__name__}"
    if not math.isfinite(got) or float(got) != int(got):
        return "expected a whole number of multiply-adds, got one with a fraction (or not finite)"
    return None


def _count_on(names: tuple):
    """Judges the count on the cases ``names`` only (what a requirement is about: an MLP, a CNN, groups)."""

    def judge(case, got, want):
        if case.name not in names or int(got) == want:
            return None
        by = ", by more than 10 %" if abs(int(got) - want) > 0.1 * want else ""
        return f"your count is too {'high' if int(got) > want else 'low'}{by}"

    return judge


def _count_secrets(outcomes) -> list[str]:
    """The counts (whole numbers: the default secrets are floats' renderings), however printed."""
    return [text for count in outcomes for text in (str(count), f"{count:,}", f"{count:_}")]


def macs_per_image(path) -> int:
    """Multiply-adds of every Conv, Gemm and MatMul node for one image, from ONNX shape inference."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path)
    batch = model.graph.input[0].type.tensor_type.shape.dim[0]
    batch.dim_value = 1  # one image: a fixed batch of 1
    model = onnx.shape_inference.infer_shapes(model)
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in [*model.graph.value_info, *model.graph.output]
    }
    weights = {t.name: numpy_helper.to_array(t).shape for t in model.graph.initializer}
    total = 0
    for node in model.graph.node:
        if node.op_type == "Conv":  # each output value: in_channels/groups x kh x kw products
            total += int(np.prod(shapes[node.output[0]])) * int(np.prod(weights[node.input[1]][1:]))
        elif node.op_type in ("Gemm", "MatMul") and node.input[1] in weights:
            total += int(np.prod(weights[node.input[1]]))  # batch 1: one product per weight
    return total


def macs_by_formula(path, ops=("Conv", "Gemm", "MatMul"), positions="output", images=1, bias=False):
    """Right: each Conv's output size from the convolution formula. The keywords make known mistakes:
    ``positions`` "weights" (a Conv counted once per weight), "no stride", "no padding", "input" (at every input
    position); ``images``: a Conv counted for that many images; ``bias``: its bias adds counted."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(path)
    w = {t.name: numpy_helper.to_array(t).shape for t in model.graph.initializer}
    size, total = np.array([28, 28]), 0
    for node in model.graph.node:
        a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
        if node.op_type == "Conv":
            out, per_group, *kernel = w[node.input[1]]
            pads = np.array(a.get("pads", [0] * 4)) * (positions != "no padding")
            strides = np.array(a.get("strides", [1, 1])) if positions != "no stride" else 1
            output = (size + pads[:2] + pads[2:] - np.array(kernel)) // strides + 1
            at = (
                int(np.prod(size if positions == "input" else output))
                if positions != "weights"
                else 1
            )
            size = output
            if "Conv" in ops:
                total += out * per_group * int(np.prod(kernel)) * at * images + (
                    out * at if bias else 0
                )
        elif node.op_type in ops and node.input[1] in w:
            total += int(np.prod(w[node.input[1]]))
    return total


def macs_from_onnxruntime(path):
    """Right, written differently: the Conv outputs' shapes from ONNX Runtime (run on one image), not inferred."""
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    model = onnx.load(path)
    weights = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    model.graph.output.extend(onnx.ValueInfoProto(name=n.output[0]) for n in convs)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    one = {session.get_inputs()[0].name: np.zeros((1, 1, 28, 28), np.float32)}
    outputs = session.run([n.output[0] for n in convs], one)
    total = sum(o.size * weights[n.input[1]][0].size for n, o in zip(convs, outputs))
    dense = [
        n for n in model.graph.node if n.op_type in ("Gemm", "MatMul") and n.input[1] in weights
    ]
    return total + sum(weights[n.input[1]].size for n in dense)


def notebook_hint(path, fix_batch=True):
    """Right: the task's hint as written (the batch dimension cleared and set to 1, infer_shapes), weights'
    shapes from the initializers' dims; ``fix_batch`` False: the batch left symbolic (0 in every shape)."""
    import onnx

    model = onnx.load(path)
    if fix_batch:
        dim = model.graph.input[0].type.tensor_type.shape.dim[0]
        dim.Clear()
        dim.dim_value = 1
    inferred = onnx.shape_inference.infer_shapes(model)
    shape = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in list(inferred.graph.value_info) + list(inferred.graph.output)
    }
    dims = {t.name: list(t.dims) for t in model.graph.initializer}
    total = 0
    for node in model.graph.node:
        # [batch, channels, height, width] times the weights of one output value
        if node.op_type == "Conv":
            total += int(np.prod(shape[node.output[0]])) * int(np.prod(dims[node.input[1]][1:]))
        elif node.op_type in {"Gemm", "MatMul"}:
            total += int(np.prod(dims.get(node.input[1], [0])))
    return total


def from_output_shapes(path, batch=2, channels="weight"):
    """Each layer counted from its output shape, inferred with the batch fixed to ``batch`` (2: two images), times
    the products of one output value; ``channels`` "input": a Conv's input channels read from its input tensor,
    its group ignored."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load(path)
    model.graph.input[0].type.tensor_type.shape.dim[0].dim_value = batch
    model = onnx.shape_inference.infer_shapes(model)
    graph = model.graph
    shapes = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in [*graph.input, *graph.value_info, *graph.output]
    }
    weights = {t.name: numpy_helper.to_array(t).shape for t in graph.initializer}
    total = 0
    for node in graph.node:
        if node.op_type in ("Conv", "Gemm", "MatMul") and node.input[1] in weights:
            output, w = shapes[node.output[0]], weights[node.input[1]]
            # a weight [in, out] or [out, in]: in products per output value
            if node.op_type != "Conv":
                per_value = int(np.prod(w)) // output[-1]
            elif channels == "input":
                per_value = shapes[node.input[0]][1] * int(np.prod(w[2:]))
            else:
                per_value = int(np.prod(w[1:]))
            total += int(np.prod(output)) * per_value
    return total


def series_numbers(path):
    """The series' files counted, any other file given a by-hand count of another CNN."""
    return (
        macs_per_image(path)
        if "mnist_" in str(path)
        else 24 * 24 * 4 * 25 + 12 * 12 * 6 * 36 + 864 * 10
    )


WHOLE, DENSE, CONV, GROUPED = (
    "a whole number",
    "a Gemm or MatMul: one multiply-add per weight, for one image",
    "a Conv: each weight at every output position, as its stride and padding give them",
    "a grouped Conv: in_channels / group inputs per output value",
)
TWICE = (
    "your counts are twice the multiply-adds of one image: FLOPs (a multiply and an add each), or two images? "
    "Count multiply-adds, for one image"
)
NO_CONV = (
    "the Conv layers add nothing to your count (a batch dimension left symbolic is 0 in every inferred shape: "
    "fix it to 1)"
)

COUNT = Exercise(
    id="06.2",
    expects="your function macs_per_image(path)",
    reference=macs_per_image,
    cases=count_cases,
    requirements=[
        Requirement(WHOLE, _whole),
        Requirement(DENSE, _count_on(MLP_CASES)),
        Requirement(CONV, _count_on(CNN_CASES)),
        Requirement(GROUPED, _count_on(GROUPED_CASES)),
    ],
    mistakes=[
        Mistake(
            "a half", lambda path: macs_per_image(path) + 0.5, "a count has no fraction", WHOLE
        ),
        Mistake("nan", lambda path: float("nan"), "expected a whole number, got nan", WHOLE),
        Mistake(
            "Gemm left out",
            lambda p: macs_by_formula(p, ops=("Conv", "MatMul")),
            "the Gemm layers add nothing",
            DENSE,
        ),
        Mistake(
            "MatMul left out",
            lambda p: macs_by_formula(p, ops=("Conv", "Gemm")),
            "the MatMul layers add nothing",
            DENSE,
        ),
        Mistake("FLOPs", lambda path: 2 * macs_per_image(path), TWICE, DENSE),
        Mistake("two images", from_output_shapes, TWICE, DENSE),
        Mistake(
            "numbers known in advance",
            series_numbers,
            "right on the series' files only: count the layers of the file at path",
            DENSE,
        ),
        Mistake(
            "the weights",
            lambda p: macs_by_formula(p, positions="weights"),
            "that is the number of weights: a convolution applies each weight at every output position",
            CONV,
        ),
        Mistake(
            "no stride",
            lambda p: macs_by_formula(p, positions="no stride"),
            "it is the count with the Conv layers' strides left out: the output positions depend on them",
            CONV,
        ),
        Mistake(
            "no padding",
            lambda p: macs_by_formula(p, positions="no padding"),
            "it is the count with the Conv layers' padding left out: the output positions depend on it",
            CONV,
        ),
        Mistake(
            "input positions",
            lambda p: macs_by_formula(p, positions="input"),
            "your Conv layers count their input positions: a Conv's output positions follow from its kernel, "
            "stride and padding",
            CONV,
        ),
        Mistake(
            "Conv left out", lambda p: macs_by_formula(p, ops=("Gemm", "MatMul")), NO_CONV, CONV
        ),
        Mistake("batch left symbolic", lambda p: notebook_hint(p, fix_batch=False), NO_CONV, CONV),
        Mistake(
            "a Conv for a batch",
            lambda p: macs_by_formula(p, images=256),
            "your Conv layers count their multiply-adds for many images: fix the batch dimension to 1",
            CONV,
        ),
        Mistake(
            "bias adds",
            lambda p: macs_by_formula(p, bias=True),
            "your count adds the Conv layers' bias adds: a multiply-add is a product added to a sum",
            CONV,
        ),
        Mistake(
            "groups ignored",
            lambda p: from_output_shapes(p, batch=1, channels="input"),
            "your grouped Conv counts every input channel for each output value: each group of output channels "
            "reads in_channels / group of them",
            GROUPED,
        ),
    ],
    alternatives=[macs_by_formula, macs_from_onnxruntime, notebook_hint],
    secrets=_count_secrets,
    explain=lambda raised, case: (
        "kernel_shape is optional: without it, the kernel is the weight's last two dimensions"
        if "kernel_shape" in raised.message
        else ""
    ),
    setup="import numpy as np",
)

EXERCISES = [STOPWATCH, COUNT]
