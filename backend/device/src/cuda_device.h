#pragma once
// The CUDA device (cuda/cuda_device.cu), compiled only when nvcc exists (CUTLINE_WITH_CUDA) into
// its own shared object, libcutline_cuda.so, the only file that needs libcudart and libcublas.
// make_device() loads it with dlopen at run time, so cutline-backend starts on a host without
// the CUDA libraries (and runs on the CPU). Internal: callers use make_device().

#include <memory>
#include <string>

#include "cutline/device/device.h"

namespace cutline::device {

// The first CUDA device, or an error naming why none is usable (no driver, no GPU, init failed).
Result<std::unique_ptr<Device>> make_cuda_device();

// The plugin's entry points, looked up by these names with dlsym. The loader and the plugin pass
// C++ objects (Device, std::string) to each other, so both must come from the same build:
// cutline_cuda_plugin_abi() returns kCudaPluginAbi as compiled into the plugin, and the loader
// refuses a plugin whose number differs from its own. Change the number when Device changes.
inline constexpr int kCudaPluginAbi = 1;
inline constexpr const char* kCudaPluginAbiSymbol = "cutline_cuda_plugin_abi";
inline constexpr const char* kCudaPluginMakeSymbol = "cutline_cuda_make_device";
using CudaPluginAbiFn = int (*)();
// The device (owned by the caller, deleted through Device's virtual destructor while the plugin
// stays loaded), or nullptr with *error set.
using CudaPluginMakeFn = Device* (*)(std::string* error);

// The CUDA device through the plugin: the file named by $CUTLINE_CUDA_PLUGIN when set, else
// libcutline_cuda.so where the package installs it relative to the running binary, else where
// this build tree puts it. An error (logged by make_device) names what is missing: the plugin
// (the cutline-backend-cuda package not installed) or a library it needs (libcudart.so.13).
Result<std::unique_ptr<Device>> load_cuda_device();

}  // namespace cutline::device
