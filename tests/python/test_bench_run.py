"""bench/run.py's aggregation over fresh processes (the GPU benchmark itself runs on the GPU machine):
the table's latency is the median over the timed processes, kiln's extra process only times a warm
compile, and a failed process makes the row an error."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "bench"))
import run  # noqa: E402


def _scripted(monkeypatch, samples):
    calls = []

    def fake(backend, workload, timeout, env=None):
        calls.append(env["KILN_CACHE_DIR"])
        return dict(samples[len(calls) - 1], backend=backend, workload=workload)

    monkeypatch.setattr(run, "measure_once", fake)
    return calls


def _sample(median, compile_s=1.0):
    return {"median_ms": median, "device_ms": median - 0.1, "host_ms": 0.2, "compile_s": compile_s,
            "max_abs_diff": 0.0, "host": {"python_loop_us": [17.0, 17.0]}}


def test_median_over_processes(monkeypatch):
    _scripted(monkeypatch, [_sample(1.9), _sample(1.5), _sample(1.6)])
    r = run.measure("reduce-overhead", "resnet50_b32", 60, processes=3)
    assert r["median_ms"] == 1.6 and r["device_ms"] == pytest.approx(1.5)
    assert [p["median_ms"] for p in r["processes"]] == [1.9, 1.5, 1.6]
    assert r["compile_s"] == 1.0 and "compile_s_warm" not in r


def test_kiln_warm_process_times_compile_only(monkeypatch):
    calls = _scripted(monkeypatch, [_sample(1.0, compile_s=3.0), _sample(0.5, compile_s=2.0)])
    r = run.measure("kiln", "gpt2_b1", 60, processes=1)
    assert len(calls) == 2 and calls[0] == calls[1]  # one kernel cache: cold, then warm
    assert r["median_ms"] == 1.0  # the warm process is not a latency sample when processes=1
    assert r["compile_s"] == 3.0 and r["compile_s_warm"] == 2.0
    assert len(r["processes"]) == 2


def test_kiln_three_processes(monkeypatch):
    _scripted(monkeypatch, [_sample(1.0, 3.0), _sample(0.7, 2.0), _sample(0.8, 2.2)])
    r = run.measure("kiln", "gpt2_b1", 60, processes=3)
    assert r["median_ms"] == 0.8 and r["compile_s"] == 3.0 and r["compile_s_warm"] == pytest.approx(2.1)


def test_a_failed_process_is_the_row(monkeypatch):
    _scripted(monkeypatch, [_sample(1.0), {"error": "CUDA out of memory"}])
    r = run.measure("eager", "gpt2_b32", 60, processes=2)
    assert r["error"] == "CUDA out of memory" and r["backend"] == "eager"
