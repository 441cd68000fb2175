#include "harness.h"

#include <malloc.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <limits>
#include <thread>

namespace pipeplan::bench {

double min_time_s(int repeat, double min_total_s, const std::function<void()>& fn) {
  constexpr int kMaxRuns = 200;
  double best = std::numeric_limits<double>::infinity(), total = 0.0;
  for (int k = 0; k < kMaxRuns && (k < std::max(1, repeat) || total < min_total_s); ++k) {
    const double t0 = now_s();
    fn();
    const double t = now_s() - t0;
    best = std::min(best, t);
    total += t;
  }
  return best;
}

std::size_t peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<std::size_t>(u.ru_maxrss) * 1024;  // Linux reports KiB
}

bool reset_peak_rss() {
  std::ofstream refs("/proc/self/clear_refs");
  refs << "5";  // Linux >= 4.0: reset the peak RSS to the current RSS
  refs.close();
  return static_cast<bool>(refs);
}

std::size_t peak_growth_bytes(const std::function<void()>& fn) {
  int fds[2];
  if (pipe(fds) != 0) return 0;
  const pid_t pid = fork();
  if (pid < 0) {
    close(fds[0]);
    close(fds[1]);
    return 0;
  }
  if (pid == 0) {
    // Hand the parent's free heap back (else fn would reuse pages already
    // counted), then restart the high-water mark at the current RSS. The
    // shared pages stay counted once and writing to them adds nothing, so
    // the rise is what fn itself allocated and touched at its peak.
    close(fds[0]);
    malloc_trim(0);
    reset_peak_rss();
    const std::size_t before = peak_rss_bytes();
    fn();
    const std::size_t growth = peak_rss_bytes() - before;
    ssize_t n = write(fds[1], &growth, sizeof growth);
    _exit(n == static_cast<ssize_t>(sizeof growth) ? 0 : 1);
  }
  close(fds[1]);
  std::size_t growth = 0;
  if (read(fds[0], &growth, sizeof growth) != static_cast<ssize_t>(sizeof growth)) growth = 0;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return growth;
}

StringSink::int_type StringSink::overflow(int_type c) {
  if (c != traits_type::eof()) text_.push_back(static_cast<char>(c));
  return traits_type::not_eof(c);
}

std::streamsize StringSink::xsputn(const char* s, std::streamsize n) {
  text_.append(s, static_cast<std::size_t>(n));
  return n;
}

std::string machine_description() {
  std::string cpu = "unknown CPU";
  std::ifstream info("/proc/cpuinfo");
  for (std::string line; std::getline(info, line);)
    if (line.rfind("model name", 0) == 0) {
      auto colon = line.find(':');
      if (colon != std::string::npos) cpu = line.substr(colon + 2);
      break;
    }
  std::string out = "nproc " + std::to_string(std::thread::hardware_concurrency()) + ", " + cpu;
#if defined(__clang__)
  out += ", clang " __clang_version__;
#elif defined(__GNUC__)
  out += ", g++ " + std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__);
#endif
#ifdef NDEBUG
  out += ", NDEBUG (Release)";
#else
  out += ", assertions on (not a Release build: numbers are not representative)";
#endif
  return out;
}

std::string decimal_text(double x, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, x);
  return buf;
}

}  // namespace pipeplan::bench
