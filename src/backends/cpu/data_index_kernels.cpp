// CPU kernels for gather, index_select and embedding. All three are one
// "indexed copy": walk the output's index space; at each element read an
// index, check it against the indexed axis (a kiln::Error naming the node when
// it is out of range, never an out-of-bounds read) and move one element.
#include <algorithm>
#include <array>
#include <string>

#include "backends/cpu/data_copy.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/strided_loop.h"
#include "ops/op_def.h"
#include "support/error.h"

namespace kiln::cpu::internal {

namespace {

// out[p] = src[src_off(p) + index[idx_off(p)] * axis_stride] over `dims`.
struct IndexedCopy {
  Dims dims;
  Dims out_strides;
  Dims src_strides;  // the indexed axis's own stride is zero here
  Dims idx_strides;  // zero on axes the index does not vary along
  int64_t axis_stride = 0;
  int64_t axis_size = 1;
};

template <typename E, typename I>
void run_indexed(const IndexedCopy& plan, const void* src_data, const void* idx_data, void* out_data,
                 ThreadPool& pool, const std::string& node, const char* axis_name) {
  const E* src = static_cast<const E*>(src_data);
  const I* idx = static_cast<const I*>(idx_data);
  E* out = static_cast<E*>(out_data);
  pool.parallel_for(numel(plan.dims), kCopyGrain / 4, [&](int64_t b, int64_t e) {
    for_each_offset<3>(plan.dims, {&plan.out_strides, &plan.src_strides, &plan.idx_strides}, b, e,
                       [&](const std::array<int64_t, 3>& o) {
                         const int64_t i = static_cast<int64_t>(idx[o[2]]);
                         if (i < 0 || i >= plan.axis_size)
                           fail(ErrorKind::invalid_argument, node, ": index ", i, " is out of range for ",
                                axis_name, " of size ", plan.axis_size);
                         out[o[0]] = src[o[1] + i * plan.axis_stride];
                       });
  });
}

// Element moves by size; index reads by dtype.
template <size_t N>
struct Elem {
  uint8_t b[N];
};

void dispatch_indexed(const IndexedCopy& plan, const TensorView& src, const TensorView& index, const TensorView& out,
                      ThreadPool& pool, const std::string& node, const char* axis_name) {
  auto with_index = [&]<typename E>() {
    switch (index.dtype) {
      case DType::i64: return run_indexed<E, int64_t>(plan, src.data, index.data, out.data, pool, node, axis_name);
      case DType::i32: return run_indexed<E, int32_t>(plan, src.data, index.data, out.data, pool, node, axis_name);
      case DType::i16: return run_indexed<E, int16_t>(plan, src.data, index.data, out.data, pool, node, axis_name);
      case DType::i8: return run_indexed<E, int8_t>(plan, src.data, index.data, out.data, pool, node, axis_name);
      case DType::u8: return run_indexed<E, uint8_t>(plan, src.data, index.data, out.data, pool, node, axis_name);
      default: fail(ErrorKind::invalid_argument, node, ": unsupported index dtype ", dtype_name(index.dtype));
    }
  };
  switch (dtype_size(src.dtype)) {
    case 1: return with_index.template operator()<Elem<1>>();
    case 2: return with_index.template operator()<Elem<2>>();
    case 4: return with_index.template operator()<Elem<4>>();
    case 8: return with_index.template operator()<Elem<8>>();
    default: fail(ErrorKind::runtime, node, ": unsupported element size");
  }
}

// "node 'name' (op)": the prefix of run-time errors.
std::string label(const Node& node) { return str_cat("node '", node.name, "' (", node.op->name, ")"); }

size_t axis_of(const Node& node) {
  const int64_t rank = std::max<int64_t>(1, static_cast<int64_t>(node.inputs[0]->type.rank()));
  const int64_t dim = node.attrs.get_int("dim");
  return static_cast<size_t>(dim < 0 ? dim + rank : dim);
}

class GatherKernel final : public CpuKernel {
 public:
  GatherKernel(std::string node, size_t dim) : node_(std::move(node)), dim_(dim) {}
  void run(std::span<const TensorView> in, std::span<const TensorView> out, const CpuContext& ctx) const override {
    const TensorView &x = in[0], &index = in[1];
    IndexedCopy plan{index.dims, out[0].strides, x.strides, index.strides, 0, 1};
    if (!x.dims.empty()) {
      plan.axis_stride = x.strides[dim_];
      plan.axis_size = x.dims[dim_];
      plan.src_strides[dim_] = 0;
    }
    const std::string axis = "dim " + std::to_string(dim_) + " of x";
    dispatch_indexed(plan, x, index, out[0], ctx.pool, node_, axis.c_str());
  }

 private:
  std::string node_;
  size_t dim_;
};

class IndexSelectKernel final : public CpuKernel {
 public:
  IndexSelectKernel(std::string node, size_t dim) : node_(std::move(node)), dim_(dim) {}
  void run(std::span<const TensorView> in, std::span<const TensorView> out, const CpuContext& ctx) const override {
    const TensorView &x = in[0], &index = in[1];
    IndexedCopy plan{out[0].dims, out[0].strides, x.strides, Dims(out[0].dims.size(), 0), 0, 1};
    if (!x.dims.empty()) {
      plan.axis_stride = x.strides[dim_];
      plan.axis_size = x.dims[dim_];
      plan.src_strides[dim_] = 0;
      plan.idx_strides[dim_] = index.dims.empty() ? 0 : index.strides[0];
    }
    const std::string axis = "dim " + std::to_string(dim_) + " of x";
    dispatch_indexed(plan, x, index, out[0], ctx.pool, node_, axis.c_str());
  }

 private:
  std::string node_;
  size_t dim_;
};

class EmbeddingKernel final : public CpuKernel {
 public:
  explicit EmbeddingKernel(std::string node) : node_(std::move(node)) {}
  void run(std::span<const TensorView> in, std::span<const TensorView> out, const CpuContext& ctx) const override {
    const TensorView &weight = in[0], &indices = in[1];
    IndexedCopy plan{out[0].dims, out[0].strides, Dims(out[0].dims.size(), 0), indices.strides,
                     weight.strides[0], weight.dims[0]};
    plan.src_strides.back() = weight.strides[1];
    plan.idx_strides.push_back(0);
    dispatch_indexed(plan, weight, indices, out[0], ctx.pool, node_, "the rows of weight");
  }

 private:
  std::string node_;
};

std::unique_ptr<CpuKernel> make_gather(const Node& node, std::string*) {
  return std::make_unique<GatherKernel>(label(node), axis_of(node));
}

std::unique_ptr<CpuKernel> make_index_select(const Node& node, std::string*) {
  return std::make_unique<IndexSelectKernel>(label(node), axis_of(node));
}

std::unique_ptr<CpuKernel> make_embedding(const Node& node, std::string* reason) {
  if (node.inputs[1]->type.dtype == DType::i64 || node.inputs[1]->type.dtype == DType::i32 ||
      node.inputs[1]->type.dtype == DType::i16 || node.inputs[1]->type.dtype == DType::i8 ||
      node.inputs[1]->type.dtype == DType::u8)
    return std::make_unique<EmbeddingKernel>(label(node));
  if (reason) *reason = "indices must have an integer dtype";
  return nullptr;
}

}  // namespace

void register_data_index_kernels(KernelMap& map) {
  map["gather"] = make_gather;
  map["index_select"] = make_index_select;
  map["embedding"] = make_embedding;
}

}  // namespace kiln::cpu::internal
