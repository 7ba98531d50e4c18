/* SPDX-License-Identifier: MIT */
/* Fixture: the other half of the call cycle of call_a.c. */
int ak_fixture_a(int n);
int ak_fixture_b(int n);
int ak_fixture_b(int n) { return n > 0 ? ak_fixture_a(n - 1) : 1; }
