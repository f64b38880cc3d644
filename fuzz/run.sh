#!/usr/bin/env bash
# Builds every libFuzzer target (fuzz/Fuzz*/, declared in Package.swift when TOLLGATE_FUZZ is
# set) and runs each for N seconds, one after the other, starting from its committed seeds
# (fuzz/corpus/NAME/) with its dictionary if it has one (fuzz/dict/NAME.dict). Exits non-zero
# if any target crashes (a Swift trap counts: overflow, out-of-bounds, precondition) or fails
# to build.
#   bash fuzz/run.sh [seconds-per-target] [target…]      (default 60 s, every target)
# Everything it writes stays under .build-fuzz/ (ignored by git): the build, the growing working
# corpus (.build-fuzz/corpus/NAME/, kept between runs so long runs build on each other) and crash
# artifacts (.build-fuzz/artifacts/NAME/). A crash is printed with the command that replays it
# and the input in base64. FUZZ_ARGS adds libFuzzer options (e.g. FUZZ_ARGS="-max_len=65536").
set -uo pipefail
cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-60}
shift $(( $# > 0 ? 1 : 0 ))
SCRATCH=.build-fuzz
# libFuzzer must see the trap itself (it then saves the input); the Swift runtime's backtracer
# would take the signal first and exit without an artifact.
export SWIFT_BACKTRACE=enable=no
if [ $# -gt 0 ]; then
  TARGETS=("$@")
else
  TARGETS=()
  for dir in fuzz/corpus/*/; do TARGETS+=("$(basename "$dir")"); done
fi

build() {
  TOLLGATE_FUZZ=1 swift build -c release --sanitize fuzzer --product "$1" --scratch-path "$SCRATCH" 2>&1 \
    | grep -vE '^\[[0-9]+/[0-9]+\]|^(Building|Build of|Compiling|Write|Fetching|Creating|Working copy|Computing|Computed|Fetched)|unhandled; explicitly declare|^    /.*CMakeLists.txt$' >&2
  [ -x "$SCRATCH/release/$1" ]
}

failed=()
for target in "${TARGETS[@]}"; do
  [ -d "fuzz/corpus/$target" ] || { echo "no seed corpus fuzz/corpus/$target" >&2; failed+=("$target (no seeds)"); continue; }
  printf '\n--- %s: build\n' "$target"
  rm -f "$SCRATCH/release/$target"
  if ! build "$target"; then failed+=("$target (build)"); continue; fi
  work="$SCRATCH/corpus/$target" artifacts="$SCRATCH/artifacts/$target"
  mkdir -p "$work" "$artifacts"
  printf -- '--- %s: %s s\n' "$target" "$SECONDS_PER_TARGET"
  log="$SCRATCH/artifacts/$target.log"
  dict=()
  [ -f "fuzz/dict/$target.dict" ] && dict=(-dict="fuzz/dict/$target.dict")
  # New inputs go to the first directory (the working corpus); the seeds are only read.
  # shellcheck disable=SC2086
  "$SCRATCH/release/$target" "$work" "fuzz/corpus/$target" "${dict[@]}" -max_total_time="$SECONDS_PER_TARGET" \
    -timeout=10 -rss_limit_mb=2048 -max_len=8192 -print_final_stats=1 -artifact_prefix="$artifacts/" \
    ${FUZZ_ARGS:-} >"$log" 2>&1
  status=$?
  grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|^stat::number_of_executed_units|^Done ' "$log"
  if [ $status -ne 0 ]; then
    failed+=("$target")
    echo "*** $target: libFuzzer exited $status; log $log"
    grep -E -m1 -A25 '==[0-9]+==|Fatal error|deadly signal' "$log" | head -40
    for artifact in "$artifacts"/*; do
      [ -f "$artifact" ] || continue
      echo "*** reproduce: $SCRATCH/release/$target $artifact"
      echo "*** input (base64): $(base64 -w0 "$artifact")"
    done
  fi
done

echo
if [ ${#failed[@]} -gt 0 ]; then
  echo "FAIL: ${failed[*]}"
  exit 1
fi
echo "PASS: ${#TARGETS[@]} targets, ${SECONDS_PER_TARGET} s each, no crash"
