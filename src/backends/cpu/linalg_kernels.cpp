// CPU matmul (torch.matmul semantics) on the strided GEMM front end, and the
// registration of the linalg kernels (conv2d lives in conv2d_kernel.cpp).
//
// Each operand is seen as [batch..., rows, cols] with its own strides (a 1-D
// operand becomes one row of a, or one column of b). Batch dims broadcast with
// stride 0. When b is shared by every batch (a linear layer: x[B, T, K] @
// permute(W)) and a's batch dims fold into its rows, the whole product is one
// GEMM; otherwise one GEMM per batch. Operands are never copied here: gemm()
// reads transposed operands through BLAS flags.
#include <algorithm>
#include <array>
#include <vector>

#include "backends/cpu/gemm.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/strided_loop.h"
#include "ops/broadcast.h"
#include "support/error.h"

namespace kiln::cpu::internal {

std::unique_ptr<CpuKernel> make_conv2d_kernel(const Node& node, std::string* reason);  // conv2d_kernel.cpp
// The plain kernel followed by the node's epilogue (epilogue_kernels.cpp).
std::unique_ptr<CpuKernel> with_epilogue(std::unique_ptr<CpuKernel> base, const Node& node, std::string* reason);
// NHWC operands read as NCHW views (channels_last_kernels.cpp).
std::unique_ptr<CpuKernel> with_channels_last(std::unique_ptr<CpuKernel> base, const Node& node);

namespace {

struct Operand {
  Dims batch_dims, batch_strides;
  int64_t rows = 1, cols = 1, row_stride = 0, col_stride = 0;
};

// a: [..., M, K] (1-D: one row); b: [..., K, N] (1-D: one column).
Operand split(const TensorView& v, bool is_left) {
  Operand op;
  size_t r = v.dims.size();
  if (r == 1) {
    if (is_left) {
      op.cols = v.dims[0];
      op.col_stride = v.strides[0];
    } else {
      op.rows = v.dims[0];
      op.row_stride = v.strides[0];
    }
    return op;
  }
  op.rows = v.dims[r - 2];
  op.cols = v.dims[r - 1];
  op.row_stride = v.strides[r - 2];
  op.col_stride = v.strides[r - 1];
  op.batch_dims.assign(v.dims.begin(), v.dims.end() - 2);
  op.batch_strides.assign(v.strides.begin(), v.strides.end() - 2);
  return op;
}

// Whether dims (outer to inner) with these strides walk one arithmetic
// sequence; sets *stride to its step (any value when every dim is 1).
bool collapses(const Dims& dims, const Dims& strides, int64_t* stride) {
  int64_t expect = 0;
  bool have = false;
  for (size_t i = dims.size(); i-- > 0;) {
    if (dims[i] == 1) continue;
    if (!have) {
      *stride = strides[i];
      expect = strides[i] * dims[i];
      have = true;
      continue;
    }
    if (strides[i] != expect) return false;
    expect *= dims[i];
  }
  if (!have) *stride = 0;
  return true;
}

class MatmulKernel final : public CpuKernel {
 public:
  void run(std::span<const TensorView> in, std::span<const TensorView> out, const CpuContext& ctx) const override {
    const TensorView& c = out[0];
    Operand a = split(in[0], true), b = split(in[1], false);
    const int64_t m = a.rows, k = a.cols, n = b.cols;
    KILN_CHECK(b.rows == k, "matmul: contracted dims differ (", k, " vs ", b.rows, ")");
    const size_t elem = dtype_size(c.dtype);
    const auto* pa = static_cast<const uint8_t*>(in[0].data);
    const auto* pb = static_cast<const uint8_t*>(in[1].data);
    auto* pc = static_cast<uint8_t*>(c.data);

    std::vector<Dims> batches = {a.batch_dims, b.batch_dims};
    Dims batch = broadcast_dims(batches);
    Dims sa = broadcast_strides(TensorType(c.dtype, a.batch_dims, a.batch_strides), batch);
    Dims sb = broadcast_strides(TensorType(c.dtype, b.batch_dims, b.batch_strides), batch);
    const int64_t num_batches = numel(batch);
    if (num_batches == 0 || m == 0 || n == 0) return;

    // One GEMM when b is shared and a's batch dims fold into its rows.
    bool b_shared = std::all_of(sb.begin(), sb.end(), [](int64_t s) { return s == 0; });
    if (b_shared && num_batches > 1) {
      Dims dims = batch, strides = sa;
      dims.push_back(m);
      strides.push_back(a.row_stride);
      int64_t folded_stride = 0;
      if (collapses(dims, strides, &folded_stride)) {
        gemm(c.dtype, num_batches * m, n, k, MatrixRef{pa, folded_stride, a.col_stride},
             MatrixRef{pb, b.row_stride, b.col_stride}, pc, n, false, ctx.pool);
        return;
      }
    }
    std::vector<std::array<int64_t, 2>> offsets;
    offsets.reserve(static_cast<size_t>(num_batches));
    for_each_offset<2>(batch, {&sa, &sb}, 0, num_batches,
                       [&](const std::array<int64_t, 2>& o) { offsets.push_back(o); });
    // Batches split over the pool (each GEMM then runs on its thread); one batch splits its GEMM instead.
    ctx.pool.parallel_for(num_batches, 1, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const auto& o = offsets[static_cast<size_t>(i)];
        gemm(c.dtype, m, n, k, MatrixRef{pa + o[0] * static_cast<int64_t>(elem), a.row_stride, a.col_stride},
             MatrixRef{pb + o[1] * static_cast<int64_t>(elem), b.row_stride, b.col_stride},
             pc + i * m * n * static_cast<int64_t>(elem), n, false, ctx.pool);
      }
    });
  }
};

std::unique_ptr<CpuKernel> make_matmul_kernel(const Node& node, std::string* reason) {
  DType d = node.inputs[0]->type.dtype;
  if (d == DType::boolean || node.inputs[1]->type.dtype != d) {
    if (reason) *reason = "matmul needs two operands of one non-bool dtype";
    return nullptr;
  }
  return std::make_unique<MatmulKernel>();
}

}  // namespace

void register_linalg_kernels(KernelMap& map) {
  map["matmul"] = make_matmul_kernel;
  map["conv2d"] = make_conv2d_kernel;
  map["matmul_epilogue"] = [](const Node& node, std::string* reason) {
    return with_epilogue(make_matmul_kernel(node, reason), node, reason);
  };
  map["conv2d_fused"] = [](const Node& node, std::string* reason) {
    return with_channels_last(with_epilogue(make_conv2d_kernel(node, reason), node, reason), node);
  };
}

}  // namespace kiln::cpu::internal
