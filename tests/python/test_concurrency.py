"""Several threads calling one compiled model at once get correct results:
kiln serializes calls of one Executable (its arena is shared), releases the
GIL while running, and writes each call's outputs into that call's tensors."""

import threading

import torch

from kiln.dynamo_backend import kiln_backend


def test_eight_threads_thousand_calls_each_are_all_correct():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 8)).eval()
    compiled = torch.compile(model, backend=kiln_backend)
    inputs = [torch.randn(4, 16) for _ in range(8)]
    with torch.no_grad():
        expected = [model(x) for x in inputs]
        compiled(inputs[0])  # compile once, before the threads start
    failures = []

    def worker(k):
        x, want = inputs[k], expected[k]
        with torch.no_grad():
            for i in range(1000):
                got = compiled(x)
                if not torch.allclose(got, want, atol=1e-5, rtol=1e-5):
                    failures.append((k, i, (got - want).abs().max().item()))
                    return

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
