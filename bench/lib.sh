# What the bench scripts share: a scratch directory, a server config on free loopback ports, a
# server started and stopped, and the clean-up on exit. Sourced from the repository's root
# (`. bench/lib.sh`); nothing runs on its own.

# A free loopback port.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# bench_scratch NAME: a new scratch directory in WORK (under BENCH_DIR, else TMPDIR, else /tmp),
# removed on exit (with the server, if one runs) unless KEEP_WORK=1. A script with more to clean
# up defines `cleanup_more`, which runs first.
bench_scratch() {
  WORK=$(mktemp -d -p "${BENCH_DIR:-${TMPDIR:-/tmp}}" "tollgate-$1.XXXXXX")
  trap bench_cleanup EXIT
}
bench_cleanup() {
  if declare -F cleanup_more >/dev/null; then cleanup_more; fi
  if [ -n "${JWKS_PID:-}" ]; then kill "$JWKS_PID" 2>/dev/null || true; fi
  if [ -f "${WORK:-}/nginx.pid" ]; then kill "$(cat "$WORK/nginx.pid")" 2>/dev/null || true; sleep 0.2; fi
  stop_server
  [ "${KEEP_WORK:-0}" = 1 ] || { [ -n "${WORK:-}" ] && rm -rf "$WORK"; }
  return 0
}

# bench_root NAME: what a bench against one server with root credentials starts from: BIN (the
# build of .ci/build-release.sh unless TOLLGATE_BIN names one), SECRET and KEY_ID (the root
# credentials bench_config writes), LOG_LEVEL (warning unless set) and a scratch directory.
bench_root() {
  BIN=${TOLLGATE_BIN:-$(bash .ci/build-release.sh)}
  SECRET="bench-root-secret-0123456789abcdefghijklmn"
  KEY_ID="TGBENCHROOT"
  export LOG_LEVEL=${LOG_LEVEL:-warning}
  bench_scratch "$1"
}

# bench_config SECRET BUCKET [MORE]: $WORK/config.json and the repository's policies, with the
# token port in PORT and the gateway's in GPORT (both free), data in $WORK/data. KEY_ID (the
# root key id, default none) and EXPIRE (token lifetime, default 900 s) when set; MORE: further
# members, e.g. '"Buckets": ["bench"]'.
bench_config() {
  PORT=$(free_port); GPORT=$(free_port)
  rm -rf "$WORK/policy"; cp -r policy "$WORK/policy"
  cat > "$WORK/config.json" <<JSON
{"AccessKeyID": "${KEY_ID:-}", "AccessKeySecret": "$1", "RoleArn": "",
 "TokenExpireTime": "${EXPIRE:-900}", "PolicyFile": "policy/all_policy.txt",
 "ListenAddress": "127.0.0.1", "Port": $PORT, "GatewayAddress": "127.0.0.1", "GatewayPort": $GPORT,
 "Variables": {"BUCKET_NAME": "$2"}, "DataDirectory": "data"${3:+, $3}}
JSON
}

# start_server COMMAND…: (re)starts `COMMAND… serve` on $WORK/config.json in PID, its output
# appended to $WORK/server.log, and waits until /healthz answers (60 s at most; a server that
# does not come up ends the script with its log). LOG_LEVEL as the caller has it.
start_server() {
  stop_server
  "$@" serve --config "$WORK/config.json" >> "$WORK/server.log" 2>&1 &
  PID=$!
  for _ in $(seq 600); do
    curl -sf -o /dev/null "http://127.0.0.1:$PORT/healthz" && return 0
    kill -0 "$PID" 2>/dev/null || break
    sleep 0.1
  done
  echo "the server did not come up; its log:" >&2
  tail -n 20 "$WORK/server.log" >&2
  exit 1
}

stop_server() {
  if [ -n "${PID:-}" ]; then kill "$PID" 2>/dev/null || true; wait "$PID" 2>/dev/null || true; fi
  PID=""
}

# start_nginx WORKERS HTTP: nginx (installed by the caller) on 127.0.0.1:$NPORT (the caller's
# free port), unprivileged, its pid, log and temporary files under $WORK, no access log, connections kept;
# HTTP is the rest of its `http` block (directives and the `server` listening on $NPORT).
# Stopped on exit. Waits until it answers (5 s at most).
start_nginx() {
  mkdir -p "$WORK/nginx-tmp"
  local user=""; [ "$(id -u)" = 0 ] && user="user root;"
  cat > "$WORK/nginx.conf" <<NGINX
$user
worker_processes $1;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  keepalive_requests 1000000;
  client_body_temp_path $WORK/nginx-tmp/body;
  proxy_temp_path $WORK/nginx-tmp/proxy;
  fastcgi_temp_path $WORK/nginx-tmp/fastcgi;
  uwsgi_temp_path $WORK/nginx-tmp/uwsgi;
  scgi_temp_path $WORK/nginx-tmp/scgi;
$2
}
NGINX
  nginx -p "$WORK" -c "$WORK/nginx.conf" -e "$WORK/nginx-error.log"
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$NPORT/" && break; sleep 0.1; done
}

# bench_jwks: an RS256 login provider for an authenticated bench. Starts bench/jwks_server.py on
# a free port (JWKS_PID, stopped on exit), waits for the login token it writes to $WORK/token
# (audience bench-app), and adds to $WORK/config.json an Authentication section that trusts it
# with the default role.
bench_jwks() {
  python3 -c 'import jwt, cryptography' 2>/dev/null || python3 -m pip install -q pyjwt cryptography
  local port
  port=$(free_port)
  python3 bench/jwks_server.py "$port" "$WORK/token" &
  JWKS_PID=$!
  for _ in $(seq 100); do [ -s "$WORK/token" ] && break; sleep 0.1; done
  python3 - "$WORK/config.json" "$port" <<'PY'
import json, sys
path, port = sys.argv[1], sys.argv[2]
config = json.load(open(path))
config["Authentication"] = {"Providers": [{"Issuer": f"http://127.0.0.1:{port}", "JWKSURL": f"http://127.0.0.1:{port}/jwks.json",
                                           "Audiences": ["bench-app"], "Algorithms": ["RS256"]}],
                            "DefaultRole": "default"}
json.dump(config, open(path, "w"))
PY
}

# The Content-MD5 of the PUT body bench/gateway.lua sends for BYTES (a multiple of 16), for the
# put-1m-md5 workloads of gateway.sh and rgw.sh.
gateway_lua_md5() {
  python3 -c 'import base64, hashlib, sys; print(base64.b64encode(hashlib.md5(b"0123456789abcdef" * (int(sys.argv[1]) // 16)).digest()).decode())' "$1"
}
