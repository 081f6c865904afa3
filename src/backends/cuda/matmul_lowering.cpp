// matmul (torch.matmul semantics, batched with broadcasting) and
// matmul_epilogue (matmul, + bias over the last dim, then an activation, or
// + a residual) through cuBLASLt, for f16, bf16, f32 (no TF32) and f64.
//
// Note [GEMM epilogues]
// matmul_epilogue's bias and activation run in cuBLASLt's epilogue
// (CUBLASLT_EPILOGUE_BIAS, _RELU_BIAS, _GELU_BIAS, or _RELU/_GELU without a
// bias) when the heuristics offer an algorithm for it. cuBLASLt's GELU is the
// tanh approximation, so it serves gelu_tanh; exact gelu, a strided bias, or
// no algorithm with the epilogue leave the remainder to one in-place pass
// (launch_bias_act, conv_kernels.cu) after the product. Decided at lowering.
// A residual (activation "none" only) is cuBLASLt's C with beta = 1, so
// D = A B + C + bias in one pass and one rounding (the unfused graph rounds
// after each add; the CPU kernel keeps those roundings). C is the residual
// in place when it has exactly D's layout (dense rows and batches: what a
// residual stream viewed at the product's dims gives), so C and D share one
// layout; any other layout is copied into D first (launch_copy) and C = D,
// in place. The remainder pass stays correct after D = A B + C:
// with no activation the bias is the last addition in either order.
//
// Note [Transposes through GEMM flags]
// A weight reaches matmul as permute(W, [1, 0]): a view whose last two dims
// are column-major. Each operand's last two dims are classified as row- or
// column-major from their strides and handed to cuBLASLt with the matching
// transpose flag and leading dimension, so no operand is ever copied (Note
// [Weights] in DESIGN.md). cuBLASLt is column-major: the row-major product
// out = a @ b is computed as out^T = b^T a^T, so b is cuBLASLt's A.
// Batch dims (broadcast, stride 0 where broadcast) must collapse into one
// strided batch per operand; other layouts are unsupported with a reason.
// Descriptors and the algorithm are chosen once, at lowering; a second
// algorithm for operands not 16-byte aligned is kept for views at odd offsets.
#include <algorithm>

#include "backends/cuda/conv_kernels.h"
#include "backends/cuda/cuda_common.h"
#include "backends/cuda/cuda_resources.h"
#include "backends/cuda/kernel_registry.h"
#include "ops/op_def.h"
#include "support/error.h"

#ifdef KILN_CUDA_HAVE_CUBLASLT
#include <cublasLt.h>
#endif

namespace kiln::cuda {

namespace {

#ifdef KILN_CUDA_HAVE_CUBLASLT

// One operand's matrix: its last two dims (1-D operands get a unit dim) and
// one strided batch.
struct Matrix {
  int64_t rows = 0, cols = 0;
  bool row_major = true;
  int64_t ld = 0;
  int64_t batch_stride = 0;
};

// Classifies the [rows, cols] matrix with strides (sr, sc); false when neither
// dim is unit-stride.
bool classify(int64_t rows, int64_t cols, int64_t sr, int64_t sc, Matrix* m) {
  m->rows = rows;
  m->cols = cols;
  if ((cols == 1 || sc == 1) && (rows == 1 || sr >= cols)) {
    m->row_major = true;
    m->ld = rows == 1 ? std::max<int64_t>(cols, 1) : sr;
    return true;
  }
  if ((rows == 1 || sr == 1) && (cols == 1 || sc >= rows)) {
    m->row_major = false;
    m->ld = cols == 1 ? std::max<int64_t>(rows, 1) : sc;
    return true;
  }
  return false;
}

// The single batch stride reading `strides` over `dims` (outer to inner), or false.
bool collapse_batch(const Dims& dims, const Dims& strides, int64_t* stride) {
  bool have = false;
  int64_t base = 0, inner = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    if (dims[i] == 1) continue;
    if (!have) {
      base = strides[i];
      have = true;
    } else if (strides[i] != base * inner) {
      return false;
    }
    inner *= dims[i];
  }
  *stride = base;
  return true;
}

// The operand `t` as a batched matrix over `out_batch`; `is_b` says how a 1-D operand is promoted.
bool operand_matrix(const TensorType& t, bool is_b, const Dims& out_batch, Matrix* m, std::string* reason,
                    const char* name) {
  int64_t rows, cols, sr, sc;
  Dims batch_dims, batch_strides;
  if (t.rank() == 1) {
    rows = is_b ? t.dims[0] : 1;
    cols = is_b ? 1 : t.dims[0];
    sr = is_b ? t.strides[0] : t.dims[0] * t.strides[0];
    sc = is_b ? 1 : t.strides[0];
  } else {
    size_t r = t.rank();
    rows = t.dims[r - 2], cols = t.dims[r - 1], sr = t.strides[r - 2], sc = t.strides[r - 1];
    batch_dims.assign(t.dims.begin(), t.dims.end() - 2);
    batch_strides.assign(t.strides.begin(), t.strides.end() - 2);
  }
  if (!classify(rows, cols, sr, sc, m)) {
    *reason = str_cat("operand ", name, " has strides [", dims_to_string(t.strides),
                      "]: neither of its last two dims is contiguous");
    return false;
  }
  // Broadcast the batch dims over the output's.
  Dims bstrides(out_batch.size(), 0);
  size_t off = out_batch.size() - batch_dims.size();
  for (size_t i = 0; i < batch_dims.size(); ++i) bstrides[off + i] = batch_dims[i] == 1 ? 0 : batch_strides[i];
  if (!collapse_batch(out_batch, bstrides, &m->batch_stride)) {
    *reason = str_cat("operand ", name, "'s batch dims (strides [", dims_to_string(t.strides),
                      "]) do not form one strided batch");
    return false;
  }
  return true;
}

template <typename T, void (*Destroy)(T)>
struct Handle {
  T h = nullptr;
  Handle() = default;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() {
    if (h) Destroy(h);
  }
};
void destroy_desc(cublasLtMatmulDesc_t d) { cublasLtMatmulDescDestroy(d); }
void destroy_layout(cublasLtMatrixLayout_t l) { cublasLtMatrixLayoutDestroy(l); }
void destroy_pref(cublasLtMatmulPreference_t p) { cublasLtMatmulPreferenceDestroy(p); }

void check_lt(cublasStatus_t st, const std::string& what) {
  KILN_CHECK_KIND(runtime, st == CUBLAS_STATUS_SUCCESS, what, ": cuBLASLt status ", static_cast<int>(st));
}

// How a residual reaches cuBLASLt's C (Note [GEMM epilogues]).
enum class Residual { none, as_c, copied_to_d };

// The residual (the output's dims) as a dense row-major [M, N] matrix in one dense batch over
// `out_batch`, exactly D's layout; false for other layouts (they are copied into D first).
bool residual_as_c(const TensorType& r, size_t a_rank, size_t b_rank, const Dims& out_batch, int64_t batch,
                   Matrix* m) {
  Dims dims = r.dims, strides = r.strides;
  // The unit dims that 1-D operands dropped from [batch..., M, N] (their strides never matter).
  if (b_rank == 1) {
    dims.push_back(1);
    strides.push_back(1);
  }
  if (a_rank == 1) {
    dims.insert(dims.end() - 1, 1);
    strides.insert(strides.end() - 1, 1);
  }
  std::string unused;
  if (!operand_matrix(TensorType(r.dtype, dims, strides), false, out_batch, m, &unused, "residual")) return false;
  // D's own layout (dense rows, dense batches): C then shares D's descriptor, the one form cuBLASLt
  // documents for C != D without conditions.
  return m->row_major && m->ld == m->cols && (batch <= 1 || m->batch_stride == m->rows * m->cols);
}

class MatmulKernel final : public CudaKernel {
 public:
  MatmulKernel(const Node& node, const LowerContext& ctx, DType dtype, Matrix a, Matrix b, int64_t m, int64_t n,
               int64_t k, int64_t batch, Activation act, bool has_bias, int64_t bias_stride, Residual residual)
      : CudaKernel(node, ctx.device),
        res_(ctx.resources),
        dtype_(dtype),
        m_(m),
        n_(n),
        k_(k),
        act_(act),
        has_bias_(has_bias),
        bias_stride_(bias_stride),
        residual_(residual) {
    const std::string where = str_cat("node '", node.name, "' (matmul)");
    cudaDataType_t type = dtype == DType::f16    ? CUDA_R_16F
                          : dtype == DType::bf16 ? CUDA_R_16BF
                          : dtype == DType::f64  ? CUDA_R_64F
                                                 : CUDA_R_32F;
    cublasComputeType_t compute = dtype == DType::f64                          ? CUBLAS_COMPUTE_64F
                                  : dtype == DType::f32 && ctx.math.tf32_matmul ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                                                : CUBLAS_COMPUTE_32F;
    tf32_ = compute == CUBLAS_COMPUTE_32F_FAST_TF32;
    cudaDataType_t scale = dtype == DType::f64 ? CUDA_R_64F : CUDA_R_32F;
    if (m == 0 || n == 0 || k == 0) return;  // launch() handles these without cuBLASLt
    res_->workspace();  // allocated now, never in the call path
    check_lt(cublasLtMatmulDescCreate(&desc_.h, compute, scale), where);
    // cuBLASLt's A is b: b row-major [K, N] is column-major N x K (no transpose).
    cublasOperation_t op_a = b.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
    cublasOperation_t op_b = a.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
    check_lt(cublasLtMatmulDescSetAttribute(desc_.h, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)), where);
    check_lt(cublasLtMatmulDescSetAttribute(desc_.h, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)), where);
    auto layout = [&](Handle<cublasLtMatrixLayout_t, destroy_layout>& l, uint64_t rows, uint64_t cols, int64_t ld,
                      int64_t batch_stride) {
      check_lt(cublasLtMatrixLayoutCreate(&l.h, type, rows, cols, ld), where);
      if (batch > 1) {
        int32_t count = static_cast<int32_t>(batch);
        check_lt(cublasLtMatrixLayoutSetAttribute(l.h, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
                 where);
        check_lt(cublasLtMatrixLayoutSetAttribute(l.h, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_stride,
                                                  sizeof(batch_stride)),
                 where);
      }
    };
    // Stored shapes: a row-major matrix [R, C] is column-major C x R.
    layout(a_layout_, b.row_major ? n : k, b.row_major ? k : n, b.ld, b.batch_stride);
    layout(b_layout_, a.row_major ? k : m, a.row_major ? m : k, a.ld, a.batch_stride);
    layout(c_layout_, n, m, n, m * n);  // C's and D's (a residual read as C has D's layout)
    const size_t es = dtype_size(dtype);
    set_epilogue(where);
    aligned_ok_ = (a.ld * es) % 16 == 0 && (b.ld * es) % 16 == 0 && (n * es) % 16 == 0 &&
                  (a.batch_stride * es) % 16 == 0 && (b.batch_stride * es) % 16 == 0 && (m * n * es) % 16 == 0;
    have_aligned_ = aligned_ok_ && pick(16, &aligned_, where, false);
    if (lt_bias_ || lt_act_) {
      cublasLtMatmulAlgo_t probe{};
      if (!pick(static_cast<uint32_t>(es), &probe, where, false)) {  // no algorithm fuses it: unfused epilogue
        lt_bias_ = lt_act_ = false;
        cublasLtEpilogue_t none = CUBLASLT_EPILOGUE_DEFAULT;
        check_lt(cublasLtMatmulDescSetAttribute(desc_.h, CUBLASLT_MATMUL_DESC_EPILOGUE, &none, sizeof(none)), where);
        have_aligned_ = aligned_ok_ && pick(16, &aligned_, where, false);
      }
    }
    pick(static_cast<uint32_t>(es), &unaligned_, where, true);
  }

  // Whether this kernel's bias and activation run inside cuBLASLt, and how a residual is read
  // (for tests and describe()).
  std::string describe() const override {
    return str_cat(CudaKernel::describe(), lt_bias_ || lt_act_ ? " (cuBLASLt epilogue)" : "",
                   residual_ == Residual::as_c        ? " (residual as C)"
                   : residual_ == Residual::copied_to_d ? " (residual copied to D)"
                                                        : "",
                   tf32_ ? " (tf32)" : "");
  }

 protected:
  void launch(std::span<const TensorView> in, std::span<const TensorView> out, cudaStream_t s) const override {
    const TensorView& o = out[0];
    if (m_ == 0 || n_ == 0 || o.numel() == 0) return;
    if (k_ == 0) {
      if (residual_ != Residual::none)
        copy_residual(in[3], o, s);
      else
        check_launch(cudaMemsetAsync(o.data, 0, static_cast<size_t>(o.numel()) * dtype_size(dtype_), s));
      finish(in, o, s, true);
      return;
    }
    if (residual_ == Residual::copied_to_d) copy_residual(in[3], o, s);
    if (lt_bias_) {
      const void* bias = in[2].data;
      check_lt(cublasLtMatmulDescSetAttribute(desc_.h, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)),
               str_cat("node '", node_name(), "' (matmul_epilogue)"));
    }
    auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    const void* c = residual_ == Residual::as_c ? in[3].data : o.data;
    const bool use_aligned = have_aligned_ && aligned(in[0].data) && aligned(in[1].data) && aligned(o.data) &&
                             aligned(c) && (!lt_bias_ || aligned(in[2].data));
    const cublasLtMatmulAlgo_t& algo = use_aligned ? aligned_ : unaligned_;
    // beta = 1 adds C (the residual, or D holding its copy); in the scale type, like alpha.
    const bool add_c = residual_ != Residual::none;
    float alpha_f = 1, beta_f = add_c ? 1 : 0;
    double alpha_d = 1, beta_d = add_c ? 1 : 0;
    const void* alpha = dtype_ == DType::f64 ? static_cast<const void*>(&alpha_d) : &alpha_f;
    const void* beta = dtype_ == DType::f64 ? static_cast<const void*>(&beta_d) : &beta_f;
    cublasStatus_t st = cublasLtMatmul(static_cast<cublasLtHandle_t>(res_->cublaslt()), desc_.h, alpha, in[1].data,
                                       a_layout_.h, in[0].data, b_layout_.h, beta, c, c_layout_.h, o.data,
                                       c_layout_.h, &algo, res_->workspace(), CudaResources::kWorkspaceBytes, s);
    KILN_CHECK_KIND(runtime, st == CUBLAS_STATUS_SUCCESS, "node '", node_name(), "' (matmul): cublasLtMatmul failed (status ",
                    static_cast<int>(st), ")");
    finish(in, o, s, false);
  }

 private:
  // Chooses the cuBLASLt epilogue (Note [GEMM epilogues]).
  void set_epilogue(const std::string& where) {
    lt_bias_ = has_bias_ && bias_stride_ == 1;
    lt_act_ = (act_ == Activation::relu || act_ == Activation::gelu_tanh) && (lt_bias_ || !has_bias_);
    if (!lt_bias_ && !lt_act_) return;
    const bool gelu = act_ == Activation::gelu_tanh;
    cublasLtEpilogue_t epi = !lt_act_ ? CUBLASLT_EPILOGUE_BIAS
                             : lt_bias_ ? (gelu ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_RELU_BIAS)
                                        : (gelu ? CUBLASLT_EPILOGUE_GELU : CUBLASLT_EPILOGUE_RELU);
    check_lt(cublasLtMatmulDescSetAttribute(desc_.h, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), where);
    if (lt_bias_) {
      int64_t zero = 0;
      check_lt(cublasLtMatmulDescSetAttribute(desc_.h, CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE, &zero, sizeof(zero)),
               where);
    }
  }

  // o = the residual, read through its strides (o is dense).
  void copy_residual(const TensorView& r, const TensorView& o, cudaStream_t s) const {
    check_launch(launch_copy(copy_args(r.dims, r.data, r.strides, o.data, o.strides, dtype_size(dtype_)), s));
  }

  // The part of the epilogue cuBLASLt did not run (all of it when `all`).
  void finish(std::span<const TensorView> in, const TensorView& o, cudaStream_t s, bool all) const {
    const bool bias = has_bias_ && (all || !lt_bias_);
    const bool act = act_ != Activation::none && (all || !lt_act_);
    if (!bias && !act) return;
    BiasActArgs a;
    a.y = o.data;
    a.bias = bias ? in[2].data : nullptr;
    a.dtype = static_cast<int>(dtype_);
    a.n = o.numel();
    a.channel_stride = 1;
    a.channels = n_;
    a.bias_stride = bias_stride_;
    a.act = act ? act_ : Activation::none;
    check_launch(launch_bias_act(a, s));
  }

  // The heuristic's best algorithm for operands aligned to `alignment` bytes.
  bool pick(uint32_t alignment, cublasLtMatmulAlgo_t* algo, const std::string& where, bool required) {
    Handle<cublasLtMatmulPreference_t, destroy_pref> pref;
    check_lt(cublasLtMatmulPreferenceCreate(&pref.h), where);
    uint64_t ws = CudaResources::kWorkspaceBytes;
    check_lt(cublasLtMatmulPreferenceSetAttribute(pref.h, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)),
             where);
    for (auto attr : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                      CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
      check_lt(cublasLtMatmulPreferenceSetAttribute(pref.h, attr, &alignment, sizeof(alignment)), where);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    cublasStatus_t st =
        cublasLtMatmulAlgoGetHeuristic(static_cast<cublasLtHandle_t>(res_->cublaslt()), desc_.h, a_layout_.h,
                                       b_layout_.h, c_layout_.h, c_layout_.h, pref.h, 1, &result, &found);
    if (st != CUBLAS_STATUS_SUCCESS || found == 0) {
      if (required) fail(ErrorKind::unsupported, where, ": cuBLASLt has no algorithm for this product (status ", static_cast<int>(st), ")");
      return false;
    }
    *algo = result.algo;
    return true;
  }

  std::shared_ptr<CudaResources> res_;
  DType dtype_;
  int64_t m_, n_, k_;
  Activation act_;
  bool has_bias_;
  int64_t bias_stride_;
  Residual residual_;
  bool tf32_ = false;  // f32 on TF32 tensor cores (Note [Math modes])
  bool lt_bias_ = false, lt_act_ = false;  // parts of the epilogue cuBLASLt runs
  Handle<cublasLtMatmulDesc_t, destroy_desc> desc_;
  Handle<cublasLtMatrixLayout_t, destroy_layout> a_layout_, b_layout_, c_layout_;
  cublasLtMatmulAlgo_t aligned_{}, unaligned_{};
  bool aligned_ok_ = false, have_aligned_ = false;
};

std::unique_ptr<BackendKernel> make_matmul(const Node& node, const LowerContext& ctx, std::string* reason) {
  const TensorType& a = node.inputs[0]->type;
  const TensorType& b = node.inputs[1]->type;
  const TensorType& out = node.outputs[0]->type;
  if (a.dtype != DType::f32 && a.dtype != DType::f16 && a.dtype != DType::bf16 && a.dtype != DType::f64) {
    *reason = str_cat("matmul of ", dtype_name(a.dtype), " is not supported on CUDA (f16, bf16, f32, f64 are)");
    return nullptr;
  }
  const int64_t m = a.rank() >= 2 ? a.dims[a.rank() - 2] : 1;
  const int64_t k = a.dims.back();
  const int64_t n = b.rank() >= 2 ? b.dims.back() : 1;
  Dims out_batch(out.dims.begin(), out.dims.end() - (a.rank() >= 2 ? 1 : 0) - (b.rank() >= 2 ? 1 : 0));
  const int64_t batch = numel(out_batch);
  if (batch > INT32_MAX || m > INT32_MAX || n > INT32_MAX || k > INT32_MAX) {
    *reason = "matmul dims beyond 2^31 are not supported on CUDA";
    return nullptr;
  }
  Matrix ma, mb;
  if (!operand_matrix(a, false, out_batch, &ma, reason, "a") || !operand_matrix(b, true, out_batch, &mb, reason, "b"))
    return nullptr;
  if (batch <= 1) ma.batch_stride = mb.batch_stride = 0;
  Activation act = Activation::none;
  const bool has_bias = node.inputs.size() > 2;
  if (node.op->name == "matmul_epilogue") {
    const std::string& name = node.attrs.get_string("activation");
    act = name == "relu" ? Activation::relu : name == "gelu" ? Activation::gelu
        : name == "gelu_tanh" ? Activation::gelu_tanh : Activation::none;
  }
  const int64_t bias_stride = has_bias ? node.inputs[2]->type.strides[0] : 0;
  Residual residual = Residual::none;
  if (node.inputs.size() > 3) {
    if (!fits_rank(node, reason)) return nullptr;  // the residual's copy (k == 0 copies it too)
    Matrix mr;
    residual = residual_as_c(node.inputs[3]->type, a.rank(), b.rank(), out_batch, batch, &mr) ? Residual::as_c
                                                                                             : Residual::copied_to_d;
  }
  return std::make_unique<MatmulKernel>(node, ctx, a.dtype, ma, mb, m, n, k, batch, act, has_bias, bias_stride,
                                        residual);
}

#else  // no cuBLASLt in this build

std::unique_ptr<BackendKernel> make_matmul(const Node&, const LowerContext&, std::string* reason) {
  *reason = "this kiln build has no cuBLASLt (set KILN_CUDA_LIB_HINTS when configuring)";
  return nullptr;
}

#endif

}  // namespace

void register_matmul_kernels(KernelMap& map) {
  map["matmul"] = &make_matmul;
  map["matmul_epilogue"] = &make_matmul;
}

}  // namespace kiln::cuda
