#!/usr/bin/env bash
# Runs one libFuzzer binary for <seconds> on a COPY of its seed corpus (the
# committed corpus stays small and unchanged), with a 10 s per-input timeout.
# A crash, leak, timeout or failed check makes it exit non-zero; the input is
# kept in the work directory it prints.
#   fuzz/run.sh <fuzzer> <seed-corpus-dir> <seconds> [extra libFuzzer flags]
#
# libFuzzer's progress lines go to a log in the work directory, not to the
# terminal: they are thousands of lines, and a log collector that keeps only
# the head and tail of a run (as CI's does) would cut the crash report out of
# the middle. On success this prints the final statistics; on failure, the
# report with the progress lines left out, then the reproducer's bytes.
set -euo pipefail
fuzzer=$1 corpus=$2 seconds=$3
shift 3
work=$(mktemp -d "${TMPDIR:-/tmp}/aspen-fuzz.XXXXXX")
mkdir -p "$work/corpus"
cp "$corpus"/* "$work/corpus/" 2>/dev/null || true
name=$(basename "$fuzzer")
echo "fuzz: $name for ${seconds}s, work dir $work"
cd "$work"
if "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
     -artifact_prefix="$work/" "$@" "$work/corpus" > "$work/log" 2>&1; then
  grep -E '^(Done |stat::)' "$work/log" || true
  rm -rf "$work"
else
  status=$?
  # Progress lines start with '#<n>' or are NEW_FUNC lines; everything else
  # (the sanitizer or check report, the stack, the reproducer's name) stays.
  grep -vE '^(#[0-9]+[[:space:]]|[[:space:]]+NEW_FUNC)' "$work/log" | tail -n 200 >&2 || true
  for artifact in "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-*; do
    [ -e "$artifact" ] || continue
    echo "fuzz: reproducer $(basename "$artifact") (hex): $(od -An -tx1 -v "$artifact" | tr -d '\n')" >&2
  done
  echo "fuzz: $name FAILED (exit $status); reproducer, corpus and full log kept in $work" >&2
  exit "$status"
fi
