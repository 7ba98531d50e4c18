/* SPDX-License-Identifier: MIT */
/* maps.c - the process's mappings as the profiler needs them: the lines
 * of /proc/self/maps (for the profile's mappings, the library's own text
 * and a thread's stack bounds), the build id of an ELF file (so that
 * pprof checks it symbolizes with the binary that ran) and the path of
 * the main program.
 *
 * Everything here reads with open/read/pread/readlink into buffers on the
 * stack: no allocation, no lock, so a sample (inside malloc) may call it. */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prof/prof_internal.h"

/* ---- /proc/self/maps ----------------------------------------------------------- */

/* Parses "start-end perms offset dev inode [path]" (NUL-terminated line).
 * False when the line is not in that form. */
static bool parse_line(char *line, _ak_prof_map_line *m) {
  char *p = line, *end;
  m->start = (uintptr_t)strtoull(p, &end, 16);
  if (end == p || *end != '-') return false;
  p = end + 1;
  m->end = (uintptr_t)strtoull(p, &end, 16);
  if (end == p || *end != ' ' || strlen(end + 1) < 5) return false;
  m->exec = end[3] == 'x';
  p = end + 6;
  m->offset = strtoull(p, &end, 16);
  if (end == p) return false;
  for (int field = 0; field < 2; field++) { /* dev, inode */
    while (*end == ' ') end++;
    while (*end && *end != ' ') end++;
  }
  while (*end == ' ') end++;
  m->path = end;
  return true;
}

int _ak_prof_maps_each(bool (*fn)(void *ctx, const _ak_prof_map_line *m), void *ctx) {
  int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[4096];
  size_t have = 0;
  bool skipping = false, more = true, go = true;
  while (more && go) {
    ssize_t r = read(fd, buf + have, sizeof buf - 1 - have);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      int e = errno;
      close(fd);
      errno = e;
      return -1;
    }
    if (r == 0) {
      more = false;
      if (have > 0) buf[have++] = '\n'; /* a last line without its newline */
    }
    have += (size_t)(r > 0 ? r : 0);
    size_t at = 0;
    for (char *nl; go && (nl = memchr(buf + at, '\n', have - at)) != NULL; at = (size_t)(nl - buf) + 1) {
      *nl = '\0';
      _ak_prof_map_line m;
      if (!skipping && parse_line(buf + at, &m)) go = fn(ctx, &m);
      skipping = false;
    }
    memmove(buf, buf + at, have - at);
    have -= at;
    if (have == sizeof buf - 1) { /* a line longer than the buffer: passed over */
      skipping = true;
      have = 0;
    }
  }
  close(fd);
  return 0;
}

typedef struct find_ctx {
  uintptr_t addr, start, end;
  bool found;
  char path[512];
} find_ctx;

static bool find_step(void *arg, const _ak_prof_map_line *m) {
  find_ctx *f = (find_ctx *)arg;
  if (f->addr < m->start || f->addr >= m->end) return true;
  f->start = m->start;
  f->end = m->end;
  f->found = true;
  size_t n = strnlen(m->path, sizeof f->path - 1);
  memcpy(f->path, m->path, n);
  f->path[n] = '\0';
  return false;
}

bool _ak_prof_maps_find(uintptr_t addr, uintptr_t *start, uintptr_t *end, bool *is_main) {
  find_ctx f;
  f.addr = addr;
  f.found = false;
  if (_ak_prof_maps_each(find_step, &f) != 0 || !f.found) return false;
  *start = f.start;
  *end = f.end;
  if (is_main) {
    char exe[512];
    *is_main = _ak_prof_exe_path(exe, sizeof exe) && strcmp(exe, f.path) == 0;
  }
  return true;
}

bool _ak_prof_exe_path(char *buf, size_t cap) {
  ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
  if (n <= 0 || (size_t)n >= cap - 1) return false;
  buf[n] = '\0';
  return true;
}

/* ---- build ids ---------------------------------------------------------------------- */

static bool read_at(int fd, void *buf, size_t n, uint64_t off) {
  ssize_t r;
  do r = pread(fd, buf, n, (off_t)off);
  while (r < 0 && errno == EINTR);
  return r == (ssize_t)n;
}

/* The build id in the notes `p[0..n)`, as hex into `hex`. */
static bool note_build_id(const unsigned char *p, size_t n, char *hex, size_t cap) {
  static const char digits[] = "0123456789abcdef";
  for (size_t at = 0; at + sizeof(Elf64_Nhdr) <= n;) {
    Elf64_Nhdr h;
    memcpy(&h, p + at, sizeof h);
    size_t name = at + sizeof h, desc = name + ((h.n_namesz + 3u) & ~3u);
    if (desc + h.n_descsz > n) return false;
    if (h.n_type == NT_GNU_BUILD_ID && h.n_namesz == 4 && memcmp(p + name, "GNU", 4) == 0) {
      if (h.n_descsz == 0 || 2 * (size_t)h.n_descsz + 1 > cap) return false;
      for (size_t i = 0; i < h.n_descsz; i++) {
        hex[2 * i] = digits[p[desc + i] >> 4];
        hex[2 * i + 1] = digits[p[desc + i] & 15];
      }
      hex[2 * h.n_descsz] = '\0';
      return true;
    }
    at = desc + ((h.n_descsz + 3u) & ~3u);
  }
  return false;
}

bool _ak_prof_build_id(const char *path, char *hex, size_t cap) {
  if (path[0] != '/') return false;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  Elf64_Ehdr eh;
  bool found = false;
  if (read_at(fd, &eh, sizeof eh, 0) && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr)) {
    for (unsigned i = 0; i < eh.e_phnum && i < 256 && !found; i++) {
      Elf64_Phdr ph;
      unsigned char notes[2048];
      if (!read_at(fd, &ph, sizeof ph, eh.e_phoff + (uint64_t)i * sizeof ph)) break;
      if (ph.p_type != PT_NOTE) continue;
      size_t n = ph.p_filesz < sizeof notes ? (size_t)ph.p_filesz : sizeof notes;
      found = read_at(fd, notes, n, ph.p_offset) && note_build_id(notes, n, hex, cap);
    }
  }
  close(fd);
  return found;
}
