// Host-side helpers of the CUDA backend (cuda_common.h).
#include "backends/cuda/cuda_common.h"

#include <algorithm>

#include "ops/broadcast.h"
#include "support/error.h"

namespace kiln::cuda {

void check_cuda(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) fail(ErrorKind::runtime, what, ": CUDA error ", cudaGetErrorName(e), " (", cudaGetErrorString(e), ")");
}

DeviceGuard::DeviceGuard(int device) : device_(device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
  if (previous_ != device_) check_cuda(cudaSetDevice(device_), str_cat("cannot select device cuda:", device_));
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0 && previous_ != device_) cudaSetDevice(previous_);
}

void CudaKernel::check_launch(cudaError_t e) const {
  if (e != cudaSuccess) check_cuda(e, str_cat("node '", node_, "' (", op_, ") on cuda:", device_));
}

bool fits_rank(const Node& node, std::string* reason) {
  auto fits = [](const Value* v) { return v->type.rank() <= static_cast<size_t>(kMaxRank); };
  if (std::all_of(node.inputs.begin(), node.inputs.end(), fits) &&
      std::all_of(node.outputs.begin(), node.outputs.end(), fits))
    return true;
  *reason = str_cat("tensors of rank above ", kMaxRank, " are not supported by the CUDA kernels");
  return false;
}

IndexSpace index_space(const Dims& dims) {
  KILN_CHECK(dims.size() <= static_cast<size_t>(kMaxRank), "CUDA kernels take rank <= ", kMaxRank, ", got [",
             dims_to_string(dims), "]");
  IndexSpace s;
  set_dims(s, static_cast<int>(dims.size()), dims.data());
  return s;
}

void copy_dims(int64_t* dst, const Dims& src) {
  KILN_CHECK(src.size() <= static_cast<size_t>(kMaxRank), "CUDA kernels take rank <= ", kMaxRank);
  std::copy(src.begin(), src.end(), dst);
}

Operand operand_over(const TensorView& view, const Dims& out_dims) {
  Operand o;
  o.data = view.data;
  o.dtype = static_cast<int>(view.dtype);
  copy_dims(o.strides, broadcast_strides(view.type(), out_dims));
  return o;
}

CopyArgs copy_args(const Dims& dims, const void* src, const Dims& src_strides, void* dst, const Dims& dst_strides,
                   size_t elem_size) {
  CopyArgs a;
  a.space = index_space(dims);
  a.elem_size = static_cast<int>(elem_size);
  a.src = src;
  copy_dims(a.src_strides, src_strides);
  a.dst = dst;
  copy_dims(a.dst_strides, dst_strides);
  return a;
}

Compute compute_of(DType d) {
  if (d == DType::f64) return Compute::f64;
  return is_floating(d) ? Compute::f32 : Compute::i64;
}

RowSpace row_space(const Dims& dims, const Dims& in_strides, const Dims& out_strides, std::span<const int64_t> axes) {
  Dims kept, red, kept_in, red_in, kept_out, red_out;
  for (size_t d = 0; d < dims.size(); ++d) {
    bool reduced = std::find(axes.begin(), axes.end(), static_cast<int64_t>(d)) != axes.end();
    (reduced ? red : kept).push_back(dims[d]);
    (reduced ? red_in : kept_in).push_back(in_strides[d]);
    (reduced ? red_out : kept_out).push_back(out_strides[d]);
  }
  RowSpace r;
  r.kept = index_space(kept);
  r.red = index_space(red);
  r.rows = r.kept.n;
  r.row_len = r.red.n;
  copy_dims(r.kept_in, kept_in);
  copy_dims(r.red_in, red_in);
  copy_dims(r.kept_out, kept_out);
  copy_dims(r.red_out, red_out);
  return r;
}

}  // namespace kiln::cuda
