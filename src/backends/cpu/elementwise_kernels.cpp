// CPU reference kernels for every op in elementwise.def and for cast.
//
// Elementwise ops run in chunks: each operand's chunk is read (through its
// broadcast strides, or linearly when contiguous with the output's dims) into
// a compute-type buffer, the op's evaluator from elementwise_eval.h runs on the
// buffers, and the result is converted into the contiguous output. Large
// outputs are split over the thread pool.
#include <array>

#include "backends/cpu/elementwise_eval.h"
#include "backends/cpu/elementwise_loop.h"
#include "backends/cpu/kernel_registry.h"
#include "ops/broadcast.h"
#include "ops/op_def.h"

namespace kiln::cpu::internal {

namespace {

// Operands' strides over the output dims, and whether each reads linearly.
std::vector<LoopOperand> loop_operands(std::span<const TensorView> inputs, const Dims& out_dims) {
  std::vector<LoopOperand> ops;
  ops.reserve(inputs.size());
  for (const TensorView& input : inputs) ops.push_back(loop_operand(input, out_dims));
  return ops;
}

template <typename C>
class ElementwiseKernel final : public CpuKernel {
 public:
  ElementwiseKernel(ElementwiseFn<C> fn, ElementwiseKind kind) : fn_(fn), kind_(kind) {}

  void run(std::span<const TensorView> inputs, std::span<const TensorView> outputs,
           const CpuContext& ctx) const override {
    const TensorView& out = outputs[0];
    std::vector<LoopOperand> ops = loop_operands(inputs, out.dims);
    for (LoopOperand& o : ops) o.as_bool = kind_ == ElementwiseKind::logical;
    const size_t arity = ops.size();
    parallel_range(ctx.pool, out.numel(), [&](int64_t begin, int64_t end) {
      std::array<std::array<C, kElementwiseChunk>, 3> in_bufs;
      std::array<C, kElementwiseChunk> out_buf;
      std::array<const C*, 3> ptrs{};
      for (int64_t b = begin; b < end; b += kElementwiseChunk) {
        int64_t n = std::min(kElementwiseChunk, end - b);
        for (size_t k = 0; k < arity; ++k) ptrs[k] = load_chunk<C>(ops[k], b, n, in_bufs[k].data());
        fn_(ptrs.data(), out_buf.data(), n);
        store_chunk<C>(out, b, n, out_buf.data());
      }
    });
  }

 private:
  ElementwiseFn<C> fn_;
  ElementwiseKind kind_;
};

std::unique_ptr<CpuKernel> make_elementwise(const Node& node, std::string* reason) {
  const OpDef& op = *node.op;
  if (!op.elementwise || node.inputs.size() != static_cast<size_t>(op.elementwise->arity)) {
    *reason = "not an elementwise node with " + std::to_string(op.elementwise ? op.elementwise->arity : 0) + " inputs";
    return nullptr;
  }
  ElementwiseKind kind = op.elementwise->kind;
  // The dtype whose compute type the expression runs in.
  DType value = kind == ElementwiseKind::logical  ? DType::i64
                : kind == ElementwiseKind::select ? node.inputs[1]->type.dtype
                                                  : node.inputs[0]->type.dtype;
  return dispatch_dtype(value, [&]<typename S>() -> std::unique_ptr<CpuKernel> {
    using C = compute_t<S>;
    ElementwiseFn<C> fn = elementwise_fn<C>(op);
    if (fn == nullptr) {
      *reason = str_cat("no form for dtype ", dtype_name(value));
      return nullptr;
    }
    return std::make_unique<ElementwiseKernel<C>>(fn, kind);
  });
}

// ---- cast -------------------------------------------------------------------

// One value from storage S to storage O, like torch: float to integer
// truncates toward zero (NaN and out-of-range values give INT64_MIN, then
// wrap like an integer cast), integer to narrower integer wraps, to bool is x != 0.
template <typename O, typename S>
inline O cast_value(S v) {
  auto c = to_compute<S>(v);  // float, double or int64_t
  if constexpr (std::is_same_v<O, bool>) {
    return c != decltype(c)(0);
  } else if constexpr (is_float_storage<O>) {
    if constexpr (std::is_same_v<O, double>) {
      return static_cast<double>(c);
    } else if constexpr (std::is_same_v<O, float>) {
      return static_cast<float>(c);
    } else {
      return O(static_cast<float>(c));
    }
  } else if constexpr (is_float_storage<S>) {
    double d = static_cast<double>(c);
    int64_t i = (d > -9223372036854775808.0 && d < 9223372036854775808.0) ? static_cast<int64_t>(d) : INT64_MIN;
    return static_cast<O>(i);
  } else {
    return static_cast<O>(c);
  }
}

template <typename O, typename S>
class CastKernel final : public CpuKernel {
 public:
  void run(std::span<const TensorView> inputs, std::span<const TensorView> outputs,
           const CpuContext& ctx) const override {
    const TensorView& in = inputs[0];
    const TensorView& out = outputs[0];
    const S* src = in.ptr<const S>();
    O* dst = out.ptr<O>();
    const bool linear = in.type().is_contiguous();
    parallel_range(ctx.pool, out.numel(), [&](int64_t begin, int64_t end) {
      if (linear) {
        for (int64_t i = begin; i < end; ++i) dst[i] = cast_value<O, S>(src[i]);
        return;
      }
      int64_t j = begin;
      for_each_offset<1>(in.dims, {&in.strides}, begin, end,
                         [&](const std::array<int64_t, 1>& o) { dst[j++] = cast_value<O, S>(src[o[0]]); });
    });
  }
};

std::unique_ptr<CpuKernel> make_cast(const Node& node, std::string* reason) {
  if (node.inputs.size() != 1 || node.outputs.size() != 1) {
    *reason = "cast takes one input and one output";
    return nullptr;
  }
  return dispatch_dtype(node.outputs[0]->type.dtype, [&]<typename O>() {
    return dispatch_dtype(node.inputs[0]->type.dtype,
                          [&]<typename S>() -> std::unique_ptr<CpuKernel> { return std::make_unique<CastKernel<O, S>>(); });
  });
}

}  // namespace

void register_elementwise_kernels(KernelMap& map) {
#define KILN_ELEMENTWISE(name, ...) map.emplace(#name, &make_elementwise);
#include "ops/elementwise.def"
#undef KILN_ELEMENTWISE
  map.emplace("cast", &make_cast);
}

}  // namespace kiln::cpu::internal
