// kiln._kiln: the nanobind extension's module. It exposes graph building (ops
// and ATen calls through the GraphBuilder), the IR text form, compilation into
// an Executable (whose calls are bound in executable_bindings.cpp), saved
// programs and weight folds. python/bindings.h lists what the files share.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/string_view.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <memory>
#include <mutex>

#include "backends/cpu/cpu_kernel.h"
#include "builder/aten_call.h"
#include "builder/graph_builder.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "ops/cuda_kernels.h"
#include "ops/op_def.h"
#include "passes/pass.h"
#include "passes/passes.h"
#include "passes/weight_folds.h"
#include "python/bindings.h"
#include "runtime/backend.h"
#include "runtime/artifact_reader.h"
#include "runtime/allocator.h"
#include "runtime/artifact_writer.h"
#include "runtime/executable.h"
#include "runtime/support_cache.h"
#include "support/error.h"

namespace nb = nanobind;
using namespace kiln;

namespace {

// ---- graphs -----------------------------------------------------------------

struct GraphState {
  std::unique_ptr<Graph> graph;
  GraphBuilder builder;
  explicit GraphState(std::unique_ptr<Graph> g) : graph(std::move(g)), builder(*graph) {}
};

// The Python Graph: shares its state with every Value handle it returned, so a
// Value never outlives the graph that owns it.
struct PyGraph {
  std::shared_ptr<GraphState> state;
  Graph* graph;
  GraphBuilder& builder;
  explicit PyGraph(std::unique_ptr<Graph> g = nullptr)
      : state(std::make_shared<GraphState>(g ? std::move(g) : std::make_unique<Graph>())),
        graph(state->graph.get()),
        builder(state->builder) {}
};

struct PyValue {
  Value* v;
  std::shared_ptr<GraphState> owner;
};

DType to_dtype(const std::string& name) {
  auto d = parse_dtype(name);
  KILN_CHECK(d.has_value(), "unknown dtype '", name, "' (valid: f32, f16, bf16, f64, i64, i32, i16, i8, u8, bool)");
  return *d;
}

TensorType make_type(const std::string& dtype, const Dims& dims, const std::optional<Dims>& strides) {
  for (int64_t d : dims) KILN_CHECK(d >= 0, "negative dimension ", d, " in [", dims_to_string(dims), "]");
  if (!strides) return TensorType(to_dtype(dtype), dims);
  KILN_CHECK(strides->size() == dims.size(), "strides [", dims_to_string(*strides), "] do not match dims [",
             dims_to_string(dims), "]");
  return TensorType(to_dtype(dtype), dims, *strides);
}

// Python attribute values to AttrValue: int, float, bool, str, list of ints, dtype name via DType.
AttrValue to_attr(const std::string& name, nb::handle h) {
  if (nb::isinstance<nb::bool_>(h)) return nb::cast<bool>(h);
  if (nb::isinstance<nb::int_>(h)) return nb::cast<int64_t>(h);
  if (nb::isinstance<nb::float_>(h)) return nb::cast<double>(h);
  if (nb::isinstance<nb::str>(h)) return nb::cast<std::string>(h);
  if (nb::isinstance<DType>(h)) return nb::cast<DType>(h);
  if (nb::isinstance<nb::list>(h) || nb::isinstance<nb::tuple>(h)) {
    std::vector<int64_t> out;
    for (nb::handle x : h) {
      KILN_CHECK(nb::isinstance<nb::int_>(x) && !nb::isinstance<nb::bool_>(x), "attribute '", name,
                 "': lists must hold ints");
      out.push_back(nb::cast<int64_t>(x));
    }
    return out;
  }
  fail(ErrorKind::invalid_argument, "attribute '", name, "' has unsupported type ",
       nb::cast<std::string>(nb::str(h.type())));
}

Attrs to_attrs(const nb::dict& d) {
  Attrs a;
  for (auto [k, v] : d) a.set(nb::cast<std::string>(k), to_attr(nb::cast<std::string>(k), v));
  return a;
}

// ATen arguments: None, tensors (PyValue), lists of tensors, numbers, bools,
// int lists, float lists, strings and DType.
Value* own(const std::shared_ptr<GraphState>& state, const PyValue& p) {
  KILN_CHECK(p.owner == state, "value %", p.v->name, " belongs to another graph");
  return p.v;
}

AtenArg to_aten_arg(const std::shared_ptr<GraphState>& state, const std::string& name, nb::handle h) {
  if (h.is_none()) return std::monostate{};
  if (nb::isinstance<PyValue>(h)) return own(state, nb::cast<PyValue&>(h));
  if (nb::isinstance<nb::bool_>(h)) return nb::cast<bool>(h);
  if (nb::isinstance<nb::int_>(h)) return nb::cast<int64_t>(h);
  if (nb::isinstance<nb::float_>(h)) return nb::cast<double>(h);
  if (nb::isinstance<nb::str>(h)) return nb::cast<std::string>(h);
  if (nb::isinstance<DType>(h)) return nb::cast<DType>(h);
  if (nb::isinstance<nb::list>(h) || nb::isinstance<nb::tuple>(h)) {
    std::vector<Value*> values;
    std::vector<int64_t> ints;
    std::vector<double> floats;
    size_t n = 0;
    for (nb::handle x : h) {
      ++n;
      if (nb::isinstance<PyValue>(x)) {
        values.push_back(own(state, nb::cast<PyValue&>(x)));
      } else if (x.is_none()) {
        values.push_back(nullptr);  // Tensor?[] (aten.index's indices): AtenCall::opt_tensors
      } else if (nb::isinstance<nb::int_>(x) && !nb::isinstance<nb::bool_>(x)) {
        ints.push_back(nb::cast<int64_t>(x));
        floats.push_back(static_cast<double>(ints.back()));
      } else if (nb::isinstance<nb::float_>(x)) {
        floats.push_back(nb::cast<double>(x));
      } else {
        fail(ErrorKind::unsupported, "argument '", name, "': list element of type ",
             nb::cast<std::string>(nb::str(x.type())), " is not supported");
      }
    }
    if (values.size() == n && n > 0 && std::any_of(values.begin(), values.end(), [](Value* v) { return v != nullptr; }))
      return values;
    if (ints.size() == n) return ints;
    if (floats.size() == n) return floats;
    fail(ErrorKind::unsupported, "argument '", name, "': mixed list");
  }
  fail(ErrorKind::unsupported, "argument '", name, "' of type ", nb::cast<std::string>(nb::str(h.type())),
       " is not supported");
}

nb::list wrap_values(const PyGraph& g, const std::vector<Value*>& vs) {
  nb::list out;
  for (Value* v : vs) {
    if (v == nullptr)
      out.append(nb::none());
    else
      out.append(nb::cast(PyValue{v, g.state}));
  }
  return out;
}

std::string_view kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::input: return "input";
    case ValueKind::weight: return "weight";
    case ValueKind::literal: return "literal";
    case ValueKind::output: return "output";
  }
  return "?";
}

Device parse_device(const std::string& s) {
  if (s == "cpu") return Device{DeviceKind::cpu, 0};
  if (s == "cuda") return Device{DeviceKind::cuda, 0};
  if (s.rfind("cuda:", 0) == 0) {
    try {
      return Device{DeviceKind::cuda, std::stoi(s.substr(5))};
    } catch (...) {
    }
  }
  fail(ErrorKind::invalid_argument, "unknown device '", s, "' (expected cpu, cuda or cuda:N)");
}

// One backend per device, kept for support queries during import.
const Backend& backend_for(Device d) {
  static std::mutex mutex;
  static std::map<std::pair<int, int>, std::unique_ptr<Backend>> cache;
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[{static_cast<int>(d.kind), d.index}];
  if (!slot) slot = make_backend(d);
  return *slot;
}

}  // namespace

// ---- compile ----------------------------------------------------------------

namespace {

void bind_compile(nb::module_& m) {
  m.def(
      "compile",
      [](PyGraph& g, const std::string& device, bool optimize, nb::object allocator, bool cuda_graphs, bool tf32_matmul,
         bool tf32_conv, const std::string& new_addresses) {
        KILN_CHECK(new_addresses == "choose" || new_addresses == "update" || new_addresses == "slots",
                   "compile: unknown new_addresses '", new_addresses, "' (valid: choose, update, slots)");
        std::unique_ptr<Graph> graph = g.graph->clone();
        verify_graph(*graph);
        if (optimize) run_pipeline(*graph);
        const Device dev = parse_device(device);
        ExecutableOptions options;
        options.cuda_graphs = cuda_graphs;
        options.new_addresses = new_addresses == "update"  ? NewAddresses::update
                                : new_addresses == "slots" ? NewAddresses::slots
                                                           : NewAddresses::choose;
        options.math = MathOptions{tf32_matmul, tf32_conv};
        if (!allocator.is_none()) options.allocator = python::python_allocator(dev, allocator);
        return new Executable(std::move(graph), dev, std::move(options));
      },
      nb::arg("graph"), nb::arg("device") = "cpu", nb::arg("optimize") = true, nb::arg("allocator") = nb::none(),
      nb::arg("cuda_graphs") = true, nb::arg("tf32_matmul") = false, nb::arg("tf32_conv") = false,
      nb::arg("new_addresses") = "choose",
      "Optimizes a copy of `graph` and compiles it into an Executable for `device`. `allocator`, if given, is "
      "called as allocator(nbytes, alignment) -> (address, owner) for the executable's device memory (the arena, "
      "literals); kiln keeps `owner` alive until it frees that memory. `cuda_graphs` replays CUDA calls as graphs. "
      "`tf32_matmul` and `tf32_conv` let f32 matrix products and convolutions use TF32 tensor cores on CUDA. "
      "`new_addresses` (choose, update, slots): what a call at addresses no kept CUDA graph has does.");
}

}  // namespace

// ---- artifacts: save and load (python/kiln/artifacts.py) ---------------------

namespace {

void bind_artifacts(nb::module_& m) {
  nb::class_<LoadedProgram>(m, "LoadedProgram")
      .def("executable", [](LoadedProgram& p) -> Executable& { return p.executable(); },
           nb::rv_policy::reference_internal, "The program's Executable (kept alive by this object).")
      .def("weights",
           [](const LoadedProgram& p) {
             nb::list out;
             for (const ArtifactWeight& w : p.artifact().weights())
               out.append(nb::make_tuple(w.key, w.name, std::string(dtype_name(w.type.dtype)), nb::cast(w.type.dims),
                                         nb::cast(w.type.strides), w.data != nullptr));
             return out;
           },
           "(key, name, dtype, dims, strides, stored) for each weight.")
      .def("metadata", [](const LoadedProgram& p) { return p.artifact().metadata(); })
      .def("format_version", [](const LoadedProgram& p) { return p.artifact().format_version(); });

  m.def(
      "save_artifact",
      [](const Executable& exe, const std::string& path, bool weights, std::map<std::string, std::string> names,
         std::map<std::string, std::string> metadata, std::vector<size_t> outputs) {
        ArtifactSaveOptions options{weights, std::move(names), std::move(metadata), std::move(outputs)};
        nb::gil_scoped_release release;
        save_artifact(exe, path, options);
      },
      nb::arg("exe"), nb::arg("path"), nb::arg("weights") = true, nb::arg("weight_names") = std::map<std::string, std::string>(),
      nb::arg("metadata") = std::map<std::string, std::string>(), nb::arg("outputs") = std::vector<size_t>(),
      "Writes `exe`'s optimized graph and (weights=True) its bound weights into one artifact file; `outputs`: the "
      "program's outputs as indices into the executable's (default: all, in order).");
  m.def(
      "load_artifact",
      [](const std::string& path, const std::string& device, bool verify_weights) {
        ArtifactReadOptions options;
        options.verify_weights = verify_weights;
        return new LoadedProgram(Artifact::open(path, options), parse_device(device));
      },
      nb::arg("path"), nb::arg("device") = "cpu", nb::arg("verify_weights") = true,
      "Maps and checks an artifact file; stored weights are bound in place from the mapping.");
}

}  // namespace

NB_MODULE(_kiln, m) {
  m.doc() = "kiln's C++ core: graphs, ops, compilation and execution";

  // Compiled programs live in torch's global caches until interpreter exit;
  // objects still alive then are not leaks worth a report.
  nb::set_leak_warnings(false);
  nb::exception<Error>(m, "Error", PyExc_RuntimeError);

  nb::enum_<DType>(m, "DType")
      .value("f32", DType::f32)
      .value("f16", DType::f16)
      .value("bf16", DType::bf16)
      .value("f64", DType::f64)
      .value("i64", DType::i64)
      .value("i32", DType::i32)
      .value("i16", DType::i16)
      .value("i8", DType::i8)
      .value("u8", DType::u8)
      .value("bool", DType::boolean);

  nb::class_<PyValue>(m, "Value")
      .def_prop_ro("name", [](const PyValue& p) { return p.v->name; })
      .def_prop_ro("dtype", [](const PyValue& p) { return std::string(dtype_name(p.v->type.dtype)); })
      .def_prop_ro("shape", [](const PyValue& p) { return p.v->type.dims; })
      .def_prop_ro("strides", [](const PyValue& p) { return p.v->type.strides; })
      .def_prop_ro("kind", [](const PyValue& p) { return std::string(kind_name(p.v->kind)); })
      .def("__repr__", [](const PyValue& p) { return "%" + p.v->name + " : " + to_string(p.v->type); });

  nb::class_<PyGraph>(m, "Graph")
      .def(nb::init<>())
      .def_static("parse", [](std::string_view text) { return new PyGraph(parse_graph(text)); },
                  "Parses the IR text form.")
      .def("set_eager_device",
           [](PyGraph& g, const std::string& device) {
             KILN_CHECK(device == "cpu" || device == "cuda", "set_eager_device: unknown device '", device,
                        "' (valid: cpu, cuda)");
             g.builder.set_eager_device(device == "cuda" ? EagerDevice::cuda : EagerDevice::cpu);
           },
           nb::arg("device"),
           "Reads numbers in arithmetic as torch's kernels on `device` do (Note [Scalars in f16 and bf16]).")
      .def("input",
           [](PyGraph& g, const std::string& name, const std::string& dtype, const Dims& dims,
              std::optional<Dims> strides) { return PyValue{g.graph->add_input(name, make_type(dtype, dims, strides)), g.state}; },
           nb::arg("name"), nb::arg("dtype"), nb::arg("shape"), nb::arg("strides") = nb::none())
      .def("weight",
           [](PyGraph& g, const std::string& name, const std::string& dtype, const Dims& dims,
              std::optional<Dims> strides, std::optional<std::string> key) {
             return PyValue{g.graph->add_weight(name, make_type(dtype, dims, strides), key.value_or(name)), g.state};
           },
           nb::arg("name"), nb::arg("dtype"), nb::arg("shape"), nb::arg("strides") = nb::none(),
           nb::arg("key") = nb::none())
      .def("scalar",
           [](PyGraph& g, double value, const std::string& dtype) { return PyValue{g.builder.scalar(value, to_dtype(dtype)), g.state}; },
           nb::arg("value"), nb::arg("dtype") = "f32")
      .def("literal",
           [](PyGraph& g, nb::ndarray<nb::device::cpu, nb::c_contig> array, const std::string& dtype,
              const std::string& name) {
             TensorType t(to_dtype(dtype), Dims(array.shape_ptr(), array.shape_ptr() + array.ndim()));
             size_t bytes = static_cast<size_t>(t.numel()) * dtype_size(t.dtype);
             KILN_CHECK(array.nbytes() == bytes, "literal '", name, "': array has ", array.nbytes(), " bytes, ",
                        to_string(t), " needs ", bytes);
             const auto* p = static_cast<const uint8_t*>(array.data());
             return PyValue{g.graph->add_literal(name, t, std::vector<uint8_t>(p, p + bytes)), g.state};
           },
           nb::arg("array"), nb::arg("dtype"), nb::arg("name") = "")
      .def("op",
           [](PyGraph& g, const std::string& op, const std::vector<PyValue>& inputs, const nb::dict& attrs,
              const std::string& name) {
             std::vector<Value*> ins;
             for (const PyValue& p : inputs) ins.push_back(own(g.state, p));
             g.builder.set_next_name(name);
             return wrap_values(g, g.builder.op(op, std::move(ins), to_attrs(attrs)));
           },
           nb::arg("op"), nb::arg("inputs"), nb::arg("attrs") = nb::dict(), nb::arg("name") = "",
           "Adds kiln op `op`; returns its outputs.")
      .def("elementwise",
           [](PyGraph& g, const std::string& op, const nb::list& operands, const std::string& name) {
             std::vector<Operand> ops;
             for (nb::handle h : operands) {
               if (nb::isinstance<PyValue>(h))
                 ops.push_back(own(g.state, nb::cast<PyValue&>(h)));
               else if (nb::isinstance<nb::bool_>(h))
                 ops.push_back(nb::cast<bool>(h));
               else if (nb::isinstance<nb::int_>(h))
                 ops.push_back(nb::cast<int64_t>(h));
               else
                 ops.push_back(nb::cast<double>(h));
             }
             g.builder.set_next_name(name);
             return PyValue{g.builder.elementwise(op, std::move(ops)), g.state};
           },
           nb::arg("op"), nb::arg("operands"), nb::arg("name") = "",
           "Adds an elementwise op with torch's type promotion over tensors and Python numbers.")
      .def("aten",
           [](PyGraph& g, const std::string& target, const nb::dict& args, const std::string& name) {
             const AtenAdapter* adapter = find_aten_adapter(target);
             if (adapter == nullptr) fail(ErrorKind::unsupported, "no kiln lowering for ", target);
             std::map<std::string, AtenArg, std::less<>> a;
             for (auto [k, v] : args) {
               std::string key = nb::cast<std::string>(k);
               a.emplace(key, to_aten_arg(g.state, key, v));
             }
             AtenCall call(g.builder, target, std::move(a));
             g.builder.set_next_name(name);
             return wrap_values(g, (*adapter)(call));
           },
           nb::arg("target"), nb::arg("args"), nb::arg("name") = "",
           "Lowers one ATen call (arguments by schema name); returns its outputs (None where kiln has none).")
      .def("set_outputs",
           [](PyGraph& g, const std::vector<PyValue>& outs) {
             std::vector<Value*> vs;
             for (const PyValue& p : outs) vs.push_back(own(g.state, p));
             g.graph->set_outputs(std::move(vs));
           })
      .def("inputs", [](PyGraph& g) { return wrap_values(g, g.graph->inputs()); })
      .def("weights", [](PyGraph& g) { return wrap_values(g, g.graph->weights()); })
      .def("outputs", [](PyGraph& g) { return wrap_values(g, g.graph->outputs()); })
      .def("num_nodes", [](PyGraph& g) { return g.graph->num_nodes(); })
      .def("unsupported_since",
           [](PyGraph& g, size_t first, const std::string& device) -> std::optional<std::string> {
             // Why `device`'s backend cannot run a node added at position >= first
             // (views need no kernel); None when it can run them all. Asked per node kind
             // (runtime/support_cache.h): on CUDA a backend answers by lowering the node.
             const Backend& backend = backend_for(parse_device(device));
             std::vector<Node*> nodes = g.graph->nodes();
             for (size_t i = first; i < nodes.size(); ++i) {
               if (nodes[i]->op->has(kView)) continue;
               std::string why;
               if (!supports_cached(backend, *nodes[i], &why)) return why;
             }
             return std::nullopt;
           },
           nb::arg("first"), nb::arg("device"))
      .def("op_counts",
           [](PyGraph& g) {
             std::map<std::string, int> counts;
             for (Node* n : g.graph->nodes()) counts[n->op->name]++;
             return counts;
           })
      .def("verify", [](PyGraph& g) { verify_graph(*g.graph); })
      .def("text", [](PyGraph& g) { return print_graph(*g.graph); })
      .def("__str__", [](PyGraph& g) { return print_graph(*g.graph); });

  m.def("aten_targets", &aten_targets, "ATen overloads kiln can lower, sorted.");
  m.def("set_host_memory_limit", &set_host_memory_limit, nb::arg("bytes"),
        "Caps the host memory kiln's CPU allocator may hold at once (0: no cap); for fault-injection tests.");
  m.def("host_memory_in_use", &host_memory_in_use, "Bytes kiln's CPU allocator holds now, process-wide.");
  m.def("has_cuda", [] { return cuda_available(); },
        "Whether the CUDA backend plugin loads and sees at least one device.");
  m.def("cuda_unavailable_reason", [] {
    std::string why;
    return cuda_available(&why) ? std::string() : why;
  });
  m.def("support_cache_stats", [] {
    const SupportCacheStats s = support_cache_stats();
    return std::map<std::string, int64_t>{{"hits", s.hits}, {"asked", s.asked}, {"uncacheable", s.uncacheable}};
  }, "How the backends' support checks were answered so far: from the cache (hits), by asking (asked, uncacheable).");
  m.def("has_aten", [](const std::string& t) { return find_aten_adapter(t) != nullptr; });
  m.def("op_names", [] {
    std::vector<std::string> names;
    for (const OpDef* op : all_ops()) names.push_back(op->name);
    return names;
  });

  m.def("op_table", [] {
    static const char* const kKinds[] = {"arith", "floating", "compare", "logical", "select"};
    nb::list out;
    for (const OpDef* op : all_ops()) {
      nb::dict d;
      d["name"] = op->name;
      d["inputs"] = op->inputs;
      d["variadic"] = op->variadic;
      d["optional_inputs"] = op->optional_inputs;
      std::vector<std::string> attrs;
      for (const AttrSpec& a : op->attrs) attrs.push_back(a.name);
      d["attrs"] = attrs;
      d["aten"] = op->aten;
      d["elementwise_kind"] =
          op->elementwise ? std::string(kKinds[static_cast<int>(op->elementwise->kind)]) : std::string();
      d["floating_only"] = op->floating_only;
      d["cpu"] = cpu::cpu_has_kernel(op->name);
      d["cuda"] = cuda_has_kernel(*op);
      out.append(d);
    }
    return out;
  }, "Every op of the op table (sorted by name): inputs, attrs, ATen overloads, dtype rule, CPU/CUDA kernels.");

  python::bind_executable(m);
  bind_compile(m);
  bind_artifacts(m);

  // Weight folds (Note [Weight folds]): the frontend's fold stage.
  m.def("lower_precision", [](PyGraph& g, const std::string& to) { return lower_precision(*g.graph, DType::f32, to_dtype(to)); },
        nb::arg("graph"), nb::arg("dtype"), "Runs the graph's f32 math in `dtype` (f16, bf16), same signature.");
  m.def("fold_batch_norm", [](PyGraph& g) { return fold_batch_norm(*g.graph); }, nb::arg("graph"));
  m.def("patchify_convs", [](PyGraph& g) { return patchify_convs(*g.graph); }, nb::arg("graph"),
        "Convolutions whose stride equals their kernel become matrix products of the patches.");
  m.def("choose_layout", [](PyGraph& g) { return choose_layout(*g.graph); }, nb::arg("graph"),
        "Runs f16/bf16 convolution chains channels-last (CUDA graphs, before split_weight_folds).");
  m.def(
      "split_weight_folds",
      [](PyGraph& g) {
        nb::list out;
        for (FoldedConstant& f : split_weight_folds(*g.graph))
          out.append(nb::make_tuple(f.key, new PyGraph(std::move(f.graph)), f.source_keys));
        return out;
      },
      nb::arg("graph"), "Moves foldable weight-only expressions out of `graph`; returns (key, fold graph, source keys).");
}
