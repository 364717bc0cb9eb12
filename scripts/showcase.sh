#!/usr/bin/env bash
# THE showcase command: build the release preset, run every example, then the benchmark.
set -uo pipefail   # no -e: one failing example should not hide the rest
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh || exit 1
cmake --preset release && cmake --build --preset release -j 2 || exit 1

failed=0
# Examples are named after their source file (examples/CMakeLists.txt).
for src in examples/*.cpp; do
  [ -e "$src" ] || continue
  name=$(basename "$src" .cpp)
  echo
  echo "=== example: $name"
  # Examples exit by themselves; the timeout only guards against a hang.
  if ! timeout 300 "build/release/examples/$name"; then
    echo "=== example $name FAILED"
    failed=1
  fi
done

if [ -x build/release/bench/aspen-bench ]; then
  echo
  echo "=== aspen-bench --workers 1,2 --runs 3"
  build/release/bench/aspen-bench --workers 1,2 --runs 3 || failed=1
fi
exit $failed
