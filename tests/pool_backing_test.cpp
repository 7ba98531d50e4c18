// SPDX-License-Identifier: MIT
// pool_backing_test.cpp - the pool's backings and bounds: a file-backed pool
// on a full file system answers ENOSPC (no SIGBUS), keeps its file bounded
// over free/reallocate cycles, refuses a path another live pool uses and
// reports after a trim what the kernel holds; a reserve or an object size
// beyond what the system can commit fails at once with nothing mapped; a
// LOCKFREE pool on the C heap gives its memory back at trim; the stats
// printer reports a failed write.
#include <arenakit/arenakit.h>
#include <errno.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "os/os_mem.h"
#include "sanitizers.h"

namespace {

const ak_sync kAllModes[] = {AK_SYNC_NONE, AK_SYNC_SPINLOCK, AK_SYNC_LOCKFREE, AK_SYNC_THREADS};

const char *mode_name(ak_sync m) {
  switch (m) {
    case AK_SYNC_NONE: return "none";
    case AK_SYNC_SPINLOCK: return "spinlock";
    case AK_SYNC_LOCKFREE: return "lockfree";
    default: return "threads";
  }
}

ak_pool_stats stats_of(const ak_pool *p) {
  ak_pool_stats s;
  ak_pool_stats_get(p, &s);
  return s;
}

ak_pool_options file_options(const std::string &path, ak_sync sync, size_t object_size = 64) {
  ak_pool_options o{};
  o.object_size = object_size;
  o.backing = AK_BACKING_FILE;
  o.path = path.c_str();
  o.sync = sync;
  o.name = "filepool";
  return o;
}

off_t file_size(const std::string &path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? st.st_size : -1;
}

// Runs `body` in a child process that must exit with 0 within `seconds`
// (the child's alarm kills a hang). Returns a description of how it ended
// ("" when it exited with 0), so that a signal (SIGBUS) fails the test with
// its name instead of killing the test program.
std::string in_child(unsigned seconds, const std::function<int()> &body) {
  fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) return std::string("fork: ") + strerror(errno);
  if (pid == 0) {
    alarm(seconds);
    _exit(body());
  }
  int st = 0;
  while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(st))
    return WEXITSTATUS(st) == 0 ? "" : "child exited with " + std::to_string(WEXITSTATUS(st));
  if (WIFSIGNALED(st)) return std::string("child killed by signal ") + strsignal(WTERMSIG(st));
  return "child ended oddly";
}

// A fresh directory, removed by the destructor (the tests unlink their
// files): in /dev/shm where there is one (the churn of slabs costs no disk
// I/O there), else under the test temp dir; `mount_tmpfs` mounts a tmpfs of
// `size` on it.
struct TempDir {
  std::string path;
  bool mounted = false;
  TempDir() {
    struct stat st;
    std::string base = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0
                           ? std::string("/dev/shm/")
                           : std::string(::testing::TempDir());
    std::string t = base + "ak_backing_XXXXXX";
    std::vector<char> buf(t.begin(), t.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data())) path = buf.data();
  }
  // 0, or the errno of mount(2).
  int mount_tmpfs(const char *size) {
    std::string opts = std::string("size=") + size + ",mode=0700";
    if (mount("tmpfs", path.c_str(), "tmpfs", 0, opts.c_str()) != 0) return errno;
    mounted = true;
    return 0;
  }
  ~TempDir() {
    if (path.empty()) return;
    if (mounted) (void)umount2(path.c_str(), MNT_DETACH);  // what is left on the tmpfs goes with it
    if (rmdir(path.c_str()) != 0) ADD_FAILURE() << "cannot remove " << path << ": " << strerror(errno);
  }
};

// ---- item 5: the file backing tells the truth ---------------------------------------

// A 1 MiB tmpfs fills up: every mode's allocation and reserve end with NULL
// (or an error code) and ENOSPC naming the file, never with SIGBUS, and
// every byte handed out is writable.
TEST(PoolFileBacking, FullFileSystemGivesEnospcNotSigbus) {
  if (geteuid() != 0) GTEST_SKIP() << "mounting a 1 MiB tmpfs needs root";
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  if (int e = dir.mount_tmpfs("1m")) GTEST_SKIP() << "cannot mount a tmpfs: " << strerror(e);
  for (ak_sync mode : kAllModes) {
    SCOPED_TRACE(mode_name(mode));
    std::string path = dir.path + "/pool-" + mode_name(mode) + ".dat";
    std::string how = in_child(60, [&]() -> int {
      ak_pool_options o = file_options(path, mode, 200);
      ak_pool *p = ak_pool_create(&o);
      if (!p) return 10;
      size_t n = 0;
      void *b;
      errno = 0;
      while ((b = ak_pool_alloc(p)) != nullptr) {
        memset(b, 0xa5, 200);  // a page the kernel could not back would fault here
        if (++n > 100000) return 11;
      }
      if (errno != ENOSPC) return 12;
      if (!strstr(ak_last_error(), path.c_str())) return 13;
      if (n < 1000) return 14;  // the tmpfs held most of a megabyte before it filled
      errno = 0;
      if (ak_pool_reserve(p, 100000) != ENOSPC || errno != ENOSPC) return 15;
      if (!strstr(ak_last_error(), "ak_pool_reserve") || !strstr(ak_last_error(), path.c_str())) return 16;
      ak_pool_destroy(p);
      return unlink(path.c_str()) == 0 ? 0 : 17;
    });
    EXPECT_EQ(how, "") << "10 create, 11 never full, 12 errno, 13 message, 14 too few, 15/16 reserve";
    (void)unlink(path.c_str());
  }
}

// A steady live set, the rest freed and allocated again, for 20 cycles: the
// file stays within a few slabs of its size after the first cycle (every
// freed offset is reused, however many slabs are released at once).
TEST(PoolFileBacking, FreeAndReallocateCyclesKeepTheFileBounded) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  for (ak_sync mode : {AK_SYNC_NONE, AK_SYNC_THREADS, AK_SYNC_SPINLOCK}) {
    SCOPED_TRACE(mode_name(mode));
    std::string path = dir.path + "/cycles.dat";
    ak_pool_options o = file_options(path, mode, 64);
    o.slab_size = 4096;  // ~60 objects a slab: thousands of slabs in a short run
    ak_pool *p = ak_pool_create(&o);
    ASSERT_NE(p, nullptr) << ak_last_error();
    std::vector<void *> steady, churn;
    for (int i = 0; i < 2000; i++) steady.push_back(ak_pool_alloc(p));
    off_t first = -1;
    for (int cycle = 0; cycle < 20; cycle++) {
      for (int i = 0; i < 90000; i++) {
        void *b = ak_pool_alloc(p);
        ASSERT_NE(b, nullptr) << ak_last_error();
        memset(b, cycle, 64);
        churn.push_back(b);
      }
      for (void *b : churn) ak_pool_free(p, b);  // ~1,500 slabs released at once
      churn.clear();
      if (cycle == 0) first = file_size(path);
    }
    off_t last = file_size(path);
    EXPECT_GT(first, 0);
    EXPECT_LE(last, first + 64 * 4096) << "first cycle " << first << " B, after 20 cycles " << last << " B";
    for (void *b : steady) ak_pool_free(p, b);
    ak_pool_destroy(p);
    unlink(path.c_str());
  }
}

// A path in use by a live pool is refused (EBUSY) instead of truncated
// under it; once that pool is gone the path can be used again.
TEST(PoolFileBacking, PathInUseIsRefusedWithEbusy) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  std::string path = dir.path + "/busy.dat";
  ak_pool_options o = file_options(path, AK_SYNC_NONE, 64);
  ak_pool *first = ak_pool_create(&o);
  ASSERT_NE(first, nullptr) << ak_last_error();
  std::vector<uint64_t *> v;
  for (int i = 0; i < 3000; i++) {
    auto *b = static_cast<uint64_t *>(ak_pool_alloc(first));
    ASSERT_NE(b, nullptr);
    *b = static_cast<uint64_t>(i) * 7;
    v.push_back(b);
  }
  off_t size = file_size(path);
  for (ak_sync mode : kAllModes) {
    ak_pool_options o2 = file_options(path, mode, 128);
    errno = 0;
    EXPECT_EQ(ak_pool_create(&o2), nullptr) << mode_name(mode);
    EXPECT_EQ(errno, EBUSY) << mode_name(mode);
    EXPECT_NE(std::string(ak_last_error()).find(path), std::string::npos) << ak_last_error();
  }
  EXPECT_EQ(file_size(path), size) << "the first pool's file is not truncated";
  for (size_t i = 0; i < v.size(); i++) ASSERT_EQ(*v[i], i * 7) << "object " << i;
  ak_pool_destroy(first);
  ak_pool *again = ak_pool_create(&o);
  EXPECT_NE(again, nullptr) << ak_last_error();
  ak_pool_destroy(again);
  unlink(path.c_str());
}

// After everything is freed and trimmed, the stats of a file-backed pool
// report what the kernel holds for it: neither the mapping nor the file
// keeps the freed memory. Allocation works again afterwards.
TEST(PoolFileBacking, StatsAfterTrimMatchWhatTheKernelHolds) {
  TempDir dir;
  ASSERT_FALSE(dir.path.empty());
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  for (ak_sync mode : kAllModes) {
    SCOPED_TRACE(mode_name(mode));
    std::string path = dir.path + "/trim.dat";
    ak_pool_options o = file_options(path, mode, 256);
    ak_pool *p = ak_pool_create(&o);
    ASSERT_NE(p, nullptr) << ak_last_error();
    std::vector<void *> v;
    for (int i = 0; i < 40000; i++) {  // ~10 MiB
      void *b = ak_pool_alloc(p);
      ASSERT_NE(b, nullptr) << ak_last_error();
      memset(b, 1, 256);
      v.push_back(b);
    }
    EXPECT_GE(stats_of(p).bytes_resident, 40000u * 256);
    for (void *b : v) ak_pool_free(p, b);
    ak_pool_trim(p);
    ak_pool_stats s = stats_of(p);
    // LOCKFREE keeps its slabs mapped: their header pages stay.
    EXPECT_LE(s.bytes_resident, s.slabs * page + 2 * 65536) << "freed and trimmed memory is not resident";
    struct stat st;
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_LE(static_cast<size_t>(st.st_blocks) * 512, s.bytes_resident + 2 * 65536)
        << "the file holds no more than the stats report";
    for (int i = 0; i < 40000; i++) {
      void *b = ak_pool_alloc(p);
      ASSERT_NE(b, nullptr) << ak_last_error();
      memset(b, 2, 256);
    }
    ak_pool_destroy(p);
    unlink(path.c_str());
  }
}

// ---- item 7: reserve and object sizes beyond what the system can commit ------------

// ak_pool_reserve(p, 1 << 40) fails with ENOMEM before anything is mapped:
// the pool's stats and the OS layer's mapping count are as before. Run in a
// child whose alarm ends a reserve that maps slab after slab instead.
TEST(PoolBounds, ReserveBeyondCommitFailsAtOnceWithNothingMapped) {
  for (ak_backing backing : {AK_BACKING_MMAP, AK_BACKING_HEAP}) {
    for (ak_sync mode : kAllModes) {
      SCOPED_TRACE(std::string(mode_name(mode)) + (backing == AK_BACKING_HEAP ? " heap" : " mmap"));
      std::string how = in_child(30, [&]() -> int {
        ak_pool_options o{};
        o.object_size = 64;
        o.sync = mode;
        o.backing = backing;
        ak_pool *p = ak_pool_create(&o);
        if (!p) return 10;
        void *keep = ak_pool_alloc(p);
        if (!keep) return 11;
        ak_pool_stats before = stats_of(p);
        _ak_os_counters c0, c1;
        _ak_os_get_counters(&c0);
        errno = 0;
        int rc = ak_pool_reserve(p, size_t{1} << 40);
        if (rc != ENOMEM || errno != ENOMEM) return 12;
        if (!strstr(ak_last_error(), "ak_pool_reserve")) return 13;
        _ak_os_get_counters(&c1);
        ak_pool_stats after = stats_of(p);
        if (after.slabs != before.slabs || after.bytes_reserved != before.bytes_reserved) return 14;
        if (c1.map_calls != c0.map_calls || c1.mapped_bytes != c0.mapped_bytes) return 15;
        if (ak_pool_reserve(p, 10000) != 0) return 16;  // a sane request still works
        ak_pool_free(p, keep);
        ak_pool_destroy(p);
        return 0;
      });
      EXPECT_EQ(how, "") << "12 rc/errno, 13 message, 14 stats changed, 15 memory mapped, 16 sane reserve";
    }
  }
}

// Under RLIMIT_AS a reserve the limit cannot hold fails up front with
// ENOMEM, leaving the pool as it was (not with the slabs that fitted).
TEST(PoolBounds, ReserveRespectsRlimitAs) {
  if (AK_TEST_SANITIZED) GTEST_SKIP() << "sanitizers reserve terabytes of address space for themselves";
  for (ak_sync mode : kAllModes) {
    SCOPED_TRACE(mode_name(mode));
    std::string how = in_child(30, [&]() -> int {
      ak_pool_options o{};
      o.object_size = 64;
      o.sync = mode;
      ak_pool *p = ak_pool_create(&o);
      if (!p) return 10;
      void *keep = ak_pool_alloc(p);
      if (!keep) return 11;
      long pages = 0;
      FILE *f = fopen("/proc/self/statm", "r");
      if (!f || fscanf(f, "%ld", &pages) != 1) return 12;
      fclose(f);
      size_t vm = static_cast<size_t>(pages) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
      struct rlimit rl = {vm + (size_t{256} << 20), vm + (size_t{256} << 20)};
      if (setrlimit(RLIMIT_AS, &rl) != 0) return 13;
      ak_pool_stats before = stats_of(p);
      errno = 0;
      int rc = ak_pool_reserve(p, (size_t{512} << 20) / 64);  // 512 MiB of objects
      if (rc != ENOMEM || errno != ENOMEM) return 14;
      ak_pool_stats after = stats_of(p);
      if (after.slabs != before.slabs) return 15;
      if (ak_pool_reserve(p, (size_t{64} << 20) / 64) != 0) return 16;  // 64 MiB fits
      ak_pool_free(p, keep);
      ak_pool_destroy(p);
      return 0;
    });
    EXPECT_EQ(how, "") << "14 rc/errno, 15 slabs were mapped, 16 a reserve that fits failed";
  }
}

// A pool of 1 TiB objects cannot hold a single one on any machine that can
// run this test: create or the first allocation fails with ENOMEM or
// EINVAL instead of handing out memory the system cannot commit.
TEST(PoolBounds, AbsurdObjectSizeFails) {
  for (ak_backing backing : {AK_BACKING_MMAP, AK_BACKING_HEAP}) {
    for (ak_sync mode : kAllModes) {
      SCOPED_TRACE(mode_name(mode));
      std::string how = in_child(30, [&]() -> int {
        ak_pool_options o{};
        o.object_size = size_t{1} << 40;
        o.sync = mode;
        o.backing = backing;
        errno = 0;
        ak_pool *p = ak_pool_create(&o);
        if (!p) return errno == ENOMEM || errno == EINVAL ? 0 : 10;
        errno = 0;
        void *b = ak_pool_alloc(p);
        if (b) return 11;
        if (errno != ENOMEM && errno != EINVAL) return 12;
        ak_pool_destroy(p);
        return 0;
      });
      EXPECT_EQ(how, "") << "10 create errno, 11 a 1 TiB object was handed out, 12 alloc errno";
    }
  }
}

// ---- item 10: LOCKFREE on the C heap gives memory back at trim --------------------

size_t rss_bytes() {
  long pages = 0, resident = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (!f) return 0;
  if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  fclose(f);
  return static_cast<size_t>(resident) * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

TEST(PoolHeapBacking, LockfreeTrimGivesMemoryBack) {
  ak_pool_options o{};
  o.object_size = 256;
  o.sync = AK_SYNC_LOCKFREE;
  o.backing = AK_BACKING_HEAP;
  ak_pool *p = ak_pool_create(&o);
  ASSERT_NE(p, nullptr) << ak_last_error();
  size_t base_pool = stats_of(p).bytes_resident, base_rss = rss_bytes();
  std::vector<void *> v;
  const size_t n = (size_t{256} << 20) / 256;  // 256 MiB of objects
  v.reserve(n);
  for (size_t i = 0; i < n; i++) {
    void *b = ak_pool_alloc(p);
    ASSERT_NE(b, nullptr) << ak_last_error();
    memset(b, 0x3c, 256);
    v.push_back(b);
  }
  EXPECT_GE(stats_of(p).bytes_resident, size_t{256} << 20);
  size_t full_rss = rss_bytes();
  for (void *b : v) ak_pool_free(p, b);
  ak_pool_trim(p);
  ak_pool_stats s = stats_of(p);
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE)), headers = s.slabs * page;
  // The slabs stay the pool's (LOCKFREE): the header page of each stays.
  EXPECT_LE(s.bytes_resident, base_pool + headers + (size_t{1} << 20))
      << "the pool's slabs still hold " << (s.bytes_resident >> 20) << " MiB after trim";
  // RSS gives back at least three quarters of what the objects took: a
  // header page per slab, the vector of pointers (8 MiB) and the C heap's
  // own chunk headers around each aligned block stay (sanitizers add shadow
  // memory and their allocator's pages: the pool's figure only there).
  if (!AK_TEST_SANITIZED) {
    size_t now = rss_bytes();
    EXPECT_LE(now - base_rss, (full_rss - base_rss) / 4)
        << "RSS, MiB: " << (base_rss >> 20) << " before, " << (full_rss >> 20) << " with the objects, "
        << (now >> 20) << " after free and trim";
  }
  for (int i = 0; i < 1000; i++) ASSERT_NE(ak_pool_alloc(p), nullptr) << "the pool works after trim";
  ak_pool_destroy(p);
}

// ---- item 11: the stats printer reports a failed write ----------------------------

TEST(PoolStatsPrint, FailedWriteIsReported) {
  FILE *f = fopen("/dev/full", "w");
  if (!f) GTEST_SKIP() << "no /dev/full";
  ak_pool_options o{};
  o.object_size = 32;
  o.name = "printed";
  ak_pool *p = ak_pool_create(&o);
  ASSERT_NE(p, nullptr);
  errno = 0;
  EXPECT_EQ(ak_pool_stats_print(p, f), -1);
  EXPECT_EQ(errno, ENOSPC);
  EXPECT_NE(std::string(ak_last_error()).find("ak_pool_stats_print"), std::string::npos) << ak_last_error();
  fclose(f);
  // A stream that takes the text still answers 0.
  f = tmpfile();
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(ak_pool_stats_print(p, f), 0);
  EXPECT_GT(ftell(f), 0);
  fclose(f);
  ak_pool_destroy(p);
}

}  // namespace
