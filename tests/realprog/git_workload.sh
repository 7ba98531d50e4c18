#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Git workload of tests/realprog/run.sh: builds a repository of ~300
# deterministic commits (edits, new files, renames, deletions, tags, merged
# topic branches), then prints log --stat, blame, archive and pack facts,
# runs gc and fsck --full.  Every byte of stdout is a function of the
# script (fixed names and dates), so it is compared between a run without
# and a run with LD_PRELOAD.  Usage: git_workload.sh DIR [COMMITS]
set -euo pipefail
dir=$1
commits=${2:-300}
export GIT_CONFIG_NOSYSTEM=1 GIT_CONFIG_GLOBAL=/dev/null
export GIT_AUTHOR_NAME="Real Prog" GIT_AUTHOR_EMAIL="realprog@example.org"
export GIT_COMMITTER_NAME="Real Prog" GIT_COMMITTER_EMAIL="realprog@example.org"
stamp() {
  GIT_AUTHOR_DATE="$((1700000000 + $1 * 3600)) +0000"
  GIT_COMMITTER_DATE=$GIT_AUTHOR_DATE
  export GIT_AUTHOR_DATE GIT_COMMITTER_DATE
}
rm -rf "$dir"
git init -q -b main "$dir"
cd "$dir"
git config gc.auto 0
git config core.autocrlf false
git config core.fsync none
nfiles=24
mkdir -p src docs topic
for ((k = 0; k < nfiles; k++)); do
  awk -v k="$k" 'BEGIN { for (l = 1; l <= 150; l++) printf "file %d line %d value %d\n", k, l, (k * 7919 + l * 104729) % 1000003 }' >"src/file_$k.txt"
done
stamp 0
git add -A
git commit -q -m "initial import"
# Rewrites a few lines of a file, inserts one and sometimes deletes one,
# all as a pure function of the commit number.
edit() {
  awk -v i="$1" -v salt="$2" '
    NR == (i * 13 + salt) % 140 + 1 { out[++n] = "commit " i " rewrote this line (" salt ")"; next }
    NR == (i * 31 + salt) % 150 + 1 { out[++n] = $0 " +" i; next }
    NR == (i * 17 + salt) % 150 + 1 && i % 5 == 0 { next }
    { out[++n] = $0 }
    NR == (i * 7 + salt) % 120 + 1 { out[++n] = "inserted by commit " i }
    END { close(FILENAME); for (l = 1; l <= n; l++) print out[l] >FILENAME }
  ' "$3"
}
for ((i = 1; i <= commits; i++)); do
  stamp "$i"
  k=$(((i * 7) % nfiles))
  edit "$i" 1 "src/file_$k.txt"
  if ((i % 3 == 0)); then edit "$i" 2 "src/file_$(((i * 11 + 5) % nfiles)).txt"; fi
  if ((i % 25 == 0)); then
    mkdir -p docs
    awk -v i="$i" 'BEGIN { for (l = 1; l <= 40; l++) printf "note %d paragraph %d: %s\n", i, l, substr("lorem ipsum dolor sit amet consectetur adipiscing elit", 1, 10 + (i * l) % 45) }' >"docs/note_$i.md"
  fi
  if ((i % 40 == 0)) && [ -f "docs/note_$((i - 15)).md" ]; then git rm -q "docs/note_$((i - 15)).md"; fi
  note="docs/note_$((i / 25 * 25)).md"
  if ((i % 45 == 0)) && [ -f "$note" ]; then mv "$note" "docs/moved_$i.md"; fi
  # New, moved and deleted files need "add -A"; plain edits take "commit -a".
  if ((i % 25 == 0 || i % 40 == 0 || i % 45 == 0)); then git add -A; fi
  git commit -q -a -m "commit $i: edit file_$k" -m "Generated change number $i."
  if ((i % 50 == 0)); then
    git checkout -q -b "topic-$i" HEAD~2
    for ((j = 1; j <= 3; j++)); do
      stamp "$i"
      mkdir -p topic
      printf 'topic %d step %d\n' "$i" "$j" >>"topic/t_$i.txt"
      git add -A
      git commit -q -m "topic $i step $j"
    done
    git checkout -q main
    git merge -q --no-ff -m "merge topic-$i" "topic-$i"
  fi
  if ((i % 60 == 0)); then git tag -a "v$i" -m "release $i"; fi
done
echo "== log --stat"
git log --stat --format=fuller
echo "== rev-list"
git rev-parse HEAD
git rev-list --count --all
git log --graph --oneline --all | tail -n 60
echo "== blame"
git blame -w -M -C src/file_3.txt | sha256sum
echo "== log -p"
git log -p --all | sha256sum
echo "== diff"
git diff --stat "main~$((commits / 3))" main
echo "== archive"
git archive --format=tar HEAD | sha256sum
echo "== gc"
git gc --quiet
git count-objects -v | grep -E '^(count|in-pack|packs|garbage):'
echo "== fsck"
git fsck --full --strict
git rev-list --objects --all | sha256sum
echo "== done"
