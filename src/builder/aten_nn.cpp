// ATen adapters for matrix products, convolution, normalization, softmax
// and pooling (attention: aten_attention.cpp).
#include "builder/aten_call.h"
#include "support/error.h"

namespace kiln::aten_internal {

namespace {

// A 2-D pooling/convolution parameter given as one int or two.
std::vector<int64_t> pair(const AtenCall& c, const char* name, std::vector<int64_t> fallback) {
  std::vector<int64_t> v = c.ints_or(name, fallback);
  if (v.size() == 1) v.push_back(v[0]);
  return v;
}

Value* scaled(GraphBuilder& b, Value* x, double factor) {
  return factor == 1.0 ? x : b.elementwise("mul", {x, factor});
}

// A norm's optional weight and bias as trailing inputs; a bias without a
// weight gets a weight of ones (kiln's norms take them in that order).
void append_affine(AtenCall& c, std::vector<Value*>& ins) {
  Value* weight = c.opt_tensor("weight");
  Value* bias = c.opt_tensor("bias");
  if (bias != nullptr && weight == nullptr)
    weight = c.b.op1("full", {}, attrs({{"shape", bias->type.dims}, {"value", 1.0}, {"dtype", bias->type.dtype}}));
  if (weight != nullptr) ins.push_back(weight);
  if (bias != nullptr) ins.push_back(bias);
}

// A 1-D convolution ([N, C, L] input) as a 2-D one over [N, C, 1, L].
Value* conv1d_as_2d(AtenCall& c, Value* x) {
  Value* w = c.tensor("weight");
  if (w->type.rank() != 3) c.unsupported("1-D convolution needs a 3-D weight");
  auto one_of = [&](const char* name, int64_t fallback) {
    std::vector<int64_t> v = c.ints_or(name, {fallback});
    if (v.size() != 1) c.unsupported(str_cat("1-D convolution with ", v.size(), " values for ", name));
    return v[0];
  };
  const Dims& xd = x->type.dims;
  const Dims& wd = w->type.dims;
  std::vector<Value*> ins = {c.b.reshape(x, {xd[0], xd[1], 1, xd[2]}), c.b.reshape(w, {wd[0], wd[1], 1, wd[2]})};
  if (Value* bias = c.opt_tensor("bias")) ins.push_back(bias);
  Attrs a = attrs({{"stride", std::vector<int64_t>{1, one_of("stride", 1)}},
                   {"padding", std::vector<int64_t>{0, one_of("padding", 0)}},
                   {"dilation", std::vector<int64_t>{1, one_of("dilation", 1)}},
                   {"groups", c.int_or("groups", 1)}});
  Value* y = c.b.op1("conv2d", ins, std::move(a));
  return c.b.reshape(y, {y->type.dims[0], y->type.dims[1], y->type.dims[3]});
}

// softmax/log_softmax; `half_to_float` (ATen's f16 in, f32 out) computes on the input cast to f32.
std::vector<Value*> softmax(AtenCall& c, const char* op) {
  Value* x = c.tensor("self");
  if (c.flag_or("half_to_float", false)) x = c.b.cast(x, DType::f32);
  if (auto t = c.dtype("dtype")) x = c.b.cast(x, *t);
  return one(c.b.op1(op, {x}, attrs({{"dim", c.int_("dim")}})));
}

}  // namespace

void register_nn_adapters(AdapterMap& m) {
  for (const char* t : {"aten.mm.default", "aten.bmm.default", "aten.matmul.default"})
    m[t] = [](AtenCall& c) {
      Value* a = c.tensor("self");
      Value* b = c.tensor(c.has("mat2") ? "mat2" : "other");
      DType t = c.b.result_type({a, b});
      return one(c.b.op1("matmul", {c.b.cast(a, t), c.b.cast(b, t)}));
    };
  m["aten.addmm.default"] = [](AtenCall& c) {
    Value* product = c.b.op1("matmul", {c.tensor("mat1"), c.tensor("mat2")});
    product = scaled(c.b, product, c.number_or("alpha", 1.0));
    Value* bias = scaled(c.b, c.tensor("self"), c.number_or("beta", 1.0));
    return one(c.b.elementwise("add", {product, bias}));
  };
  m["aten.convolution.default"] = [](AtenCall& c) {
    Value* x = c.tensor("input");
    if (c.flag_or("transposed", false)) c.unsupported("transposed convolution");
    if (x->type.rank() == 3) return one(conv1d_as_2d(c, x));
    if (x->type.rank() != 4) c.unsupported("only 1-D and 2-D convolution (3-D or 4-D input) are supported");
    std::vector<Value*> ins = {x, c.tensor("weight")};
    if (Value* bias = c.opt_tensor("bias")) ins.push_back(bias);
    Attrs a = attrs({{"stride", pair(c, "stride", {1, 1})},
                     {"padding", pair(c, "padding", {0, 0})},
                     {"dilation", pair(c, "dilation", {1, 1})},
                     {"groups", c.int_or("groups", 1)}});
    return one(c.b.op1("conv2d", ins, std::move(a)));
  };
  m["aten._native_batch_norm_legit_no_training.default"] = [](AtenCall& c) {
    Value* x = c.tensor("input");
    std::vector<Value*> ins = {x, c.tensor("running_mean"), c.tensor("running_var")};
    append_affine(c, ins);
    Value* out = c.b.op1("batch_norm", ins, attrs({{"eps", c.number_or("eps", 1e-5)}}));
    return std::vector<Value*>{out, nullptr, nullptr};
  };
  m["aten.native_layer_norm.default"] = [](AtenCall& c) {
    std::vector<Value*> ins = {c.tensor("input")};
    append_affine(c, ins);
    int64_t rank = static_cast<int64_t>(c.ints("normalized_shape").size());
    Value* out = c.b.op1("layer_norm", ins, attrs({{"normalized_rank", rank}, {"eps", c.number_or("eps", 1e-5)}}));
    return std::vector<Value*>{out, nullptr, nullptr};
  };
  // native_group_norm (output 0 only): each group of C/G channels, with all their positions, is one row of a
  // layer norm over x viewed as [N, G, C/G * HxW]; then the per-channel affine, broadcast over dim 1. f16 and
  // bf16 compute in f32 and round once at the end, as ATen's kernel does.
  m["aten.native_group_norm.default"] = [](AtenCall& c) {
    Value* x = c.tensor("input");
    const int64_t n = c.int_("N"), channels = c.int_("C"), hw = c.int_("HxW"), groups = c.int_("group");
    if (x->type.rank() < 2 || groups <= 0 || channels % groups != 0)
      c.unsupported("group_norm needs [N, C, ...] with C divisible by the groups");
    const DType out = x->type.dtype;
    const DType compute = is_half(out) ? DType::f32 : out;
    Value* rows = c.b.reshape(c.b.cast(x, compute), {n, groups, channels / groups * hw});
    Value* y = c.b.op1("layer_norm", {rows}, attrs({{"normalized_rank", int64_t{1}}, {"eps", c.number_or("eps", 1e-5)}}));
    y = c.b.reshape(y, x->type.dims);
    Dims per_channel(x->type.rank(), 1);
    per_channel[1] = channels;
    if (Value* w = c.opt_tensor("weight")) y = c.b.elementwise("mul", {y, c.b.cast(c.b.reshape(w, per_channel), compute)});
    if (Value* b = c.opt_tensor("bias")) y = c.b.elementwise("add", {y, c.b.cast(c.b.reshape(b, per_channel), compute)});
    return std::vector<Value*>{c.b.cast(y, out), nullptr, nullptr};
  };
  m["aten._softmax.default"] = [](AtenCall& c) { return softmax(c, "softmax"); };
  m["aten.softmax.int"] = m["aten._softmax.default"];
  m["aten._log_softmax.default"] = [](AtenCall& c) { return softmax(c, "log_softmax"); };
  m["aten.log_softmax.int"] = m["aten._log_softmax.default"];
  m["aten.max_pool2d_with_indices.default"] = [](AtenCall& c) {
    Attrs a = attrs({{"kernel_size", pair(c, "kernel_size", {})},
                     {"stride", pair(c, "stride", {})},
                     {"padding", pair(c, "padding", {0, 0})},
                     {"dilation", pair(c, "dilation", {1, 1})},
                     {"ceil_mode", c.flag_or("ceil_mode", false)}});
    return c.b.op("max_pool2d", {c.tensor("self")}, std::move(a));  // values and indices
  };
  m["aten.avg_pool2d.default"] = [](AtenCall& c) {
    Attrs a = attrs({{"kernel_size", pair(c, "kernel_size", {})},
                     {"stride", pair(c, "stride", {})},
                     {"padding", pair(c, "padding", {0, 0})},
                     {"ceil_mode", c.flag_or("ceil_mode", false)},
                     {"count_include_pad", c.flag_or("count_include_pad", true)},
                     {"divisor_override", c.int_or("divisor_override", 0)}});
    return one(c.b.op1("avg_pool2d", {c.tensor("self")}, std::move(a)));
  };
  m["aten._adaptive_avg_pool2d.default"] = [](AtenCall& c) {
    return one(c.b.op1("adaptive_avg_pool2d", {c.tensor("self")}, attrs({{"output_size", pair(c, "output_size", {})}})));
  };
  m["aten.adaptive_avg_pool2d.default"] = m["aten._adaptive_avg_pool2d.default"];
}

}  // namespace kiln::aten_internal
