/* SPDX-License-Identifier: MIT */
// child_process.cpp - the runner's children: each measurement runs in a
// process of its own (this program again, `ak_bench child <scenario>
// <allocator> key=value...`), with LD_PRELOAD set to the allocator's
// library (glibc: none). The parent reads the child's "key=value" lines
// from a pipe and checks that malloc came from the allocator it asked for.
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

#include "runner.h"

extern char **environ;

namespace akb {

std::string self_exe() {
  std::error_code ec;
  fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string("/proc/self/exe") : p.string();
}

pid_t spawn_piped(std::vector<std::string> args, const std::string &preload, bool drop_preload, int *out_fd) {
  std::vector<char *> argv;
  for (auto &a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env;
  for (char **e = environ; *e; e++)
    if ((preload.empty() && !drop_preload) || std::strncmp(*e, "LD_PRELOAD=", 11) != 0) env.emplace_back(*e);
  if (!preload.empty()) env.push_back("LD_PRELOAD=" + preload);
  std::vector<char *> envp;
  for (auto &e : env) envp.push_back(e.data());
  envp.push_back(nullptr);

  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) {
    std::perror("ak_bench: pipe");
    return -1;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  pid_t pid;
  int rc = posix_spawn(&pid, args[0].c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    std::fprintf(stderr, "ak_bench: cannot start %s: %s\n", args[0].c_str(), std::strerror(rc));
    close(fds[0]);
    return -1;
  }
  *out_fd = fds[0];
  return pid;
}

int wait_piped(pid_t pid, int fd, double kill_at, std::string &out, bool *killed) {
  if (killed) *killed = false;
  char buf[4096];
  for (;;) {
    double left = kill_at - now_s();
    if (left <= 0) {
      kill(pid, SIGKILL);
      if (killed) *killed = true;
      break;
    }
    pollfd p{fd, POLLIN, 0};
    int k = poll(&p, 1, std::isinf(left) ? -1 : static_cast<int>(left * 1000) + 1);
    if (k < 0 && errno == EINTR) continue;
    if (k == 0) continue;
    ssize_t got = read(fd, buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;
    out.append(buf, static_cast<std::size_t>(got));
  }
  close(fd);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

std::vector<std::pair<std::string, std::string>> key_values(const std::string &text) {
  std::vector<std::pair<std::string, std::string>> kv;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::size_t eq = line.find('=');
    if (eq != std::string::npos && eq > 0) kv.emplace_back(line.substr(0, eq), line.substr(eq + 1));
  }
  return kv;
}

bool run_child(const Scenario &sc, const Allocator &al, const Params &params,
               std::map<std::string, double> &nums, std::map<std::string, std::string> &strs,
               const std::string &exe_path, std::vector<std::string> *order) {
  std::string exe = exe_path.empty() ? self_exe() : exe_path;
  std::vector<std::string> args = {exe, "child", sc.name, al.label};
  for (const auto &kv : params) args.push_back(kv.first + "=" + kv.second);
  int fd;
  pid_t pid = spawn_piped(args, al.path, true, &fd);
  if (pid < 0) return false;
  std::string out;
  int status = wait_piped(pid, fd, INFINITY, out, nullptr);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "ak_bench: child %s/%s failed (status %d; %s)\n", sc.name, al.label.c_str(), status,
                 exe.c_str());
    return false;
  }
  for (const auto &[k, v] : key_values(out)) {
    char *end = nullptr;
    double d = std::strtod(v.c_str(), &end);
    if (!v.empty() && end && *end == '\0') {
      if (order && !nums.count(k)) order->push_back(k);
      nums[k] = d;
    } else {
      strs[k] = v;
    }
  }
  // The preload must have taken: malloc must come from the allocator's
  // library (glibc: from libc).
  std::string from = strs.count("malloc_from") ? strs["malloc_from"] : "?";
  std::string want = al.path.empty() ? std::string("libc.so") : fs::path(al.path).filename().string();
  std::string from_real = fs::weakly_canonical(from).filename().string();
  std::string want_real = al.path.empty() ? want : fs::weakly_canonical(al.path).filename().string();
  if (from.find(want) == std::string::npos && from_real != want_real) {
    std::fprintf(stderr, "ak_bench: child %s: malloc resolves to %s, expected %s - LD_PRELOAD did not take\n",
                 al.label.c_str(), from.c_str(), want.c_str());
    return false;
  }
  return true;
}

int child_main(int argc, char **argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: ak_bench child <scenario> <allocator> key=value...\n");
    return 2;
  }
  const Scenario *sc = find_scenario(argv[2]);
  if (!sc) {
    std::fprintf(stderr, "ak_bench: unknown scenario %s\n", argv[2]);
    return 2;
  }
  Params params;
  for (int i = 4; i < argc; i++) {
    const char *eq = std::strchr(argv[i], '=');
    if (eq) params[std::string(argv[i], static_cast<std::size_t>(eq - argv[i]))] = eq + 1;
  }
  // Which object does malloc come from in this process?
  Dl_info info{};
  void *m = dlsym(RTLD_DEFAULT, "malloc");
  emit_str("malloc_from", m && dladdr(m, &info) && info.dli_fname ? info.dli_fname : "?");
  emit_str("allocator", argv[3]);
  return sc->child(params);
}

}  // namespace akb
