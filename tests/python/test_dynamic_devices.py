"""Dynamic shapes on every device under test (CPU, and CUDA on the GPU machine): a convolution net over
several batch sizes, and GPT-2 and LLaMA decoding step by step with transformers' dynamic cache, against eager; on
CUDA, each specialization replays its CUDA graph and dropped specializations give their device memory
back. (tests/python/test_dynamic.py checks the specialization cache itself, on the CPU.)"""

import gc

import pytest
import torch

import kiln
from conftest import assert_close, cuda_available, no_tf32, tiny_gpt2
from kiln.dynamo_backend import kiln_backend


class ConvNet(torch.nn.Module):
    def __init__(self, channels: int = 8):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, channels, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(channels)
        self.fc = torch.nn.Linear(channels, 5)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x)))
        return self.fc(y.mean(dim=(2, 3))).softmax(-1), y


def _live_regions():
    """kiln's regions alive now (compiled functions and their specializations hold them)."""
    gc.collect()
    return [o for o in gc.get_objects() if type(o) is kiln.region.KilnRegion]


def test_conv_net_batches_match_eager_and_replay(device):
    torch.manual_seed(0)
    model = ConvNet().to(device).eval()
    compiled = torch.compile(model, backend=kiln_backend, dynamic=True)
    with no_tf32(), torch.no_grad():
        for b in (2, 3, 8, 3, 2, 8):
            x = torch.randn(b, 3, 12, 12, device=device)
            assert_close(compiled(x), model(x), atol=1e-5, rtol=1e-4)
    if device == "cuda":
        stats = [r.exe.call_stats() for r in _live_regions()]
        # Batches 2, 3 and 8 each specialized once, then called again: a captured graph, replayed.
        assert sum(s["graph_captures"] for s in stats) >= 3
        assert sum(s["graph_replays"] for s in stats) >= 3


def tiny_llama(device):
    """transformers' LLaMA (rotary positions, grouped key/value heads) with 2 layers of width 32."""
    import transformers as tf

    config = tf.LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return tf.LlamaForCausalLM(config).to(device).eval()


@pytest.mark.parametrize("build", [tiny_gpt2, tiny_llama], ids=["gpt2", "llama"])
def test_decoding_steps_match_eager(device, build, monkeypatch):
    """Teacher-forced decoding with a dynamic cache: each step's cache is one longer, so after the first
    two steps Dynamo hands kiln one symbolic graph, specialized per length; every step's logits match
    eager's."""
    from transformers import DynamicCache

    lengths = []
    original = kiln.specialize.specialize

    def counting(gm, args, symbolic=None):
        lengths.append(args)
        return original(gm, args, symbolic)

    monkeypatch.setattr(kiln.specialize, "specialize", counting)
    torch.manual_seed(0)
    model = build(device)
    compiled = torch.compile(model.forward, backend=kiln_backend)
    tokens = torch.randint(0, 96, (2, 16), device=device)
    caches = DynamicCache(), DynamicCache()
    with no_tf32(), torch.inference_mode():
        prompt = tokens[:, :5]
        for step in range(5, tokens.shape[1]):
            want = model(prompt, past_key_values=caches[0], use_cache=True).logits
            got = compiled(prompt, past_key_values=caches[1], use_cache=True).logits
            assert_close(got, want, atol=1e-4, rtol=1e-4)
            prompt = tokens[:, step:step + 1]
        assert caches[1].get_seq_length() == caches[0].get_seq_length() == tokens.shape[1] - 1
    assert len(lengths) >= 8  # the steps after the two static graphs (prompt, first step)


@pytest.mark.skipif(not cuda_available(), reason="needs a GPU and kiln's CUDA backend")
def test_dropped_specializations_give_device_memory_back(monkeypatch):
    """With room for two specializations, a second walk over five batch sizes re-specializes each one and
    drops the one before: torch's allocated device memory ends where the first walk left it."""
    monkeypatch.setattr(kiln.specialize, "MAX_SPECIALIZATIONS", 2)
    torch.manual_seed(0)
    model = ConvNet(channels=16).cuda().eval()  # activations of several MB per batch row
    compiled = torch.compile(model, backend=kiln_backend, dynamic=True)

    def walk():
        for b in range(2, 7):
            x = torch.randn(b, 3, 128, 128, device="cuda")
            out = compiled(x)
            assert_close(out, model(x), atol=1e-5, rtol=1e-4)
            del x, out  # only the compiled model's own memory stays
        gc.collect()
        torch.cuda.synchronize()
        return torch.cuda.memory_allocated()

    with no_tf32(), torch.no_grad():
        first = walk()
        second = walk()
    assert second <= first + 2**20, f"{(second - first) / 2**20:.1f} MiB more after the second walk"
