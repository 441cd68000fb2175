#include "test_util.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <filesystem>

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "io/cell_text.h"

namespace pipeplan::test {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string temp_dir() {
  static std::string dir = [] {
    char tmpl[] = "/tmp/pipeplan-test-XXXXXX";
    const char* d = mkdtemp(tmpl);
    return std::string(d ? d : "/tmp");
  }();
  return dir;
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
#else
constexpr bool kSanitized = false;
#endif

}  // namespace

std::string temp_file(const std::string& name, const std::string& text) {
  std::string path = temp_dir() + "/" + name;
  std::ofstream(path, std::ios::binary) << text;
  return path;
}

CliResult run_cli(const std::vector<std::string>& args, const std::string& stdin_text) {
  static int counter = 0;
  const std::string base = temp_dir() + "/cli" + std::to_string(counter++);
  const std::string in_path = temp_file("cli_in" + std::to_string(counter), stdin_text);
  const std::string out_path = base + ".out", err_path = base + ".err";
  pid_t pid = fork();
  if (pid == 0) {
    int in = open(in_path.c_str(), O_RDONLY);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> argv;
    std::string bin = PIPEPLAN_BINARY;
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(out_path);
  r.err = slurp(err_path);
  return r;
}

std::vector<Action> actions(const std::string& text) {
  std::istringstream ss(text);
  std::vector<Action> out;
  std::string tok;
  while (ss >> tok) {
    io::CellError bad;
    INFO("token: " << tok);
    const bool ok = io::parse_cell(tok, out, bad);
    INFO(bad.message);
    REQUIRE(ok);
  }
  return out;
}

std::string read_source_file(const std::string& relative) {
  return slurp(std::string(PIPEPLAN_SOURCE_DIR) + "/" + relative);
}

CliResult run_cli_capped(const std::vector<std::string>& args, long mib) {
  if (kSanitized) return run_cli(args);  // ASan reserves terabytes of shadow address space
  const std::string out_path = temp_file("capped.out", ""), err_path = temp_file("capped.err", "");
  pid_t pid = fork();
  if (pid == 0) {
    rlimit lim{};
    lim.rlim_cur = lim.rlim_max = static_cast<rlim_t>(mib) << 20;
    setrlimit(RLIMIT_AS, &lim);
    int in = open("/dev/null", O_RDONLY);
    int out = open(out_path.c_str(), O_WRONLY | O_TRUNC);
    int err = open(err_path.c_str(), O_WRONLY | O_TRUNC);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<std::string> copy = args;
    std::string bin = PIPEPLAN_BINARY;
    std::vector<char*> argv{bin.data()};
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  std::ifstream o(out_path), e(err_path);
  std::stringstream so, se;
  so << o.rdbuf();
  se << e.rdbuf();
  r.out = so.str();
  r.err = se.str();
  return r;
}

std::vector<OrderFixture> order_fixtures(const std::string& dir) {
  std::vector<OrderFixture> out;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".txt") continue;
    OrderFixture f;
    f.file = entry.path().filename().string();
    const std::size_t a = f.file.find("_p"), b = f.file.find("_m", a), c = f.file.find("_v", b);
    f.name = f.file.substr(0, a);
    f.p = std::stoi(f.file.substr(a + 2, b - a - 2));
    f.m = std::stoi(f.file.substr(b + 2, c - b - 2));
    std::ifstream in(entry.path());
    for (std::string line; std::getline(in, line);) f.ranks.push_back(line);
    out.push_back(std::move(f));
  }
  std::sort(out.begin(), out.end(),
            [](const OrderFixture& x, const OrderFixture& y) { return x.file < y.file; });
  return out;
}

}  // namespace pipeplan::test
