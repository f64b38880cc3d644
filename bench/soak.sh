#!/usr/bin/env bash
# Soak test: N concurrent boto3 clients for T seconds of mixed PUT/GET/DELETE/LIST/multipart
# (0 B to 4 MiB, single PUTs; multipart up to ~5.3 MiB) on 24 shared keys, one `kill -9` and
# restart of the server halfway, every GET checked by SHA-256 against the versions that could
# legitimately be current (bench/soak.py says exactly which). Not run by CI.
#   bash bench/soak.sh [clients] [seconds]        (default 8 clients, 30 s)
# Prints operations by type, errors by code (inside / outside the kill window), 5xx outside the
# window, mismatches, the server's peak RSS in both lives; exits 1 on any mismatch or any 5xx or
# connection error outside the window. TOLLGATE_BIN skips the build; KEEP_WORK=1 keeps the
# scratch directory (config, data, server.log); SOAK_MAX_MIB and SOAK_SEED pass through.
set -euo pipefail
cd "$(dirname "$0")/.."
CLIENTS=${1:-8}
SECONDS_TOTAL=${2:-30}
python3 -c 'import boto3' 2>/dev/null || python3 -m pip install -q --disable-pip-version-check boto3
TOLLGATE_BIN=${TOLLGATE_BIN:-$(bash .ci/build-release.sh)}
. bench/lib.sh
bench_scratch soak
EXPIRE=43200 bench_config soak-test-root-secret-0123456789abcdefghij soak
echo "soak: binary $TOLLGATE_BIN, scratch $WORK" >&2
status=0
python3 bench/soak.py --bin "$TOLLGATE_BIN" --config "$WORK/config.json" --clients "$CLIENTS" \
  --seconds "$SECONDS_TOTAL" --max-mib "${SOAK_MAX_MIB:-4}" --seed "${SOAK_SEED:-1}" || status=$?
if [ $status -ne 0 ]; then
  echo "--- server log (tail)"; tail -n 20 "$WORK/server.log" 2>/dev/null || true
fi
exit $status
