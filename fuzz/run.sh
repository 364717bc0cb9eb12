#!/usr/bin/env bash
# Runs one libFuzzer binary for <seconds> on a COPY of its seed corpus (the
# committed corpus stays small and unchanged), with a 10 s per-input timeout.
# A crash, leak, timeout or failed check makes it exit non-zero; the input is
# kept in the work directory it prints.
#   fuzz/run.sh <fuzzer> <seed-corpus-dir> <seconds> [extra libFuzzer flags]
set -euo pipefail
fuzzer=$1 corpus=$2 seconds=$3
shift 3
work=$(mktemp -d "${TMPDIR:-/tmp}/aspen-fuzz.XXXXXX")
mkdir -p "$work/corpus"
cp "$corpus"/* "$work/corpus/" 2>/dev/null || true
echo "fuzz: $(basename "$fuzzer") for ${seconds}s, work dir $work"
cd "$work"
if "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
     -artifact_prefix="$work/" "$@" "$work/corpus"; then
  rm -rf "$work"
else
  status=$?
  echo "fuzz: $(basename "$fuzzer") FAILED (exit $status); reproducer and corpus kept in $work" >&2
  exit "$status"
fi
