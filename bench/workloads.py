"""The benchmark's workloads (issue 4): each returns (model on cuda in fp16, inputs)."""

from __future__ import annotations

import torch


def linear_stack(batch=8, width=8192, layers=24):
    model = torch.nn.Sequential(*[torch.nn.Linear(width, width, bias=False) for _ in range(layers)])
    return model.half().cuda().eval(), [torch.randn(batch, width, dtype=torch.half, device="cuda")]


def torchvision_model(name, batch):
    import torchvision

    model = getattr(torchvision.models, name)().half().cuda().eval()
    return model, [torch.randn(batch, 3, 224, 224, dtype=torch.half, device="cuda")]


def hf_model(kind, batch, seq=128):
    import transformers

    if kind == "bert":
        model = transformers.BertModel(transformers.BertConfig())
    else:
        model = transformers.GPT2Model(transformers.GPT2Config())
    model = model.half().cuda().eval()
    return model, [torch.randint(0, 1000, (batch, seq), device="cuda")]


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
