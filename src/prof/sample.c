/* SPDX-License-Identifier: MIT */
/* sample.c - the slow path of the per-thread countdown (sample.h): the
 * exponential draws, the per-thread generator, and the weight that
 * unsamples a sample, with ln and exp written here because the library
 * links libc only (no libm).
 *
 * Unsampling: bytes between samples form a Poisson process of rate
 * 1/period, so a block of s bytes is sampled with probability
 * p = 1 - exp(-s / period); a sample stands for 1/p such blocks and s/p
 * bytes (the estimate is unbiased whatever the mix of sizes). The weight
 * is kept in fixed point (AK_PROF_OBJ_ONE per object) so that a record
 * adds and later removes exactly the same amounts. */
#include <stdint.h>
#include <string.h>

#include "common/assert.h"
#include "prof/prof_internal.h"

__thread _ak_prof_tls _ak_prof_self __attribute__((tls_model("initial-exec")));
uint64_t _ak_prof_gen = 2;

#define LN2_HI 6.93147180369123816490e-01 /* ln 2, split so that k * LN2_HI is exact */
#define LN2_LO 1.90821492927058770002e-10
#define SQRT2 1.41421356237309504880

/* ---- ln and exp ---------------------------------------------------------- */

static double bits_to_double(uint64_t b) {
  double d;
  memcpy(&d, &b, sizeof d);
  return d;
}

static uint64_t double_to_bits(double d) {
  uint64_t b;
  memcpy(&b, &d, sizeof b);
  return b;
}

/* x = m * 2^e with m in [sqrt(1/2), sqrt(2)); ln m = 2 atanh(s) with
 * s = (m - 1) / (m + 1), |s| < 0.172: the odd series to s^21 is exact to
 * the last bits. For x > 0 (finite); x <= 0 gives -1e308. */
double _ak_prof_ln(double x) {
  if (!(x > 0)) return -1e308;
  int e = 0;
  uint64_t b = double_to_bits(x);
  if ((b >> 52) == 0) {       /* subnormal: scale into the normal range */
    x *= 18014398509481984.0; /* 2^54 */
    e = -54;
    b = double_to_bits(x);
  }
  e += (int)((b >> 52) & 0x7ff) - 1023;
  double m = bits_to_double((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
  if (m > SQRT2) {
    m *= 0.5;
    e++;
  }
  double s = (m - 1) / (m + 1), s2 = s * s, sum = 0;
  for (int k = 21; k >= 3; k -= 2) sum = (sum + 1.0 / k) * s2;
  return e * LN2_HI + (e * LN2_LO + 2 * s * (1 + sum));
}

/* x = k ln 2 + r with |r| <= ln2 / 2; exp(r) by its Taylor series to r^13
 * (the remainder is below 1e-17), times 2^k built in the exponent bits.
 * Underflows to 0 below -708 and saturates above 709. */
double _ak_prof_exp(double x) {
  if (x < -708) return 0;
  if (x > 709) x = 709;
  double kf = x / (LN2_HI + LN2_LO);
  long k = (long)(kf < 0 ? kf - 0.5 : kf + 0.5);
  double r = (x - (double)k * LN2_HI) - (double)k * LN2_LO;
  double sum = 1;
  for (int i = 13; i >= 1; i--) sum = 1 + sum * r / i;
  return sum * bits_to_double((uint64_t)(k + 1023) << 52);
}

/* 1 - exp(-x) for x >= 0, by its series while x is small (where the
 * subtraction would cancel), else directly. */
static double one_minus_exp_neg(double x) {
  if (x >= 0.25) return 1 - _ak_prof_exp(-x);
  double term = x, sum = 0;
  for (int k = 1; k <= 12; k++) {
    sum += term;
    term *= -x / (k + 1);
  }
  return sum;
}

uint64_t _ak_prof_weight(uint64_t size, uint64_t period) {
  AK_ASSERT(period > 0);
  double p = one_minus_exp_neg((double)(size ? size : 1) / (double)period);
  return (uint64_t)((double)AK_PROF_OBJ_ONE / p + 0.5);
}

/* ---- the generator ---------------------------------------------------------- */

static uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint64_t seed_count;

void _ak_prof_seed(uint64_t seed) {
  uint64_t s = splitmix64(seed);
  _ak_prof_self.rng = s ? s : 0x2545f4914f6cdd1dull;
}

/* xorshift64*: 64 bits per call; a thread seeds itself from its state's
 * address and a process-wide count (distinct per thread, no system call). */
static uint64_t next_random(_ak_prof_tls *t) {
  if (t->rng == 0)
    _ak_prof_seed((uint64_t)(uintptr_t)t ^ (__atomic_add_fetch(&seed_count, 1, __ATOMIC_RELAXED) << 40));
  uint64_t x = t->rng;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  t->rng = x;
  return x * 0x2545f4914f6cdd1dull;
}

int64_t _ak_prof_draw(uint64_t period) {
  /* u in (0, 1]: 53 random bits, never 0; -ln u is exponential, mean 1. */
  double u = (double)((next_random(&_ak_prof_self) >> 11) + 1) * (1.0 / 9007199254740992.0);
  double x = -_ak_prof_ln(u) * (double)period;
  return x < 4e18 ? (int64_t)x : INT64_MAX / 2;
}

/* ---- the countdown's slow paths ------------------------------------------------ */

uint64_t _ak_prof_period(void) { return __atomic_load_n(&_ak_prof_g.period, __ATOMIC_RELAXED); }

void _ak_prof_rearm(uint64_t gen) {
  _ak_prof_self.gen = gen;
  _ak_prof_self.left = (gen & 1) ? _ak_prof_draw(_ak_prof_period()) : INT64_MAX;
}

int64_t _ak_prof_countdown(void) {
  uint64_t gen = __atomic_load_n(&_ak_prof_gen, __ATOMIC_RELAXED);
  return (gen & 1) ? _ak_prof_draw(_ak_prof_period()) : INT64_MAX;
}

bool _ak_prof_sample_slow(size_t n) {
  _ak_prof_tls *t = &_ak_prof_self;
  uint64_t gen = __atomic_load_n(&_ak_prof_gen, __ATOMIC_RELAXED);
  if (t->gen != gen) { /* a start, stop or new period since this thread armed */
    _ak_prof_rearm(gen);
    t->left = (int64_t)((uint64_t)t->left - n);
    if (t->left >= 0) return false;
  }
  if (!(gen & 1)) { /* off: never again until the generation changes */
    t->left = INT64_MAX;
    return false;
  }
  t->left = _ak_prof_draw(_ak_prof_period());
  return t->busy == 0;
}
