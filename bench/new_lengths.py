"""What a sequence length kiln has not compiled for costs while decoding on the CPU: kiln specializes a
symbolic graph per new key/value cache length (python/kiln/specialize.py), so the first generate() over
lengths it has not seen pays one specialization per token. transformers' LLaMA or GPT-2 (random weights,
greedy), `model.forward` compiled by kiln. After two warm-up calls (the second makes the prompt's graph
symbolic too), each prompt length L runs generate() twice: the first meets tokens + 1 new lengths (the
prompt's and each step's), the second none; their difference over tokens + 1 is the cost of one new
length. Prints each prompt's figures and the median.

    python bench/new_lengths.py [--model llama|gpt2] [--layers 12] [--tokens 10] [--prompts 100,130,160,190,220]

A benchmark, not a test (docs/models.md, "Dynamic batch")."""

from __future__ import annotations

import argparse
import statistics
import time


def build(name: str, layers: int):
    import transformers as t

    if name == "gpt2":
        return t.GPT2LMHeadModel(t.GPT2Config(n_layer=layers, n_positions=1024)).eval()
    return t.LlamaForCausalLM(t.LlamaConfig(vocab_size=32000, hidden_size=768, intermediate_size=2048,
                                            num_hidden_layers=layers, num_attention_heads=12, num_key_value_heads=4,
                                            max_position_embeddings=1024)).eval()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=["llama", "gpt2"], default="llama")
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--tokens", type=int, default=10)
    parser.add_argument("--prompts", default="100,130,160,190,220")
    args = parser.parse_args()

    import torch

    import kiln  # noqa: F401  (registers the "kiln" backend)

    torch.manual_seed(0)
    model = build(args.model, args.layers)
    model.forward = torch.compile(model.forward, backend="kiln")
    vocab = model.config.vocab_size

    def generate(length: int, tokens: int) -> float:
        ids = torch.randint(0, vocab, (1, length))
        with torch.inference_mode():
            start = time.perf_counter()
            model.generate(ids, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False, pad_token_id=0)
            return time.perf_counter() - start

    generate(16, args.tokens)
    generate(41, 2)
    costs = []
    for length in map(int, args.prompts.split(",")):
        new, cached = generate(length, args.tokens), generate(length, args.tokens)
        costs.append((new - cached) / (args.tokens + 1))
        print(f"prompt {length}: {new:.3f} s with new lengths, {cached:.3f} s again; "
              f"{costs[-1] * 1000:.0f} ms per new length", flush=True)
    print(f"median: {statistics.median(costs) * 1000:.0f} ms per new length")


if __name__ == "__main__":
    main()
