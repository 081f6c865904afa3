// conv2d and conv2d_fused through cuDNN's graph API (Note [cuDNN plans] in
// cudnn_graph.h), for f32 (no TF32), f16 and bf16 with groups (depthwise
// included), stride, padding and dilation.
//
// Every tensor is described to cuDNN by its logical N, C, H, W dims and its
// actual strides, so NCHW, channels-last (conv2d_fused{channels_last}) and
// strided views are all read in place. The graph is the convolution, then a
// pointwise bias add (when the node has a bias) and a ReLU (conv2d_fused
// {relu}), computed in float. A residual (a fourth operand: a ResNet block's
// skip connection) is added, and the ReLU after it applied, by a small kernel
// (conv_kernels.cu) in place after the graph, which is then the plain
// conv + bias graph other nodes of that geometry share: on the H200 (run 7,
// docs/benchmarks.md) cuDNN's runtime-fusion engines for conv + bias + add +
// ReLU took 2.5-7 s to build for resnet50 and ran its batch 32 0.3 ms slower.
// The same kernel adds the bias and applies the ReLU when no engine fuses
// them. Why the graph API and not cudnnConvolutionForward: it takes the
// fusion and the layout as data, picks engines once at lowering, and is the
// API cuDNN 9 develops.
// Plans are cached per process by geometry (ConvKernel::plan), so the
// partitioner's support check, the lowering and repeated blocks share one.
#include <algorithm>
#include <deque>
#include <map>
#include <memory>
#include <mutex>

#include "backends/cuda/conv_kernels.h"
#include "backends/cuda/cuda_common.h"
#include "backends/cuda/cuda_resources.h"
#include "backends/cuda/kernel_registry.h"
#include "support/error.h"

#ifdef KILN_CUDA_HAVE_CUDNN
#include "backends/cuda/cudnn_graph.h"
#endif

namespace kiln::cuda {

namespace {

#ifdef KILN_CUDA_HAVE_CUDNN

enum Uid : int64_t { kX = 1, kW = 2, kY = 3, kBias = 4, kConvOut = 5, kBiasOut = 6 };

// Logical N, C, H, W dims and strides of a conv operand (rank 3 means batch
// 1; channels-last operands are N, H, W, C in the IR).
struct Nchw {
  int64_t dims[4];
  int64_t strides[4];
};
Nchw nchw_of(const TensorType& t, bool channels_last) {
  Dims d = t.dims, s = t.strides;
  if (d.size() == 3) {
    d.insert(d.begin(), 1);
    s.insert(s.begin(), numel(t.dims));
  }
  Nchw r;
  const int order[4] = {0, channels_last ? 3 : 1, channels_last ? 1 : 2, channels_last ? 2 : 3};
  for (int i = 0; i < 4; ++i) {
    r.dims[i] = d[static_cast<size_t>(order[i])];
    r.strides[i] = s[static_cast<size_t>(order[i])];
  }
  return r;
}

std::vector<int64_t> pair_attr(const Attrs& attrs, std::string_view name) {
  const std::vector<int64_t>& v = attrs.get_ints(name);
  return v.size() == 1 ? std::vector<int64_t>{v[0], v[0]} : v;
}

bool attr_or(const Node& node, std::string_view name) {
  return node.op->attr_spec(name) != nullptr && node.attrs.get_bool(name);
}

cudnnDataType_t cudnn_type(DType d) {
  return d == DType::f16 ? CUDNN_DATA_HALF : d == DType::bf16 ? CUDNN_DATA_BFLOAT16 : CUDNN_DATA_FLOAT;
}

// A node's execution plans: at 16-byte alignment and at element alignment.
struct Plans {
  CudnnPlan main;
  bool ok = false, fused = false;  // usable; runs the bias and the graph's ReLU too
};
struct ConvPlans {
  Plans aligned, unaligned;
  std::string reason;  // why the last variant failed
};

class ConvKernel final : public CudaKernel {
 public:
  ConvKernel(const Node& node, const LowerContext& ctx)
      : CudaKernel(node, ctx.device), res_(ctx.resources), device_(ctx.device), tf32_(ctx.math.tf32_conv) {
    what_ = str_cat("node '", node.name, "' (", node.op->name, ")");
    const bool channels_last = attr_or(node, "channels_last");
    relu_ = attr_or(node, "relu");
    has_bias_ = node.inputs.size() > 2;
    has_residual_ = node.inputs.size() > 3;  // y's layout (fuse_epilogues)
    graph_relu_ = relu_ && !has_residual_;  // with a residual the ReLU follows the add, in the epilogue kernel
    dtype_ = node.outputs[0]->type.dtype;
    const Nchw y = nchw_of(node.outputs[0]->type, channels_last);
    channels_ = y.dims[1];
    n_ = numel(node.outputs[0]->type.dims);
    channel_stride_ = y.strides[1];
    if (has_bias_) bias_stride_ = node.inputs[2]->type.strides[0];
    handle_ = &cudnn_handle(ctx.device);
    res_->workspace();  // allocated now, never in the call path
  }

  std::string describe() const override {
    return str_cat(CudaKernel::describe(), has_residual_ ? " + residual" : "");
  }

  // Builds the plans; false with *reason when cuDNN has none for this node.
  bool plan(const Node& node, std::string* reason) {
    const bool channels_last = attr_or(node, "channels_last");
    const Nchw x = nchw_of(node.inputs[0]->type, channels_last);
    const Nchw w = nchw_of(node.inputs[1]->type, channels_last);
    const Nchw y = nchw_of(node.outputs[0]->type, channels_last);
    for (const Nchw* t : {&x, &w, &y})
      for (int i = 0; i < 4; ++i)
        if (t->strides[i] <= 0 && t->dims[i] > 1) {
          *reason = "cuDNN needs positive strides (a broadcast operand is not supported)";
          return false;
        }
    // Plans are shared by every node of the same geometry (the partitioner's
    // support check, the lowering, and the repeated blocks of a network), so
    // each is built once per process: finalizing runtime-fusion engines compiles code.
    std::string key = str_cat(device_, " ", dtype_name(dtype_), " bias ", has_bias_, ":", bias_stride_, " relu ",
                              graph_relu_, " tf32 ", tf32_ && dtype_ == DType::f32);
    for (const Nchw* t : {&x, &w, &y})
      key += str_cat(" [", dims_to_string(Dims(t->dims, t->dims + 4)), "]{", dims_to_string(Dims(t->strides, t->strides + 4)), "}");
    for (const char* a : {"stride", "padding", "dilation"}) key += str_cat(" ", a, dims_to_string(pair_attr(node.attrs, a)));
    static std::mutex mutex;
    static std::map<std::string, std::shared_ptr<const ConvPlans>> cache;
    std::lock_guard<std::mutex> lock(mutex);
    auto& slot = cache[key];
    if (!slot) slot = build(node, x, w, y);
    plans_ = slot;
    if (!plans_->aligned.ok && !plans_->unaligned.ok) *reason = plans_->reason;
    return plans_->aligned.ok || plans_->unaligned.ok;
  }

 protected:
  void launch(std::span<const TensorView> in, std::span<const TensorView> out, cudaStream_t s) const override {
    if (n_ == 0) return;
    auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
    bool use_aligned = plans_->aligned.ok && aligned(in[0].data) && aligned(in[1].data) && aligned(out[0].data) &&
                       (!has_bias_ || aligned(in[2].data));
    const Plans& p = use_aligned ? plans_->aligned : plans_->unaligned;
    KILN_CHECK_KIND(runtime, p.ok, what_, ": no cuDNN plan for operands at these addresses");
    std::vector<int64_t> uids = {kX, kW, kY};
    std::vector<void*> ptrs = {in[0].data, in[1].data, out[0].data};
    if (p.fused && has_bias_) {
      uids.push_back(kBias);
      ptrs.push_back(in[2].data);
    }
    execute_plan(*handle_, p.main, uids, ptrs, res_->workspace(), s, what_);
    const bool bias_left = has_bias_ && !p.fused;
    if (!bias_left && !has_residual_ && (p.fused || !relu_)) return;
    BiasActArgs a;
    a.y = out[0].data;
    a.bias = bias_left ? in[2].data : nullptr;
    a.residual = has_residual_ ? in[3].data : nullptr;
    a.dtype = static_cast<int>(dtype_);
    a.n = n_;
    a.channel_stride = channel_stride_;
    a.channels = channels_;
    a.bias_stride = bias_stride_;
    a.act = relu_ ? Activation::relu : Activation::none;
    check_launch(launch_bias_act(a, s));
  }

 private:
  // Fused (bias, ReLU) at 16-byte alignment; then unfused; each also at element
  // alignment. A descriptor cuDNN rejects (an error) makes that variant unusable, not the node.
  std::shared_ptr<const ConvPlans> build(const Node& node, const Nchw& x, const Nchw& w, const Nchw& y) {
    auto plans = std::make_shared<ConvPlans>();
    const bool tensor_cores = dtype_ != DType::f32 || tf32_;  // f32 on tensor cores is TF32 (Note [Math modes])
    auto attempt = [&](int64_t align, bool fused, CudnnPlan* out) {
      try {
        return make(node, x, w, y, align, fused, tensor_cores, out, &plans->reason);
      } catch (const Error& e) {
        plans->reason = e.what();
        return false;
      }
    };
    for (int64_t align : {int64_t{16}, static_cast<int64_t>(dtype_size(dtype_))}) {
      Plans& p = align == 16 ? plans->aligned : plans->unaligned;
      if (has_bias_ || graph_relu_) p.fused = attempt(align, true, &p.main);
      p.ok = p.fused || attempt(align, false, &p.main);
    }
    return plans;
  }

  bool make(const Node& node, const Nchw& x, const Nchw& w, const Nchw& y, int64_t align, bool fused,
            bool tensor_cores, CudnnPlan* out, std::string* reason) {
    const cudnnDataType_t io = cudnn_type(dtype_);
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    const auto stride = pair_attr(node.attrs, "stride"), padding = pair_attr(node.attrs, "padding"),
               dilation = pair_attr(node.attrs, "dilation");
    BackendDescriptor tx = make_tensor(kX, io, x.dims, x.strides, align, false, what_);
    BackendDescriptor tw = make_tensor(kW, io, w.dims, w.strides, align, false, what_);
    BackendDescriptor ty = make_tensor(kY, io, y.dims, y.strides, align, false, what_);
    const bool more = fused && (has_bias_ || graph_relu_);
    // Virtual (f32) intermediates have no pointer; their alignment only has to suit f32.
    const int64_t virtual_align = 16;
    BackendDescriptor tconv =
        more ? make_tensor(kConvOut, f32, y.dims, y.strides, virtual_align, true, what_) : BackendDescriptor();

    BackendDescriptor conv(CUDNN_BACKEND_CONVOLUTION_DESCRIPTOR, what_);
    int64_t spatial = 2;
    cudnnConvolutionMode_t mode = CUDNN_CROSS_CORRELATION;
    conv.set(CUDNN_ATTR_CONVOLUTION_SPATIAL_DIMS, CUDNN_TYPE_INT64, 1, &spatial);
    conv.set(CUDNN_ATTR_CONVOLUTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
    conv.set(CUDNN_ATTR_CONVOLUTION_CONV_MODE, CUDNN_TYPE_CONVOLUTION_MODE, 1, &mode);
    conv.set(CUDNN_ATTR_CONVOLUTION_DILATIONS, CUDNN_TYPE_INT64, 2, dilation.data());
    conv.set(CUDNN_ATTR_CONVOLUTION_FILTER_STRIDES, CUDNN_TYPE_INT64, 2, stride.data());
    conv.set(CUDNN_ATTR_CONVOLUTION_PRE_PADDINGS, CUDNN_TYPE_INT64, 2, padding.data());
    conv.set(CUDNN_ATTR_CONVOLUTION_POST_PADDINGS, CUDNN_TYPE_INT64, 2, padding.data());
    conv.finalize();

    BackendDescriptor op(CUDNN_BACKEND_OPERATION_CONVOLUTION_FORWARD_DESCRIPTOR, what_);
    float alpha = 1, beta = 0;
    op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_X, tx);
    op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_W, tw);
    op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_Y, more ? tconv : ty);
    op.set_desc(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_CONV_DESC, conv);
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_ALPHA, CUDNN_TYPE_FLOAT, 1, &alpha);
    op.set(CUDNN_ATTR_OPERATION_CONVOLUTION_FORWARD_BETA, CUDNN_TYPE_FLOAT, 1, &beta);
    op.finalize();
    std::deque<BackendDescriptor> keep;  // pointwise descriptors and tensors live until the plan is built
    std::vector<const BackendDescriptor*> ops = {&op};
    auto pointwise = [&](cudnnPointwiseMode_t pw_mode, const BackendDescriptor& in, const BackendDescriptor* b,
                         const BackendDescriptor& result) {
      BackendDescriptor pw(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, what_);
      pw.set(CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &pw_mode);
      pw.set(CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &f32);
      pw.finalize();
      BackendDescriptor pop(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, what_);
      pop.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw);
      pop.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_XDESC, in);
      if (b != nullptr) pop.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_BDESC, *b);
      pop.set_desc(CUDNN_ATTR_OPERATION_POINTWISE_YDESC, result);
      pop.finalize();
      keep.push_back(std::move(pw));
      keep.push_back(std::move(pop));
      ops.push_back(&keep.back());
    };
    if (more) {
      // conv -> (+ bias) -> (ReLU) -> y: the last step writes y, the one before a virtual f32 tensor.
      const BackendDescriptor* last = &tconv;
      if (has_bias_) {
        const int64_t bdims[4] = {1, y.dims[1], 1, 1};
        const int64_t bstrides[4] = {y.dims[1] * bias_stride_, bias_stride_, 1, 1};
        keep.push_back(make_tensor(kBias, io, bdims, bstrides, align, false, what_));
        const BackendDescriptor& bias = keep.back();
        if (graph_relu_) {
          keep.push_back(make_tensor(kBiasOut, f32, y.dims, y.strides, virtual_align, true, what_));
          const BackendDescriptor& biased = keep.back();  // pointwise() pushes more onto keep
          pointwise(CUDNN_POINTWISE_ADD, *last, &bias, biased);
          last = &biased;
        } else {
          pointwise(CUDNN_POINTWISE_ADD, *last, &bias, ty);
        }
      }
      if (graph_relu_) pointwise(CUDNN_POINTWISE_RELU_FWD, *last, nullptr, ty);
    }
    return build_plan(*handle_, ops, tensor_cores, static_cast<int64_t>(CudaResources::kWorkspaceBytes), out, reason,
                      what_);
  }

  std::shared_ptr<CudaResources> res_;
  std::string what_;
  CudnnHandle* handle_ = nullptr;
  DType dtype_ = DType::f32;
  bool relu_ = false, has_bias_ = false, has_residual_ = false, graph_relu_ = false;
  int64_t n_ = 0, channels_ = 1, channel_stride_ = 1, bias_stride_ = 1;
  int device_ = 0;
  bool tf32_ = false;  // f32 may use TF32 tensor cores (Note [Math modes])
  std::shared_ptr<const ConvPlans> plans_;
};

std::unique_ptr<BackendKernel> make_conv(const Node& node, const LowerContext& ctx, std::string* reason) {
  const DType d = node.outputs[0]->type.dtype;
  if (d != DType::f32 && d != DType::f16 && d != DType::bf16) {
    *reason = str_cat(node.op->name, " of ", dtype_name(d), " is not supported on CUDA (f16, bf16, f32 are)");
    return nullptr;
  }
  auto kernel = std::make_unique<ConvKernel>(node, ctx);
  if (!kernel->plan(node, reason)) return nullptr;
  return kernel;
}

#else  // no cuDNN in this build

std::unique_ptr<BackendKernel> make_conv(const Node& node, const LowerContext&, std::string* reason) {
  *reason = str_cat(node.op->name, ": this kiln build has no cuDNN (set KILN_CUDA_LIB_HINTS when configuring)");
  return nullptr;
}

#endif

}  // namespace

void register_conv_kernels(KernelMap& map) {
  map["conv2d"] = &make_conv;
  map["conv2d_fused"] = &make_conv;
}

}  // namespace kiln::cuda
