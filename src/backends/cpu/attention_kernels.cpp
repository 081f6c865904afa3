// CPU attention: the reference kernel. Batch entries (heads) are split over
// the thread pool; per entry, query rows go in blocks of kRowBlock: one GEMM
// gives the block's scores (kRowBlock x S, the most ever held, never L x S),
// each row is scaled, masked and exponentiated, and a second GEMM multiplies
// by v (with one entry, the GEMMs and rows use the pool instead). Math
// is in float (double for f64): f32/f64 operands are read in place, f16/bf16
// are converted to float blocks first. q, k, v and the mask are read through
// their strides (broadcast batch dims have stride 0; grouped-query k/v heads
// are found by attention_batch_index). Fully masked rows give zeros (Note
// [Fully masked rows] in attention_ops.cpp).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "backends/cpu/dtype_dispatch.h"
#include "backends/cpu/gemm.h"
#include "backends/cpu/kernel_registry.h"
#include "ops/attention_shape.h"
#include "ops/broadcast.h"
#include "ops/scalar_math.h"
#include "support/error.h"

namespace kiln::cpu::internal {

namespace {

Dims leading(const Dims& d, size_t drop) { return Dims(d.begin(), d.end() - static_cast<std::ptrdiff_t>(drop)); }

class AttentionKernel final : public CpuKernel {
 public:
  explicit AttentionKernel(const Node& node)
      : causal_(node.attrs.get_bool("causal")),
        scale_(node.attrs.get_float("scale")),
        heads_last_(node.attrs.get_bool("heads_last")) {}

  void run(std::span<const TensorView> in, std::span<const TensorView> out, const CpuContext& ctx) const override {
    dispatch_floating(out[0].dtype, "attention", [&]<typename T>() { run_typed<T>(in, out[0], ctx); });
  }

 private:
  template <typename T>
  void run_typed(std::span<const TensorView> in, const TensorView& y, const CpuContext& ctx) const {
    using C = compute_t<T>;
    const TensorView &q = in[0], &k = in[1], &v = in[2];
    const TensorView* mask = in.size() > 3 ? &in[3] : nullptr;
    const size_t rq = q.dims.size(), rk = k.dims.size(), rv = v.dims.size();
    const int64_t L = q.dims[rq - 2], E = q.dims[rq - 1], S = k.dims[rk - 2], Ev = v.dims[rv - 1];
    const Dims batch = attention_output_batch(y.dims, heads_last_);
    const AttentionOutputLayout out{heads_last_ ? batch.back() : 1, L, Ev};
    const int64_t num_batches = numel(batch);
    if (num_batches == 0 || L == 0 || Ev == 0) return;

    // Per-batch element offsets of each operand: q, k, v, mask.
    std::vector<std::array<int64_t, 4>> offsets(static_cast<size_t>(num_batches));
    const TensorView* operands[3] = {&q, &k, &v};
    int64_t mask_row = 0, mask_col = 0;
    Dims mask_strides;
    if (mask) {
      Dims target = batch;
      target.push_back(L);
      target.push_back(S);
      Dims full = broadcast_strides(mask->type(), target);
      mask_strides = leading(full, 2);
      mask_row = full[full.size() - 2];
      mask_col = full.back();
    }
    for (int64_t b = 0; b < num_batches; ++b) {
      auto& o = offsets[static_cast<size_t>(b)];
      o = {0, 0, 0, 0};
      int64_t rest = b;
      for (size_t d = batch.size(); d-- > 0;) {
        const int64_t idx = rest % batch[d];
        rest /= batch[d];
        for (int t = 0; t < 3; ++t) {
          const TensorView& x = *operands[t];
          const size_t pad = batch.size() - (x.dims.size() - 2);
          if (d < pad) continue;
          o[static_cast<size_t>(t)] += attention_batch_index(idx, batch[d], x.dims[d - pad]) * x.strides[d - pad];
        }
        if (mask) o[3] += idx * mask_strides[d];
      }
    }

    const C scale = static_cast<C>(scale_ != 0.0 ? scale_ : 1.0 / std::sqrt(static_cast<double>(E)));
    const bool mask_is_bool = mask && mask->dtype == DType::boolean;
    const T* pq = static_cast<const T*>(q.data);
    const T* pk = static_cast<const T*>(k.data);
    const T* pv = static_cast<const T*>(v.data);
    T* py = static_cast<T*>(y.data);
    const int64_t qs_l = q.strides[rq - 2], qs_e = q.strides[rq - 1];
    const int64_t ks_s = k.strides[rk - 2], ks_e = k.strides[rk - 1];
    const int64_t vs_s = v.strides[rv - 2], vs_e = v.strides[rv - 1];
    constexpr bool kDirect = std::is_same_v<T, C>;  // f32/f64 are read in place; f16/bf16 go through C copies
    constexpr DType kComputeDType = std::is_same_v<C, double> ? DType::f64 : DType::f32;
    const C neg_inf = -std::numeric_limits<C>::infinity();

    // An [rows, cols] block of a strided operand as a contiguous C matrix.
    auto to_compute_block = [](std::vector<C>& buf, const T* src, int64_t rows, int64_t cols, int64_t rs, int64_t cs) {
      buf.resize(static_cast<size_t>(rows * cols));
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c) buf[static_cast<size_t>(r * cols + c)] = to_compute(src[r * rs + c * cs]);
    };
    // A chunk's working memory, reused by the entries it runs: K, V and a Q block in C (f16/bf16 only), the
    // block's scores, the weighted sums of V and each row's 1 / sum.
    struct Scratch {
      std::vector<C> k, v, q, scores, acc, inv;
    };
    // One batch entry (a head) with a chunk's own scratch. Entries are split over the pool, so the GEMMs and
    // row loops inside one run inline on their thread; a single entry uses the pool inside instead.
    auto attend = [&](int64_t b, Scratch& work) {
      std::vector<C>& scores = work.scores;
      std::vector<C>& acc = work.acc;
      std::vector<C>& inv = work.inv;
      const auto& o = offsets[static_cast<size_t>(b)];
      // K^T as an [E, S] matrix and V as [S, Ev].
      MatrixRef kt{pk + o[1], ks_e, ks_s}, vm{pv + o[2], vs_s, vs_e};
      if constexpr (!kDirect) {
        to_compute_block(work.k, pk + o[1], S, E, ks_s, ks_e);
        to_compute_block(work.v, pv + o[2], S, Ev, vs_s, vs_e);
        kt = {work.k.data(), 1, E};
        vm = {work.v.data(), Ev, 1};
      }
      for (int64_t i0 = 0; i0 < L; i0 += kRowBlock) {
        const int64_t rows = std::min(kRowBlock, L - i0);
        // Under causality no row of the block sees keys at or past i0 + rows.
        const int64_t cols = causal_ ? std::min(S, i0 + rows) : S;
        MatrixRef qm{pq + o[0] + i0 * qs_l, qs_l, qs_e};
        if constexpr (!kDirect) {
          to_compute_block(work.q, pq + o[0] + i0 * qs_l, rows, E, qs_l, qs_e);
          qm = {work.q.data(), E, 1};
        }
        scores.resize(static_cast<size_t>(rows * cols));
        inv.resize(static_cast<size_t>(rows));
        if (cols > 0) gemm(kComputeDType, rows, cols, E, qm, kt, scores.data(), cols, false, ctx.pool);
        // Each row: scale, mask, causal, then exp(s - max); inv holds 1 / sum (0 for a fully masked row).
        ctx.pool.parallel_for(rows, std::max<int64_t>(1, 16384 / std::max<int64_t>(1, cols)), [&](int64_t r0, int64_t r1) {
          for (int64_t r = r0; r < r1; ++r) {
            const int64_t i = i0 + r;
            C* row = scores.data() + r * cols;
            const int64_t visible = causal_ ? std::min(cols, i + 1) : cols;
            C max = neg_inf;
            for (int64_t j = 0; j < cols; ++j) {
              C s = j < visible ? row[j] * scale : neg_inf;
              if (mask && j < visible) {
                const int64_t mo = o[3] + i * mask_row + j * mask_col;
                if (mask_is_bool) {
                  if (!static_cast<const bool*>(mask->data)[mo]) s = neg_inf;
                } else {
                  s += to_compute(static_cast<const T*>(mask->data)[mo]);
                }
              }
              row[j] = s;
              if (s > max || std::isnan(s)) max = s;
            }
            if (max == neg_inf) {  // every key masked: zeros, like torch's _safe_softmax
              std::fill(row, row + cols, C(0));
              inv[static_cast<size_t>(r)] = C(0);
              continue;
            }
            for (int64_t j = 0; j < cols; ++j) row[j] = sm::k_exp(row[j] - max);  // vectorizes apart from the sum
            C sum = C(0);
            for (int64_t j = 0; j < cols; ++j) sum += row[j];
            inv[static_cast<size_t>(r)] = C(1) / sum;
          }
        });
        acc.assign(static_cast<size_t>(rows * Ev), C(0));
        if (cols > 0) gemm(kComputeDType, rows, Ev, cols, {scores.data(), cols, 1}, vm, acc.data(), Ev, false, ctx.pool);
        T* yb = py + out.base(b) + i0 * out.row_stride();
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t e = 0; e < Ev; ++e)
            yb[r * out.row_stride() + e] =
                from_compute<T>(acc[static_cast<size_t>(r * Ev + e)] * inv[static_cast<size_t>(r)]);
      }
    };
    ctx.pool.parallel_for(num_batches, 1, [&](int64_t b0, int64_t b1) {
      Scratch work;
      for (int64_t b = b0; b < b1; ++b) attend(b, work);
    });
  }

  static constexpr int64_t kRowBlock = 256;  // query rows per block: the scores held at once are kRowBlock x S

  bool causal_;
  double scale_;
  bool heads_last_;
};

std::unique_ptr<CpuKernel> make_attention_kernel(const Node& node, std::string* reason) {
  if (!is_floating(node.inputs[0]->type.dtype)) {
    if (reason) *reason = "attention needs floating-point q, k, v";
    return nullptr;
  }
  return std::make_unique<AttentionKernel>(node);
}

}  // namespace

void register_attention_kernels(KernelMap& map) { map["attention"] = make_attention_kernel; }

}  // namespace kiln::cpu::internal
