#!/usr/bin/env bash
# Server CPU per 1 MiB PUT from real clients (bench/put_cpu.py: a presigned PUT, boto3 as it
# sends by default, boto3 with Content-MD5, oss2), release build. CPU time per request drifts
# far less than throughput on a shared machine, so this compares what each client's uploads cost
# the gateway: the digests and checksums it computes over the bytes, beside the HTTP and the
# store's write and fsync, which are the same for all.
#   bash bench/put_cpu.sh [requests-per-client] [rounds]        (defaults 300 and 3)
#   CLIENTS="boto3-https oss2" bash bench/put_cpu.sh …          some of the clients only
#   BASELINE_BIN=path/to/older/tollgate bash bench/put_cpu.sh …  compares two builds in one run:
# each round runs every client against both builds (restarted on the same data), and the summary
# adds this build / the baseline per client. Prints medians over the rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
REQUESTS=${1:-300}
ROUNDS=${2:-3}
BIN=${TOLLGATE_BIN:-$(bash .ci/build-release.sh)}
SECRET="bench-root-secret-0123456789abcdefghijklmn"
KEY_ID="TGBENCHROOT"
python3 -c 'import boto3, oss2, requests' 2>/dev/null || python3 -m pip install -q boto3 oss2 requests >&2

. bench/lib.sh
export LOG_LEVEL=${LOG_LEVEL:-warning}
bench_scratch put-cpu
bench_config "$SECRET" bench
: > "$WORK/results.txt"
for round in $(seq "$ROUNDS"); do
  for build in ${BASELINE_BIN:+baseline} gateway; do
    binary=$BIN; [ $build = baseline ] && binary=$BASELINE_BIN
    start_server "$binary"
    python3 bench/put_cpu.py "$PID" "http://127.0.0.1:$GPORT" "$KEY_ID" "$SECRET" "$REQUESTS" |
      while read -r client micros; do echo "$round $build $client $micros"; done | tee -a "$WORK/results.txt" >&2
  done
done
echo
python3 - "$WORK/results.txt" <<'PY'
import statistics, sys
cpu = {}
for line in open(sys.argv[1]):
    round_, build, client, micros = line.split()
    cpu.setdefault((client, build), []).append(float(micros))
clients = list(dict.fromkeys(client for client, _ in cpu))
print(f"{'client':<12} {'build':<9} {'server CPU µs per 1 MiB PUT':>28}   (medians over rounds)")
for client in clients:
    for build in ("baseline", "gateway"):
        if (client, build) in cpu:
            print(f"{client:<12} {build:<9} {statistics.median(cpu[(client, build)]):>28.0f}")
for client in clients:
    if (client, "baseline") in cpu:
        ratios = [g / b for g, b in zip(cpu[(client, "gateway")], cpu[(client, "baseline")])]
        print(f"CPU gateway/baseline {client:<12} {statistics.median(ratios):6.3f}   rounds: {' '.join(f'{r:.2f}' for r in ratios)}")
PY
