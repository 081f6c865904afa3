"""The CI-sized soak (bench/soak.py runs the long one): after warm-up, repeated
calls of a compiled model keep host memory, open descriptors and threads
flat and every output right; building, compiling, running and dropping kiln
graphs returns host memory to where it started."""

import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).parents[2] / "bench"))
soak = pytest.importorskip("soak")

MIB_SLACK = 1.0  # allocator noise; a leak of even 400 bytes per call or 5 KiB per compile exceeds it


def test_calls_keep_memory_handles_and_threads_flat_and_outputs_right():
    result = soak.soak_calls(3000, "cpu", warmup=300, checkpoints=6)
    assert result["wrong_outputs"] == 0
    first, last = result["trace"][0], result["trace"][-1]
    assert last["open_fds"] == result["after_warmup"]["open_fds"]
    assert last["threads"] == result["after_warmup"]["threads"]
    assert last["rss_mib"] - first["rss_mib"] < MIB_SLACK, result["trace"]


def test_compiled_and_dropped_graphs_return_host_memory():
    result = soak.soak_graph_compiles(200, "cpu")
    before, after = result["before"], result["after"]
    assert after["open_fds"] == before["open_fds"] and after["threads"] == before["threads"]
    assert after["rss_mib"] - before["rss_mib"] < MIB_SLACK, (before, after)
