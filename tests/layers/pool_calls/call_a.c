/* SPDX-License-Identifier: MIT */
/* A fixture of tests/layers: call_a.c and call_b.c call each other, a
 * call cycle check_layout.sh must reject. */
int ak_fixture_b(int n);
int ak_fixture_a(int n);
int ak_fixture_a(int n) { return n > 0 ? ak_fixture_b(n - 1) : 0; }
