#!/bin/sh
# Builds PolicyBench in release mode and runs it: median and p99 ns per policy decision.
# Usage: bench/policy.sh [ITERATIONS]
set -eu
cd "$(dirname "$0")/.."
swift build -c release --product PolicyBench
"$(swift build -c release --product PolicyBench --show-bin-path)/PolicyBench" "$@"
