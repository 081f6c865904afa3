"""docs/ops.md is generated from the op table (kiln.ops_doc) and must be
current; the CUDA kernel list the core compiles must match the plugin's."""

import pathlib
import re

from kiln import _kiln, ops_doc

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_ops_doc_is_current():
    page = ROOT / "docs" / "ops.md"
    assert page.exists(), f"docs/ops.md is missing: run `{ops_doc.COMMAND}` from the repository root"
    assert page.read_text() == ops_doc.render(), (
        f"docs/ops.md is stale (the op table changed): run `PYTHONPATH=<your kiln> {ops_doc.COMMAND}` "
        "from the repository root and commit the result"
    )


def test_ops_doc_lists_every_op_and_overload():
    page = ops_doc.render()
    for op in _kiln.op_table():
        assert f"| `{op['name']}` |" in page
    for target in _kiln.aten_targets():
        assert f"| `{target}` |" in page


def _plugin_registrations() -> set[str]:
    names = set()
    for path in (ROOT / "src" / "backends" / "cuda").glob("*.c*"):
        text = path.read_text()
        names |= set(re.findall(r'map\["(\w+)"\]', text)) | set(re.findall(r'map\.emplace\("(\w+)"', text))
    return names


def test_cuda_kernel_list_matches_plugin():
    registered = _plugin_registrations() - {"cast", "fused"}
    table = {op["name"]: op for op in _kiln.op_table()}
    unknown = registered - table.keys()
    assert not unknown, f"the CUDA plugin registers kernels for ops the op table lacks: {sorted(unknown)}"
    listed = {n for n, op in table.items() if op["cuda"] and not op["elementwise_kind"]} - {"cast", "fused"}
    missing, extra = registered - listed, listed - registered
    assert not missing and not extra, (
        "src/ops/cuda_kernels.def differs from the plugin's registrations in src/backends/cuda/: "
        f"add {sorted(missing)}, remove {sorted(extra)}; then regenerate docs/ops.md (`{ops_doc.COMMAND}`)"
    )
