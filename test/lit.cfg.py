# lit configuration for DPC: dialect, pass, emission and tool tests.
import os
import sys
import lit.formats

config.name = "DPC"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.dpc_obj_root, "test")
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "CMakeLists.txt", "unit", "reference", "Inputs"]

config.environment["PATH"] = os.pathsep.join(
    [config.dpc_tools_dir, config.llvm_tools_dir, config.environment.get("PATH", os.environ["PATH"])])
# DPRT_TEST_RUN_AHEAD=1: the training programs' CPU backend queues each step
# before the step before writes its metrics, as CUDA does (TrainStep.cpp);
# ctest's lit-run-ahead runs the suite so.
if os.environ.get("DPRT_TEST_RUN_AHEAD"):
    config.environment["DPRT_TEST_RUN_AHEAD"] = os.environ["DPRT_TEST_RUN_AHEAD"]
config.substitutions.append(("%examples", os.path.join(config.dpc_src_root, "examples")))
config.substitutions.append(("%inputs", os.path.join(config.test_source_root, "Inputs")))
config.substitutions.append(("%scripts", os.path.join(config.dpc_src_root, "scripts")))
config.substitutions.append(("%python", sys.executable))
config.substitutions.append(("%cxx", config.cxx))
config.substitutions.append(("%runtime_include", os.path.join(config.dpc_src_root, "runtime", "include")))
# "cuda": the CUDA backend's archives are built, which `all` leaves out; ctest's
# lit-cuda (`make test-cuda`) passes --param cuda_backend=built after building
# them (test/cuda-backend).
if config.cuda_enabled and lit_config.params.get("cuda_backend") == "built":
    config.available_features.add("cuda")
