// A small fuzz test with a fixed seed: random character and token edits of a
// valid IR text must either parse or throw kiln::Error, never crash; whatever
// parses must verify or throw kiln::Error, and must round-trip exactly.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "graph_diff.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "support/error.h"

namespace kiln {
namespace {

const char* const kSeedText = R"(graph {
  input %x : f32[1,2,4,4]
  input %t : f32[4,2]{1,4}
  input %"odd name" : f16[2]
  weight %w : f32[2] = "block.0.w\n\"q\""
  literal %one : f32[] = [1.0]
  literal %mix : f64[4] = [-0.0, inf, nan, 0x7ff0000000000001]
  literal %h : bf16[2] = [0.5, -nan]
  literal %ints : i64[3] = [-9223372036854775808, 0, 9223372036854775807]
  literal %flags : bool[2] = [true, false]
  %v, %i = max_pool2d(%x) {ceil_mode=false, channels_last=false, dilation=[1,1], kernel_size=[2,2], padding=[0,0], stride=[]} : f32[1,2,2,2], i64[1,2,2,2]
  %p = permute(%v) {dims=[0,1,3,2]} : f32[1,2,2,2]{8,4,1,2}
  %f, %g = fused(%p, %one) : f32[1,2,2,2], f32[1,2,2,2] {
    input %a : f32[1,2,2,2]{8,4,1,2}
    input %b : f32[]
    literal %k : f32[] = [0.25]
    %s = add(%a, %b) : f32[1,2,2,2]
    %m = mul(%s, %k) : f32[1,2,2,2] @inner
    return %s, %m
  }
  %r = relu(%f) : f32[1,2,2,2]
  %q = where(%flags, %w, %w) : f32[2]
  return %r, %g, %i, %q, %"odd name"
}
)";

// Splits into rough tokens (runs of name characters, or single other characters).
std::vector<std::string> rough_tokens(const std::string& text) {
  std::vector<std::string> out;
  for (size_t i = 0; i < text.size();) {
    size_t j = i;
    while (j < text.size() && (std::isalnum(static_cast<unsigned char>(text[j])) || text[j] == '_' || text[j] == '.'))
      ++j;
    if (j == i) j = i + 1;
    out.push_back(text.substr(i, j - i));
    i = j;
  }
  return out;
}

std::string mutate(const std::string& text, const std::vector<std::string>& tokens, std::mt19937& rng) {
  static const std::string kAlphabet = "%@{}()[],:=\"\\#-+.0123456789exnaif_ \n\t\x01\xff";
  std::string s = text;
  int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits && !s.empty(); ++e) {
    size_t at = rng() % s.size();
    switch (rng() % 6) {
      case 0: s.erase(at, 1 + rng() % 3); break;                                     // delete
      case 1: s.insert(at, 1, kAlphabet[rng() % kAlphabet.size()]); break;           // insert
      case 2:                                                                         // swap
        if (at + 1 < s.size()) std::swap(s[at], s[at + 1]);
        break;
      case 3: s[at] = kAlphabet[rng() % kAlphabet.size()]; break;                    // replace
      case 4: s.insert(at, tokens[rng() % tokens.size()]); break;                    // insert a token
      case 5: {                                                                       // duplicate a span
        size_t len = 1 + rng() % 40;
        s.insert(at, s.substr(at, len));
        break;
      }
    }
  }
  return s;
}

TEST(IrFuzz, MutatedTextNeverCrashes) {
  std::unique_ptr<Graph> seed = parse_graph(kSeedText);
  verify_graph(*seed);
  ASSERT_EQ(print_graph(*seed), kSeedText);  // the seed is already in printed form

  std::vector<std::string> tokens = rough_tokens(kSeedText);
  std::mt19937 rng(20261202);
  int parsed = 0, verified = 0;
  for (int iter = 0; iter < 4000; ++iter) {
    std::string text = mutate(kSeedText, tokens, rng);
    std::unique_ptr<Graph> g;
    try {
      g = parse_graph(text);
    } catch (const Error& e) {
      ASSERT_EQ(std::string(e.what()).rfind("line ", 0), 0u) << "no position in: " << e.what();
      continue;
    } catch (const std::exception& e) {
      FAIL() << "non-kiln exception " << e.what() << " from:\n" << text;
    }
    ++parsed;
    try {
      verify_graph(*g);
      ++verified;
    } catch (const Error&) {
    } catch (const std::exception& e) {
      FAIL() << "non-kiln exception from the verifier: " << e.what() << "\n" << text;
    }
    // Whatever parses round-trips, verified or not.
    std::string printed = print_graph(*g);
    std::unique_ptr<Graph> again;
    try {
      again = parse_graph(printed);
    } catch (const Error& e) {
      FAIL() << "printed text does not parse: " << e.what() << "\nfrom:\n" << text << "\nprinted:\n" << printed;
    }
    ASSERT_EQ(print_graph(*again), printed);
    ASSERT_EQ(testing::graph_diff(*g, *again), "") << printed;
  }
  // The mutations must exercise both paths, or the test proves little.
  EXPECT_GT(parsed, 200);
  EXPECT_GT(verified, 50);
  EXPECT_LT(parsed, 4000);
}

}  // namespace
}  // namespace kiln
