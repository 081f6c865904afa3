"""The ATen op cases of tests/python/test_aten_ops.py, one module per op family.
Importing the package runs every family module, each appending its cases to
CASES in a fixed order."""

from aten_cases import elementwise, shapes, nn, reductions, edge_cases  # noqa: F401,I001 - registers the cases, in this order
from aten_cases.common import CASES, Case  # noqa: F401

__all__ = ["CASES", "Case"]
