// CPU scaled_dot_product_attention: the reference kernel. Rows (batch, query)
// are independent and split over the thread pool; each worker keeps one row of
// scores (S values), one scaled query row and one output accumulator, so memory
// never grows with L * S. Two passes per row: scores and their max, then
// exp/sum and the weighted sum of v. Math is in float (double for f64); q, k,
// v and the mask are read through their strides (broadcast batch dims have
// stride 0). Fully masked rows give zeros (Note [Fully masked rows] in
// attention_ops.cpp).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/cpu/dtype_dispatch.h"
#include "backends/cpu/kernel_registry.h"
#include "backends/cpu/strided_loop.h"
#include "ops/broadcast.h"
#include "support/error.h"

namespace kiln::cpu::internal {

namespace {

Dims leading(const Dims& d, size_t drop) { return Dims(d.begin(), d.end() - static_cast<std::ptrdiff_t>(drop)); }

class SdpaKernel final : public CpuKernel {
 public:
  explicit SdpaKernel(const Node& node)
      : causal_(node.attrs.get_bool("causal")), scale_(node.attrs.get_float("scale")) {}

  void run(std::span<const TensorView> in, std::span<const TensorView> out, const CpuContext& ctx) const override {
    dispatch_floating(out[0].dtype, "scaled_dot_product_attention", [&]<typename T>() { run_typed<T>(in, out[0], ctx); });
  }

 private:
  template <typename T>
  void run_typed(std::span<const TensorView> in, const TensorView& y, const CpuContext& ctx) const {
    using C = compute_t<T>;
    const TensorView &q = in[0], &k = in[1], &v = in[2];
    const TensorView* mask = in.size() > 3 ? &in[3] : nullptr;
    const size_t rq = q.dims.size(), rk = k.dims.size(), rv = v.dims.size();
    const int64_t L = q.dims[rq - 2], E = q.dims[rq - 1], S = k.dims[rk - 2], Ev = v.dims[rv - 1];
    const Dims batch = leading(y.dims, 2);
    const int64_t num_batches = numel(batch);
    if (num_batches == 0 || L == 0 || Ev == 0) return;

    // Per-batch offsets of each operand (broadcast dims read with stride 0).
    auto batch_strides = [&](const TensorView& t) {
      return broadcast_strides(TensorType(t.dtype, leading(t.dims, 2), leading(t.strides, 2)), batch);
    };
    Dims sq = batch_strides(q), sk = batch_strides(k), sv = batch_strides(v);
    Dims sm(batch.size(), 0);
    int64_t mask_row = 0, mask_col = 0;
    if (mask) {
      Dims target = batch;
      target.push_back(L);
      target.push_back(S);
      Dims full = broadcast_strides(mask->type(), target);
      sm = leading(full, 2);
      mask_row = full[full.size() - 2];
      mask_col = full.back();
    }
    std::vector<std::array<int64_t, 4>> offsets;
    offsets.reserve(static_cast<size_t>(num_batches));
    for_each_offset<4>(batch, {&sq, &sk, &sv, &sm}, 0, num_batches,
                       [&](const std::array<int64_t, 4>& o) { offsets.push_back(o); });

    const C scale = static_cast<C>(scale_ != 0.0 ? scale_ : 1.0 / std::sqrt(static_cast<double>(E)));
    const bool mask_is_bool = mask && mask->dtype == DType::boolean;
    const T* pq = static_cast<const T*>(q.data);
    const T* pk = static_cast<const T*>(k.data);
    const T* pv = static_cast<const T*>(v.data);
    T* py = static_cast<T*>(y.data);
    const int64_t qs_l = q.strides[rq - 2], qs_e = q.strides[rq - 1];
    const int64_t ks_s = k.strides[rk - 2], ks_e = k.strides[rk - 1];
    const int64_t vs_s = v.strides[rv - 2], vs_e = v.strides[rv - 1];
    const C neg_inf = -std::numeric_limits<C>::infinity();
    const int64_t row_cost = std::max<int64_t>(1, S * (E + Ev));

    ctx.pool.parallel_for(num_batches * L, std::max<int64_t>(1, 65536 / row_cost), [&](int64_t r0, int64_t r1) {
      std::vector<C> scores(static_cast<size_t>(S)), q_row(static_cast<size_t>(E)), acc(static_cast<size_t>(Ev));
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t b = r / L, i = r % L;
        const auto& o = offsets[static_cast<size_t>(b)];
        const T* qi = pq + o[0] + i * qs_l;
        for (int64_t e = 0; e < E; ++e) q_row[static_cast<size_t>(e)] = to_compute(qi[e * qs_e]) * scale;
        // Keys past `visible` are masked by causality (top-left aligned: j <= i).
        const int64_t visible = causal_ ? std::min(S, i + 1) : S;
        C max = neg_inf;
        for (int64_t j = 0; j < visible; ++j) {
          C s;
          bool keep = true;
          if (mask) {
            const int64_t mo = o[3] + i * mask_row + j * mask_col;
            if (mask_is_bool) keep = static_cast<const bool*>(mask->data)[mo];
          }
          if (!keep) {
            s = neg_inf;
          } else {
            const T* kj = pk + o[1] + j * ks_s;
            C dot = C(0);
            for (int64_t e = 0; e < E; ++e) dot += q_row[static_cast<size_t>(e)] * to_compute(kj[e * ks_e]);
            s = dot;
            if (mask && !mask_is_bool)
              s += to_compute(static_cast<const T*>(mask->data)[o[3] + i * mask_row + j * mask_col]);
          }
          scores[static_cast<size_t>(j)] = s;
          if (s > max || std::isnan(s)) max = s;
        }
        T* yi = py + r * Ev;
        if (max == neg_inf) {  // every key masked: zeros, like torch's _safe_softmax
          std::fill(yi, yi + Ev, from_compute<T>(C(0)));
          continue;
        }
        std::fill(acc.begin(), acc.end(), C(0));
        C sum = C(0);
        for (int64_t j = 0; j < visible; ++j) {
          const C p = std::exp(scores[static_cast<size_t>(j)] - max);
          sum += p;
          const T* vj = pv + o[2] + j * vs_s;
          for (int64_t e = 0; e < Ev; ++e) acc[static_cast<size_t>(e)] += p * to_compute(vj[e * vs_e]);
        }
        const C inv = C(1) / sum;
        for (int64_t e = 0; e < Ev; ++e) yi[e] = from_compute<T>(acc[static_cast<size_t>(e)] * inv);
      }
    });
  }

  bool causal_;
  double scale_;
};

std::unique_ptr<CpuKernel> make_sdpa_kernel(const Node& node, std::string* reason) {
  if (!is_floating(node.inputs[0]->type.dtype)) {
    if (reason) *reason = "scaled_dot_product_attention needs floating-point q, k, v";
    return nullptr;
  }
  return std::make_unique<SdpaKernel>(node);
}

}  // namespace

void register_attention_kernels(KernelMap& map) { map["scaled_dot_product_attention"] = make_sdpa_kernel; }

}  // namespace kiln::cpu::internal
