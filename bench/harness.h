// Benchmark plumbing: a monotonic timer, peak-RSS probes, an in-memory
// output sink and the machine description printed with every run.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <streambuf>
#include <string>

namespace pipeplan::bench {

/// Seconds since an arbitrary epoch (steady clock).
inline double now_s() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

/// Minimum wall time of at least `repeat` runs of `fn`, in seconds (noise
/// only adds); short passes keep repeating until `min_total_s` has been
/// spent (at most 200 runs), so their minimum is as trustworthy as a long
/// pass's.
double min_time_s(int repeat, double min_total_s, const std::function<void()>& fn);

/// x with `decimals` places ("%.*f"), as the benchmark tables print numbers.
std::string decimal_text(double x, int decimals = 2);

/// Peak resident set size of this process so far, in bytes (getrusage).
std::size_t peak_rss_bytes();

/// Restarts the peak RSS at the current RSS (/proc/self/clear_refs); false
/// where the kernel does not allow it (then peaks include earlier ones).
bool reset_peak_rss();

/// Runs `fn` once in a forked child and returns how far the child's peak RSS
/// rose above the RSS it started with (the parent's pages are shared, so
/// this is what `fn` itself allocated and touched at its peak), in bytes.
/// Returns 0 when fork is unavailable.
std::size_t peak_growth_bytes(const std::function<void()>& fn);

/// A streambuf that appends to a string: emission measured without a file
/// system, and the string keeps its capacity across repeats.
class StringSink : public std::streambuf {
 public:
  std::string& text() { return text_; }

 protected:
  int_type overflow(int_type c) override;
  std::streamsize xsputn(const char* s, std::streamsize n) override;

 private:
  std::string text_;
};

/// "nproc 2, AMD EPYC ..., g++ 12.2 -O2 (Release)": the machine line.
std::string machine_description();

}  // namespace pipeplan::bench
