//===- Main.cpp - Entry point of an emitted training program --------------===//
//
// The emitted program defines only dp_describe and the step functions; the
// driver library brings `main`.
//
//===----------------------------------------------------------------------===//

#include "Trainer.h"

int main(int argc, char **argv) {
  return dprt::driver::runTrainingProgram(argc, argv);
}
