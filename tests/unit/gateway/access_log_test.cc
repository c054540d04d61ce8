// The access log's writer: lines leave on its own thread, so a log destination that stalls (a
// full pipe here, a slow disk in production) never blocks the caller, and what the bounded queue
// cannot hold is dropped and counted, not kept. And the line: valid JSON in UTF-8 whatever bytes
// the client put in its request-target.
#include "cutline/gateway/access_log.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <simdjson.h>

#include <chrono>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace cutline::gateway {
namespace {

using Clock = std::chrono::steady_clock;

// A target refused before routing is logged as the client sent it: bytes outside printable ASCII
// (invalid UTF-8, control characters) are written as \xNN, so the line stays one valid JSON
// object that a reader (`cutline policy advise`, jq) takes.
TEST(AccessLogLine, HostileTargetsAreEscapedAndTheLineStaysValidJson) {
  proto::StopRecord s;
  s.cause = proto::Cause::kInvalidRequest;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"/v1/\xff\xfe\x80models", R"("path":"/v1/\\xff\\xfe\\x80models")"},
      {"/v1/\xc3(", R"("path":"/v1/\\xc3(")"},
      {"/a\x1b[31mred\x7f", R"("path":"/a\\x1b[31mred\\x7f")"},
      {std::string("/nul\0x", 6), R"("path":"/nul\\x00x")"},
      {"/v1/chat/completions?q=\"x\"", R"("path":"/v1/chat/completions?q=\"x\"")"},
  };
  for (const auto& [path, logged] : cases) {
    AccessLogEntry e;
    e.request_id = "r1";
    e.method = "G\xe9T";
    e.path = path;
    e.status = 400;
    e.stop = &s;
    const std::string line = access_log_line(e);
    EXPECT_NE(line.find(logged), std::string::npos) << line;
    EXPECT_NE(line.find(R"("method":"G\\xe9T")"), std::string::npos) << line;
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    ASSERT_EQ(parser.parse(line).get(doc), simdjson::SUCCESS) << line;
    std::string_view parsed_path;
    ASSERT_EQ(doc["path"].get(parsed_path), simdjson::SUCCESS) << line;
    for (char c : parsed_path) EXPECT_EQ(c & 0x80, 0) << line;
  }
  // A printable target is logged as it is.
  AccessLogEntry plain;
  plain.method = "POST";
  plain.path = "/v1/models/a%2Bb;x";
  plain.stop = &s;
  EXPECT_NE(access_log_line(plain).find(R"("path":"/v1/models/a%2Bb;x")"), std::string::npos);
}

TEST(AccessLogWriter, AStalledDestinationNeitherBlocksTheCallerNorGrowsMemory) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  fcntl(fds[1], F_SETPIPE_SZ, 4096);
  std::FILE* out = fdopen(fds[1], "w");
  ASSERT_NE(out, nullptr);
  constexpr size_t kQueueBytes = 64 * 1024;
  auto log = AccessLog::over(out, /*owned=*/true, kQueueBytes);
  const std::string line(99, 'x');  // 100 bytes with the newline
  constexpr int kLines = 5000;      // 500 KB: far more than the pipe and the queue hold
  int64_t slowest_us = 0;
  for (int i = 0; i < kLines; ++i) {
    const auto t0 = Clock::now();
    log->write_line(line);
    slowest_us = std::max<int64_t>(
        slowest_us,
        std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count());
  }
  // Nobody reads the pipe: the writer thread is stuck in write(), the caller was not.
  EXPECT_LT(slowest_us, 100000) << "write_line waited for the stalled destination";
  const uint64_t dropped = log->dropped_lines();
  EXPECT_GT(dropped, 0u);
  // Bounded: the queue, the batch being written and the stdio/pipe buffers, nothing more.
  EXPECT_GE(dropped, static_cast<uint64_t>(kLines) - 2 * kQueueBytes / 100 - 200);
  // The destination recovers: everything that was not dropped arrives, whole lines only.
  std::string got;
  std::thread reader([&] {
    char buf[65536];
    for (;;) {
      const ssize_t n = read(fds[0], buf, sizeof(buf));
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
  });
  log->flush();
  log.reset();  // closes the write end: the reader sees EOF
  reader.join();
  close(fds[0]);
  EXPECT_EQ(got.size() % 100, 0u);
  EXPECT_EQ(got.size() / 100 + dropped, static_cast<uint64_t>(kLines));
}

TEST(AccessLogWriter, EveryLineArrivesInOrderWhenTheDestinationKeepsUp) {
  char path[] = "/tmp/cutline_access_log_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  auto opened = AccessLog::open(path);
  ASSERT_TRUE(opened.ok());
  auto log = std::move(opened).value();
  for (int i = 0; i < 1000; ++i) log->write_line("line " + std::to_string(i));
  log->flush();
  EXPECT_EQ(log->dropped_lines(), 0u);
  log.reset();
  std::FILE* f = std::fopen(path, "r");
  ASSERT_NE(f, nullptr);
  char buf[64];
  int expect = 0;
  while (std::fgets(buf, sizeof(buf), f) != nullptr) {
    EXPECT_EQ(std::string(buf), "line " + std::to_string(expect) + "\n");
    ++expect;
  }
  std::fclose(f);
  unlink(path);
  EXPECT_EQ(expect, 1000);
}

// The file the log creates (first open and after logrotate renamed it) is 0640 whatever the
// umask: access lines carry clients' addresses and targets, not for every local user to read.
TEST(AccessLogWriter, CreatesTheFileReadableByOwnerAndGroupOnly) {
  char dir[] = "/tmp/cutline_access_dir_XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/access.log";
  const mode_t old_umask = umask(022);
  auto opened = AccessLog::open(path);
  ASSERT_TRUE(opened.ok());
  auto log = std::move(opened).value();
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  const std::string rotated = path + ".1";
  ASSERT_EQ(rename(path.c_str(), rotated.c_str()), 0);
  ASSERT_TRUE(log->reopen().ok());
  log->write_line("after rotation");
  log->flush();
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  umask(old_umask);
  log.reset();
  unlink(path.c_str());
  unlink(rotated.c_str());
  rmdir(dir);
}

}  // namespace
}  // namespace cutline::gateway
