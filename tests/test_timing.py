"""helpers.measure.timing and helpers.measure.machine: the numbers every benchmark in the series is built on."""

from __future__ import annotations

import time

from helpers.measure.machine import cpu_description, machine_report
from helpers.measure.timing import measure


def test_measure_reports_ordered_percentiles_in_microseconds():
    result = measure(lambda: time.sleep(0.001), repeat=20, warmup=1)
    assert set(result) == {"p50_us", "p90_us", "mean_us", "n"}
    assert result["n"] == 20
    assert 900 <= result["p50_us"] <= result["p90_us"]  # sleep(1 ms) never returns early


def test_measure_scale_shrinks_the_run(monkeypatch):
    monkeypatch.setenv("ONNX_PDF_BENCH_SCALE", "0.25")
    assert measure(lambda: None, repeat=40, warmup=0)["n"] == 10
    monkeypatch.setenv("ONNX_PDF_BENCH_SCALE", "0.01")
    assert measure(lambda: None, repeat=40, warmup=0)["n"] == 3  # never fewer than 3 samples


def test_measure_by_time_budget_takes_at_least_ten_samples():
    calls = []
    result = measure(lambda: calls.append(1), min_time_s=0.0, warmup=2)
    assert result["n"] >= 10 and len(calls) == result["n"] + 2


def test_machine_report_describes_cpu_threads_and_packages():
    report = machine_report(["numpy", "surely-not-installed-package"], threads=2)
    cpu = cpu_description()
    assert report["cpu"]["model"] == cpu["model"] and report["threads"] == 2
    assert (
        report["packages"]["numpy"] and report["packages"]["surely-not-installed-package"] is None
    )
    assert isinstance(cpu["flags"], list) and cpu["logical_cores"] >= 1
