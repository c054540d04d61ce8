// make_device: picks the device at run time. CUDA is used when the build has it, its plugin
// (libcutline_cuda.so) and the CUDA libraries load, and cudaGetDeviceCount finds a GPU;
// otherwise the CPU device runs and the reason is logged.
#include <dlfcn.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cpu_device.h"
#include "cuda_device.h"
#include "cutline/device/device.h"

namespace cutline::device {

#if defined(CUTLINE_WITH_CUDA)
namespace {

// Where the plugin may be, in the order tried (cuda_device.h).
std::vector<std::string> cuda_plugin_paths() {
  if (const char* env = std::getenv("CUTLINE_CUDA_PLUGIN"); env != nullptr && *env != '\0')
    return {env};
  std::vector<std::string> paths;
  std::string exe(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", exe.data(), exe.size() - 1);
  if (n > 0) {
    exe.resize(static_cast<size_t>(n));
    paths.push_back(exe.substr(0, exe.rfind('/') + 1) + CUTLINE_CUDA_PLUGIN_FROM_BINDIR);
  }
  paths.emplace_back(CUTLINE_CUDA_PLUGIN_BUILD_PATH);
  return paths;
}

}  // namespace

Result<std::unique_ptr<Device>> load_cuda_device() {
  std::string absent;
  for (const std::string& path : cuda_plugin_paths()) {
    if (::access(path.c_str(), F_OK) != 0) {
      absent += (absent.empty() ? "" : ", ") + path;
      continue;
    }
    // Loaded once and never unloaded: the device's code lives in it. A second load is a no-op.
    void* plugin = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (plugin == nullptr) {
      // Typically a CUDA library it needs is missing: "libcudart.so.13: cannot open ...".
      return make_error(ErrorKind::kUnsupported,
                        "cuda: cannot load " + path + ": " + std::string(::dlerror()));
    }
    auto abi = reinterpret_cast<CudaPluginAbiFn>(::dlsym(plugin, kCudaPluginAbiSymbol));
    auto make = reinterpret_cast<CudaPluginMakeFn>(::dlsym(plugin, kCudaPluginMakeSymbol));
    if (abi == nullptr || make == nullptr || abi() != kCudaPluginAbi) {
      return make_error(ErrorKind::kUnsupported,
                        "cuda: " + path + " is not the CUDA plugin of this cutline build");
    }
    std::string error;
    Device* device = make(&error);
    if (device == nullptr) return make_error(ErrorKind::kUnsupported, error);
    return std::unique_ptr<Device>(device);
  }
  return make_error(
      ErrorKind::kUnsupported,
      "cuda: no CUDA plugin (install the cutline-backend-cuda package; looked for " + absent + ")");
}
#endif

Result<std::unique_ptr<Device>> make_device(const DeviceOptions& options) {
  if (options.kind == DeviceKind::kCpu)
    return make_cpu_device(options.cpu_threads, options.cpu_isa);
#if defined(CUTLINE_WITH_CUDA)
  auto cuda = load_cuda_device();
  if (cuda.ok()) {
    std::fprintf(stderr, "cutline: device %s\n", cuda.value()->description().c_str());
    return std::move(cuda).value();
  }
  if (options.kind == DeviceKind::kCuda) return std::move(cuda).error();
  std::fprintf(stderr, "cutline: CUDA not usable (%s); falling back to CPU\n",
               cuda.error().message.c_str());
#else
  if (options.kind == DeviceKind::kCuda) {
    return make_error(ErrorKind::kUnsupported, "cuda: this build has no CUDA support (no nvcc)");
  }
#endif
  auto cpu = make_cpu_device(options.cpu_threads, options.cpu_isa);
  std::fprintf(stderr, "cutline: device %s\n", cpu->description().c_str());
  return cpu;
}

}  // namespace cutline::device
