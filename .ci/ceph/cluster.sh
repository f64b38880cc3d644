#!/usr/bin/env bash
# A single-node Ceph cluster on loopback for tests: one monitor, one OSD, one RADOS Gateway
# with STS enabled, and an admin user. Everything lives in DIR; nothing outside it is written.
#
#   bash .ci/ceph/cluster.sh start DIR    # prints DIR/cluster.env's lines when the gateway answers
#   bash .ci/ceph/cluster.sh stop DIR     # stops the daemons (SIGTERM, then SIGKILL after 10 s)
#   bash .ci/ceph/cluster.sh status DIR   # exit 0 when RGW answers
#   bash .ci/ceph/cluster.sh rgw-stop DIR / rgw-start DIR   # the gateway alone, same port (outage tests)
#
# DIR/cluster.env (shell KEY=VALUE lines) names what a client needs: RGW_ENDPOINT, RGW_ACCESS_KEY,
# RGW_SECRET_KEY (the admin user, caps roles=*;users=*;buckets=*;metadata=*;oidc-provider=*),
# RGW_REGION, RGW_STS_KEY, CEPH_CONF (for the ceph and radosgw-admin commands), CEPH_DIR, and
# the daemons' pids.
#
# Packages (Debian 12: Ceph 16.2): apt-get install --no-install-recommends ceph-mon ceph-osd
# radosgw ceph-common. No ceph-mgr is needed.
#
# Environment:
#   CEPH_OBJECTSTORE   bluestore (default: a sparse file of CEPH_BLOCK_SIZE, data on disk) or
#                      memstore (data in RAM, a little faster to start; bounded by CEPH_BLOCK_SIZE)
#   CEPH_BLOCK_SIZE    bytes; default 32 GiB (sparse: only what is written takes space)
#   RGW_PORT           the gateway's port; default a free one
#   RGW_BIND_ADDRESS   where the gateway listens; default 127.0.0.1 (0.0.0.0 in a container)
#   RGW_ACCESS_KEY, RGW_SECRET_KEY (or RGW_ACCESS_KEY_FILE, RGW_SECRET_KEY_FILE)
#                      the admin user's keys; default random ones
#   CEPH_START_TIMEOUT seconds for the whole start; default 240
#
# Settings that matter here, found by measurement:
#   - auth is off (auth_*_required = none); then radosgw hangs on its monitor connection unless
#     ms_mon_client_mode = crc.
#   - paxos_propose_interval = 0.05 takes start-up from about 23 s to 7-10 s on 2 cores.
#   - pools of size 1 (osd_pool_default_size = 1, mon_allow_pool_size_one), 8 PGs, no autoscaler.
#   - every daemon is started with its descriptors closed but for stdin/stdout/stderr, which go
#     to /dev/null and its log: a daemon keeping the caller's pipe would make `$(cluster.sh start)`
#     or a test runner's captured output wait for the daemons' end.
#   - rgw_sts_key must be exactly 16 characters; rgw_s3_auth_use_sts = true enables STS.
#   - rgw_multipart_min_part_size = 1: OSS allows multipart parts down to 100 KiB (its mobile
#     SDKs' resumable uploads use small parts) where S3 requires 5 MiB (RGW's default). Tollgate
#     applies each dialect's minimum itself when an upload completes (5 MiB for S3 clients,
#     100 KiB for OSS clients), so the backend must accept at least as small; the store tests use
#     tiny parts, hence 1 here (Storage.BackendMinimumPartSize says what a backend accepts).
set -euo pipefail

usage() { echo "usage: $0 start|stop|status|rgw-stop|rgw-start DIR" >&2; exit 2; }
[ $# -eq 2 ] || usage
command=$1
DIR=$(mkdir -p "$2" && cd "$2" && pwd)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
log() { printf '[ceph %s] %s\n' "$(date +%T)" "$*" >&2; }

# Runs a daemon in the foreground of a background process with no inherited descriptors but
# /dev/null and its own log; records its pid in DIR/run/NAME.pid.
spawn() {
  local name=$1; shift
  (
    for fd in /proc/$BASHPID/fd/*; do
      fd=${fd##*/}
      [ "$fd" -gt 2 ] 2>/dev/null && eval "exec $fd>&-" 2>/dev/null || true
    done
    exec "$@" </dev/null >>"$DIR/log/$name.out" 2>&1
  ) &
  echo $! >"$DIR/run/$name.pid"
}

alive() { [ -f "$DIR/run/$1.pid" ] && kill -0 "$(cat "$DIR/run/$1.pid")" 2>/dev/null; }

ceph_cli() { timeout 30 ceph -c "$DIR/ceph.conf" --connect-timeout 20 "$@"; }

# Waits until "$@" succeeds or the start deadline passes; the name says what for.
wait_for() {
  local what=$1 daemon=$2; shift 2
  while ! "$@" >/dev/null 2>&1; do
    if ! alive "$daemon"; then
      log "$daemon exited while waiting for $what; its log:"; tail -n 40 "$DIR/log/$daemon.out" "$DIR/log/"*"$daemon"*.log >&2 2>/dev/null || true
      exit 1
    fi
    if [ "$(date +%s)" -ge "$deadline" ]; then
      log "timed out waiting for $what"; tail -n 40 "$DIR/log/$daemon.out" >&2 2>/dev/null || true
      exit 1
    fi
    sleep 0.2
  done
}

stop_cluster() {
  local pids=() name pid
  for name in rgw osd mon; do
    alive "$name" && pids+=("$(cat "$DIR/run/$name.pid")")
  done
  [ ${#pids[@]} -eq 0 ] && return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 100); do
    local running=0
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && running=1; done
    [ $running -eq 0 ] && break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done; done
  rm -f "$DIR"/run/*.pid
}

rgw_answers() {
  # shellcheck disable=SC1091
  [ -f "$DIR/cluster.env" ] && . "$DIR/cluster.env" && curl -s -o /dev/null --max-time 2 "$RGW_ENDPOINT"
}

rgw_stop() {
  alive rgw || return 0
  local pid; pid=$(cat "$DIR/run/rgw.pid")
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  while kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  rm -f "$DIR/run/rgw.pid"
}

rgw_start() {
  alive rgw && return 0
  # shellcheck disable=SC1091
  . "$DIR/cluster.env"
  deadline=$(( $(date +%s) + ${CEPH_START_TIMEOUT:-240} ))
  spawn rgw radosgw -c "$DIR/ceph.conf" -n client.rgw -f
  wait_for "the gateway" rgw curl -s -o /dev/null --max-time 2 "$RGW_ENDPOINT/"
  sed -i "s/^CEPH_RGW_PID=.*/CEPH_RGW_PID=$(cat "$DIR/run/rgw.pid")/" "$DIR/cluster.env"
}

case $command in
  stop) stop_cluster; exit 0 ;;
  status) rgw_answers; exit $? ;;
  rgw-stop) rgw_stop; exit 0 ;;
  rgw-start) rgw_start; exit 0 ;;
  start) ;;
  *) usage ;;
esac

for tool in ceph-mon ceph-osd radosgw radosgw-admin monmaptool ceph curl; do
  command -v "$tool" >/dev/null || { log "$tool not found: apt-get install --no-install-recommends ceph-mon ceph-osd radosgw ceph-common curl"; exit 3; }
done
if alive mon || alive osd || alive rgw; then log "a cluster is already running in $DIR (stop it first)"; exit 1; fi

started=$(date +%s)
deadline=$((started + ${CEPH_START_TIMEOUT:-240}))
trap 'status=$?; [ $status -ne 0 ] && stop_cluster; exit $status' EXIT

rm -rf "$DIR/mon" "$DIR/osd" "$DIR/rgw" "$DIR/run" "$DIR/log" "$DIR/cluster.env" "$DIR/monmap"
mkdir -p "$DIR/mon/a" "$DIR/osd/0" "$DIR/rgw" "$DIR/run" "$DIR/log"

FSID=$(cat /proc/sys/kernel/random/uuid)
MON_PORT=$(free_port)
RGW_PORT=${RGW_PORT:-$(free_port)}
RGW_BIND_ADDRESS=${RGW_BIND_ADDRESS:-127.0.0.1}
OBJECTSTORE=${CEPH_OBJECTSTORE:-bluestore}
BLOCK_SIZE=${CEPH_BLOCK_SIZE:-$((32 << 30))}
# Exactly 16 characters (RGW's STS key is an AES-128 key).
STS_KEY=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
from_file() { if [ -n "${1:-}" ]; then tr -d '\n' <"$1"; fi; }
ACCESS_KEY=${RGW_ACCESS_KEY:-$(from_file "${RGW_ACCESS_KEY_FILE:-}")}
SECRET_KEY=${RGW_SECRET_KEY:-$(from_file "${RGW_SECRET_KEY_FILE:-}")}
[ -n "$ACCESS_KEY" ] || ACCESS_KEY="TGCEPH$(head -c 7 /dev/urandom | od -An -tx1 | tr -d ' \n' | tr a-f A-F)"
[ -n "$SECRET_KEY" ] || SECRET_KEY=$(head -c 30 /dev/urandom | base64 | tr -d '/+=\n' | head -c 40)

cat >"$DIR/ceph.conf" <<EOF
[global]
fsid = $FSID
mon_host = v2:127.0.0.1:$MON_PORT
mon_initial_members = a
public_network = 127.0.0.0/8
ms_bind_ipv4 = true
ms_bind_ipv6 = false
ms_bind_msgr1 = false
ms_mon_client_mode = crc
auth_cluster_required = none
auth_service_required = none
auth_client_required = none
auth_allow_insecure_global_id_reclaim = true
run_dir = $DIR/run
admin_socket = $DIR/run/\$name.asok
pid_file = $DIR/run/\$name.daemon-pid
log_file = $DIR/log/\$name.log
log_to_stderr = false
err_to_stderr = true
debug_ms = 0
keyring = $DIR/keyring
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
mon_allow_pool_size_one = true
mon_allow_pool_delete = true
mon_warn_on_pool_no_redundancy = false
mon_max_pg_per_osd = 1000
osd_crush_chooseleaf_type = 0

[mon]
mon_data = $DIR/mon/\$id
paxos_propose_interval = 0.05
mon_data_avail_warn = 1
mon_data_avail_crit = 0
mon_osd_full_ratio = 0.99
mon_osd_nearfull_ratio = 0.98
mon_osd_backfillfull_ratio = 0.985

[osd]
osd_data = $DIR/osd/\$id
osd_objectstore = $OBJECTSTORE
bluestore_block_create = true
bluestore_block_size = $BLOCK_SIZE
bluestore_block_db_create = false
bluestore_block_wal_create = false
bluestore_fsck_on_mkfs = false
memstore_device_bytes = $BLOCK_SIZE
osd_max_object_name_len = 460
osd_max_object_namespace_len = 64
osd_op_num_shards = 2
osd_op_num_threads_per_shard = 1

[client.rgw]
rgw_data = $DIR/rgw
rgw_frontends = beast endpoint=$RGW_BIND_ADDRESS:$RGW_PORT
rgw_dns_name = 127.0.0.1
rgw_sts_key = $STS_KEY
rgw_s3_auth_use_sts = true
rgw_multipart_min_part_size = 1
rgw_thread_pool_size = 64
rgw_enable_usage_log = false
rgw_gc_obj_min_wait = 60
rgw_gc_processor_period = 60
EOF
: >"$DIR/keyring"

log "monitor on 127.0.0.1:$MON_PORT ($OBJECTSTORE OSD)"
monmaptool --create --fsid "$FSID" --addv a "[v2:127.0.0.1:$MON_PORT]" "$DIR/monmap" >/dev/null
ceph-mon -c "$DIR/ceph.conf" --mkfs -i a --monmap "$DIR/monmap" >>"$DIR/log/mon.out" 2>&1
spawn mon ceph-mon -c "$DIR/ceph.conf" -i a -f
wait_for "the monitor" mon ceph_cli mon stat

OSD_UUID=$(cat /proc/sys/kernel/random/uuid)
OSD_ID=$(ceph_cli osd new "$OSD_UUID")
[ "$OSD_ID" = 0 ] || { log "unexpected OSD id $OSD_ID"; exit 1; }
ceph-osd -c "$DIR/ceph.conf" -i 0 --mkfs --osd-uuid "$OSD_UUID" >>"$DIR/log/osd.out" 2>&1
spawn osd ceph-osd -c "$DIR/ceph.conf" -i 0 -f
osd_up() { ceph_cli osd stat --format json | grep -q '"num_up_osds":1'; }
wait_for "the OSD" osd osd_up

log "gateway on 127.0.0.1:$RGW_PORT"
spawn rgw radosgw -c "$DIR/ceph.conf" -n client.rgw -f
rgw_up() { curl -s -o /dev/null --max-time 2 "http://127.0.0.1:$RGW_PORT/"; }
wait_for "the gateway" rgw rgw_up

timeout 60 radosgw-admin -c "$DIR/ceph.conf" -n client.rgw user create --uid=tollgate-admin --display-name="Tollgate admin" \
  --access-key="$ACCESS_KEY" --secret-key="$SECRET_KEY" >>"$DIR/log/admin.out" 2>&1
timeout 60 radosgw-admin -c "$DIR/ceph.conf" -n client.rgw caps add --uid=tollgate-admin \
  --caps="roles=*;users=*;buckets=*;metadata=*;oidc-provider=*" >>"$DIR/log/admin.out" 2>&1

cat >"$DIR/cluster.env.tmp" <<EOF
RGW_ENDPOINT=http://127.0.0.1:$RGW_PORT
RGW_PORT=$RGW_PORT
RGW_ACCESS_KEY=$ACCESS_KEY
RGW_SECRET_KEY=$SECRET_KEY
RGW_REGION=us-east-1
RGW_ADMIN_UID=tollgate-admin
RGW_STS_KEY=$STS_KEY
RGW_MULTIPART_MIN_PART_SIZE=1
CEPH_CONF=$DIR/ceph.conf
CEPH_DIR=$DIR
CEPH_MON_PID=$(cat "$DIR/run/mon.pid")
CEPH_OSD_PID=$(cat "$DIR/run/osd.pid")
CEPH_RGW_PID=$(cat "$DIR/run/rgw.pid")
EOF
chmod 0600 "$DIR/cluster.env.tmp"
mv "$DIR/cluster.env.tmp" "$DIR/cluster.env"
log "up in $(( $(date +%s) - started )) s: $DIR/cluster.env"
grep -v SECRET "$DIR/cluster.env"
