// Linear-algebra op declarations: matmul (torch.matmul semantics, batched with
// broadcasting) and conv2d (NCHW, groups, optional bias). There is no separate
// linear/addmm op: linear(x, W, b) is add(matmul(x, permute(W, [1, 0])), b),
// and the CPU and CUDA GEMMs read the permuted weight through their transpose
// flag (Note [Weights] in DESIGN.md).
#include <string>
#include <vector>

#include "ops/broadcast.h"
#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln::ops_internal {

namespace {

std::string shape_text(const TensorType& t) { return str_cat("[", dims_to_string(t.dims), "]"); }

// torch.matmul: 1-D operands are promoted (a: prepend 1, b: append 1) and the
// added dim is removed from the result; batch dims broadcast.
std::vector<TensorType> infer_matmul(std::span<const TensorType> in, const Attrs&) {
  const TensorType& a = in[0];
  const TensorType& b = in[1];
  KILN_CHECK(a.rank() >= 1 && b.rank() >= 1, "both operands need at least 1 dim, got ", shape_text(a), " and ",
             shape_text(b));
  KILN_CHECK(a.dtype == b.dtype, "operand dtypes differ: ", dtype_name(a.dtype), " and ", dtype_name(b.dtype),
             " (cast first)");
  KILN_CHECK(!is_bool(a.dtype), "bool operands are not supported (torch has no bool matmul)");
  int64_t k_a = a.dims.back();
  int64_t k_b = b.rank() == 1 ? b.dims[0] : b.dims[b.rank() - 2];
  KILN_CHECK(k_a == k_b, "shapes ", shape_text(a), " and ", shape_text(b), " cannot be multiplied (", k_a,
             " != ", k_b, " in the contracted dim)");
  Dims batch_a(a.dims.begin(), a.dims.end() - (a.rank() >= 2 ? 2 : 1));
  Dims batch_b(b.dims.begin(), b.dims.end() - (b.rank() >= 2 ? 2 : 1));
  std::vector<Dims> batches = {batch_a, batch_b};
  Dims out = broadcast_dims(batches);
  if (a.rank() >= 2) out.push_back(a.dims[a.rank() - 2]);
  if (b.rank() >= 2) out.push_back(b.dims.back());
  return {TensorType(a.dtype, out)};
}

// Reads an ints attribute of 2 entries (1 entry is repeated, like torch's int args).
std::vector<int64_t> pair_attr(const Attrs& attrs, std::string_view name) {
  const std::vector<int64_t>& v = attrs.get_ints(name);
  KILN_CHECK(v.size() == 1 || v.size() == 2, "attribute '", name, "' needs 2 values, got ", v.size());
  return v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
}

std::vector<TensorType> infer_conv2d(std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  const TensorType& w = in[1];
  KILN_CHECK(x.rank() == 4 || x.rank() == 3, "input must be [N, C, H, W] or [C, H, W], got ", shape_text(x));
  KILN_CHECK(w.rank() == 4, "weight must be [O, C/groups, kH, kW], got ", shape_text(w));
  KILN_CHECK(is_floating(x.dtype), "needs a floating-point input, got ", dtype_name(x.dtype));
  KILN_CHECK(w.dtype == x.dtype, "weight is ", dtype_name(w.dtype), " but input is ", dtype_name(x.dtype),
             " (cast first)");
  auto stride = pair_attr(attrs, "stride");
  auto padding = pair_attr(attrs, "padding");
  auto dilation = pair_attr(attrs, "dilation");
  int64_t groups = attrs.get_int("groups");
  for (int i = 0; i < 2; ++i) {
    KILN_CHECK(stride[i] >= 1, "stride must be positive, got [", dims_to_string(stride), "]");
    KILN_CHECK(padding[i] >= 0, "padding must be non-negative, got [", dims_to_string(padding), "]");
    KILN_CHECK(dilation[i] >= 1, "dilation must be positive, got [", dims_to_string(dilation), "]");
  }
  KILN_CHECK(groups >= 1, "groups must be positive, got ", groups);
  size_t off = x.rank() - 3;  // 1 when batched
  int64_t channels = x.dims[off], height = x.dims[off + 1], width = x.dims[off + 2];
  int64_t out_channels = w.dims[0];
  KILN_CHECK(out_channels % groups == 0, "weight has ", out_channels, " output channels, not divisible by groups ",
             groups);
  KILN_CHECK(channels == w.dims[1] * groups, "input ", shape_text(x), " has ", channels,
             " channels but weight ", shape_text(w), " with groups ", groups, " expects ", w.dims[1] * groups);
  if (in.size() == 3) {
    const TensorType& bias = in[2];
    KILN_CHECK(bias.rank() == 1 && bias.dims[0] == out_channels, "bias must be [", out_channels, "], got ",
               shape_text(bias));
    KILN_CHECK(bias.dtype == x.dtype, "bias is ", dtype_name(bias.dtype), " but input is ", dtype_name(x.dtype));
  }
  Dims sizes = {height, width};
  Dims out_hw(2);
  for (int i = 0; i < 2; ++i) {
    int64_t effective = dilation[i] * (w.dims[2 + i] - 1) + 1;
    int64_t padded = sizes[i] + 2 * padding[i];
    KILN_CHECK(padded >= effective, "kernel ", w.dims[2], "x", w.dims[3], " (dilated ", effective,
               ") is larger than the padded input ", shape_text(x), " (padded size ", padded, ")");
    out_hw[i] = (padded - effective) / stride[i] + 1;
  }
  Dims out;
  if (off == 1) out.push_back(x.dims[0]);
  out.insert(out.end(), {out_channels, out_hw[0], out_hw[1]});
  return {TensorType(x.dtype, out)};
}

}  // namespace

std::vector<AttrSpec> conv2d_attrs() {
  return {{"stride", AttrKind::ints, std::vector<int64_t>{1, 1}},
          {"padding", AttrKind::ints, std::vector<int64_t>{0, 0}},
          {"dilation", AttrKind::ints, std::vector<int64_t>{1, 1}},
          {"groups", AttrKind::int_, int64_t{1}}};
}

void register_linalg_ops(OpList& ops) {
  OpDef matmul;
  matmul.name = "matmul";
  matmul.inputs = {"a", "b"};
  matmul.infer = infer_matmul;
  matmul.aten = {"aten.matmul.default", "aten.mm.default", "aten.bmm.default", "aten.mv.default",
                 "aten.dot.default"};
  ops.push_back(std::move(matmul));

  OpDef conv;
  conv.name = "conv2d";
  conv.floating_only = true;
  conv.inputs = {"x", "weight", "bias"};
  conv.optional_inputs = 1;
  conv.attrs = conv2d_attrs();
  conv.infer = infer_conv2d;
  // aten.convolution.default only when transposed=False with 2 spatial dims:
  // the frontend checks that before mapping.
  conv.aten = {"aten.conv2d.default", "aten.convolution.default"};
  ops.push_back(std::move(conv));
}

}  // namespace kiln::ops_internal
