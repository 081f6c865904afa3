"""kiln against eager PyTorch decoding on the CPU: transformers' GPT-2 (random weights) generating greedily
with its dynamic key/value cache, `model.forward` compiled by kiln, eager and kiln generate() calls
alternating so that a host whose speed drifts moves both alike. Prints each call's seconds and whether
kiln's tokens equal eager's.

    python bench/cpu_decode.py [--layers 12] [--batch 1] [--prompt 8] [--tokens 20]
                               [--dtype fp32|bf16|fp16] [--pairs 4]

The first two kiln generate() calls compile (the prompt, the first step, then the symbolic graph and a
specialization per new length) and are not timed. A benchmark, not a test (docs/models.md, "Dynamic
batch")."""

from __future__ import annotations

import argparse
import time

DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--prompt", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=20)
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="fp32")
    parser.add_argument("--pairs", type=int, default=4)
    args = parser.parse_args()

    import torch
    import transformers

    import kiln  # noqa: F401  (registers the "kiln" backend)

    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(transformers.GPT2Config(n_layer=args.layers)).eval()
    model = model.to(getattr(torch, DTYPES[args.dtype]))
    ids = torch.randint(0, model.config.vocab_size, (args.batch, args.prompt))
    eager_forward = model.forward
    compiled_forward = torch.compile(model.forward, backend="kiln")

    def generate(forward):
        model.forward = forward
        start = time.perf_counter()
        tokens = model.generate(ids, max_new_tokens=args.tokens, do_sample=False, pad_token_id=0)
        return tokens, time.perf_counter() - start

    with torch.no_grad():
        expected, _ = generate(eager_forward)
        for _ in range(2):
            generate(compiled_forward)
        eager_s, kiln_s, same = [], [], True
        for _ in range(args.pairs):
            tokens, seconds = generate(eager_forward)
            eager_s.append(seconds)
            tokens, seconds = generate(compiled_forward)
            kiln_s.append(seconds)
            same = same and torch.equal(tokens, expected)
    print(f"torch {torch.__version__}, GPT-2 {args.layers} layers, {args.dtype}, batch {args.batch}, "
          f"prompt {args.prompt}, {args.tokens} new tokens, {torch.get_num_threads()} threads")
    print("eager s:", " ".join(f"{s:.3f}" for s in eager_s))
    print("kiln s: ", " ".join(f"{s:.3f}" for s in kiln_s))
    print("kiln's tokens equal eager's:", same)


if __name__ == "__main__":
    main()
