"""Which precision torch's kernels read a Python number at in f16/bf16 arithmetic, and whether kiln
agrees (Note [Scalars in f16 and bf16], src/builder/graph_builder.cpp). For each op and dtype, the
number of elements where eager differs from: the op computed in f32 with the number in f32,
the op computed in f32 with the number rounded to the dtype, and kiln.

    python bench/scalar_precision.py [--device cpu|cuda]

On the CPU with torch 2.14.1 (2026-12-03): mul, div and the 0-d tensor read the number in f32; add,
sub, rsub, pow and the alpha read it rounded (the alpha's a + alpha * b rounded once); kiln agrees with
eager everywhere. On CUDA (H200, torch 2.11.0+cu130, 2026-12-03): everything but pow reads the number in
f32 (div as a multiply by the f32 reciprocal, which the "f32 number" column's f32 eager also does);
kiln at a8708f5 agrees with eager everywhere (it differed in 44-239 elements per op before). The `lt` and
`leaky` rows were added after that run: on the CPU, lt reads the number rounded and leaky_relu in f32
(kiln agrees); on CUDA they have not been run yet."""

from __future__ import annotations

import argparse

import torch

import kiln  # noqa: F401  (registers the backend)

# lt's number rounds down to 0.5 in f16 and bf16 alike, so an element equal to 0.5 compares one way
# against the number in f32 and the other against it rounded; 64 such elements are appended to x.
NUMBER = {"mul": 0.1, "div": 0.3, "add": 0.3, "sub": 0.3, "rsub": 0.3, "pow": 0.3, "alpha": 0.1, "tensor": 0.1,
          "lt": 0.5 + 2**-13, "leaky": 0.1}
APPLY = {
    "mul": lambda x, c: x * c,
    "div": lambda x, c: x / c,
    "add": lambda x, c: x + c,
    "sub": lambda x, c: x - c,
    "rsub": lambda x, c: c - x,
    "pow": lambda x, c: x.abs() ** c,
    "alpha": lambda x, c: torch.add(x[:2048], x[2048:], alpha=c),  # a + alpha * b
    "tensor": lambda x, c: x * torch.tensor(c),  # a 0-d f32 tensor constant on the CPU
    "lt": lambda x, c: torch.cat([x, torch.full_like(x[:64], 0.5)]) < c,
    "leaky": lambda x, c: torch.nn.functional.leaky_relu(x, c),  # a number an activation reads
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    device = parser.parse_args().device
    print(f"torch {torch.__version__} on {device}: elements (of 4096; alpha: of 2048; lt: of 4160) where eager differs from ...")
    print(f"{'dtype':10} {'op':5} {'f32 number':>11} {'rounded number':>15} {'kiln':>6}")
    for dtype in (torch.float16, torch.bfloat16):
        x = (torch.randn(4096, generator=torch.Generator().manual_seed(0)) * 10).to(device, dtype)
        for op, number in NUMBER.items():
            fn = APPLY[op]
            rounded = torch.tensor(number, dtype=dtype).item()
            with torch.no_grad():
                eager = fn(x, number)
                wide = fn(x.float(), number).to(dtype)
                narrow = fn(x.float(), rounded).to(dtype)
                torch._dynamo.reset()
                got = torch.compile(lambda t: fn(t, number), backend="kiln")(x)
            counts = [int((eager != other).sum()) for other in (wide, narrow, got)]
            print(f"{str(dtype).removeprefix('torch.'):10} {op:5} {counts[0]:>11} {counts[1]:>15} {counts[2]:>6}")


if __name__ == "__main__":
    main()
