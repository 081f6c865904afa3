// The per-op evaluator table behind elementwise_eval.h, generated from
// elementwise.def: one functor per op holding its expression, instantiated for
// float, double and int64_t (floating-kind ops only for float and double).
#include "backends/cpu/elementwise_eval.h"

#include <map>
#include <string_view>
#include <type_traits>

#include "ops/scalar_math.h"
#include "support/error.h"

namespace kiln::cpu {

namespace {

// One functor per op: `eval` is the .def expression over x, y, z in C.
#define KILN_ELEMENTWISE(name, arity_, kind_, ...)                                           \
  struct Eval_##name {                                                                         \
    static constexpr int arity = arity_;                                                       \
    static constexpr ElementwiseKind kind = ElementwiseKind::kind_;                            \
    template <typename C>                                                                      \
    static C eval([[maybe_unused]] C x, [[maybe_unused]] C y, [[maybe_unused]] C z) {         \
      return static_cast<C>(__VA_ARGS__);                                                      \
    }                                                                                          \
  };
#include "ops/elementwise.def"
#undef KILN_ELEMENTWISE

template <typename F, typename C>
void eval_chunk(const C* const* in, C* out, int64_t n) {
  if constexpr (F::arity == 1) {
    const C* x = in[0];
    for (int64_t i = 0; i < n; ++i) out[i] = F::template eval<C>(x[i], C(0), C(0));
  } else if constexpr (F::arity == 2) {
    const C *x = in[0], *y = in[1];
    for (int64_t i = 0; i < n; ++i) out[i] = F::template eval<C>(x[i], y[i], C(0));
  } else {
    static_assert(F::arity == 3, "elementwise ops take 1 to 3 operands");
    const C *x = in[0], *y = in[1], *z = in[2];
    for (int64_t i = 0; i < n; ++i) out[i] = F::template eval<C>(x[i], y[i], z[i]);
  }
}

template <typename F, typename C>
constexpr ElementwiseFn<C> fn_for() {
  if constexpr (std::is_integral_v<C> && F::kind == ElementwiseKind::floating) {
    return nullptr;
  } else {
    return &eval_chunk<F, C>;
  }
}

struct Entry {
  ElementwiseFn<float> f32;
  ElementwiseFn<double> f64;
  ElementwiseFn<int64_t> i64;
};

const std::map<std::string_view, Entry, std::less<>>& table() {
  static const std::map<std::string_view, Entry, std::less<>> t = {
#define KILN_ELEMENTWISE(name, ...) \
  {#name, Entry{fn_for<Eval_##name, float>(), fn_for<Eval_##name, double>(), fn_for<Eval_##name, int64_t>()}},
#include "ops/elementwise.def"
#undef KILN_ELEMENTWISE
  };
  return t;
}

}  // namespace

template <typename C>
ElementwiseFn<C> elementwise_fn(const OpDef& op) {
  if (!op.elementwise) return nullptr;
  auto it = table().find(op.name);
  if (it == table().end()) return nullptr;
  if constexpr (std::is_same_v<C, float>) return it->second.f32;
  if constexpr (std::is_same_v<C, double>) return it->second.f64;
  if constexpr (std::is_same_v<C, int64_t>) return it->second.i64;
  return nullptr;
}

template <typename C>
void apply_elementwise(const OpDef& op, const C* const* inputs, C* out, int64_t n) {
  ElementwiseFn<C> fn = elementwise_fn<C>(op);
  if (fn == nullptr)
    fail(ErrorKind::unsupported, "op '", op.name, "' has no elementwise form in compute type ",
         std::is_same_v<C, float> ? "float" : std::is_same_v<C, double> ? "double" : "int64");
  fn(inputs, out, n);
}

template ElementwiseFn<float> elementwise_fn<float>(const OpDef&);
template ElementwiseFn<double> elementwise_fn<double>(const OpDef&);
template ElementwiseFn<int64_t> elementwise_fn<int64_t>(const OpDef&);
template void apply_elementwise<float>(const OpDef&, const float* const*, float*, int64_t);
template void apply_elementwise<double>(const OpDef&, const double* const*, double*, int64_t);
template void apply_elementwise<int64_t>(const OpDef&, const int64_t* const*, int64_t*, int64_t);

}  // namespace kiln::cpu
