// CPU kernels for the copy and creation ops: contiguous, concat,
// constant_pad, full, arange. Copies are byte moves by element size over
// strided inputs (data_copy.h). View ops have no kernel: the runtime binds
// them (Note [Views are resolved by the runtime] in ops/view_offset.h). The
// index ops live in data_index_kernels.cpp.
#include <algorithm>
#include <array>
#include <cstring>

#include "backends/cpu/data_copy.h"
#include "backends/cpu/dtype_dispatch.h"
#include "backends/cpu/kernel_registry.h"
#include "ops/op_def.h"
#include "support/error.h"

namespace kiln::cpu::internal {

void register_data_index_kernels(KernelMap& map);  // data_index_kernels.cpp

namespace {

char* byte_ptr(const TensorView& v) { return static_cast<char*>(v.data); }

class ContiguousKernel final : public CpuKernel {
 public:
  void run(std::span<const TensorView> in, std::span<const TensorView> out, const CpuContext& ctx) const override {
    strided_copy(ctx.pool, in[0].dims, in[0].data, in[0].strides, out[0].data, out[0].strides,
                 dtype_size(in[0].dtype));
  }
};

// copies: each output a contiguous copy of its input.
class CopiesKernel final : public CpuKernel {
 public:
  void run(std::span<const TensorView> in, std::span<const TensorView> out, const CpuContext& ctx) const override {
    for (size_t k = 0; k < in.size(); ++k)
      strided_copy(ctx.pool, in[k].dims, in[k].data, in[k].strides, out[k].data, out[k].strides,
                   dtype_size(in[k].dtype));
  }
};

class ConcatKernel final : public CpuKernel {
 public:
  explicit ConcatKernel(size_t dim) : dim_(dim) {}
  void run(std::span<const TensorView> in, std::span<const TensorView> out, const CpuContext& ctx) const override {
    const TensorView& o = out[0];
    const size_t es = dtype_size(o.dtype);
    int64_t at = 0;  // position along dim_
    for (const TensorView& x : in) {
      if (x.dims.size() != o.dims.size()) continue;  // a legacy 1-D empty input
      char* dst = byte_ptr(o) + at * o.strides[dim_] * static_cast<int64_t>(es);
      strided_copy(ctx.pool, x.dims, x.data, x.strides, dst, o.strides, es);
      at += x.dims[dim_];
    }
  }

 private:
  size_t dim_;
};

class ConstantPadKernel final : public CpuKernel {
 public:
  ConstantPadKernel(std::vector<int64_t> pad, std::array<uint8_t, 8> value) : pad_(std::move(pad)), value_(value) {}
  void run(std::span<const TensorView> in, std::span<const TensorView> out, const CpuContext& ctx) const override {
    const TensorView &x = in[0], &o = out[0];
    const size_t es = dtype_size(o.dtype);
    // The part of x that survives cropping, and where it lands in the output.
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
    if (padded) strided_fill(ctx.pool, o.dims, o.data, o.strides, value_.data(), es);
    if (numel(region) == 0) return;
    const int64_t ies = static_cast<int64_t>(es);
    strided_copy(ctx.pool, region, byte_ptr(x) + src_off * ies, x.strides, byte_ptr(o) + dst_off * ies, o.strides,
                 es);
  }

 private:
  std::vector<int64_t> pad_;
  std::array<uint8_t, 8> value_;
};

class FullKernel final : public CpuKernel {
 public:
  explicit FullKernel(std::array<uint8_t, 8> value) : value_(value) {}
  void run(std::span<const TensorView>, std::span<const TensorView> out, const CpuContext& ctx) const override {
    strided_fill(ctx.pool, out[0].dims, out[0].data, out[0].strides, value_.data(), dtype_size(out[0].dtype));
  }

 private:
  std::array<uint8_t, 8> value_;
};

class ArangeKernel final : public CpuKernel {
 public:
  ArangeKernel(double start, double step) : start_(start), step_(step) {}
  void run(std::span<const TensorView>, std::span<const TensorView> out, const CpuContext& ctx) const override {
    const TensorView& o = out[0];
    const int64_t n = o.numel(), stride = o.dims.empty() ? 1 : o.strides[0];
    dispatch_dtype(o.dtype, [&]<typename T>() {
      T* p = o.ptr<T>();
      ctx.pool.parallel_for(n, kCopyGrain, [&](int64_t b, int64_t e) {
        for (int64_t i = b; i < e; ++i) {
          // Computed in double like torch's CPU kernel, then converted like a cast.
          p[i * stride] = convert_scalar<T>(start_ + static_cast<double>(i) * step_);
        }
      });
    });
  }

 private:
  double start_, step_;
};

std::unique_ptr<CpuKernel> make_contiguous(const Node&, std::string*) { return std::make_unique<ContiguousKernel>(); }
std::unique_ptr<CpuKernel> make_copies(const Node&, std::string*) { return std::make_unique<CopiesKernel>(); }

std::unique_ptr<CpuKernel> make_concat(const Node& node, std::string*) {
  const int64_t rank = static_cast<int64_t>(node.outputs[0]->type.rank());
  int64_t dim = node.attrs.get_int("dim");
  return std::make_unique<ConcatKernel>(static_cast<size_t>(dim < 0 ? dim + rank : dim));
}

std::unique_ptr<CpuKernel> make_constant_pad(const Node& node, std::string*) {
  return std::make_unique<ConstantPadKernel>(node.attrs.get_ints("pad"),
                                             scalar_bytes(node.attrs.get_float("value"), node.outputs[0]->type.dtype));
}

std::unique_ptr<CpuKernel> make_full(const Node& node, std::string*) {
  return std::make_unique<FullKernel>(scalar_bytes(node.attrs.get_float("value"), node.outputs[0]->type.dtype));
}

std::unique_ptr<CpuKernel> make_arange(const Node& node, std::string*) {
  return std::make_unique<ArangeKernel>(node.attrs.get_float("start"), node.attrs.get_float("step"));
}

}  // namespace

void register_data_kernels(KernelMap& map) {
  map["contiguous"] = make_contiguous;
  map["copies"] = make_copies;
  map["concat"] = make_concat;
  map["constant_pad"] = make_constant_pad;
  map["full"] = make_full;
  map["arange"] = make_arange;
  register_data_index_kernels(map);
}

}  // namespace kiln::cpu::internal
