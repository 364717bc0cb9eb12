#!/usr/bin/env bash
# THE showcase command: build the release preset, run every example, then the
# micro-benchmarks and the benchmark.
set -uo pipefail   # no -e: one failing example should not hide the rest
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh || exit 1
# Only what runs here: the examples and the benchmarks (the library comes
# with them). The test programs, about 11 CPU-minutes of g++ -O3 on a
# fresh clone, are left to the test command (scripts/test.sh).
cmake --preset release && cmake --build --preset release -j 2 --target examples/all bench/all || exit 1

failed=0
# Examples are named after their source file (examples/CMakeLists.txt).
for src in examples/*.cpp; do
  [ -e "$src" ] || continue
  name=$(basename "$src" .cpp)
  case "$name" in echo_server|echo_client) continue ;; esac  # run as a pair below
  echo
  echo "=== example: $name"
  # Examples exit by themselves; the timeout only guards against a hang.
  if ! timeout 300 "build/release/examples/$name"; then
    echo "=== example $name FAILED"
    failed=1
  fi
done
# The C API example (examples/c_embed.c): a C "language runtime" on aspen.
echo
echo "=== example: c_embed"
timeout 300 build/release/examples/c_embed || { echo "=== example c_embed FAILED"; failed=1; }

# The echo pair: the server in the background on a free port (it stops by
# itself after 64 connections, or 60 s at the latest), the client against it.
echo
echo "=== example: echo_server + echo_client (64 connections x 1000 round trips, loopback)"
server_out=$(mktemp)
build/release/examples/echo_server --connections 64 --seconds 60 >"$server_out" &
server_pid=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/^listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$server_out")
  [ -n "$port" ] && break
  sleep 0.1
done
if [ -n "$port" ] && timeout 120 build/release/examples/echo_client --port "$port" --connections 64 --rounds 1000; then
  wait "$server_pid" || failed=1
else
  echo "=== example echo_server + echo_client FAILED"
  kill "$server_pid" 2>/dev/null
  wait "$server_pid" 2>/dev/null
  failed=1
fi
cat "$server_out"
rm -f "$server_out"

if [ -x build/release/bench/aspen-micro ]; then
  echo
  echo "=== aspen-micro (single operations, Google Benchmark)"
  build/release/bench/aspen-micro --benchmark_min_time=0.1 || failed=1
fi

# The benchmark's default seven timed runs, not fewer: a median of three
# runs of skynet (10 ms each) is spoilt by a 20 ms stall of the shared host.
if [ -x build/release/bench/aspen-bench ]; then
  echo
  echo "=== aspen-bench --workers 1,2 --runs 7"
  build/release/bench/aspen-bench --workers 1,2 --runs 7 || failed=1
fi
exit $failed
