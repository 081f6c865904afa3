"""The benchmark's workloads (issue 4): each returns (model on cuda in fp16, inputs); the model builders
take another device and dtype for the CPU benchmark (cpu_latency.py). DIAGNOSTIC_WORKLOADS
adds single-op models for the diagnostics (kernel_profile.py, host_profile.py), not for the table."""

from __future__ import annotations

import torch


def linear_stack(batch=8, width=8192, layers=24):
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width, bias=False) for _ in range(layers)])
    return model.half().cuda().eval(), [torch.randn(batch, width, dtype=torch.half, device="cuda")]


def torchvision_model(name, batch, device="cuda", dtype=torch.half):
    import torchvision

    model = getattr(torchvision.models, name)()
    if name.startswith("vit"):  # torchvision zero-initializes ViT's head: all-zero logits would hide any difference
        torch.nn.init.normal_(model.heads.head.weight, std=0.02)
    model = model.to(device, dtype).eval()
    return model, [torch.randn(batch, 3, 224, 224, dtype=dtype, device=device)]


def hf_model(kind, batch, seq=128, device="cuda", dtype=torch.half):
    import transformers

    if kind == "bert":
        model = transformers.BertModel(transformers.BertConfig())
    else:
        model = transformers.GPT2Model(transformers.GPT2Config())
    model = model.to(device, dtype).eval()
    return model, [torch.randint(0, 1000, (batch, seq), device=device)]


WORKLOADS = {
    "linear24x8192_b8": linear_stack,
    "resnet50_b1": lambda: torchvision_model("resnet50", 1),
    "resnet50_b32": lambda: torchvision_model("resnet50", 32),
    "vit_b_16_b1": lambda: torchvision_model("vit_b_16", 1),
    "vit_b_16_b32": lambda: torchvision_model("vit_b_16", 32),
    "bert_base_b1": lambda: hf_model("bert", 1),
    "bert_base_b32": lambda: hf_model("bert", 32),
    "gpt2_b1": lambda: hf_model("gpt2", 1),
    "gpt2_b32": lambda: hf_model("gpt2", 32),
}


class Attention(torch.nn.Module):
    """One transformer attention as GPT-2 and BERT feed it: q, k and v split from one packed [B, S, 3E]
    projection, heads of 64, the output back in [B, S, E]."""

    def __init__(self, heads: int, causal: bool):
        super().__init__()
        self.heads, self.causal = heads, causal

    def forward(self, qkv):
        b, s, e3 = qkv.shape
        q, k, v = (t.view(b, s, self.heads, -1).transpose(1, 2) for t in qkv.split(e3 // 3, dim=2))
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=self.causal)
        return out.transpose(1, 2).reshape(b, s, e3 // 3)


def attention(batch: int, causal: bool, seq=128, heads=12):
    return Attention(heads, causal).cuda().eval(), [torch.randn(batch, seq, 3 * heads * 64, dtype=torch.half,
                                                                device="cuda")]


DIAGNOSTIC_WORKLOADS = {
    **WORKLOADS,
    "attention_causal_b1": lambda: attention(1, True),
    "attention_b1": lambda: attention(1, False),
    "attention_causal_b32": lambda: attention(32, True),
}
