#include "pipeplan/exec/launch.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

#include "pipeplan/error.h"

namespace pipeplan::exec {

namespace {

int decode_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 255;
}

}  // namespace

int free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw InputError(std::string("cannot open a socket: ") + std::strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    int err = errno;
    ::close(fd);
    throw InputError(std::string("cannot find a free loopback port: ") + std::strerror(err));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::vector<std::string> own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string raw((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> args;
  std::string cur;
  for (char c : raw) {
    if (c == '\0') {
      args.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) args.push_back(cur);
  char exe[4096];
  ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0 || args.empty()) throw InputError("cannot read this process's command line");
  args[0] = std::string(exe, static_cast<std::size_t>(n));
  return args;
}

LaunchResult launch_local(const std::vector<std::string>& argv, const LaunchOptions& options) {
  if (argv.empty()) throw InputError("launch_local: empty command");
  if (options.nproc < 1)
    throw InputError("nproc (the number of ranks to start) must be at least 1");
  const int port = options.master_port > 0 ? options.master_port : free_loopback_port();

  std::vector<char*> cargv;
  for (const std::string& a : argv) cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);

  LaunchResult result;
  result.exit_codes.assign(options.nproc, -1);
  std::vector<pid_t> pids(options.nproc, -1);
  // Environments are built before fork: the child only calls execve.
  static const char* const kVars[] = {"RANK",        "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                                      "MASTER_ADDR", "MASTER_PORT"};
  std::vector<std::string> inherited;
  for (char** e = environ; *e != nullptr; ++e) {
    bool ours = false;
    for (const char* v : kVars)
      ours = ours || (std::strncmp(*e, v, std::strlen(v)) == 0 && (*e)[std::strlen(v)] == '=');
    if (!ours) inherited.emplace_back(*e);
  }
  std::vector<std::vector<std::string>> envs(options.nproc, inherited);
  std::vector<std::vector<char*>> cenvs(options.nproc);
  for (int r = 0; r < options.nproc; ++r) {
    const std::string values[] = {std::to_string(r),
                                  std::to_string(r),
                                  std::to_string(options.nproc),
                                  std::to_string(options.nproc),
                                  options.master_addr,
                                  std::to_string(port)};
    for (int k = 0; k < 6; ++k) envs[r].push_back(std::string(kVars[k]) + "=" + values[k]);
    for (std::string& e : envs[r]) cenvs[r].push_back(e.data());
    cenvs[r].push_back(nullptr);
  }

  for (int r = 0; r < options.nproc; ++r) {
    pid_t pid = ::fork();
    if (pid < 0) {
      int err = errno;
      for (int k = 0; k < r; ++k) ::kill(pids[k], SIGKILL);
      for (int k = 0; k < r; ++k) ::waitpid(pids[k], nullptr, 0);
      throw InputError(std::string("cannot start rank ") + std::to_string(r) + ": " +
                       std::strerror(err));
    }
    if (pid == 0) {
      ::execve(cargv[0], cargv.data(), cenvs[r].data());
      ::_exit(127);
    }
    pids[r] = pid;
  }

  using Clock = std::chrono::steady_clock;
  Clock::time_point deadline = Clock::time_point::max();
  int running = options.nproc;
  bool terminated = false;
  while (running > 0) {
    for (int r = 0; r < options.nproc; ++r) {
      if (result.exit_codes[r] >= 0) continue;
      int status = 0;
      pid_t got = ::waitpid(pids[r], &status, WNOHANG);
      if (got != pids[r]) continue;
      result.exit_codes[r] = decode_status(status);
      --running;
      if (result.exit_codes[r] != 0 && result.first_failed < 0) {
        result.first_failed = r;
        deadline = Clock::now() + options.grace;
      }
    }
    if (running > 0 && Clock::now() >= deadline) {
      // Survivors outlived the grace period: SIGTERM, then SIGKILL.
      for (int r = 0; r < options.nproc; ++r) {
        if (result.exit_codes[r] >= 0) continue;
        ::kill(pids[r], terminated ? SIGKILL : SIGTERM);
        if (!terminated) result.killed.push_back(r);
      }
      deadline = Clock::now() + std::chrono::seconds(2);
      terminated = true;
    }
    if (running > 0) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return result;
}

}  // namespace pipeplan::exec
