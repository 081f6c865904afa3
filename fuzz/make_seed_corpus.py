"""Writes the artifact seed corpus (fuzz/corpus/artifact/*.kiln): a few small
valid programs saved by kiln.save, with and without weights, covering
several ops, dtypes and a strided weight. The IR seeds are copies of IR test
files (tests/ir). Run from the repository root with kiln importable:

    python fuzz/make_seed_corpus.py
"""

from pathlib import Path

import torch

import kiln

OUT = Path(__file__).resolve().parent / "corpus" / "artifact"


class Tiny(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.fc(x)).sum(dim=-1, keepdim=True) * 2


class TinyConv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(2, 2, 3, padding=1)

    def forward(self, x, idx):
        h = torch.tanh(self.conv(x)).flatten(1)
        return h.t() @ h, torch.softmax(h * idx.to(h.dtype), dim=-1).amax(dim=0)


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    tiny = Tiny().eval()
    program = kiln.compile(tiny, [torch.randn(2, 4)])
    kiln.save(program, OUT / "tiny.kiln")
    kiln.save(program, OUT / "tiny_bare.kiln", weights=False)
    conv = TinyConv().eval()
    program = kiln.compile(conv, [torch.randn(1, 2, 3, 3), torch.arange(18)])
    kiln.save(program, OUT / "conv_int_input.kiln")
    for f in sorted(OUT.iterdir()):
        print(f, f.stat().st_size)


if __name__ == "__main__":
    main()
