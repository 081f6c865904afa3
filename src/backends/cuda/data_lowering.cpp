// Lowering of the copy, creation and index ops to data_kernels.cu: contiguous,
// concat, constant_pad, full, arange, gather, index_select and embedding. The
// layouts mirror the CPU kernels (backends/cpu/data_kernels.cpp and
// data_index_kernels.cpp), so both backends read the same views. View ops
// have no kernel (the runtime binds them).
#include <algorithm>
#include <cstring>
#include <vector>

#include "backends/cpu/data_copy.h"
#include "backends/cuda/cuda_common.h"
#include "backends/cuda/kernel_registry.h"
#include "ops/op_def.h"
#include "support/error.h"

namespace kiln::cuda {

namespace {

char* byte_ptr(const TensorView& v) { return static_cast<char*>(v.data); }

uint64_t fill_word(double v, DType dtype) {
  std::array<uint8_t, 8> bytes = cpu::internal::scalar_bytes(v, dtype);
  uint64_t w = 0;
  std::memcpy(&w, bytes.data(), 8);
  return w;
}

class ContiguousKernel final : public CudaKernel {
 public:
  using CudaKernel::CudaKernel;

 protected:
  void launch(std::span<const TensorView> in, std::span<const TensorView> out, cudaStream_t s) const override {
    check_launch(launch_copy(
        copy_args(in[0].dims, in[0].data, in[0].strides, out[0].data, out[0].strides, dtype_size(in[0].dtype)), s));
  }
};

// copies: contiguous copies of inputs that share a layout, in one launch (launch_copy_group).
class CopiesKernel final : public CudaKernel {
 public:
  using CudaKernel::CudaKernel;

 protected:
  void launch(std::span<const TensorView> in, std::span<const TensorView> out, cudaStream_t s) const override {
    std::vector<CopyArgs> copies;
    for (size_t k = 0; k < in.size(); ++k)
      copies.push_back(copy_args(in[k].dims, in[k].data, in[k].strides, out[k].data, out[k].strides,
                                 dtype_size(in[k].dtype)));
    check_launch(launch_copy_group(copies.data(), static_cast<int>(copies.size()), s));
  }
};

class ConcatKernel final : public CudaKernel {
 public:
  ConcatKernel(const Node& node, int device, size_t dim) : CudaKernel(node, device), dim_(dim) {}

 protected:
  void launch(std::span<const TensorView> in, std::span<const TensorView> out, cudaStream_t s) const override {
    const TensorView& o = out[0];
    const size_t es = dtype_size(o.dtype);
    int64_t at = 0;
    for (const TensorView& x : in) {
      if (x.dims.size() != o.dims.size()) continue;  // a legacy 1-D empty input
      char* dst = byte_ptr(o) + at * o.strides[dim_] * static_cast<int64_t>(es);
      check_launch(launch_copy(copy_args(x.dims, x.data, x.strides, dst, o.strides, es), s));
      at += x.dims[dim_];
    }
  }

 private:
  size_t dim_;
};

class ConstantPadKernel final : public CudaKernel {
 public:
  ConstantPadKernel(const Node& node, int device, std::vector<int64_t> pad, uint64_t value)
      : CudaKernel(node, device), pad_(std::move(pad)), value_(value) {}

 protected:
  void launch(std::span<const TensorView> in, std::span<const TensorView> out, cudaStream_t s) const override {
    const TensorView &x = in[0], &o = out[0];
    const size_t es = dtype_size(o.dtype);
    Dims region = x.dims;
    int64_t src_off = 0, dst_off = 0;
    bool padded = false;
    for (size_t k = 0; k < pad_.size() / 2; ++k) {
      const size_t d = x.dims.size() - 1 - k;
      const int64_t lo = pad_[2 * k], hi = pad_[2 * k + 1];
      padded = padded || lo > 0 || hi > 0;
      const int64_t begin = std::max<int64_t>(0, -lo), end = x.dims[d] - std::max<int64_t>(0, -hi);
      region[d] = std::max<int64_t>(0, end - begin);
      src_off += begin * x.strides[d];
      dst_off += std::max<int64_t>(0, lo) * o.strides[d];
    }
    if (padded) {
      FillArgs f;
      f.space = index_space(o.dims);
      f.elem_size = static_cast<int>(es);
      f.value = value_;
      f.dst = o.data;
      copy_dims(f.dst_strides, o.strides);
      check_launch(launch_fill(f, s));
    }
    if (numel(region) == 0) return;
    const int64_t ies = static_cast<int64_t>(es);
    check_launch(launch_copy(
        copy_args(region, byte_ptr(x) + src_off * ies, x.strides, byte_ptr(o) + dst_off * ies, o.strides, es), s));
  }

 private:
  std::vector<int64_t> pad_;
  uint64_t value_;
};

class FullKernel final : public CudaKernel {
 public:
  FullKernel(const Node& node, int device, uint64_t value) : CudaKernel(node, device), value_(value) {}

 protected:
  void launch(std::span<const TensorView>, std::span<const TensorView> out, cudaStream_t s) const override {
    FillArgs f;
    f.space = index_space(out[0].dims);
    f.elem_size = static_cast<int>(dtype_size(out[0].dtype));
    f.value = value_;
    f.dst = out[0].data;
    copy_dims(f.dst_strides, out[0].strides);
    check_launch(launch_fill(f, s));
  }

 private:
  uint64_t value_;
};

class ArangeKernel final : public CudaKernel {
 public:
  ArangeKernel(const Node& node, int device, double start, double step)
      : CudaKernel(node, device), start_(start), step_(step) {}

 protected:
  void launch(std::span<const TensorView>, std::span<const TensorView> out, cudaStream_t s) const override {
    ArangeArgs a;
    a.n = out[0].numel();
    a.stride = out[0].dims.empty() ? 1 : out[0].strides[0];
    a.start = start_;
    a.step = step_;
    a.dst = out[0].data;
    a.dtype = static_cast<int>(out[0].dtype);
    check_launch(launch_arange(a, s));
  }

 private:
  double start_, step_;
};

// gather, index_select and embedding: one indexed copy with op-specific strides.
enum class IndexKind { gather, index_select, embedding };

class IndexedKernel final : public CudaKernel {
 public:
  IndexedKernel(const Node& node, int device, IndexKind kind, size_t dim)
      : CudaKernel(node, device), kind_(kind), dim_(dim) {}

 protected:
  void launch(std::span<const TensorView> in, std::span<const TensorView> out, cudaStream_t s) const override {
    const TensorView &x = in[0], &index = in[1], &o = out[0];
    IndexedCopyArgs a;
    a.elem_size = static_cast<int>(dtype_size(x.dtype));
    a.src = x.data;
    a.index = index.data;
    a.index_dtype = static_cast<int>(index.dtype);
    a.dst = o.data;
    Dims src_strides, idx_strides;
    Dims space = o.dims;
    if (kind_ == IndexKind::gather) {
      space = index.dims;
      src_strides = x.strides;
      idx_strides = index.strides;
      if (!x.dims.empty()) {
        a.axis_stride = x.strides[dim_];
        a.axis_size = x.dims[dim_];
        src_strides[dim_] = 0;
      } else {
        a.axis_stride = 0;
        a.axis_size = 1;
      }
    } else if (kind_ == IndexKind::index_select) {
      src_strides = x.strides;
      idx_strides = Dims(o.dims.size(), 0);
      if (!x.dims.empty()) {
        a.axis_stride = x.strides[dim_];
        a.axis_size = x.dims[dim_];
        src_strides[dim_] = 0;
        idx_strides[dim_] = index.dims.empty() ? 0 : index.strides[0];
      } else {
        a.axis_stride = 0;
        a.axis_size = 1;
      }
    } else {
      src_strides = Dims(o.dims.size(), 0);
      src_strides.back() = x.strides[1];
      idx_strides = index.strides;
      idx_strides.push_back(0);
      a.axis_stride = x.strides[0];
      a.axis_size = x.dims[0];
    }
    a.space = index_space(space);
    copy_dims(a.src_strides, src_strides);
    copy_dims(a.idx_strides, idx_strides);
    copy_dims(a.dst_strides, contiguous_strides(space));
    check_launch(launch_indexed_copy(a, s));
  }

 private:
  IndexKind kind_;
  size_t dim_;
};

bool integer_index(const Node& node, std::string* reason) {
  if (is_integral(node.inputs[1]->type.dtype)) return true;
  *reason = str_cat("indices must have an integer dtype, got ", dtype_name(node.inputs[1]->type.dtype));
  return false;
}

size_t axis_attr(const Node& node) {
  const int64_t rank = std::max<int64_t>(1, static_cast<int64_t>(node.inputs[0]->type.rank()));
  const int64_t dim = node.attrs.get_int("dim");
  return static_cast<size_t>(dim < 0 ? dim + rank : dim);
}

template <typename K>
std::unique_ptr<BackendKernel> make_simple(const Node& node, const LowerContext& ctx, std::string* reason) {
  if (!fits_rank(node, reason)) return nullptr;
  return std::make_unique<K>(node, ctx.device);
}

std::unique_ptr<BackendKernel> make_concat(const Node& node, const LowerContext& ctx, std::string* reason) {
  if (!fits_rank(node, reason)) return nullptr;
  const int64_t rank = static_cast<int64_t>(node.outputs[0]->type.rank());
  int64_t dim = node.attrs.get_int("dim");
  return std::make_unique<ConcatKernel>(node, ctx.device, static_cast<size_t>(dim < 0 ? dim + rank : dim));
}

std::unique_ptr<BackendKernel> make_constant_pad(const Node& node, const LowerContext& ctx, std::string* reason) {
  if (!fits_rank(node, reason)) return nullptr;
  return std::make_unique<ConstantPadKernel>(node, ctx.device, node.attrs.get_ints("pad"),
                                             fill_word(node.attrs.get_float("value"), node.outputs[0]->type.dtype));
}

std::unique_ptr<BackendKernel> make_full(const Node& node, const LowerContext& ctx, std::string* reason) {
  if (!fits_rank(node, reason)) return nullptr;
  return std::make_unique<FullKernel>(node, ctx.device,
                                      fill_word(node.attrs.get_float("value"), node.outputs[0]->type.dtype));
}

std::unique_ptr<BackendKernel> make_arange(const Node& node, const LowerContext& ctx, std::string*) {
  return std::make_unique<ArangeKernel>(node, ctx.device, node.attrs.get_float("start"), node.attrs.get_float("step"));
}

template <IndexKind Kind>
std::unique_ptr<BackendKernel> make_indexed(const Node& node, const LowerContext& ctx, std::string* reason) {
  if (!fits_rank(node, reason) || !integer_index(node, reason)) return nullptr;
  if (Kind == IndexKind::embedding && node.inputs[0]->type.rank() != 2) {
    *reason = "embedding weight must be 2-D";
    return nullptr;
  }
  return std::make_unique<IndexedKernel>(node, ctx.device, Kind, Kind == IndexKind::embedding ? 0 : axis_attr(node));
}

}  // namespace

void register_data_kernels(KernelMap& map) {
  map["contiguous"] = &make_simple<ContiguousKernel>;
  map["copies"] = &make_simple<CopiesKernel>;
  map["concat"] = &make_concat;
  map["constant_pad"] = &make_constant_pad;
  map["full"] = &make_full;
  map["arange"] = &make_arange;
  map["gather"] = &make_indexed<IndexKind::gather>;
  map["index_select"] = &make_indexed<IndexKind::index_select>;
  map["embedding"] = &make_indexed<IndexKind::embedding>;
}

}  // namespace kiln::cuda
