"""kiln: a deep-learning graph compiler and runtime.

Use it as ``torch.compile(model, backend="kiln")`` (registered through torch's
backend entry point, no import needed), ahead of time with
``kiln.compile(model, example_inputs)``, or build graphs directly with
``kiln.Graph``. Importing kiln changes no global torch setting; torch is only
imported by the functions that need it.
"""

from kiln._kiln import DType, Error, Graph
from kiln.executable import compile_graph
from kiln.options import Options

__all__ = ["DType", "Error", "Graph", "Options", "compile", "compile_graph", "explain", "load", "memory_report", "save"]
__version__ = "0.1.0"


def compile(model, example_inputs, **options):
    """Compiles ``model`` ahead of time through torch.export; returns a callable."""
    from kiln.aot import compile_exported

    return compile_exported(model, tuple(example_inputs), Options.from_user(options))


def explain(model, *inputs, **options):
    """Compiles ``model`` with kiln and reports what was lowered and what fell back, op by op."""
    from kiln.explainer import explain_model

    return explain_model(model, inputs, Options.from_user(options))


def memory_report(clear: bool = False):
    """Memory at each stage of the most recent compiles (kiln.memory_trace); `clear` forgets them."""
    from kiln.memory_trace import memory_report as report

    return report(clear)


def save(compiled, path, weights: bool = True, example_inputs=None, options=None) -> None:
    """Saves a program from kiln.compile, or a torch.compile(backend="kiln") model traced whole on
    `example_inputs` (compiled with `options`), into one file (weights=False leaves the weights out)."""
    from kiln.artifacts import save as save_program

    save_program(compiled, path, weights, example_inputs, options)


def load(path, weights=None, device="cpu"):
    """Loads a file written by kiln.save onto `device`; returns a callable on torch tensors. `weights`: a
    state dict or a safetensors file path, required for weights the file does not hold."""
    from kiln.artifacts import load as load_program

    return load_program(path, weights, device)
