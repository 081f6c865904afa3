// Lowering of the row-wise ops (softmax, log_softmax, layer_norm) to
// norm_kernels.cu and of the axis reductions (sum, mean, amax, amin) to
// reduce_kernels.cu. Rows are described by RowSpace, so strided inputs are
// read in place.
#include "backends/cuda/cuda_common.h"
#include "backends/cuda/kernel_registry.h"
#include "ops/broadcast.h"
#include "ops/op_def.h"
#include "support/error.h"

namespace kiln::cuda {

namespace {

class RowKernel final : public CudaKernel {
 public:
  RowKernel(const Node& node, int device, RowOp op, std::vector<int64_t> axes, double eps)
      : CudaKernel(node, device), op_(op), axes_(std::move(axes)), eps_(eps) {}

 protected:
  void launch(std::span<const TensorView> in, std::span<const TensorView> out, cudaStream_t s) const override {
    const TensorView& x = in[0];
    RowArgs a;
    a.rows = row_space(x.dims, x.strides, out[0].strides, axes_);
    a.op = op_;
    a.dtype = static_cast<int>(x.dtype);
    a.in = x.data;
    a.out = out[0].data;
    a.eps = eps_;
    const Dims normalized(x.dims.end() - static_cast<int64_t>(axes_.size()), x.dims.end());
    if (in.size() > 1) {
      a.weight = in[1].data;
      a.param_dtype = static_cast<int>(in[1].dtype);
      copy_dims(a.weight_strides, broadcast_strides(in[1].type(), normalized));
    }
    if (in.size() > 2) {
      a.bias = in[2].data;
      copy_dims(a.bias_strides, broadcast_strides(in[2].type(), normalized));
    }
    check_launch(launch_rows(a, s));
  }

 private:
  RowOp op_;
  std::vector<int64_t> axes_;
  double eps_;
};

bool floating_input(const Node& node, std::string* reason) {
  for (const Value* v : node.inputs)
    if (!is_floating(v->type.dtype)) {
      *reason = str_cat("input %", v->name, " is ", dtype_name(v->type.dtype), ", not floating-point");
      return false;
    }
  if (node.inputs.size() > 2 && node.inputs[1]->type.dtype != node.inputs[2]->type.dtype) {
    *reason = "weight and bias have different dtypes";
    return false;
  }
  return true;
}

template <RowOp Op>
std::unique_ptr<BackendKernel> make_softmax(const Node& node, const LowerContext& ctx, std::string* reason) {
  if (!fits_rank(node, reason) || !floating_input(node, reason)) return nullptr;
  const int64_t rank = static_cast<int64_t>(node.inputs[0]->type.rank());
  std::vector<int64_t> axes;
  if (rank > 0) axes.push_back(normalize_axis(node.attrs.get_int("dim"), rank));
  return std::make_unique<RowKernel>(node, ctx.device, Op, axes, 0.0);
}

std::unique_ptr<BackendKernel> make_layer_norm(const Node& node, const LowerContext& ctx, std::string* reason) {
  if (!fits_rank(node, reason) || !floating_input(node, reason)) return nullptr;
  const int64_t rank = static_cast<int64_t>(node.inputs[0]->type.rank());
  const int64_t k = node.attrs.get_int("normalized_rank");
  std::vector<int64_t> axes;
  for (int64_t d = rank - k; d < rank; ++d) axes.push_back(d);
  return std::make_unique<RowKernel>(node, ctx.device, RowOp::layer_norm, axes, node.attrs.get_float("eps"));
}

class ReduceKernel final : public CudaKernel {
 public:
  ReduceKernel(const Node& node, int device, ReduceOp op, std::vector<int64_t> axes)
      : CudaKernel(node, device), op_(op), axes_(std::move(axes)) {}

 protected:
  void launch(std::span<const TensorView> in, std::span<const TensorView> out, cudaStream_t s) const override {
    const TensorView& x = in[0];
    ReduceArgs a;
    a.rows = row_space(x.dims, x.strides, contiguous_strides(x.dims), axes_);
    a.op = op_;
    a.in_dtype = static_cast<int>(x.dtype);
    a.out_dtype = static_cast<int>(out[0].dtype);
    a.in = x.data;
    a.out = out[0].data;
    check_launch(launch_reduce(a, s));
  }

 private:
  ReduceOp op_;
  std::vector<int64_t> axes_;
};

template <ReduceOp Op>
std::unique_ptr<BackendKernel> make_reduce(const Node& node, const LowerContext& ctx, std::string* reason) {
  if (!fits_rank(node, reason)) return nullptr;
  const TensorType& x = node.inputs[0]->type;
  std::vector<int64_t> axes = normalize_axes(node.attrs.get_ints("dims"), static_cast<int64_t>(x.rank()));
  if (x.rank() == 0) axes.clear();
  return std::make_unique<ReduceKernel>(node, ctx.device, Op, axes);
}

}  // namespace

void register_norm_kernels(KernelMap& map) {
  map["softmax"] = &make_softmax<RowOp::softmax>;
  map["log_softmax"] = &make_softmax<RowOp::log_softmax>;
  map["layer_norm"] = &make_layer_norm;
  map["sum"] = &make_reduce<ReduceOp::sum>;
  map["mean"] = &make_reduce<ReduceOp::mean>;
  map["amax"] = &make_reduce<ReduceOp::amax>;
  map["amin"] = &make_reduce<ReduceOp::amin>;
}

}  // namespace kiln::cuda
