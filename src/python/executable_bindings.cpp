// kiln._kiln's Executable: calls with tensors that cross through DLPack
// (torch, numpy, anything with __dlpack__) or, for outputs kiln described
// itself, by address; weights and inputs are bound and read by pointer,
// outputs written into caller buffers. Also the allocator callback that lets
// torch's caching allocator provide an executable's device memory.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <map>
#include <string>
#include <vector>

#include "ir/printer.h"
#include "python/bindings.h"
#include "runtime/executable.h"
#include "support/error.h"

namespace nb = nanobind;

namespace kiln::python {

namespace {

using AnyArray = nb::ndarray<nb::ro>;

DType dlpack_dtype(const AnyArray& a, const std::string& what) {
  nb::dlpack::dtype t = a.dtype();
  using Code = nb::dlpack::dtype_code;
  auto code = static_cast<Code>(t.code);
  if (t.lanes == 1) {
    if (code == Code::Float && t.bits == 32) return DType::f32;
    if (code == Code::Float && t.bits == 16) return DType::f16;
    if (code == Code::Float && t.bits == 64) return DType::f64;
    if (code == Code::Bfloat && t.bits == 16) return DType::bf16;
    if (code == Code::Int && t.bits == 64) return DType::i64;
    if (code == Code::Int && t.bits == 32) return DType::i32;
    if (code == Code::Int && t.bits == 16) return DType::i16;
    if (code == Code::Int && t.bits == 8) return DType::i8;
    if (code == Code::UInt && t.bits == 8) return DType::u8;
    if (code == Code::Bool && t.bits == 8) return DType::boolean;
  }
  fail(ErrorKind::invalid_argument, what, ": DLPack dtype (code ", int(t.code), ", ", int(t.bits), " bits, ",
       int(t.lanes), " lanes) is not supported by kiln");
}

TensorView to_view(const AnyArray& a, const std::string& what) {
  TensorView v;
  v.data = const_cast<void*>(a.data());
  v.dtype = dlpack_dtype(a, what);
  for (size_t i = 0; i < a.ndim(); ++i) {
    v.dims.push_back(a.shape(i));
    v.strides.push_back(a.stride(i));
  }
  int dev = a.device_type();
  if (dev == nb::device::cpu::value) {
    v.device = Device{DeviceKind::cpu, 0};
  } else if (dev == nb::device::cuda::value) {
    v.device = Device{DeviceKind::cuda, a.device_id()};
  } else {
    fail(ErrorKind::invalid_argument, what, ": DLPack device type ", dev, " is not supported by kiln");
  }
  return v;
}

nb::list types_to_py(const std::vector<TensorType>& types) {
  nb::list out;
  for (const TensorType& t : types)
    out.append(nb::make_tuple(std::string(dtype_name(t.dtype)), nb::cast(t.dims), nb::cast(t.strides)));
  return out;
}

std::vector<TensorView> to_views(const nb::list& arrays, const char* what) {
  std::vector<TensorView> views;
  size_t i = 0;
  for (nb::handle h : arrays) {
    std::string label = std::string(what) + " " + std::to_string(i++);
    AnyArray a;
    if (!nb::try_cast<AnyArray>(h, a))
      fail(ErrorKind::invalid_argument, label, ": expected a tensor or array with __dlpack__, got ",
           nb::cast<std::string>(nb::str(h.type())));
    views.push_back(to_view(a, label));
  }
  return views;
}

}  // namespace

// A CallbackAllocator over a Python callable (kiln.executable passes one that
// allocates from torch's caching allocator). Called with or without the GIL
// held (run() releases it); the returned owner is released, with the GIL,
// when kiln frees the memory.
std::shared_ptr<Allocator> python_allocator(Device device, nb::object fn) {
  auto release = [](PyObject* p) {
    if (Py_IsInitialized()) {
      nb::gil_scoped_acquire gil;
      Py_DECREF(p);
    }
  };
  std::shared_ptr<PyObject> callable(fn.release().ptr(), release);
  return std::make_shared<CallbackAllocator>(device, [callable, device, release](size_t bytes, size_t alignment) {
    nb::gil_scoped_acquire gil;
    nb::object result = nb::borrow(callable.get())(bytes, alignment);
    nb::tuple pair;
    KILN_CHECK(nb::try_cast<nb::tuple>(result, pair) && pair.size() == 2,
               "allocator callback must return (address, owner), got ", nb::cast<std::string>(nb::str(result)));
    const uintptr_t address = nb::cast<uintptr_t>(pair[0]);
    PyObject* owner = nb::object(pair[1]).release().ptr();
    return DeviceBuffer(reinterpret_cast<void*>(address), bytes, device, [owner, release](void*) { release(owner); });
  });
}

void bind_executable(nb::module_& m) {
  nb::class_<Executable>(m, "Executable")
      .def("bind_weight",
           [](Executable& e, const std::string& key, AnyArray a) { e.bind_weight(key, to_view(a, "weight '" + key + "'")); },
           nb::arg("key"), nb::arg("tensor"))
      .def("run",
           [](Executable& e, const nb::list& inputs, const nb::list& outputs, uintptr_t stream) {
             std::vector<TensorView> ins = to_views(inputs, "input");
             std::vector<TensorView> outs = to_views(outputs, "output");
             nb::gil_scoped_release release;
             e.run(ins, outs, Stream{reinterpret_cast<void*>(stream)});
           },
           nb::arg("inputs"), nb::arg("outputs"), nb::arg("stream") = 0,
           "Runs one call. On CUDA the work is enqueued on `stream` (a cudaStream_t as an int, e.g. "
           "torch.cuda.current_stream().cuda_stream; 0 is the default stream) and not waited for.")
      .def("run_into",
           [](Executable& e, const nb::list& inputs, const std::vector<uintptr_t>& outputs, uintptr_t stream) {
             std::vector<TensorView> ins = to_views(inputs, "input");
             std::vector<void*> outs(outputs.size());
             for (size_t k = 0; k < outputs.size(); ++k) outs[k] = reinterpret_cast<void*>(outputs[k]);
             nb::gil_scoped_release release;
             e.run_into(ins, outs, Stream{reinterpret_cast<void*>(stream)});
           },
           nb::arg("inputs"), nb::arg("outputs"), nb::arg("stream") = 0,
           "run() with each output given by its address: a contiguous buffer of output_types()[k] on the "
           "executable's device that the caller allocated (skips DLPack for outputs kiln itself described).")
      .def("run_at",
           [](Executable& e, const std::vector<uintptr_t>& inputs, const std::vector<uintptr_t>& outputs,
              uintptr_t stream) {
             std::vector<void*> ins(inputs.size()), outs(outputs.size());
             for (size_t k = 0; k < inputs.size(); ++k) ins[k] = reinterpret_cast<void*>(inputs[k]);
             for (size_t k = 0; k < outputs.size(); ++k) outs[k] = reinterpret_cast<void*>(outputs[k]);
             nb::gil_scoped_release release;
             e.run_at(ins, outs, Stream{reinterpret_cast<void*>(stream)});
           },
           nb::arg("inputs"), nb::arg("outputs"), nb::arg("stream") = 0,
           "run_into() with each input given by its address as well: the caller holds every input to "
           "input_types()[k] (dtype, dims, strides) on the executable's device; only the addresses are checked.")
      .def("input_types", [](const Executable& e) { return types_to_py(e.input_types()); })
      .def("output_types", [](const Executable& e) { return types_to_py(e.output_types()); })
      .def("weight_keys", &Executable::weight_keys)
      .def("arena_bytes", [](const Executable& e) { return e.plan().arena_bytes; })
      .def("arena_address", [](const Executable& e) { return reinterpret_cast<uintptr_t>(e.arena_data()); })
      .def("literal_bytes", &Executable::literal_bytes)
      .def("bound_weights",
           [](const Executable& e) {
             std::map<std::string, uintptr_t> out;
             for (const auto& [key, ptr] : e.bound_weights()) out[key] = reinterpret_cast<uintptr_t>(ptr);
             return out;
           })
      .def("describe", &Executable::describe)
      .def("step_timings",
           [](const Executable& e) {
             nb::list out;
             for (const Executable::StepTiming& t : e.step_timings())
               out.append(nb::make_tuple(t.node, t.kernel, t.lower_ms, t.first_run_ms));
             return out;
           },
           "Per kernel (node, kernel, lower_ms, first_run_ms): host milliseconds lowering it and launching it in "
           "the first call (-1 before it).")
      .def("call_stats",
           [](const Executable& e) {
             CallStats s = e.call_stats();
             nb::dict d;
             d["calls"] = s.calls;
             d["graph_captures"] = s.graph_captures;
             d["graph_updates"] = s.graph_updates;
             d["graph_replays"] = s.graph_replays;
             d["slot_calls"] = s.slot_calls;
             d["uncaptured_reason"] = s.uncaptured_reason;
             return d;
           })
      .def("graph_text", [](const Executable& e) { return print_graph(e.graph()); });
}

}  // namespace kiln::python
