"""bench/run.py's aggregation over fresh processes (the GPU benchmark itself runs on the GPU machine):
the table's latency is the median over the timed processes, kiln's extra process only times a warm
compile, a failed process makes the row an error, and the backends' processes run in rounds."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "bench"))
import run  # noqa: E402


def _scripted(monkeypatch, samples):
    calls = []

    def fake(backend, workload, timeout, env=None):
        calls.append((backend, env["KILN_CACHE_DIR"]))
        return dict(samples[len(calls) - 1], backend=backend, workload=workload)

    monkeypatch.setattr(run, "measure_once", fake)
    return calls


def _sample(median, compile_s=1.0):
    return {"median_ms": median, "device_ms": median - 0.1, "host_ms": 0.2, "compile_s": compile_s,
            "max_abs_diff": 0.0, "host": {"python_loop_us": [17.0, 17.0]}}


def test_median_over_processes(monkeypatch):
    _scripted(monkeypatch, [_sample(1.9), _sample(1.5), _sample(1.6)])
    [r] = run.measure_workload("resnet50_b32", ["reduce-overhead"], 60, processes=3)
    assert r["median_ms"] == 1.6 and r["device_ms"] == pytest.approx(1.5)
    assert [p["median_ms"] for p in r["processes"]] == [1.9, 1.5, 1.6]
    assert r["compile_s"] == 1.0 and "compile_s_warm" not in r


def test_kiln_warm_process_times_compile_only(monkeypatch):
    calls = _scripted(monkeypatch, [_sample(1.0, compile_s=3.0), _sample(0.5, compile_s=2.0)])
    [r] = run.measure_workload("gpt2_b1", ["kiln"], 60, processes=1)
    assert len(calls) == 2 and calls[0][1] == calls[1][1]  # one kernel cache: cold, then warm
    assert r["median_ms"] == 1.0  # the warm process is not a latency sample when processes=1
    assert r["compile_s"] == 3.0 and r["compile_s_warm"] == 2.0
    assert len(r["processes"]) == 2


def test_kiln_three_processes(monkeypatch):
    _scripted(monkeypatch, [_sample(1.0, 3.0), _sample(0.7, 2.0), _sample(0.8, 2.2)])
    [r] = run.measure_workload("gpt2_b1", ["kiln"], 60, processes=3)
    assert r["median_ms"] == 0.8 and r["compile_s"] == 3.0 and r["compile_s_warm"] == pytest.approx(2.1)


def test_a_failed_process_is_the_row(monkeypatch):
    calls = _scripted(monkeypatch, [_sample(1.0), {"error": "CUDA out of memory"}, _sample(2.0), _sample(2.1)])
    rows = run.measure_workload("gpt2_b32", ["eager", "inductor"], 60, processes=3)
    assert rows[0]["median_ms"] == 2.0  # eager: the median of 1.0, 2.0 and 2.1
    assert rows[1]["error"] == "CUDA out of memory" and rows[1]["backend"] == "inductor"
    assert [b for b, _ in calls].count("inductor") == 1  # a failed backend runs no more processes


def test_backends_run_in_rounds(monkeypatch):
    """A drift of the host's speed between minutes falls on every backend: their processes alternate."""
    calls = _scripted(monkeypatch, [_sample(1.0 + k / 10, compile_s=3.0 - k / 10) for k in range(6)])
    rows = run.measure_workload("bert_base_b1", ["reduce-overhead", "kiln"], 60, processes=3)
    assert [b for b, _ in calls] == ["reduce-overhead", "kiln"] * 3
    assert len({d for b, d in calls if b == "kiln"}) == 1  # kiln's processes share one cache folder
    assert {d for b, d in calls if b == "kiln"}.isdisjoint(d for b, d in calls if b == "reduce-overhead")
    assert rows[0]["median_ms"] == pytest.approx(1.2) and rows[1]["median_ms"] == pytest.approx(1.3)
    assert rows[1]["compile_s"] == pytest.approx(2.9) and rows[1]["compile_s_warm"] == pytest.approx(2.6)


def test_kiln_warm_process_follows_the_round(monkeypatch):
    calls = _scripted(monkeypatch, [_sample(1.0), _sample(0.9, 3.0), _sample(0.8, 2.0)])
    run.measure_workload("gpt2_b1", ["eager", "kiln"], 60, processes=1)
    assert [b for b, _ in calls] == ["eager", "kiln", "kiln"]
