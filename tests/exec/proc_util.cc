#include "proc_util.h"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

namespace pipeplan::test {

std::string make_temp_dir(const std::string& prefix) {
  std::string templ = (std::filesystem::temp_directory_path() / (prefix + "-XXXXXX")).string();
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  REQUIRE(::mkdtemp(buf.data()) != nullptr);
  return std::string(buf.data());
}

Child spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            const std::string& dir, const std::string& name) {
  static const char* const kDropped[] = {
      "RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT"};
  std::vector<std::string> envs;
  for (char** e = environ; *e != nullptr; ++e) {
    bool drop = false;
    for (const char* d : kDropped)
      drop = drop || (std::strncmp(*e, d, std::strlen(d)) == 0 && (*e)[std::strlen(d)] == '=');
    if (!drop) envs.emplace_back(*e);
  }
  for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
  std::vector<char*> cenv, cargv;
  for (std::string& e : envs) cenv.push_back(e.data());
  cenv.push_back(nullptr);
  std::vector<std::string> args = argv;
  for (std::string& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);

  Child c;
  c.out_path = dir + "/" + name + ".out";
  c.err_path = dir + "/" + name + ".err";
  int out = ::open(c.out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  int err = ::open(c.err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(out >= 0);
  REQUIRE(err >= 0);
  c.pid = ::fork();
  REQUIRE(c.pid >= 0);
  if (c.pid == 0) {
    ::dup2(out, 1);
    ::dup2(err, 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::execve(cargv[0], cargv.data(), cenv.data());
    ::_exit(127);
  }
  ::close(out);
  ::close(err);
  return c;
}

int wait_exit(Child& c, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (true) {
    int status = 0;
    pid_t got = ::waitpid(c.pid, &status, WNOHANG);
    if (got == c.pid) {
      c.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      return c.exit_code;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      ::kill(c.pid, SIGKILL);
      ::waitpid(c.pid, &status, 0);
      c.exit_code = -1;
      return -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool wait_for_text(const std::string& path, const std::string& needle, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    if (slurp(path).find(needle) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

Ran run(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
        std::chrono::seconds limit) {
  static int counter = 0;
  static const std::string dir = make_temp_dir("pipeplan-exec-run");
  Child c = spawn(argv, env, dir, "run" + std::to_string(counter++));
  Ran r;
  r.exit_code = wait_exit(c, limit);
  r.out = slurp(c.out_path);
  r.err = slurp(c.err_path);
  return r;
}

// Digits of a printed number, leading zeros and exponent excluded.
int significant_digits(const std::string& token) {
  std::string mantissa = token.substr(0, token.find_first_of("eE"));
  std::string digits;
  for (char ch : mantissa)
    if (ch >= '0' && ch <= '9') digits += ch;
  std::size_t first = digits.find_first_not_of('0');
  return first == std::string::npos ? 0 : static_cast<int>(digits.size() - first);
}

std::vector<double> losses_of(const std::string& out) {
  static const std::regex line_re(R"(step (\d+) loss (-?[0-9.]+(e[-+][0-9]+)?))");
  std::vector<double> losses;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    INFO("stdout line: " << line);
    REQUIRE(std::regex_match(line, m, line_re));
    REQUIRE(std::stoi(m[1]) == static_cast<int>(losses.size()) + 1);
    REQUIRE(significant_digits(m[2]) >= 9);
    losses.push_back(std::stod(m[2]));
  }
  return losses;
}

}  // namespace pipeplan::test
