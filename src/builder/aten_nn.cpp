// ATen adapters for matrix products, convolution, normalization, softmax,
// pooling and attention.
#include "builder/aten_call.h"

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

std::vector<Value*> softmax(AtenCall& c, const char* op) {
  Value* x = c.tensor("self");
  if (c.flag_or("half_to_float", false)) c.unsupported("half_to_float");
  if (auto t = c.dtype("dtype")) x = c.b.cast(x, *t);
  return one(c.b.op1(op, {x}, attrs({{"dim", c.int_("dim")}})));
}

std::vector<Value*> attention(AtenCall& c, bool with_logsumexp) {
  if (c.number_or("dropout_p", 0.0) != 0.0) c.unsupported("dropout in attention");
  if (c.flag_or("enable_gqa", false)) c.unsupported("grouped-query attention (enable_gqa)");
  std::vector<Value*> ins = {c.tensor("query"), c.tensor("key"), c.tensor("value")};
  if (Value* mask = c.opt_tensor("attn_mask")) ins.push_back(mask);
  Attrs a = attrs({{"causal", c.flag_or("is_causal", false)}, {"scale", c.number_or("scale", 0.0)}});
  Value* out = c.b.op1("scaled_dot_product_attention", ins, std::move(a));
  if (!with_logsumexp) return one(out);
  return {out, nullptr};
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
    if (x->type.rank() != 4) c.unsupported("only 2-D convolution (4-D input) is supported");
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
  m["aten.scaled_dot_product_attention.default"] = [](AtenCall& c) { return attention(c, false); };
  m["aten._scaled_dot_product_flash_attention_for_cpu.default"] = [](AtenCall& c) { return attention(c, true); };
}

}  // namespace kiln::aten_internal
