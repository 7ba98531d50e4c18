// SPDX-License-Identifier: MIT
// prof_decode.h - the tests' own reader of pprof's profile.proto: a
// protocol-buffers decoder written apart from the library's encoder
// (packed and unpacked repeated fields alike), the fields of Profile the
// heap profiler writes, and a check of what makes a profile valid for
// pprof (the string table starts with "", every index is in it, every
// location and mapping a sample or location names exists, each sample
// has one value per sample type); and a scratch directory for the
// profiles a test writes.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace profdec {

struct Sample {
  std::vector<uint64_t> locs;
  std::vector<int64_t> values;
  std::vector<std::pair<int64_t, int64_t>> labels;  // (key, str) string ids
};
struct Mapping {
  uint64_t id = 0, start = 0, limit = 0, offset = 0;
  int64_t file = 0, build = 0;
};
struct Location {
  uint64_t id = 0, mapping = 0, address = 0;
};
struct Profile {
  std::vector<std::pair<int64_t, int64_t>> sample_type;
  std::vector<Sample> samples;
  std::vector<Mapping> mappings;
  std::vector<Location> locations;
  std::vector<std::string> strings;
  std::vector<int64_t> comments;
  int64_t drop_frames = 0, time_nanos = 0, period = 0, default_type = 0;
  std::pair<int64_t, int64_t> period_type{0, 0};

  const std::string &str(int64_t i) const {
    static const std::string bad = "<bad string index>";
    return i >= 0 && static_cast<size_t>(i) < strings.size() ? strings[static_cast<size_t>(i)] : bad;
  }
};

class Reader {
 public:
  Reader(const uint8_t *p, size_t n) : p_(p), end_(p + n) {}
  bool done() const { return p_ == end_; }
  bool varint(uint64_t *v) {
    *v = 0;
    for (int shift = 0; shift < 64 && p_ < end_; shift += 7) {
      uint8_t b = *p_++;
      *v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return true;
    }
    return false;
  }
  // One field: its number, wire type, and value (varint) or bytes (len).
  bool field(uint32_t *num, unsigned *wire, uint64_t *v, Reader *sub) {
    uint64_t key;
    if (!varint(&key)) return false;
    *num = static_cast<uint32_t>(key >> 3);
    *wire = static_cast<unsigned>(key & 7);
    if (*wire == 0) return varint(v);
    if (*wire != 2) return false;
    uint64_t len;
    if (!varint(&len) || len > static_cast<uint64_t>(end_ - p_)) return false;
    *sub = Reader(p_, static_cast<size_t>(len));
    p_ += len;
    return true;
  }
  std::string bytes() const { return std::string(reinterpret_cast<const char *>(p_), end_ - p_); }

 private:
  const uint8_t *p_, *end_;
};

// Calls f(number, wire type, varint value, length-delimited bytes) for
// each field of `r`; false when `r` is malformed or f returns false.
template <class F>
bool each_field(Reader r, F f) {
  while (!r.done()) {
    uint32_t num;
    unsigned wire;
    uint64_t v = 0;
    Reader sub(nullptr, 0);
    if (!r.field(&num, &wire, &v, &sub) || !f(num, wire, v, sub)) return false;
  }
  return true;
}

// A repeated varint field, packed (wire 2) or not (wire 0).
inline bool repeated(unsigned wire, uint64_t v, Reader sub, std::vector<uint64_t> *out) {
  if (wire == 0) {
    out->push_back(v);
    return true;
  }
  while (!sub.done()) {
    if (!sub.varint(&v)) return false;
    out->push_back(v);
  }
  return true;
}

// A message of varint fields, into out[field number].
inline bool varint_message(Reader r, std::map<uint32_t, uint64_t> *out) {
  return each_field(r, [&](uint32_t num, unsigned wire, uint64_t v, Reader) {
    if (wire == 0) (*out)[num] = v;
    return true;
  });
}

// Fields 1 and 2 of a message (ValueType, Label's key and str).
inline bool pair_message(Reader r, std::pair<int64_t, int64_t> *out) {
  std::map<uint32_t, uint64_t> m;
  if (!varint_message(r, &m)) return false;
  *out = {static_cast<int64_t>(m[1]), static_cast<int64_t>(m[2])};
  return true;
}

inline bool sample_message(Reader r, Sample *s) {
  return each_field(r, [&](uint32_t num, unsigned wire, uint64_t v, Reader sub) {
    std::vector<uint64_t> vals;
    std::pair<int64_t, int64_t> l;
    switch (num) {
      case 1: return repeated(wire, v, sub, &s->locs);
      case 2:
        if (!repeated(wire, v, sub, &vals)) return false;
        for (uint64_t x : vals) s->values.push_back(static_cast<int64_t>(x));
        return true;
      case 3:
        if (!pair_message(sub, &l)) return false;
        s->labels.push_back(l);
        return true;
      default: return true;
    }
  });
}

inline bool decode(const std::string &bytes, Profile *p) {
  Reader r(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size());
  return each_field(r, [&](uint32_t num, unsigned, uint64_t v, Reader sub) {
    std::map<uint32_t, uint64_t> m;
    std::pair<int64_t, int64_t> vt;
    Sample s;
    switch (num) {
      case 1: return pair_message(sub, &vt) && (p->sample_type.push_back(vt), true);
      case 2: return sample_message(sub, &s) && (p->samples.push_back(s), true);
      case 3:
        if (!varint_message(sub, &m)) return false;
        p->mappings.push_back(
            {m[1], m[2], m[3], m[4], static_cast<int64_t>(m[5]), static_cast<int64_t>(m[6])});
        return true;
      case 4:
        if (!varint_message(sub, &m)) return false;
        p->locations.push_back({m[1], m[2], m[3]});
        return true;
      case 6: p->strings.push_back(sub.bytes()); return true;
      case 7: p->drop_frames = static_cast<int64_t>(v); return true;
      case 9: p->time_nanos = static_cast<int64_t>(v); return true;
      case 11: return pair_message(sub, &p->period_type);
      case 12: p->period = static_cast<int64_t>(v); return true;
      case 13: p->comments.push_back(static_cast<int64_t>(v)); return true;
      case 14: p->default_type = static_cast<int64_t>(v); return true;
      default: return true;
    }
  });
}

// A scratch directory for a test's files, removed with what it holds
// (kept when AK_PROF_KEEP is set, to look at them).
class TempDir {
 public:
  explicit TempDir(const char *prefix) {
    std::string tmpl = std::string("/tmp/") + prefix + ".XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data())) path_ = buf.data();
  }
  ~TempDir() {
    if (!path_.empty() && !getenv("AK_PROF_KEEP")) {
      std::string cmd = "rm -rf '" + path_ + "'";
      if (system(cmd.c_str()) != 0) std::fprintf(stderr, "could not remove %s\n", path_.c_str());
    }
  }
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  const std::string &path() const { return path_; }  // "" when it could not be made

 private:
  std::string path_;
};

inline std::string read_file(const std::string &path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// Empty when `p` is valid; else what is wrong.
inline std::string validate(const Profile &p) {
  if (p.strings.empty() || !p.strings[0].empty()) return "string_table[0] is not \"\"";
  auto in = [&](int64_t i) { return i >= 0 && static_cast<size_t>(i) < p.strings.size(); };
  std::map<uint64_t, const Location *> locs;
  std::map<uint64_t, bool> maps;
  for (const Mapping &m : p.mappings) {
    if (m.id == 0 || maps.count(m.id) || !in(m.file) || !in(m.build) || m.start >= m.limit)
      return "bad mapping";
    maps[m.id] = true;
  }
  for (const Location &l : p.locations) {
    if (l.id == 0 || locs.count(l.id) || (l.mapping != 0 && !maps.count(l.mapping))) return "bad location";
    locs[l.id] = &l;
  }
  for (const auto &st : p.sample_type)
    if (!in(st.first) || !in(st.second)) return "bad sample type";
  for (const Sample &s : p.samples) {
    if (s.values.size() != p.sample_type.size()) return "a sample's values do not match the sample types";
    for (uint64_t id : s.locs)
      if (!locs.count(id)) return "a sample names a missing location";
    for (const auto &l : s.labels)
      if (!in(l.first) || !in(l.second)) return "bad label";
  }
  if (!in(p.drop_frames) || !in(p.default_type) || !in(p.period_type.first) || !in(p.period_type.second))
    return "bad string index in the profile";
  return "";
}

// The sum of value `index` over the samples whose label `key` is `value`
// (key empty: every sample).
inline int64_t sum(const Profile &p, size_t index, const std::string &key = "",
                   const std::string &value = "") {
  int64_t total = 0;
  for (const Sample &s : p.samples) {
    bool match = key.empty();
    for (const auto &l : s.labels) match = match || (p.str(l.first) == key && p.str(l.second) == value);
    if (match && index < s.values.size()) total += s.values[index];
  }
  return total;
}

}  // namespace profdec
