// 2-D pooling op declarations over NCHW (or unbatched CHW) inputs:
//   max_pool2d           values and i64 indices (flat h * W + w within each input
//                        plane, like torch's max_pool2d_with_indices); indices
//                        are cheap to produce and unused ones die in liveness
//   avg_pool2d           torch's window/divisor rules incl. count_include_pad and
//                        divisor_override (0 means none)
//   adaptive_avg_pool2d  torch's start = floor(o * I / O), end = ceil((o + 1) * I / O)
// Output sizes follow torch's pooling_output_shape (ceil_mode drops a last
// window that would start in the right padding).
// Each also has channels_last (default false), set by the layout pass
// (passes/choose_layout.cpp): input and outputs are then N, H, W, C (or H, W, C).
#include <string>
#include <vector>

#include "ops/op_registry.h"
#include "support/error.h"

namespace kiln::ops_internal {

namespace {

std::string shape_text(const TensorType& t) { return str_cat("[", dims_to_string(t.dims), "]"); }

std::vector<int64_t> pair_attr(const Attrs& attrs, std::string_view name, const std::vector<int64_t>& fallback) {
  const std::vector<int64_t>& v = attrs.get_ints(name);
  if (v.empty() && !fallback.empty()) return fallback;
  KILN_CHECK(v.size() == 1 || v.size() == 2, "attribute '", name, "' needs 2 values, got ", v.size());
  return v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
}

void check_input(const TensorType& x) {
  KILN_CHECK(x.rank() == 4 || x.rank() == 3, "input must be [N, C, H, W] or [C, H, W], got ", shape_text(x));
}

int64_t pooled_size(int64_t in, int64_t kernel, int64_t pad, int64_t stride, int64_t dilation, bool ceil_mode) {
  int64_t num = in + 2 * pad - dilation * (kernel - 1) - 1 + (ceil_mode ? stride - 1 : 0);
  int64_t out = num / stride - (num % stride < 0 ? 1 : 0) + 1;  // floor division, like torch's div_rtn
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

// Output dims for windowed pools; errors name the input and the window.
Dims windowed_output(const TensorType& x, const std::vector<int64_t>& kernel, const std::vector<int64_t>& stride,
                     const std::vector<int64_t>& padding, const std::vector<int64_t>& dilation, bool ceil_mode) {
  check_input(x);
  for (int i = 0; i < 2; ++i) {
    KILN_CHECK(kernel[i] >= 1, "kernel_size must be positive, got [", dims_to_string(kernel), "]");
    KILN_CHECK(stride[i] >= 1, "stride must be positive, got [", dims_to_string(stride), "]");
    KILN_CHECK(dilation[i] >= 1, "dilation must be positive, got [", dims_to_string(dilation), "]");
    KILN_CHECK(padding[i] >= 0 && padding[i] <= kernel[i] / 2, "padding [", dims_to_string(padding),
               "] should be at most half of kernel_size [", dims_to_string(kernel), "]");
  }
  size_t off = x.rank() - 3;
  Dims out(x.dims.begin(), x.dims.begin() + static_cast<std::ptrdiff_t>(off + 1));
  for (int i = 0; i < 2; ++i) {
    int64_t o = pooled_size(x.dims[off + 1 + i], kernel[i], padding[i], stride[i], dilation[i], ceil_mode);
    KILN_CHECK(o >= 1, "kernel_size [", dims_to_string(kernel), "] is larger than the (padded) input ",
               shape_text(x), ": output would be empty");
    out.push_back(o);
  }
  return out;
}

std::vector<TensorType> infer_max_pool2d(std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  KILN_CHECK(is_floating(x.dtype) || is_integral(x.dtype), "needs a numeric input, got ", dtype_name(x.dtype));
  auto kernel = pair_attr(attrs, "kernel_size", {});
  Dims out = windowed_output(x, kernel, pair_attr(attrs, "stride", kernel), pair_attr(attrs, "padding", {}),
                             pair_attr(attrs, "dilation", {}), attrs.get_bool("ceil_mode"));
  return {TensorType(x.dtype, out), TensorType(DType::i64, out)};
}

std::vector<TensorType> infer_avg_pool2d(std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  KILN_CHECK(is_floating(x.dtype), "needs a floating-point input, got ", dtype_name(x.dtype));
  KILN_CHECK(attrs.get_int("divisor_override") >= 0, "divisor_override must be positive (0 means none), got ",
             attrs.get_int("divisor_override"));
  auto kernel = pair_attr(attrs, "kernel_size", {});
  Dims out = windowed_output(x, kernel, pair_attr(attrs, "stride", kernel), pair_attr(attrs, "padding", {}), {1, 1},
                             attrs.get_bool("ceil_mode"));
  return {TensorType(x.dtype, out)};
}

std::vector<TensorType> infer_adaptive_avg_pool2d(std::span<const TensorType> in, const Attrs& attrs) {
  const TensorType& x = in[0];
  check_input(x);
  KILN_CHECK(is_floating(x.dtype), "needs a floating-point input, got ", dtype_name(x.dtype));
  auto size = pair_attr(attrs, "output_size", {});
  KILN_CHECK(size[0] >= 0 && size[1] >= 0, "output_size must be non-negative, got [", dims_to_string(size), "]");
  size_t off = x.rank() - 3;
  for (size_t d = off; d < x.rank(); ++d)
    KILN_CHECK(x.dims[d] > 0, "input ", shape_text(x), " must have non-zero size in its non-batch dims");
  Dims out(x.dims.begin(), x.dims.begin() + static_cast<std::ptrdiff_t>(off + 1));
  out.push_back(size[0]);
  out.push_back(size[1]);
  return {TensorType(x.dtype, out)};
}

// NHWC <-> NCHW dim orders of a rank-3 or rank-4 type.
TensorType permuted(const TensorType& t, bool to_nchw) {
  const Dims& d = t.dims;
  if (d.size() == 4) return TensorType(t.dtype, to_nchw ? Dims{d[0], d[3], d[1], d[2]} : Dims{d[0], d[2], d[3], d[1]});
  return TensorType(t.dtype, to_nchw ? Dims{d[2], d[0], d[1]} : Dims{d[1], d[2], d[0]});
}

// `infer` over the NCHW reading of channels-last input and outputs.
InferFn with_layout(InferFn infer) {
  return [infer](std::span<const TensorType> in, const Attrs& attrs) {
    if (!attrs.get_bool("channels_last")) return infer(in, attrs);
    check_input(in[0]);
    TensorType x = permuted(in[0], true);
    std::vector<TensorType> out = infer(std::span<const TensorType>(&x, 1), attrs);
    for (TensorType& t : out) t = permuted(t, false);
    return out;
  };
}

}  // namespace

void register_pool_ops(OpList& ops) {
  OpDef max_pool;
  max_pool.name = "max_pool2d";
  max_pool.inputs = {"x"};
  max_pool.num_outputs = 2;  // values, indices (i64)
  max_pool.attrs = {{"kernel_size", AttrKind::ints, std::nullopt},
                    {"stride", AttrKind::ints, std::vector<int64_t>{}},  // empty: kernel_size
                    {"padding", AttrKind::ints, std::vector<int64_t>{0, 0}},
                    {"dilation", AttrKind::ints, std::vector<int64_t>{1, 1}},
                    {"ceil_mode", AttrKind::bool_, false},
                    {"channels_last", AttrKind::bool_, false}};
  max_pool.infer = with_layout(infer_max_pool2d);
  max_pool.aten = {"aten.max_pool2d_with_indices.default"};
  ops.push_back(std::move(max_pool));

  OpDef avg_pool;
  avg_pool.name = "avg_pool2d";
  avg_pool.inputs = {"x"};
  avg_pool.floating_only = true;
  avg_pool.attrs = {{"kernel_size", AttrKind::ints, std::nullopt},
                    {"stride", AttrKind::ints, std::vector<int64_t>{}},  // empty: kernel_size
                    {"padding", AttrKind::ints, std::vector<int64_t>{0, 0}},
                    {"ceil_mode", AttrKind::bool_, false},
                    {"count_include_pad", AttrKind::bool_, true},
                    {"divisor_override", AttrKind::int_, int64_t{0}},  // 0: none
                    {"channels_last", AttrKind::bool_, false}};
  avg_pool.infer = with_layout(infer_avg_pool2d);
  avg_pool.aten = {"aten.avg_pool2d.default"};
  ops.push_back(std::move(avg_pool));

  OpDef adaptive;
  adaptive.name = "adaptive_avg_pool2d";
  adaptive.inputs = {"x"};
  adaptive.floating_only = true;
  adaptive.attrs = {{"output_size", AttrKind::ints, std::nullopt}, {"channels_last", AttrKind::bool_, false}};
  adaptive.infer = with_layout(infer_adaptive_avg_pool2d);
  adaptive.aten = {"aten._adaptive_avg_pool2d.default", "aten.adaptive_avg_pool2d.default"};
  ops.push_back(std::move(adaptive));
}

}  // namespace kiln::ops_internal
