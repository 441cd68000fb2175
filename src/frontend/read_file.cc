#include "frontend/read_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>

#include "pipeplan/error.h"
#include "pipeplan/limits.h"

namespace pipeplan::frontend {
namespace {

std::string too_large() {
  return "larger than the supported " + std::to_string(limits::kMaxInputBytes >> 20) + " MiB";
}

// Everything `f` holds, or why not ("" on success). Refused before the text
// outgrows the limit, so a string's doubling never passes it.
std::string read_all(std::FILE* f, std::string& text) {
  char buf[1 << 16];
  std::size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    if (text.size() + n > limits::kMaxInputBytes) return too_large();
    text.append(buf, n);
  }
  if (std::ferror(f)) return errno ? std::strerror(errno) : "an I/O error";
  return "";
}

}  // namespace

std::string read_file(const std::string& path) {
  auto fail = [&](const std::string& why) -> std::string {
    throw InputError("cannot read '" + limits::excerpt(path) + "': " + why);
  };
  // The OS would read the path up to its first NUL: another file (a Python
  // str may hold one).
  if (path.find('\0') != std::string::npos) return fail("the path holds a NUL byte");
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status)) return fail("no such file");
  if (std::filesystem::is_directory(status)) return fail("it is a directory");
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return fail(std::strerror(errno));
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(f, &std::fclose);
  std::string text;
  // A file known too large is refused unread; one that fits is read into
  // its exact size (memory: the file, not twice it).
  if (const auto size = std::filesystem::file_size(path, ec); !ec) {
    if (size > limits::kMaxInputBytes) return fail(too_large());
    text.reserve(static_cast<std::size_t>(size));
  }
  const std::string why = read_all(f, text);
  if (!why.empty()) return fail(why);
  return text;
}

std::string read_stdin() {
  std::string text;
  const std::string why = read_all(stdin, text);
  if (!why.empty()) throw InputError("cannot read stdin: " + why);
  return text;
}

}  // namespace pipeplan::frontend
