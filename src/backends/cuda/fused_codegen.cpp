// The fused-group source generator (Note [Generated fused kernels] in
// fused_codegen.h). Output is deterministic: it depends only on the body's
// ops, dtypes, literal values and the group's shapes and strides, never on
// names or addresses, so equal groups share one cache entry.
#include "backends/cuda/fused_codegen.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "ir/literal.h"
#include "ops/broadcast.h"
#include "ops/fused_compute.h"
#include "ops/op_def.h"
#include "support/error.h"

namespace kiln::cuda {

namespace {

#include "kiln_scalar_math_text.inc"  // kScalarMathText: ops/scalar_math.h, embedded by CMake

struct DefOp {
  const char* name;
  int arity;
  bool floating_only;
  const char* expr;  // in x, y, z and the compute type C
};

constexpr DefOp kDefOps[] = {
#define KILN_ELEMENTWISE(name, arity, kind, ...) {#name, arity, std::string_view(#kind) == "floating", #__VA_ARGS__},
#include "ops/elementwise.def"
#undef KILN_ELEMENTWISE
};

const DefOp* find_def_op(const std::string& name) {
  for (const DefOp& op : kDefOps)
    if (name == op.name) return &op;
  return nullptr;
}

// The helpers every generated source starts with: conversions between the
// storage dtypes and the compute type, written without CUDA headers (NVRTC
// gets none), with the CUDA backend's rounding rules (device_math.cuh).
constexpr const char* kPrelude = R"(// NVRTC has no <cstdint>: the fixed-width names scalar_math.h may use.
typedef long long int64_t;
typedef unsigned long long uint64_t;
typedef int int32_t;
typedef unsigned int uint32_t;
#include "scalar_math.h"
namespace kiln {
namespace gen {
__device__ __forceinline__ float f16_to_f32(unsigned short h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}
__device__ __forceinline__ unsigned short f32_to_f16(float f) {
  unsigned short h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}
__device__ __forceinline__ float bf16_to_f32(unsigned short h) { return __uint_as_float(((unsigned int)h) << 16); }
__device__ __forceinline__ unsigned short f32_to_bf16(float f) {  // round to nearest even; NaN stays NaN
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}
// Floats to integers like the CPU cast: truncate; NaN and out of range give INT64_MIN.
__device__ __forceinline__ long long to_i64(double d) {
  return (d > -9223372036854775808.0 && d < 9223372036854775808.0) ? (long long)d : (-9223372036854775807LL - 1);
}
__device__ __forceinline__ long long to_i64(float f) { return to_i64((double)f); }
__device__ __forceinline__ long long to_i64(long long v) { return v; }
template <typename T, int N>
struct alignas(sizeof(T) * N) Vec {
  T v[N];
};
)";

const char* storage_type(DType d) {
  switch (d) {
    case DType::f32: return "float";
    case DType::f16: return "unsigned short";
    case DType::bf16: return "unsigned short";
    case DType::f64: return "double";
    case DType::i64: return "long long";
    case DType::i32: return "int";
    case DType::i16: return "short";
    case DType::i8: return "signed char";
    case DType::u8: return "unsigned char";
    case DType::boolean: return "unsigned char";
  }
  return "void";
}

// Generates expressions in compute type `c` ("float", "double", "long long").
struct Emit {
  std::string c;

  std::string load(DType d, const std::string& raw) const {
    switch (d) {
      case DType::f16: return str_cat("static_cast<", c, ">(f16_to_f32(", raw, "))");
      case DType::bf16: return str_cat("static_cast<", c, ">(bf16_to_f32(", raw, "))");
      case DType::boolean: return str_cat("static_cast<", c, ">((", raw, ") != 0)");
      default: return str_cat("static_cast<", c, ">(", raw, ")");
    }
  }
  std::string store(DType d, const std::string& v) const {
    switch (d) {
      case DType::f32: return str_cat("static_cast<float>(", v, ")");
      case DType::f16: return str_cat("f32_to_f16(static_cast<float>(", v, "))");
      case DType::bf16: return str_cat("f32_to_bf16(static_cast<float>(", v, "))");
      case DType::f64: return str_cat("static_cast<double>(", v, ")");
      case DType::i64: return str_cat("to_i64(", v, ")");
      case DType::boolean: return str_cat("static_cast<unsigned char>((", v, ") != static_cast<", c, ">(0))");
      default: return str_cat("static_cast<", storage_type(d), ">(to_i64(", v, "))");
    }
  }
  // v rounded to dtype d and back, as storing and reloading would.
  std::string round(DType d, const std::string& v) const {
    if ((d == DType::f32 && c == "float") || (d == DType::f64 && c == "double") ||
        (d == DType::i64 && c == "long long"))
      return v;
    return load(d, store(d, v));
  }
};

std::string double_literal(double v) {
  if (std::isfinite(v)) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "%a", v);
    return buf;
  }
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(bits));
  char buf[64];
  std::snprintf(buf, sizeof(buf), "__longlong_as_double(0x%016" PRIx64 "LL)", bits);
  return buf;
}

std::string int_literal(int64_t v) {
  if (v == INT64_MIN) return "(-9223372036854775807LL - 1)";
  return str_cat(v, "LL");
}

int64_t literal_int(const Value* lit) {
  const void* p = lit->literal_data.data();
  switch (lit->type.dtype) {
    case DType::i64: return *static_cast<const int64_t*>(p);
    case DType::i32: return *static_cast<const int32_t*>(p);
    case DType::i16: return *static_cast<const int16_t*>(p);
    case DType::i8: return *static_cast<const int8_t*>(p);
    case DType::u8: return *static_cast<const uint8_t*>(p);
    case DType::boolean: return *static_cast<const uint8_t*>(p) != 0;
    default: return static_cast<int64_t>(load_scalar(p, lit->type.dtype));
  }
}

// How one input is read over the output's index space.
struct Access {
  Dims strides;           // broadcast strides over the output dims
  bool scalar = false;    // every element reads offset 0
  bool linear = false;    // offset == index
  bool vector = false;    // the vector kernel reads vec elements with one load
};

// The element offset of index `i` under `strides` over `dims`, as C++ text.
std::string offset_expr(const Dims& dims, const Dims& strides, const std::string& i) {
  std::string out;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (strides[d] == 0 || dims[d] == 1) continue;
    int64_t inner = 1;
    for (size_t e = d + 1; e < dims.size(); ++e) inner *= dims[e];
    std::string t = inner == 1 ? i : str_cat("(", i, " / ", inner, ")");
    if (d != 0) t = str_cat("(", t, " % ", dims[d], ")");
    if (strides[d] != 1) t = str_cat(t, " * ", strides[d]);
    out += (out.empty() ? "" : " + ") + t;
  }
  return out.empty() ? "0" : out;
}

bool is_linear(const Dims& dims, const Dims& strides) {
  int64_t expect = 1;
  for (size_t d = dims.size(); d-- > 0;) {
    if (dims[d] != 1 && strides[d] != expect) return false;
    expect *= dims[d];
  }
  return true;
}

}  // namespace

const char* scalar_math_header_text() { return kScalarMathText; }

std::optional<FusedSource> generate_fused_source(const Node& node, std::string* reason) {
  const auto compute = fused_compute_type(node, reason);
  if (!compute) return std::nullopt;
  const Graph& body = *node.body;
  const Dims& dims = node.outputs[0]->type.dims;
  const bool f64 = *compute == FusedCompute::f64, floating = *compute != FusedCompute::i64;
  const Emit e{f64 ? "double" : floating ? "float" : "long long"};
  const bool integral_compute = !floating;

  FusedSource out;
  out.numel = numel(dims);
  const size_t num_in = node.inputs.size(), num_out = node.outputs.size();

  // Accesses and the vector width: 16 bytes of the widest non-scalar operand.
  std::vector<Access> access(num_in);
  size_t widest = 1;
  for (size_t k = 0; k < num_in; ++k) {
    const TensorType& t = node.inputs[k]->type;
    Access& a = access[k];
    a.strides = broadcast_strides(t, dims);
    a.scalar = offset_expr(dims, a.strides, "i") == "0";
    a.linear = !a.scalar && is_linear(dims, a.strides);
    if (!a.scalar) widest = std::max(widest, dtype_size(t.dtype));
  }
  for (const Value* v : node.outputs) widest = std::max(widest, dtype_size(v->type.dtype));
  int vec = static_cast<int>(std::min<size_t>(8, 16 / widest));
  while (vec > 1 && (out.numel == 0 || out.numel % vec != 0)) vec /= 2;
  out.vec = vec;
  for (size_t k = 0; k < num_in && vec > 1; ++k) {
    Access& a = access[k];
    if (a.scalar) continue;
    bool rows = !dims.empty() && a.strides.back() == 1 && dims.back() % vec == 0;
    for (size_t d = 0; rows && d + 1 < dims.size(); ++d) rows = a.strides[d] % vec == 0 || dims[d] == 1;
    a.vector = a.linear || rows;
  }
  for (size_t k = 0; k < num_in; ++k)
    out.vec_alignment.push_back(access[k].vector ? vec * static_cast<int>(dtype_size(node.inputs[k]->type.dtype)) : 0);
  for (const Value* v : node.outputs)
    out.vec_alignment.push_back(vec > 1 ? vec * static_cast<int>(dtype_size(v->type.dtype)) : 0);

  // 32-bit indices when every index and offset fits.
  int64_t largest = out.numel;
  for (size_t k = 0; k < num_in; ++k) {
    int64_t span = 0;
    for (size_t d = 0; d < dims.size(); ++d) {
      if (access[k].strides[d] < 0) largest = INT64_MAX;
      span += (dims[d] - 1) * std::max<int64_t>(access[k].strides[d], 0);
    }
    largest = std::max(largest, span + 1);
  }
  const char* index_type = largest < (int64_t{1} << 31) - 1024 ? "unsigned int" : "long long";

  std::ostringstream src;
  src << "// kiln fused group: " << body.nodes().size() << " ops over [" << dims_to_string(dims) << "] ("
      << out.numel << " elements), compute " << e.c << "\n";
  src << kPrelude;
  src << "typedef " << e.c << " C;\n";
  src << "typedef " << index_type << " I;\n";
  src << "struct Args {\n  void* p[" << num_in + num_out << "];\n};\n";

  // One function per distinct op, from elementwise.def.
  std::unordered_map<std::string, bool> emitted;
  for (const Node* n : body.nodes()) {
    const std::string& name = n->op->name;
    if (n->outputs.size() != 1 || n->outputs[0]->type.dims != dims) {
      *reason = str_cat("body node '", n->name, "' does not produce the group's dims [", dims_to_string(dims), "]");
      return std::nullopt;
    }
    if (name == "cast") {
      if (n->inputs.size() != 1) {
        *reason = str_cat("body node '", n->name, "': cast takes one input");
        return std::nullopt;
      }
      continue;
    }
    const DefOp* def = n->op->elementwise ? find_def_op(name) : nullptr;
    if (def == nullptr || n->inputs.size() != static_cast<size_t>(def->arity) || (integral_compute && def->floating_only)) {
      *reason = str_cat("body node '", n->name, "' (", name, ") is not an elementwise op the generator can express");
      return std::nullopt;
    }
    if (emitted.emplace(name, true).second)
      src << "__device__ __forceinline__ C op_" << name << "(C x, C y, C z) { return static_cast<C>(" << def->expr
          << "); }\n";
  }

  // The body: values named by slot.
  std::unordered_map<const Value*, std::string> name_of;
  src << "struct Result {\n  C o[" << num_out << "];\n};\n";
  src << "__device__ __forceinline__ Result eval(";
  for (size_t k = 0; k < num_in; ++k) {
    name_of[body.inputs()[k]] = str_cat("v", k);
    src << (k ? ", " : "") << "C v" << k;
  }
  src << ") {\n";
  int lit_index = 0;
  for (const Value* lit : body.literals()) {
    if (lit->type.numel() != 1) {
      *reason = str_cat("fused body literal %", lit->name, " is not a scalar");
      return std::nullopt;
    }
    std::string value = integral_compute ? int_literal(literal_int(lit))
                                         : double_literal(load_scalar(lit->literal_data.data(), lit->type.dtype));
    std::string nm = str_cat("l", lit_index++);
    src << "  const C " << nm << " = static_cast<C>(" << value << ");\n";
    name_of[lit] = nm;
  }
  int step = 0;
  for (const Node* n : body.nodes()) {
    std::vector<std::string> args;
    for (const Value* v : n->inputs) {
      auto it = name_of.find(v);
      if (it == name_of.end()) {
        *reason = str_cat("body node '", n->name, "' reads a value defined outside the body");
        return std::nullopt;
      }
      args.push_back(it->second);
    }
    while (args.size() < 3) args.push_back("static_cast<C>(0)");
    std::string expr = n->op->name == "cast" ? args[0]
                                             : str_cat("op_", n->op->name, "(", args[0], ", ", args[1], ", ", args[2], ")");
    std::string nm = str_cat("s", step++);
    src << "  const C " << nm << " = " << e.round(n->outputs[0]->type.dtype, expr) << ";  // " << n->op->name << " -> "
        << dtype_name(n->outputs[0]->type.dtype) << "\n";
    name_of[n->outputs[0]] = nm;
  }
  src << "  Result r;\n";
  for (size_t k = 0; k < num_out; ++k) {
    auto it = name_of.find(body.outputs()[k]);
    if (it == name_of.end()) {
      *reason = "fused body output is not defined in the body";
      return std::nullopt;
    }
    src << "  r.o[" << k << "] = " << it->second << ";\n";
  }
  src << "  return r;\n}\n";

  auto in_ptr = [&](size_t k) {
    return str_cat("static_cast<const ", storage_type(node.inputs[k]->type.dtype), "*>(a.p[", k, "])");
  };
  auto out_ptr = [&](size_t k) {
    return str_cat("static_cast<", storage_type(node.outputs[k]->type.dtype), "*>(a.p[", num_in + k, "])");
  };
  auto element_load = [&](size_t k, const std::string& i) {
    const Access& a = access[k];
    std::string off = a.scalar ? "0" : a.linear ? i : offset_expr(dims, a.strides, i);
    return e.load(node.inputs[k]->type.dtype, str_cat(in_ptr(k), "[", off, "]"));
  };
  auto eval_call = [&](const std::vector<std::string>& vals) {
    std::string s = "eval(";
    for (size_t k = 0; k < vals.size(); ++k) s += (k ? ", " : "") + vals[k];
    return s + ")";
  };

  // The scalar kernel: one element per thread, grid-stride.
  src << "}  // namespace gen\n}  // namespace kiln\n";
  src << "using namespace kiln::gen;\n";
  src << "extern \"C\" __global__ void __launch_bounds__(" << kFusedThreads << ") " << kFusedScalarKernel
      << "(const Args a) {\n";
  src << "  const I n = " << out.numel << ";\n";
  src << "  for (I i = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += static_cast<I>(gridDim.x) * "
         "blockDim.x) {\n";
  {
    std::vector<std::string> vals;
    for (size_t k = 0; k < num_in; ++k) vals.push_back(element_load(k, "i"));
    src << "    const Result r = " << eval_call(vals) << ";\n";
    for (size_t k = 0; k < num_out; ++k)
      src << "    " << out_ptr(k) << "[i] = " << e.store(node.outputs[k]->type.dtype, str_cat("r.o[", k, "]")) << ";\n";
  }
  src << "  }\n}\n";

  // The vector kernel: vec consecutive elements per thread.
  if (vec > 1) {
    src << "extern \"C\" __global__ void __launch_bounds__(" << kFusedThreads << ") " << kFusedVectorKernel
        << "(const Args a) {\n";
    src << "  const I count = " << out.numel / vec << ";\n";
    src << "  for (I t = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; t < count; t += "
           "static_cast<I>(gridDim.x) * blockDim.x) {\n";
    src << "    const I i0 = t * " << vec << ";\n";
    for (size_t k = 0; k < num_in; ++k) {
      if (!access[k].vector) continue;
      const char* st = storage_type(node.inputs[k]->type.dtype);
      std::string off = access[k].linear ? "i0" : offset_expr(dims, access[k].strides, "i0");
      src << "    const Vec<" << st << ", " << vec << "> x" << k << " = *reinterpret_cast<const Vec<" << st << ", " << vec
          << ">*>(" << in_ptr(k) << " + " << off << ");\n";
    }
    for (size_t k = 0; k < num_out; ++k)
      src << "    Vec<" << storage_type(node.outputs[k]->type.dtype) << ", " << vec << "> y" << k << ";\n";
    src << "#pragma unroll\n    for (int j = 0; j < " << vec << "; ++j) {\n";
    src << "      const I i = i0 + j;\n";
    std::vector<std::string> vals;
    for (size_t k = 0; k < num_in; ++k)
      vals.push_back(access[k].vector ? e.load(node.inputs[k]->type.dtype, str_cat("x", k, ".v[j]"))
                                      : element_load(k, "i"));
    src << "      const Result r = " << eval_call(vals) << ";\n";
    for (size_t k = 0; k < num_out; ++k)
      src << "      y" << k << ".v[j] = " << e.store(node.outputs[k]->type.dtype, str_cat("r.o[", k, "]")) << ";\n";
    src << "    }\n";
    for (size_t k = 0; k < num_out; ++k) {
      const char* st = storage_type(node.outputs[k]->type.dtype);
      src << "    *reinterpret_cast<Vec<" << st << ", " << vec << ">*>(" << out_ptr(k) << " + i0) = y" << k << ";\n";
    }
    src << "  }\n}\n";
  }
  out.source = src.str();
  return out;
}

}  // namespace kiln::cuda
