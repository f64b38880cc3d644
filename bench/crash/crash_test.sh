#!/usr/bin/env bash
# Crash test for the embedded object store, driven over the S3 API.
#
# Each iteration: start `tollgate serve`, commit version A of two objects (one single PUT,
# one multipart), start uploading version B in the background, `kill -9` the server at a random
# moment (mid-body, mid-fsync, mid-commit or after) or, every other iteration, 0–30 ms after
# the client sends CompleteMultipartUpload for B's parts (the client kills it: before, during or
# after the completion), restart it, and check that
#   * each object reads back as exactly version A or exactly version B (size, SHA-256, ETag,
#     and metadata from the same version: never a mix),
#   * the data directory's tmp/ is empty and every file under objects/ is referenced by a
#     metadata row (start-up recovery removed what the crash left),
#   * leftover multipart uploads can be listed and aborted.
#
# Usage:
#   bench/crash/crash_test.sh [iterations]          (default 20)
#
# Environment:
#   TOLLGATE_CONFIG    config file for `tollgate serve` (required); its storage data
#                      directory must be DATA_DIR and its credentials must allow
#                      s3:* on BUCKET.
#   DATA_DIR           the store's data directory (required), used for the tmp/orphan checks.
#   TOLLGATE_BIN       the tollgate executable (default: .build/release/tollgate; build it with
#                      `swift build -c release --product tollgate`).
#   SERVE_CMD          override the whole server command line
#                      (default: "$TOLLGATE_BIN serve --config $TOLLGATE_CONFIG").
#   ENDPOINT           gateway URL (default http://127.0.0.1:9000).
#   HEALTH_URL         readiness URL (default $ENDPOINT/healthz).
#   AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN
#                      credentials boto3 signs with (e.g. from `tollgate token issue`).
#   BUCKET             bucket to use (default crash-test; created if missing).
#   WORK_DIR           where test bodies and logs go (default /tmp/tollgate-crash).
#   MAX_KILL_DELAY_MS  upper bound of the random delay before kill -9 (default 3000).
#   CRASH_SINGLE_MIB, CRASH_MULTIPART_MIB  object sizes in MiB (defaults 48 and 40).
#
# Requires: python3 with boto3, curl, sqlite3.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
iterations="${1:-20}"
: "${TOLLGATE_CONFIG:?set TOLLGATE_CONFIG to the config file tollgate serve should use}"
: "${DATA_DIR:?set DATA_DIR to the store data directory named in that config}"
TOLLGATE_BIN="${TOLLGATE_BIN:-.build/release/tollgate}"
SERVE_CMD="${SERVE_CMD:-$TOLLGATE_BIN serve --config $TOLLGATE_CONFIG}"
export ENDPOINT="${ENDPOINT:-http://127.0.0.1:9000}"
HEALTH_URL="${HEALTH_URL:-$ENDPOINT/healthz}"
export BUCKET="${BUCKET:-crash-test}"
WORK_DIR="${WORK_DIR:-/tmp/tollgate-crash}"
MAX_KILL_DELAY_MS="${MAX_KILL_DELAY_MS:-3000}"
driver=(python3 "$here/driver.py")

server_pid=""
client_pid=""

log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*"; }

cleanup() {
    if [[ -n "$client_pid" ]]; then kill -9 "$client_pid" 2>/dev/null || true; fi
    if [[ -n "$server_pid" ]]; then kill -TERM "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
}
trap cleanup EXIT

start_server() {
    # shellcheck disable=SC2086 # SERVE_CMD is a command line
    $SERVE_CMD >>"$WORK_DIR/server.log" 2>&1 &
    server_pid=$!
    for _ in $(seq 1 300); do
        if curl -fsS -o /dev/null "$HEALTH_URL" 2>/dev/null; then return 0; fi
        if ! kill -0 "$server_pid" 2>/dev/null; then
            log "server exited during start-up; see $WORK_DIR/server.log"
            tail -n 20 "$WORK_DIR/server.log" >&2
            exit 2
        fi
        sleep 0.1
    done
    log "server not healthy after 30 s"
    exit 2
}

crash_server() {
    kill -9 "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
    server_pid=""
}

check_data_dir() {
    local leftovers
    leftovers="$(find "$DATA_DIR/tmp" -type f 2>/dev/null | wc -l)"
    if [[ "$leftovers" -ne 0 ]]; then
        log "FAIL: $leftovers file(s) left in $DATA_DIR/tmp after restart"
        find "$DATA_DIR/tmp" -type f >&2
        exit 1
    fi
    # Every object file must be referenced by a row (object, a multipart object's extent, or part).
    local referenced on_disk unreferenced
    referenced="$(mktemp)"; on_disk="$(mktemp)"
    sqlite3 "file:$DATA_DIR/meta.sqlite?mode=ro" \
        "SELECT file_id FROM object UNION SELECT file_id FROM extent UNION SELECT file_id FROM part;" | sort -u >"$referenced"
    find "$DATA_DIR/objects" -type f -printf '%f\n' | sort -u >"$on_disk"
    unreferenced="$(comm -13 "$referenced" "$on_disk" | wc -l)"
    local missing
    missing="$(comm -23 "$referenced" "$on_disk" | wc -l)"
    rm -f "$referenced" "$on_disk"
    if [[ "$unreferenced" -ne 0 || "$missing" -ne 0 ]]; then
        log "FAIL: $unreferenced orphan file(s), $missing row(s) without a file under $DATA_DIR/objects"
        exit 1
    fi
}

mkdir -p "$WORK_DIR"
: >"$WORK_DIR/server.log"
if [[ ! -f "$WORK_DIR/expected.json" ]]; then
    log "generating test bodies in $WORK_DIR"
    "${driver[@]}" prepare "$WORK_DIR"
fi

start_server
"${driver[@]}" setup

for i in $(seq 1 "$iterations"); do
    # A committed version A of both objects.
    "${driver[@]}" put "$WORK_DIR" A
    if (( i % 2 == 1 )); then
        # Version B in the background, then kill -9 the server at a random moment.
        "${driver[@]}" put "$WORK_DIR" B >>"$WORK_DIR/client.log" 2>&1 &
        client_pid=$!
        delay_ms=$(( RANDOM * 32768 + RANDOM ))
        delay_ms=$(( delay_ms % (MAX_KILL_DELAY_MS + 1) ))
    else
        # B's parts; then the client sends CompleteMultipartUpload and kills the server 0–30 ms
        # later (boto3 and the completion take about 10 ms here: before, during or after it).
        delay_us=$(( RANDOM % 30000 ))
        "${driver[@]}" complete "$WORK_DIR" B "$server_pid" "$delay_us" >>"$WORK_DIR/client.log" 2>&1 || true
        delay_ms=0
    fi
    sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
    crash_server
    kill -9 "$client_pid" 2>/dev/null || true
    wait "$client_pid" 2>/dev/null || true
    client_pid=""

    start_server
    check_data_dir
    if ! "${driver[@]}" verify "$WORK_DIR" >"$WORK_DIR/verify.log" 2>&1; then
        log "iteration $i (kill after ${delay_ms} ms): FAILED"
        cat "$WORK_DIR/verify.log" >&2
        exit 1
    fi
    log "iteration $i ($([[ $((i % 2)) -eq 1 ]] && echo "upload, kill after ${delay_ms} ms" || echo "completion, kill after ${delay_us} µs")): ok — $(tr '\n' ' ' <"$WORK_DIR/verify.log")"
done

log "all $iterations iterations passed"
