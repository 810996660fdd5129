#!/usr/bin/env bash
# tests/tsan.sh - the threaded tests under ThreadSanitizer (the build of `make tsan`): the
# switch's control and dataplane threads with stats read from another thread, worker engine
# threads, two communicators in one process, several jobs at once, the ring between two
# threads (base/ring.h under the fabric's stage queue). The first race report
# fails its test (halt_on_error). Ends with the harness's "N passed, N failed" line.
# Usage: bash tests/tsan.sh [substring ...]   (default: the list below)
set -uo pipefail
cd "$(dirname "$0")/.."
nice -n 10 make -s -j2 tsan || { echo "0 passed, 1 failed, 0 skipped"; exit 1; }
tests=("$@")
if [ ${#tests[@]} -eq 0 ]; then
    tests=(switch_stats_race control_ int32_average_and_threads two_concurrent_jobs
           async_requests two_communicators p4sgd_small_allreduces killed_worker
           int32_bit_identical_under_1pct optimizer_adam_in_switch_switchml
           compress_error_feedback_rate compress_codec_stats p4sgd_exact_with_inline
           bytering_spsc)
fi
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
INAGG_TEST_TIMEOUT_SCALE=4 timeout 900 ./build-tsan/inagg-tests "${tests[@]}"
