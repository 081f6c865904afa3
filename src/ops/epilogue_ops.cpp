// Op declarations that passes create (no ATen overload maps to them):
//
// conv2d_fused(x, weight, [bias, [residual]]): conv2d's attrs plus
//   relu           apply ReLU to the result (fuse_epilogues)
//   A residual (the output's dims and dtype, any strides; only with a bias;
//   fuse_epilogues gives it the output's layout)
//   is added after the bias and before the ReLU: a ResNet block's skip
//   connection, relu(conv(x) + bias + identity), in one cuDNN graph.
//   channels_last  x, weight and the result are stored N, H, W, C (weight
//                  O, kH, kW, C/groups) instead of NCHW/OIHW (choose_layout)
// matmul_epilogue(a, b, [bias, [residual]]): matmul, then + bias (1-D, the
//   output's last dim) and an activation ("none", "relu", "gelu", "gelu_tanh"),
//   as cuBLASLt's epilogues compute them (fuse_epilogues). A residual (the
//   output's dims and dtype, any strides) is added after the bias, and only
//   with activation "none": cuBLASLt adds it (as beta * C) before its
//   activation, not after.
// Both infer through the plain op's inference, so their checks and messages
// are the same.
#include <algorithm>
#include <string>
#include <vector>

#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln::ops_internal {

namespace {

// NHWC <-> NCHW dim orders of a rank-3 or rank-4 type.
TensorType permuted(const TensorType& t, bool to_nchw) {
  Dims d = t.dims;
  const size_t off = d.size() - 3;
  if (to_nchw)
    d = off ? Dims{d[0], d[3], d[1], d[2]} : Dims{d[2], d[0], d[1]};
  else
    d = off ? Dims{d[0], d[2], d[3], d[1]} : Dims{d[1], d[2], d[0]};
  return TensorType(t.dtype, d);
}

std::vector<TensorType> infer_conv2d_fused(std::span<const TensorType> in, const Attrs& attrs) {
  const bool channels_last = attrs.get_bool("channels_last");
  std::vector<TensorType> logical(in.begin(), in.end());
  if (channels_last) {
    KILN_CHECK(in[0].rank() == 3 || in[0].rank() == 4, "input must be [N, H, W, C] or [H, W, C] (channels_last), got [",
               dims_to_string(in[0].dims), "]");
    KILN_CHECK(in[1].rank() == 4, "weight must be [O, kH, kW, C/groups] (channels_last), got [",
               dims_to_string(in[1].dims), "]");
    logical[0] = permuted(in[0], true);
    logical[1] = permuted(in[1], true);
  }
  Attrs conv_attrs;
  for (const char* name : {"stride", "padding", "dilation", "groups"}) conv_attrs.set(name, *attrs.find(name));
  std::vector<TensorType> out = get_op("conv2d").infer(std::span(logical).first(std::min<size_t>(logical.size(), 3)),
                                                      conv_attrs);
  if (channels_last) out[0] = permuted(out[0], false);
  if (in.size() > 3) {
    const TensorType& residual = in[3];
    KILN_CHECK(residual.dims == out[0].dims, "residual must be [", dims_to_string(out[0].dims),
               "] (the output's dims), got [", dims_to_string(residual.dims), "]");
    KILN_CHECK(residual.dtype == out[0].dtype, "residual is ", dtype_name(residual.dtype), " but the convolution is ",
               dtype_name(out[0].dtype));
  }
  return out;
}

std::vector<TensorType> infer_matmul_epilogue(std::span<const TensorType> in, const Attrs& attrs) {
  const std::string& act = attrs.get_string("activation");
  KILN_CHECK(act == "none" || act == "relu" || act == "gelu" || act == "gelu_tanh",
             "activation must be none, relu, gelu or gelu_tanh, got '", act, "'");
  std::vector<TensorType> out = get_op("matmul").infer(in.subspan(0, 2), Attrs());
  if (in.size() > 2) {
    const TensorType& bias = in[2];
    KILN_CHECK(bias.rank() == 1 && !out[0].dims.empty() && bias.dims[0] == out[0].dims.back(), "bias must be [",
               out[0].dims.empty() ? 0 : out[0].dims.back(), "] (the output's last dim), got [",
               dims_to_string(bias.dims), "]");
    KILN_CHECK(bias.dtype == out[0].dtype, "bias is ", dtype_name(bias.dtype), " but the product is ",
               dtype_name(out[0].dtype));
  }
  if (in.size() > 3) {
    const TensorType& residual = in[3];
    KILN_CHECK(act == "none", "a residual needs activation none, got '", act, "'");
    KILN_CHECK(residual.dims == out[0].dims, "residual must be [", dims_to_string(out[0].dims),
               "] (the output's dims), got [", dims_to_string(residual.dims), "]");
    KILN_CHECK(residual.dtype == out[0].dtype, "residual is ", dtype_name(residual.dtype), " but the product is ",
               dtype_name(out[0].dtype));
  }
  return out;
}

}  // namespace

void register_epilogue_ops(OpList& ops) {
  OpDef conv;
  conv.name = "conv2d_fused";
  conv.floating_only = true;
  conv.inputs = {"x", "weight", "bias", "residual"};
  conv.optional_inputs = 2;
  conv.attrs = conv2d_attrs();
  conv.attrs.push_back({"relu", AttrKind::bool_, false});
  conv.attrs.push_back({"channels_last", AttrKind::bool_, false});
  conv.infer = infer_conv2d_fused;
  ops.push_back(std::move(conv));

  OpDef mm;
  mm.name = "matmul_epilogue";
  mm.floating_only = true;
  mm.inputs = {"a", "b", "bias", "residual"};
  mm.optional_inputs = 2;
  mm.attrs = {{"activation", AttrKind::string, std::string("none")}};
  mm.infer = infer_matmul_epilogue;
  ops.push_back(std::move(mm));
}

}  // namespace kiln::ops_internal
