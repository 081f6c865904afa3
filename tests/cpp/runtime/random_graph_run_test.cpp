// Runs hundreds of random elementwise graphs with views through the
// Executable, as built and after the pass pipeline (folds of a literal's
// views, fusion), and compares every output with a naive interpreter that
// gives each value its own storage. A planner, binding or pass bug (two live
// values sharing bytes, a wrong view offset, a missing output copy, a view
// left with stale strides) shows up as a wrong number here.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <memory>
#include <random>

#include "../memory/random_graphs.h"
#include "ir/literal.h"
#include "ops/op_def.h"
#include "ops/view_offset.h"
#include "passes/pass.h"
#include "runtime/executable.h"

namespace kiln {
namespace {

// A value in the reference: shared storage, a strided type and an offset.
struct Ref {
  std::shared_ptr<std::vector<double>> data;
  TensorType type;
  int64_t offset = 0;
};

double apply(const std::string& op, double x, double y) {
  auto f = [](double v) { return static_cast<double>(static_cast<float>(v)); };  // f32 rounding
  if (op == "relu") return x > 0 ? x : 0;
  if (op == "neg") return -x;
  if (op == "abs") return std::fabs(x);
  if (op == "tanh") return f(std::tanh(x));
  if (op == "sigmoid") return f(1.0 / (1.0 + std::exp(-x)));
  if (op == "sin") return f(std::sin(x));
  if (op == "add") return f(x + y);
  if (op == "sub") return f(x - y);
  if (op == "mul") return f(x * y);
  if (op == "maximum") return std::max(x, y);
  if (op == "minimum") return std::min(x, y);
  ADD_FAILURE() << "reference has no op " << op;
  return 0;
}

// Element `index` (over `out_dims`, row-major) of `t` broadcast to `out_dims`.
double read(const Ref& t, const Dims& out_dims, int64_t index) {
  int64_t pos = t.offset;
  const size_t lead = out_dims.size() - t.type.rank();
  for (size_t d = out_dims.size(); d-- > 0;) {
    int64_t i = out_dims[d] ? index % out_dims[d] : 0;
    index = out_dims[d] ? index / out_dims[d] : 0;
    if (d >= lead && t.type.dims[d - lead] != 1) pos += i * t.type.strides[d - lead];
  }
  return (*t.data)[static_cast<size_t>(pos)];
}

Ref dense(const TensorType& type, std::vector<double> values) {
  return Ref{std::make_shared<std::vector<double>>(std::move(values)), type, 0};
}

TEST(ExecutableRandom, MatchesANaiveInterpreter) {
  int runs = 0, outputs_checked = 0;
  for (uint32_t seed = 0; seed < 250; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::unique_ptr<Graph> g = test::random_graph(seed, true);
    std::mt19937 rng(seed * 7919u + 1);
    std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
    auto random_data = [&](const TensorType& t) {
      std::vector<float> v(static_cast<size_t>(t.storage_bytes() / 4 + 1));
      for (float& x : v) x = dist(rng);
      return v;
    };

    std::map<const Value*, Ref> ref;
    std::vector<std::vector<float>> input_data;
    for (const Value* in : g->inputs()) {
      input_data.push_back(random_data(in->type));
      ref[in] = Ref{std::make_shared<std::vector<double>>(input_data.back().begin(), input_data.back().end()),
                    in->type, 0};
    }
    std::vector<float> weight_data;
    for (const Value* w : g->weights()) {
      weight_data = random_data(w->type);
      ref[w] = Ref{std::make_shared<std::vector<double>>(weight_data.begin(), weight_data.end()), w->type, 0};
    }
    for (const Value* l : g->literals()) {
      std::vector<double> values(static_cast<size_t>(l->type.numel()));
      for (size_t i = 0; i < values.size(); ++i) values[i] = load_scalar(l->literal_data.data() + i * 4, DType::f32);
      ref[l] = dense(l->type, std::move(values));
    }
    double scale = 1;
    for (const Node* node : g->nodes()) {
      const Value* out = node->outputs[0];
      if (node->op->has(kView)) {
        const Ref& src = ref.at(node->inputs[0]);
        ref[out] = Ref{src.data, out->type, src.offset + view_offset(*node)};
        continue;
      }
      std::vector<double> values(static_cast<size_t>(out->type.numel()));
      for (int64_t i = 0; i < out->type.numel(); ++i) {
        double x = read(ref.at(node->inputs[0]), out->type.dims, i);
        double y = node->inputs.size() > 1 ? read(ref.at(node->inputs[1]), out->type.dims, i) : 0;
        values[static_cast<size_t>(i)] = apply(node->op->name, x, y);
        scale = std::max(scale, std::fabs(values[static_cast<size_t>(i)]));
      }
      ref[out] = dense(out->type, std::move(values));
    }

    for (bool optimized : {false, true}) {
      SCOPED_TRACE(optimized ? "after the pipeline" : "as built");
      std::unique_ptr<Graph> compiled = g->clone();
      if (optimized) run_pipeline(*compiled);
      Executable exe(*compiled);
      if (!compiled->weights().empty())  // the pipeline drops a weight nothing reads
        exe.bind_weight("layer.w", TensorView(weight_data.data(), g->weights()[0]->type));
      std::vector<TensorView> ins;
      for (size_t k = 0; k < g->inputs().size(); ++k) ins.emplace_back(input_data[k].data(), g->inputs()[k]->type);
      std::vector<TensorType> out_types = exe.output_types();
      // Two calls into different buffers: both must hold the full answer.
      for (int call = 0; call < 2; ++call) {
        std::vector<std::vector<float>> out_data;
        std::vector<TensorView> outs;
        for (const TensorType& t : out_types) out_data.emplace_back(static_cast<size_t>(t.numel()), NAN);
        for (size_t k = 0; k < out_types.size(); ++k) outs.emplace_back(out_data[k].data(), out_types[k]);
        exe.run(ins, outs);
        ++runs;
        for (size_t k = 0; k < out_types.size(); ++k) {
          const Ref& expect = ref.at(g->outputs()[k]);
          for (int64_t i = 0; i < out_types[k].numel(); ++i) {
            double want = read(expect, out_types[k].dims, i);
            ASSERT_NEAR(out_data[k][static_cast<size_t>(i)], want, 1e-4 * scale)
                << "output " << k << " (%" << g->outputs()[k]->name << ") element " << i << ", call " << call;
          }
          ++outputs_checked;
        }
      }
    }
  }
  EXPECT_EQ(runs, 1000);
  EXPECT_GT(outputs_checked, 1000);
}

}  // namespace
}  // namespace kiln
