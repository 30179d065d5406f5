//===- FiniteCheckTest.cpp - What the driver checks before dp_apply -------===//
//
// finiteCheckRanges (FiniteChecks.cpp): a unit whose parameters' sums are
// all in its gradient is checked whole; in a unit with parameters whose sum
// dp_apply forms from rows (describe_update_from_rows), every other
// trainable parameter's gradient range is checked, and their never written
// ranges are not; frozen units and parameters never are.
//
//===----------------------------------------------------------------------===//

#include "FiniteChecks.h"

#include <gtest/gtest.h>

using namespace dprt;
using namespace dprt::driver;

namespace {

ParamSpec param(const char *name, int32_t unit, int64_t offset, int64_t numel,
                bool trainable = true, bool fromRows = false) {
  ParamSpec p{name, {numel}, unit, offset, 0, trainable, {}, {}};
  p.sumFromRows = fromRows;
  return p;
}

TEST(FiniteCheckRanges, SumsFromRowsAreNotChecked) {
  ProgramSpec spec;
  spec.compute = DType::BF16; // acc f32: 4 bytes an element
  spec.units = {
      UnitSpec{"whole", 100, 100, 0, 0, 1024, -1, -1},
      UnitSpec{"rows", 300, 300, 0, 0, 4096, -1, -1},
      UnitSpec{"frozen", 50, 50, 0, 0, -1, -1, -1},
  };
  spec.params = {
      param("a", 0, 0, 100),
      param("w", 1, 0, 128, true, true), // from rows
      param("g", 1, 128, 16),            // in the gradient
      param("f", 1, 144, 20, false),     // frozen
      param("v", 1, 192, 64, true, true),
      param("b", 1, 256, 44),
      param("z", 2, 0, 50, false),
  };
  std::vector<int64_t> offsets, counts;
  finiteCheckRanges(spec, offsets, counts);
  EXPECT_EQ(offsets,
            (std::vector<int64_t>{1024, 4096 + 128 * 4, 4096 + 256 * 4}));
  EXPECT_EQ(counts, (std::vector<int64_t>{100, 16, 44}));
}

TEST(FiniteCheckRanges, WithoutRowsEveryTrainableUnitWhole) {
  ProgramSpec spec;
  spec.compute = DType::F64;
  spec.units = {UnitSpec{"u0", 10, 10, 0, 0, 256, -1, -1},
                UnitSpec{"u1", 10, 10, 0, 0, -1, -1, -1},
                UnitSpec{"u2", 10, 12, 0, 0, 512, -1, -1}};
  spec.params = {param("a", 0, 0, 10), param("b", 1, 0, 10, false),
                 param("c", 2, 0, 10)};
  std::vector<int64_t> offsets, counts;
  finiteCheckRanges(spec, offsets, counts);
  EXPECT_EQ(offsets, (std::vector<int64_t>{256, 512}));
  EXPECT_EQ(counts, (std::vector<int64_t>{10, 12}));
}

} // namespace
