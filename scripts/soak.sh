#!/usr/bin/env bash
# Soak (not in CI): builds aspen-soak in the release preset and runs the
# exactly-once and the I/O stress workloads on random configurations for
# <minutes> (default 10).
# Extra arguments go to aspen-soak (--seed S, --tasks T). Exits non-zero on
# any miscount or hang.
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-10}
shift || true
preset=${ASPEN_SOAK_PRESET:-release}
cmake --preset "$preset" >/dev/null
cmake --build "build/$preset" --target aspen-soak
exec "build/$preset/tests/aspen-soak" --minutes "$minutes" "$@"
