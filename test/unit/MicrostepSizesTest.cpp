//===- MicrostepSizesTest.cpp - dp_microstep on fewer rows ----------------===//
//
// addSizedMicrostep (passes/MicrostepSizes.cpp) runs a micro-step compiled
// for fewer rows on the full program's memory plan. That is sound only when
// the two are the same operations on the same buffers, only smaller: these
// tests give it programs that differ in each other way and expect a refusal,
// and check what it builds when they do not.
//
//===----------------------------------------------------------------------===//

#include "DP/DPDialect.h"
#include "DPRT/DPRTDialect.h"
#include "passes/Pipeline.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <string>

using namespace mlir;

namespace {

/// The usual call of the micro-step below, on `rows` rows.
std::string linearCall(int64_t rows, const std::string &dtype = "F32",
                       const std::string &input = "%1") {
  return "dprt.call \"linear_forward\"(" + input +
         ", %0, %2) {args = [#dprt.dtype<" + dtype +
         ">, 0 : index, 1 : index, #dprt.null, #dprt.null, 2 : index, " +
         std::to_string(rows) + ", 4, 4]}";
}

/// A program whose micro-step allocates two buffers of `bytes` and makes
/// `call` on them (linearCall by default); its mask takes `maskBytes`.
std::string program(int64_t rows, int64_t bytes, int64_t maskBytes = 16,
                    std::string call = "") {
  if (call.empty())
    call = linearCall(rows);
  const std::string b = std::to_string(bytes);
  return R"(
  dprt.program @p.program attributes {arena_bytes = 8192 : i64, peak_bytes = 8192 : i64, prefetch = 1 : i64} {
    dprt.global @state {bytes = 256 : i64, offset = 0 : i64}
    dprt.global @mask {bytes = )" +
         std::to_string(maskBytes) + R"( : i64, offset = 256 : i64}
    dprt.global @loss {bytes = 16 : i64, offset = 512 : i64}
    dprt.global @w {bytes = 64 : i64, offset = 768 : i64}
    dprt.func @dp_microstep {
      %0 = dprt.get_global @w
      %1 = dprt.alloc {bytes = )" +
         b + R"( : i64, name = "x", offset = 1024 : i64}
      %2 = dprt.alloc {bytes = )" +
         b + R"( : i64, name = "y", offset = 4096 : i64}
      %3 = dprt.get_global @mask
      )" +
         call + R"(
      dprt.return
    }
    dprt.func @dp_describe attributes {describe} {
      dprt.return
    }
  }
)";
}

class MicrostepSizesTest : public ::testing::Test {
protected:
  MicrostepSizesTest() {
    context.loadDialect<dpc::dp::DPDialect, dpc::rt::DPRTDialect>();
  }

  OwningOpRef<ModuleOp> parse(const std::string &text) {
    OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &context);
    EXPECT_TRUE(module) << text;
    return module;
  }

  /// addSizedMicrostep's result, and its error message.
  std::pair<bool, std::string> add(ModuleOp full, ModuleOp sized,
                                   int64_t rows) {
    std::string message;
    ScopedDiagnosticHandler handler(&context, [&](Diagnostic &d) {
      message += d.str();
      return success();
    });
    bool ok = succeeded(dpc::addSizedMicrostep(full, sized, rows));
    return {ok, message};
  }

  MLIRContext context;
};

TEST_F(MicrostepSizesTest, SmallerCopyRunsOnTheFullPlan) {
  OwningOpRef<ModuleOp> full = parse(program(4, 256));
  OwningOpRef<ModuleOp> sized = parse(program(2, 128, 8));
  // The sized program's own plan puts its buffers elsewhere.
  sized->walk([](dpc::rt::AllocOp alloc) {
    alloc.setOffset(alloc.getOffset().value_or(0) + 2048);
  });
  auto [ok, message] = add(*full, *sized, 2);
  ASSERT_TRUE(ok) << message;
  dpc::rt::FuncOp copy;
  full->walk([&](dpc::rt::FuncOp func) {
    if (func.getSymName() == "dp_microstep_2")
      copy = func;
  });
  ASSERT_TRUE(copy);
  std::vector<int64_t> offsets, bytes;
  copy.walk([&](dpc::rt::AllocOp alloc) {
    offsets.push_back(alloc.getOffset().value_or(-1));
    bytes.push_back(alloc.getBytes());
  });
  EXPECT_EQ(offsets, (std::vector<int64_t>{1024, 4096}));
  EXPECT_EQ(bytes, (std::vector<int64_t>{128, 128}));
  int calls = 0;
  full->walk([&](dpc::rt::CallOp call) {
    if (call.getCallee() != "describe_microstep")
      return;
    ++calls;
    EXPECT_EQ(cast<IntegerAttr>(call.getArgs()[0]).getInt(), 2);
    EXPECT_EQ(cast<FlatSymbolRefAttr>(call.getArgs()[1]).getValue(),
              "dp_microstep_2");
  });
  EXPECT_EQ(calls, 1);
  // Each size once.
  auto [again, why] = add(*full, *sized, 2);
  EXPECT_FALSE(again);
  EXPECT_NE(why.find("already has dp_microstep_2"), std::string::npos) << why;
}

TEST_F(MicrostepSizesTest, RefusesWhatIsNotTheSameStepMadeSmaller) {
  struct Case {
    const char *what;
    std::string sized;
    const char *message;
  } cases[] = {
      {"a larger buffer", program(2, 512),
       "operation #1 (dprt.alloc) is "
       "larger"},
      {"a larger global", program(2, 128, 32), "names a global that is larger"},
      {"another callee",
       program(2, 128, 8,
               "dprt.call \"add_forward\"(%1, %0, %2) {args = "
               "[#dprt.dtype<F32>, 0 : index, 1 : index, 2 : index, 8]}"),
       "calls 'add_forward' with other arguments than sizes"},
      {"another type", program(2, 128, 8, linearCall(2, "F64")),
       "with other arguments than sizes"},
      {"another operand", program(2, 128, 8, linearCall(2, "F32", "%2")),
       "reads other buffers"},
  };
  for (const Case &c : cases) {
    OwningOpRef<ModuleOp> full = parse(program(4, 256));
    OwningOpRef<ModuleOp> sized = parse(c.sized);
    auto [ok, message] = add(*full, *sized, 2);
    EXPECT_FALSE(ok) << c.what;
    EXPECT_NE(message.find("cannot run its micro-step on 2 rows"),
              std::string::npos)
        << c.what << ": " << message;
    EXPECT_NE(message.find(c.message), std::string::npos)
        << c.what << ": " << message;
  }
}

} // namespace
