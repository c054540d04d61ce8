#include "cutline/server/file_prefetch.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace cutline::server {

Result<int64_t> prefetch_file(const std::string& path, int64_t chunk_bytes,
                              const ReadProgress& progress) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error(ErrorKind::kIo, path + ": cannot open: " + std::strerror(errno));
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  struct stat st {};
  const int64_t size = ::fstat(fd, &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
  auto buffer = std::make_unique<char[]>(static_cast<size_t>(chunk_bytes));
  int64_t total = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buffer.get(), static_cast<size_t>(chunk_bytes), total);
    if (n < 0) {
      if (errno == EINTR) continue;
      const std::string why = std::strerror(errno);
      ::close(fd);
      return make_error(ErrorKind::kIo,
                        path + ": read failed at byte " + std::to_string(total) + ": " + why);
    }
    if (n == 0) break;
    total += n;
    if (progress) progress(total, size);
  }
  ::close(fd);
  return total;
}

}  // namespace cutline::server
