//===- CheckpointReaderTool.cpp - The reader linked as a tool links it ----===//
//
// Prints each parameter of a checkpoint with its element count and the sum
// of its elements, as `dpc export` would read them: linked with
// dprt_driver_objects, dprt_privacy and dprt_common only, no backend
// (CheckpointReader.h), so that a missing library is a build error here.
// Exit status 2 on a bad checkpoint, naming it.
//
//===----------------------------------------------------------------------===//

#include "CheckpointReader.h"
#include "Options.h"

#include <cstdio>
#include <vector>

int main(int argc, char **argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CHECKPOINT\n", argv[0]);
    return 2;
  }
  try {
    dprt::driver::CheckpointReader checkpoint(argv[1]);
    std::vector<double> values;
    for (const auto &p : checkpoint.parameters()) {
      values.resize(static_cast<size_t>(p.numel()));
      checkpoint.read(p.name, dprt::DType::F64, values.data());
      double sum = 0;
      for (double v : values)
        sum += v;
      std::printf("%s %lld %.6f\n", p.name.c_str(),
                  static_cast<long long>(p.numel()), sum);
    }
  } catch (const dprt::driver::UsageError &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 2;
  }
  return 0;
}
