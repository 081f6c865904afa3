// The fused-group source generator (backends/cuda/fused_codegen.h): the text
// is deterministic, independent of value names, carries each op's math from
// elementwise.def, reads broadcast and strided operands through their
// strides, rounds half-precision steps, and compiles with NVRTC for sm_90
// (when NVRTC is present; no GPU needed).
#include <gtest/gtest.h>

#include <cmath>

#include "backends/cuda/fused_codegen.h"
#include "backends/cuda/nvrtc_compiler.h"
#include "ir/parser.h"
#include "support/error.h"
#include "ops/op_def.h"

namespace kiln::cuda {
namespace {

const Node& fused_node(const Graph& g) {
  for (const Node* n : g.nodes())
    if (n->op->name == "fused") return *n;
  throw std::runtime_error("no fused node");
}

FusedSource generate(const std::string& text) {
  auto g = parse_graph(text);
  std::string why;
  auto src = generate_fused_source(fused_node(*g), &why);
  EXPECT_TRUE(src.has_value()) << why;
  return src.value_or(FusedSource{});
}

const char* kChain = R"(graph {
  input %x : f32[4,8]
  input %bias : f32[8]
  %t, %g = fused(%x, %bias) : f32[4,8], f32[4,8] {
    input %x : f32[4,8]
    input %bias : f32[8]
    literal %half : f32[] = [0.5]
    %a = add(%x, %bias) : f32[4,8]
    %t = tanh(%a) : f32[4,8]
    %g = mul(%t, %half) : f32[4,8]
    return %t, %g
  }
  return %t, %g
})";

TEST(FusedCodegen, DeterministicWithTheOpsMath) {
  FusedSource a = generate(kChain), b = generate(kChain);
  EXPECT_EQ(a.source, b.source);
  EXPECT_NE(a.source.find("#include \"scalar_math.h\""), std::string::npos);
  EXPECT_NE(a.source.find("op_add(C x, C y, C z) { return static_cast<C>(x + y); }"), std::string::npos) << a.source;
  EXPECT_NE(a.source.find("sm::k_tanh(x)"), std::string::npos);
  EXPECT_NE(a.source.find("static_cast<C>(0x1p-1)"), std::string::npos);  // the literal 0.5, exactly
  EXPECT_EQ(a.numel, 32);
  EXPECT_EQ(a.vec, 4);
  // x is contiguous (read at i), bias broadcasts along rows (read at i % 8, vector-loaded per row).
  EXPECT_NE(a.source.find("a.p[0])[i]"), std::string::npos) << a.source;
  EXPECT_NE(a.source.find("a.p[1])[(i % 8)]"), std::string::npos) << a.source;
  EXPECT_EQ(a.vec_alignment, (std::vector<int>{16, 16, 16, 16}));
  EXPECT_NE(a.source.find(kFusedVectorKernel), std::string::npos);
}

TEST(FusedCodegen, IndependentOfValueNames) {
  std::string renamed = kChain;
  for (auto [from, to] : {std::pair{"%bias", "%b0"}, {"%half", "%h0"}, {"%a ", "%zz "}, {"%a)", "%zz)"}}) {
    for (size_t at = renamed.find(from); at != std::string::npos; at = renamed.find(from, at + 1))
      renamed.replace(at, std::string(from).size(), to);
  }
  EXPECT_EQ(generate(kChain).source, generate(renamed).source);
}

TEST(FusedCodegen, HalfStepsAreRoundedAndStridedReadsUseStrides) {
  FusedSource s = generate(R"(graph {
  input %x : f16[4,6]{1,4}
  input %y : f16[4,6]
  %o = fused(%x, %y) : f16[4,6] {
    input %x : f16[4,6]{1,4}
    input %y : f16[4,6]
    %m = mul(%x, %y) : f16[4,6]
    %o = relu(%m) : f16[4,6]
    return %o
  }
  return %o
})");
  EXPECT_NE(s.source.find("typedef float C;"), std::string::npos);
  // Each step is rounded to f16 and back, as the ops run one by one would.
  EXPECT_NE(s.source.find("f16_to_f32(f32_to_f16(static_cast<float>(op_mul("), std::string::npos) << s.source;
  // The transposed x: element (r, c) sits at r + 4 c.
  EXPECT_NE(s.source.find("a.p[0])[(i / 6) + (i % 6) * 4]"), std::string::npos) << s.source;
  EXPECT_EQ(s.vec, 8);
  EXPECT_EQ(s.vec_alignment[0], 0);   // x: element by element
  EXPECT_EQ(s.vec_alignment[1], 16);  // y: 8 halves per load
}

TEST(FusedCodegen, IntegerGroupsComputeInInt64AndOddSizesHaveNoVectorKernel) {
  FusedSource s = generate(R"(graph {
  input %x : i32[7]
  %o = fused(%x) : i32[7] {
    input %x : i32[7]
    literal %k : i32[] = [-3]
    %o = maximum(%x, %k) : i32[7]
    return %o
  }
  return %o
})");
  EXPECT_NE(s.source.find("typedef long long C;"), std::string::npos);
  EXPECT_NE(s.source.find("static_cast<C>(-3LL)"), std::string::npos);
  EXPECT_EQ(s.vec, 1);
  EXPECT_EQ(s.source.find(kFusedVectorKernel), std::string::npos);
}

TEST(FusedCodegen, RefusesMixedIntegerAndFloatingBodies) {
  auto g = parse_graph(R"(graph {
  input %x : i32[4]
  %o = fused(%x) : f32[4] {
    input %x : i32[4]
    %o = cast(%x) {dtype=f32} : f32[4]
    return %o
  }
  return %o
})");
  std::string why;
  EXPECT_FALSE(generate_fused_source(fused_node(*g), &why).has_value());
  EXPECT_NE(why.find("mixes integer and floating"), std::string::npos) << why;
}

TEST(FusedCodegen, CompilesWithNvrtcForSm90) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  const int64_t before = nvrtc_compile_count();
  for (const char* text : {kChain}) {
    FusedSource s = generate(text);
    std::string cubin =
        nvrtc_compile_cubin(s.source, {{kScalarMathHeaderName, scalar_math_header_text()}}, 90, "test_fused.cu");
    ASSERT_GT(cubin.size(), 4u);
    EXPECT_EQ(cubin.substr(0, 4), std::string("\x7f" "ELF"));
  }
  EXPECT_EQ(nvrtc_compile_count(), before + 1);
}

// A group holding every elementwise op of elementwise.def that applies to
// `dtype` (floating-only ops skipped for integers), each result an output.
std::unique_ptr<Graph> every_op_group(DType dtype) {
  const Dims dims = {3, 64};
  auto body = std::make_shared<Graph>();
  Value* x = body->add_input("x", TensorType(dtype, dims));
  Value* y = body->add_input("y", TensorType(dtype, {64}));
  Value* z = body->add_input("z", TensorType(dtype, dims));
  Value* c = body->add_input("c", TensorType(DType::boolean, dims));
  std::vector<Value*> outs;
  for (const OpDef* op : all_ops()) {
    if (!op->elementwise) continue;
    const ElementwiseKind kind = op->elementwise->kind;
    if (is_integral(dtype) && kind == ElementwiseKind::floating) continue;
    std::vector<Value*> ins = kind == ElementwiseKind::select ? std::vector<Value*>{c, x, z}
                                                              : std::vector<Value*>{x, y, z};
    ins.resize(static_cast<size_t>(op->elementwise->arity));
    outs.push_back(body->add_node(*op, ins)->outputs[0]);
  }
  if (!is_integral(dtype))  // a non-finite literal
    outs.push_back(body->add_node(get_op("maximum"), {x, body->add_scalar(-INFINITY, dtype)})->outputs[0]);
  Attrs cast;
  cast.set("dtype", is_integral(dtype) ? DType::i64 : DType::f32);
  outs.push_back(body->add_node(get_op("cast"), {x}, cast)->outputs[0]);
  body->set_outputs(outs);
  auto g = std::make_unique<Graph>();
  std::vector<Value*> ins;
  for (const Value* v : body->inputs()) ins.push_back(g->add_input(v->name, v->type));
  std::vector<TensorType> types;
  std::vector<std::string> names;
  for (const Value* v : outs) {
    types.push_back(v->type);
    names.push_back(v->name + "_out");
  }
  Node* fused = g->add_node_typed(get_op("fused"), ins, Attrs(), types, names);
  fused->body = std::move(body);
  g->set_outputs(fused->outputs);
  return g;
}

TEST(FusedCodegen, EveryElementwiseOpCompilesInEveryComputeType) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  for (DType d : {DType::f16, DType::bf16, DType::f64, DType::i32}) {
    auto g = every_op_group(d);
    auto src = generate_fused_source(fused_node(*g), &why);
    ASSERT_TRUE(src.has_value()) << dtype_name(d) << ": " << why;
    EXPECT_NO_THROW(nvrtc_compile_cubin(src->source, {{kScalarMathHeaderName, scalar_math_header_text()}}, 90,
                                        str_cat("every_op_", dtype_name(d), ".cu")))
        << dtype_name(d);
  }
}

TEST(FusedCodegen, NvrtcErrorsCarryTheLog) {
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << why;
  try {
    nvrtc_compile_cubin("extern \"C\" __global__ void k() { undefined_thing(); }", {}, 90, "broken.cu");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("undefined_thing"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace kiln::cuda
