// Lowering of the attention op to attention_kernels.cu (and attention_rows.cu): f16/bf16 (flash
// attention on tensor cores) and f32, head dims up to 128, any batch
// broadcast, grouped-query heads, bool or additive masks read in place
// through their strides. q, k and v need a unit stride along the head dim
// (what linear projections and their head-splitting permutes give); other
// layouts are left to PyTorch with a reason.
#include <cmath>
#include <cstdint>

#include "backends/cuda/attention_launch.h"
#include "backends/cuda/cuda_common.h"
#include "backends/cuda/kernel_registry.h"
#include "ops/attention_shape.h"
#include "ops/broadcast.h"
#include "support/error.h"

namespace kiln::cuda {

namespace {

Dims leading(const Dims& d, size_t drop) { return Dims(d.begin(), d.end() - static_cast<std::ptrdiff_t>(drop)); }

bool unit_head_stride(const TensorType& t) { return t.dims.back() <= 1 || t.strides.back() == 1; }

// Strides of `t`'s batch dims over the output batch dims (0 where broadcast)
// and the grouped-query head group along the last of them.
void batch_strides(const TensorView& t, const Dims& batch, int64_t* strides, int64_t* group) {
  const size_t rank = t.dims.size() - 2, pad = batch.size() - rank;
  for (size_t d = 0; d < batch.size(); ++d) {
    strides[d] = d < pad || t.dims[d - pad] == 1 ? 0 : t.strides[d - pad];
  }
  if (group != nullptr) {
    *group = 1;
    if (rank > 0 && !batch.empty()) {
      const int64_t heads = t.dims[rank - 1];
      if (heads != 1 && heads != batch.back()) *group = batch.back() / heads;
    }
  }
}

// Whether every row of `t` (f16/bf16) can be read `elements` at a time: the row length and every
// stride are multiples of it and the data is aligned to its bytes.
bool rows_vectorizable(const TensorView& t, int64_t cols, int64_t elements = 8) {
  const int64_t bytes = 2 * elements;
  if (t.dtype == DType::f32 || cols % elements != 0 || reinterpret_cast<uintptr_t>(t.data) % bytes != 0) return false;
  for (size_t d = 0; d + 1 < t.dims.size(); ++d)
    if (t.dims[d] != 1 && t.strides[d] % elements != 0) return false;
  return true;
}

class AttentionKernel final : public CudaKernel {
 public:
  AttentionKernel(const Node& node, int device, bool tensor_cores)
      : CudaKernel(node, device),
        causal_(node.attrs.get_bool("causal")),
        scale_(node.attrs.get_float("scale")),
        heads_last_(node.attrs.get_bool("heads_last")),
        tensor_cores_(tensor_cores) {}

 protected:
  void launch(std::span<const TensorView> in, std::span<const TensorView> out, cudaStream_t s) const override {
    const TensorView &q = in[0], &k = in[1], &v = in[2], &y = out[0];
    for (const TensorView* t : {&q, &k, &v})
      KILN_CHECK(unit_head_stride(t->type()), "node '", node_name(), "': attention needs unit head-dim strides");
    KILN_CHECK(y.type().is_contiguous(), "node '", node_name(), "': attention writes a contiguous output");
    AttentionArgs a;
    a.q = q.data;
    a.k = k.data;
    a.v = v.data;
    a.out = y.data;
    a.dtype = static_cast<int>(q.dtype);
    a.causal = causal_;
    a.tensor_cores = tensor_cores_;
    a.L = q.dims[q.dims.size() - 2];
    a.E = q.dims.back();
    a.S = k.dims[k.dims.size() - 2];
    a.Ev = v.dims.back();
    const double scale = scale_ != 0.0 ? scale_ : 1.0 / std::sqrt(static_cast<double>(a.E));
    a.scale = static_cast<float>(scale);
    const Dims batch = attention_output_batch(y.dims, heads_last_);
    a.out_heads = heads_last_ ? batch.back() : 1;
    a.nbatch = static_cast<int>(batch.size());
    copy_dims(a.batch_dims, batch);
    batch_strides(q, batch, a.q_batch, nullptr);
    batch_strides(k, batch, a.k_batch, &a.k_group);
    batch_strides(v, batch, a.v_batch, &a.v_group);
    a.q_row = q.strides[q.dims.size() - 2];
    a.k_row = k.strides[k.dims.size() - 2];
    a.v_row = v.strides[v.dims.size() - 2];
    a.k_vec = rows_vectorizable(k, a.E);
    a.v_vec = rows_vectorizable(v, a.Ev);
    a.q_pairs = rows_vectorizable(q, a.E, 2);
    a.out_vec = rows_vectorizable(y, a.Ev);
    if (in.size() > 3) {
      const TensorView& m = in[3];
      Dims target = batch;
      target.push_back(a.L);
      target.push_back(a.S);
      const Dims full = broadcast_strides(m.type(), target);
      copy_dims(a.m_batch, leading(full, 2));
      a.m_row = full[full.size() - 2];
      a.m_col = full.back();
      a.mask = m.data;
      a.mask_is_bool = m.dtype == DType::boolean;
    }
    check_launch(launch_attention(a, s));
  }

 private:
  bool causal_;
  double scale_;
  bool heads_last_;
  bool tensor_cores_;
};

std::unique_ptr<BackendKernel> make_attention(const Node& node, const LowerContext& ctx, std::string* reason) {
  if (!fits_rank(node, reason)) return nullptr;
  const TensorType& q = node.inputs[0]->type;
  const TensorType& v = node.inputs[2]->type;
  if (q.dtype != DType::f16 && q.dtype != DType::bf16 && q.dtype != DType::f32) {
    *reason = str_cat("attention on CUDA takes f16, bf16 or f32, not ", dtype_name(q.dtype));
    return nullptr;
  }
  if (q.dims.back() > kAttentionMaxHeadDim || v.dims.back() > kAttentionMaxHeadDim) {
    *reason = str_cat("attention on CUDA takes head dims up to ", kAttentionMaxHeadDim, ", got ", q.dims.back(),
                      " (q/k) and ", v.dims.back(), " (v)");
    return nullptr;
  }
  for (size_t i = 0; i < 3; ++i)
    if (!unit_head_stride(node.inputs[i]->type)) {
      *reason = str_cat("attention on CUDA needs a unit stride along the head dim of %", node.inputs[i]->name);
      return nullptr;
    }
  if (!node.outputs[0]->type.is_contiguous()) {
    *reason = "attention on CUDA writes a contiguous output";
    return nullptr;
  }
  int major = 0;
  check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, ctx.device), "compute capability");
  return std::make_unique<AttentionKernel>(node, ctx.device, major >= 8);
}

}  // namespace

void register_attention_kernels(KernelMap& map) { map["attention"] = &make_attention; }

}  // namespace kiln::cuda
