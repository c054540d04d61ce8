#pragma once
// prefetch_file: brings a model file into the page cache with large sequential reads (the
// fastest way to get bytes off a disk), before the runner maps it and touches its pages. Without
// it, a cold mmap is read one fault (and one small readahead window) at a time. Used by the
// model loader as the `read` phase; the load benchmark compares it with plain file-read
// bandwidth.

#include <cstdint>
#include <functional>
#include <string>

#include "cutline/base/result.h"

namespace cutline::server {

inline constexpr int64_t kPrefetchChunkBytes = 8ll << 20;

// Called after each chunk with the bytes read so far and the file's size (progress display).
using ReadProgress = std::function<void(int64_t done_bytes, int64_t total_bytes)>;

// Reads the whole file once; returns its size in bytes. kIo naming the file on failure.
Result<int64_t> prefetch_file(const std::string& path, int64_t chunk_bytes = kPrefetchChunkBytes,
                              const ReadProgress& progress = {});

}  // namespace cutline::server
