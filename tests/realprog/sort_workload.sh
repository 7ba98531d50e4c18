#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# sort workload of tests/realprog/run.sh: sorts INPUT (a few hundred MB of
# generated lines) with a small -S buffer, so sort spills to temporary files
# in TMP and merges them, once whole-line, once by keys (stable, numeric
# field), once unique; prints line counts and sha256 of every output.
# Usage: sort_workload.sh INPUT TMP
set -euo pipefail
input=$1 tmp=$2
export LC_ALL=C
rm -rf "$tmp"
mkdir -p "$tmp"
sort -S 32M -T "$tmp" --parallel=2 -o "$tmp/out1" "$input"
sha256sum <"$tmp/out1"
wc -l <"$tmp/out1"
sort -c "$tmp/out1"
rm -f "$tmp/out1"
sort -S 24M -T "$tmp" -s -t ' ' -k3,3n -k1,1 -o "$tmp/out2" "$input"
sha256sum <"$tmp/out2"
rm -f "$tmp/out2"
sort -u -S 16M -T "$tmp" -k2,2 -o "$tmp/out3" "$input"
sha256sum <"$tmp/out3"
wc -l <"$tmp/out3"
rm -rf "$tmp"
