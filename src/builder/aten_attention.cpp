// ATen adapters for every scaled-dot-product-attention overload torch may hand
// kiln: the composite op, the CPU flash kernel, and the CUDA flash, efficient,
// cuDNN and overrideable kernels (what torch picks on a GPU when nothing
// decomposes them), and the math path. All become kiln's `attention` op.
// Their extra outputs (logsumexp, philox state, sequence bookkeeping, debug
// mask, the math path's attention weights) are not produced: the adapter
// returns nullptr for them, so a graph that reads one falls back with a reason.
// Dropout (dropout_p != 0) is unsupported: kiln compiles inference graphs.
#include <cstddef>

#include "builder/aten_call.h"

namespace kiln::aten_internal {

namespace {

// `mask_arg`: the schema's name of the mask ("attn_mask" or "attn_bias"), or
// nullptr when the overload takes none. `outputs`: the schema's return count.
std::vector<Value*> attention(AtenCall& c, const char* mask_arg, size_t outputs) {
  if (c.number_or("dropout_p", 0.0) != 0.0) c.unsupported("dropout in attention (dropout_p != 0)");
  if (c.has("dropout_mask")) c.unsupported("an explicit dropout_mask in attention");
  if (c.has("scale") && c.number("scale") == 0.0) c.unsupported("attention with scale=0");
  Value* q = c.tensor("query");
  std::vector<Value*> ins = {q, c.tensor("key"), c.tensor("value")};
  if (Value* mask = mask_arg ? c.opt_tensor(mask_arg) : nullptr) {
    // A float mask of another dtype is added in q's (torch's math path promotes the same way for inference).
    if (mask->type.dtype != DType::boolean && mask->type.dtype != q->type.dtype) mask = c.b.cast(mask, q->type.dtype);
    ins.push_back(mask);
  }
  // enable_gqa needs nothing more: the op maps q's heads onto fewer k/v heads by shape.
  Attrs a = attrs({{"causal", c.flag_or("is_causal", false)}, {"scale", c.number_or("scale", 0.0)}});
  std::vector<Value*> out(outputs, nullptr);
  out[0] = c.b.op1("attention", ins, std::move(a));
  return out;
}

}  // namespace

void register_attention_adapters(AdapterMap& m) {
  m["aten.scaled_dot_product_attention.default"] = [](AtenCall& c) { return attention(c, "attn_mask", 1); };
  m["aten._scaled_dot_product_attention_math.default"] = [](AtenCall& c) { return attention(c, "attn_mask", 2); };
  m["aten._scaled_dot_product_flash_attention_for_cpu.default"] = [](AtenCall& c) {
    return attention(c, "attn_mask", 2);
  };
  m["aten._scaled_dot_product_flash_attention.default"] = [](AtenCall& c) { return attention(c, nullptr, 9); };
  m["aten._scaled_dot_product_efficient_attention.default"] = [](AtenCall& c) {
    return attention(c, "attn_bias", 4);
  };
  m["aten._scaled_dot_product_cudnn_attention.default"] = [](AtenCall& c) { return attention(c, "attn_bias", 9); };
  m["aten._scaled_dot_product_fused_attention_overrideable.default"] = [](AtenCall& c) {
    return attention(c, "attn_bias", 9);
  };
}

}  // namespace kiln::aten_internal
