//===- CudnnLibrary.h - libcudnn.so.9 opened at run time --------*- C++ -*-===//
//
// Internal to runtime/cuda, built only with the cuDNN path (DPRT_WITH_CUDNN).
// CudnnLibrary.cpp defines the cuDNN entry points the frontend calls
// (cudnnCreate, cudnnBackend*, ...) as forwarders to libcudnn.so.9, opened
// with dlopen on the first call of loadCudnn: the programs carry no link to
// cuDNN and start where it is missing. Before the library is open every
// forwarder returns CUDNN_STATUS_NOT_INITIALIZED.
//
//===----------------------------------------------------------------------===//

#ifndef DPRT_CUDA_CUDNNLIBRARY_H
#define DPRT_CUDA_CUDNNLIBRARY_H

#include <string>

namespace dprt::cuda {

/// Opens libcudnn.so.9 (once per process; thread-safe). "" when it is open,
/// else why not (dlopen's or dlsym's message).
const std::string &loadCudnn();

} // namespace dprt::cuda

#endif // DPRT_CUDA_CUDNNLIBRARY_H
