"""The graphs kiln is given and makes for a small transformers model: the core
ATen FX graph (before kiln) and each region's optimized kiln graph (after
kiln's passes), printed. A diagnostic, e.g. for why a mask was not evaluated at
compile time (the ATen graph shows the ops of its chain).

    python bench/dump_graphs.py [--model gpt2|bert|llama] [--dtype f16|bf16|f32] [--device cuda] [--seq 160]
"""

from __future__ import annotations

import argparse
import functools

import torch

DTYPES = {"f32": torch.float32, "f16": torch.float16, "bf16": torch.bfloat16}


def small_model(name: str):
    import transformers as t

    if name == "gpt2":
        return t.GPT2Model(t.GPT2Config(vocab_size=100, n_positions=256, n_embd=128, n_layer=2, n_head=2))
    if name == "bert":
        return t.BertModel(t.BertConfig(vocab_size=100, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                                        intermediate_size=256))
    return t.LlamaModel(t.LlamaConfig(vocab_size=100, hidden_size=128, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, intermediate_size=256))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["gpt2", "bert", "llama"], default="gpt2")
    parser.add_argument("--dtype", choices=list(DTYPES), default="bf16")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--seq", type=int, default=160)
    args = parser.parse_args()

    import kiln.compile_fx as compile_fx
    from kiln.dynamo_backend import kiln_backend

    original = compile_fx.compile_fx_graph

    def dump(gm, *rest, **kwargs):
        print("==== core ATen graph given to kiln")
        print(gm.graph)
        return original(gm, *rest, **kwargs)

    compile_fx.compile_fx_graph = dump
    torch.manual_seed(0)
    model = small_model(args.model).eval().to(args.device, DTYPES[args.dtype])
    ids = torch.randint(0, 100, (2, args.seq), device=args.device)
    reports = []
    compiled = torch.compile(model, backend=functools.partial(kiln_backend, reports=reports))
    with torch.no_grad():
        compiled(ids)
    compile_fx.compile_fx_graph = original
    for report in reports:
        for region in report.region_modules:
            print(f"==== kiln graph of {region.name}, after its passes")
            print(region.exe._native.graph_text())
        for d in report.fallbacks:
            print(f"fallback {d.target}: {d.reason}")


if __name__ == "__main__":
    main()
