// SPDX-License-Identifier: MIT
// fork_child_watch.h - the fork tests' watch over a child: tells a child
// that is stuck from one that is only slow. The child writes one byte to a
// pipe after each step; the parent waits for the child to exit, and its
// time limit restarts at every byte (and at the end of the pipe, when the
// child exits), so a child is hung only when it made no progress for the
// whole limit, however long its steps take together (under a sanitizer a
// fork copies the page tables of the shadow memory too, and every page the
// child writes is copied on write). A hung child is killed.
//
//   ForkChildWatch watch;
//   ASSERT_TRUE(watch.open());
//   pid_t pid = fork();
//   if (pid == 0) { watch.in_child(); step(); watch.progress(); ...; fork_child_exit(0); }
//   ForkChildWatch::Outcome o = watch.wait(pid, limit);  // o.hung, o.status
#pragma once

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "sanitizers.h"

// A child's exit. Under ThreadSanitizer, _exit() in a child makes it report
// the parent's threads copied into the child as leaked (exit code 66): the
// child leaves with the system call itself.
[[noreturn]] inline void fork_child_exit(int code) {
#if AK_TEST_TSAN
  syscall(SYS_exit_group, code);
#endif
  _exit(code);
}

class ForkChildWatch {
 public:
  using Clock = std::chrono::steady_clock;

  // What wait() saw: the child's wait status (when not hung), the bytes of
  // progress it sent, its run time and the longest time without progress.
  struct Outcome {
    bool hung = false;
    int status = 0;
    unsigned steps = 0;
    double seconds = 0;
    double longest_quiet = 0;
  };

  ForkChildWatch() = default;
  ForkChildWatch(const ForkChildWatch &) = delete;
  ForkChildWatch &operator=(const ForkChildWatch &) = delete;
  ~ForkChildWatch() { close_both(); }

  // Before fork(): the pipe (close-on-exec). False if it cannot be made.
  bool open() {
    close_both();
    return pipe2(fd_, O_CLOEXEC) == 0;
  }

  // In the child, first: drops the parent's end, so that only the parent
  // holds the reading end.
  void in_child() {
    ::close(fd_[0]);
    fd_[0] = -1;
  }

  // In the child after each step: one byte to the parent (a system call,
  // no lock of any allocator).
  void progress() {
    char b = 1;
    while (write(fd_[1], &b, 1) < 0 && errno == EINTR) {
    }
  }

  // In the parent after fork(): waits for `pid`. A child that sends no byte
  // and does not exit for `limit` is killed (SIGKILL), reaped and reported
  // hung.
  Outcome wait(pid_t pid, Clock::duration limit) {
    ::close(fd_[1]);
    fd_[1] = -1;
    Outcome o;
    const auto start = Clock::now();
    auto last = start;  // the last progress: start, a byte, the end of the pipe
    bool open_pipe = true;
    for (;;) {
      int status = 0;
      pid_t w = waitpid(pid, &status, WNOHANG);
      auto now = Clock::now();
      if (w == pid) {
        if (open_pipe) o.steps += drain();  // bytes written just before the exit
        o.status = status;
        break;
      }
      quiet(o, now - last);
      if (now - last >= limit) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        o.hung = true;
        break;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(limit - (now - last));
      if (!open_pipe) {
        // The child closed its end (it is exiting): waitpid until it is gone.
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        continue;
      }
      pollfd p = {fd_[0], POLLIN, 0};
      // Wakes at a byte, at the end of the pipe, or every 100 ms to look
      // for the child's exit.
      int n = poll(&p, 1, static_cast<int>(std::min<long long>(left.count() + 1, 100)));
      if (n <= 0) continue;  // timeout or EINTR: the loop checks the limit
      char buf[64];
      ssize_t r = read(fd_[0], buf, sizeof buf);
      if (r < 0 && errno == EINTR) continue;
      now = Clock::now();
      quiet(o, now - last);
      last = now;
      if (r > 0)
        o.steps += static_cast<unsigned>(r);
      else
        open_pipe = false;  // end of the pipe (or an error): no more bytes
    }
    o.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    close_both();
    return o;
  }

 private:
  void quiet(Outcome &o, Clock::duration d) {
    o.longest_quiet = std::max(o.longest_quiet, std::chrono::duration<double>(d).count());
  }
  unsigned drain() {
    unsigned n = 0;
    char buf[64];
    int flags = fcntl(fd_[0], F_GETFL);
    fcntl(fd_[0], F_SETFL, flags | O_NONBLOCK);
    for (ssize_t r; (r = read(fd_[0], buf, sizeof buf)) > 0;) n += static_cast<unsigned>(r);
    return n;
  }
  void close_both() {
    for (int &fd : fd_)
      if (fd >= 0) {
        ::close(fd);
        fd = -1;
      }
  }

  int fd_[2] = {-1, -1};
};
