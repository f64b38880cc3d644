#!/usr/bin/env bash
# Proves the Dockerfile's runtime stage without a Docker engine: a Debian root file system with
# exactly the stage's packages (debootstrap, cached by package list), the stage's RUN commands
# (user, directories), COPY sources, ENV, USER, WORKDIR, ENTRYPOINT/CMD and HEALTHCHECK, all read
# from the Dockerfile. Then, from the host: /healthz answers, a token is vended, an object goes up
# and down with it, and `tollgate token issue` without flags works in the root as the image's user.
#   bash .ci/rootfs-check.sh PATH/TO/RELEASE/tollgate
# Needs root (chroot, mount), debootstrap, python3 with boto3. Exit 0 when the image would work.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(realpath "${1:?usage: rootfs-check.sh PATH/TO/tollgate}")
CACHE=${TOLLGATE_ROOTFS_CACHE:-/var/cache/tollgate-ci}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}

say() { printf 'rootfs-check: %s\n' "$*"; }
fail() { say "FAIL: $*"; exit 1; }

# --- The runtime stage, read from the Dockerfile -------------------------------------------------
# The lines after the last FROM, with continuation lines joined.
stage=$(awk '/^FROM /{buf=""} {buf=buf $0 "\n"} END{printf "%s", buf}' Dockerfile | sed -e ':a' -e '/\\$/N; s/\\\n//; ta')
from=$(sed -n 's/^FROM \([^ ]*\).*/\1/p' <<<"$stage")
case "$from" in
  debian:12*|debian:bookworm*) suite=bookworm ;;
  debian:13*|debian:trixie*) suite=trixie ;;
  *) fail "runtime stage FROM $from: not a Debian image this check knows" ;;
esac
run=$(grep -m1 '^RUN .*apt-get install' <<<"$stage") || fail "no 'RUN … apt-get install' in the runtime stage"
# The package list: the words after `apt-get install` that are not options, up to `&&`.
packages=$(sed -e 's/.*apt-get install//' -e 's/&&.*//' <<<"$run" | tr ' ' '\n' | grep -v -e '^-' -e '^$' | paste -sd, -)
[ -n "$packages" ] || fail "empty package list in: $run"
# The rest of that RUN (useradd, mkdir, chown …) runs in the root as written; apt-get is done.
setup=$(sed -e 's/^RUN //' <<<"$run" | awk 'BEGIN{RS="&&"} {sub(/^[ \t\n]+/, ""); sub(/[ \t\n]+$/, "")} $0 !~ /^(apt-get|rm -rf \/var\/lib\/apt)/ && $0 != "" {printf "%s%s", sep, $0; sep=" && "}')
mapfile -t envs < <(sed -n 's/^ENV //p' <<<"$stage" | python3 -c 'import shlex,sys; [print(w) for l in sys.stdin for w in shlex.split(l)]')
user=$(sed -n 's/^USER //p' <<<"$stage")
workdir=$(sed -n 's/^WORKDIR //p' <<<"$stage")
json_array() { sed -n "s/^$1 //p" <<<"$stage" | python3 -c 'import json,sys; [print(w) for w in json.loads(sys.stdin.read())]'; }
mapfile -t entrypoint < <(json_array ENTRYPOINT)
mapfile -t cmd < <(json_array CMD)
mapfile -t healthcheck < <(sed -n 's/^HEALTHCHECK .*CMD //p' <<<"$stage" | python3 -c 'import json,sys; [print(w) for w in json.loads(sys.stdin.read())]')
[ -n "$user" ] && [ -n "$workdir" ] && [ ${#entrypoint[@]} -gt 0 ] && [ ${#healthcheck[@]} -gt 0 ] \
  || fail "the runtime stage needs USER, WORKDIR, ENTRYPOINT and an exec-form HEALTHCHECK"
say "$from -> debootstrap $suite with $packages; user $user; ${entrypoint[*]} ${cmd[*]}"

# --- The root file system, cached per suite and package list --------------------------------------
key=$(printf '%s %s %s' "$suite" "$packages" "$MIRROR" | sha256sum | cut -c1-16)
cached="$CACHE/rootfs-$key"
mkdir -p "$CACHE"
if [ ! -d "$cached" ]; then
  # Built under another name and renamed when complete: a killed run leaves no half cache.
  exec 9>"$CACHE/lock"
  flock -w 1800 9 || fail "timed out waiting for another run's debootstrap"
  if [ ! -d "$cached" ]; then
    building=$(mktemp -d "$CACHE/building-XXXXXX") && chmod 0755 "$building"
    say "debootstrap into $building (cold cache)"
    timeout 1500 debootstrap --variant=minbase --include="$packages" "$suite" "$building" "$MIRROR" \
      >"$building.log" 2>&1 || { tail -20 "$building.log"; rm -rf "$building"; fail "debootstrap failed"; }
    rm -f "$building.log" "$building"/var/cache/apt/archives/*.deb
    mv "$building" "$cached"
  fi
  exec 9>&-
fi

scratch=$(mktemp -d /tmp/tollgate-rootfs-XXXXXX)
root="$scratch/root"
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  umount "$root/proc" 2>/dev/null || true
  umount "$root" 2>/dev/null || true
  rm -rf --one-file-system "$scratch"
}
trap cleanup EXIT
# Each run writes to its own layer over the cached tree (a copy where overlayfs is not allowed).
mkdir -p "$root" "$scratch/upper" "$scratch/work"
mount -t overlay overlay -o "lowerdir=$cached,upperdir=$scratch/upper,workdir=$scratch/work" "$root" 2>/dev/null \
  || { rmdir "$root" && cp -a "$cached" "$root"; }
chmod 0755 "$root"   # the image's user must reach /

# --- The image's build steps ----------------------------------------------------------------------
chroot "$root" /bin/sh -ec "$setup"
while read -r src dest; do
  if [ "$src" = "--from=build" ]; then
    read -r src dest <<<"$dest"
    install -D -m 0755 "$BIN" "$root$dest"
  elif [ -d "$src" ]; then
    mkdir -p "$root$dest" && cp -a "$src/." "$root$dest/"
  else
    install -D -m 0644 "$src" "$root$dest"
  fi
done < <(sed -n 's/^COPY //p' <<<"$stage")
mount -t proc proc "$root/proc"

missing=$(chroot "$root" ldd "/usr/local/bin/${entrypoint[0]}" | grep 'not found' || true)
[ -z "$missing" ] || fail "libraries the runtime packages do not provide:"$'\n'"$missing"

# Docker's environment for the container: its default PATH, HOME of the user, the image's ENV.
uid=$(chroot "$root" id -u "$user") gid=$(chroot "$root" id -g "$user")
[ "$uid" = 10001 ] || fail "USER $user has uid $uid, not 10001"
home=$(chroot "$root" getent passwd "$user" | cut -d: -f6)
# A command run as the container runs it: prefix it with "${in_image[@]}".
in_image=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME="$home" "${envs[@]}"
          chroot --userspec="$uid:$gid" --groups="$gid" "$root" env --chdir="$workdir")

# The image's ports, or free loopback ports in an edited copy of its config when those are busy.
config=$(printf '%s\n' "${envs[@]}" | sed -n 's/^TOLLGATE_CONFIG=//p')
[ -n "$config" ] || fail "the image sets no TOLLGATE_CONFIG"
ports=$(python3 - "$root$config" <<'EOF'
import json, socket, sys
path = sys.argv[1]
config = json.load(open(path))
def free(port):
    with socket.socket() as s:
        try:
            s.bind(("0.0.0.0", port))
            return True
        except OSError:
            return False
wanted = [int(config.get("Port", 7080)), int(config.get("GatewayPort", 9000))]
if not all(free(p) for p in wanted):
    def any_port():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    config.update(ListenAddress="127.0.0.1", GatewayAddress="127.0.0.1", Port=any_port(), GatewayPort=any_port())
    json.dump(config, open(path, "w"), indent=2)
    wanted = [config["Port"], config["GatewayPort"]]
print(wanted[0], wanted[1], config.get("Buckets", [config.get("Variables", {}).get("BUCKET_NAME", "")])[0])
EOF
)
read -r port gateway_port bucket <<<"$ports"

# --- Run it: the image's ENTRYPOINT and CMD as its user -----------------------------------------
"${in_image[@]}" "${entrypoint[@]}" "${cmd[@]}" >"$scratch/server.log" 2>&1 &
server_pid=$!
healthy=""
for _ in $(seq 1 100); do
  kill -0 "$server_pid" 2>/dev/null || { cat "$scratch/server.log"; fail "the server exited"; }
  if curl -fsS --max-time 2 "http://127.0.0.1:$port/healthz" >/dev/null 2>&1; then healthy=1; break; fi
  sleep 0.2
done
[ -n "$healthy" ] || { cat "$scratch/server.log"; fail "/healthz did not answer within 20 s"; }
say "serve: /healthz answers on $port (gateway $gateway_port)"
# What `docker logs` shows while it runs: the root key id, and the secret generated on first start.
grep -q 'root.access_key_id=TG' "$scratch/server.log" && grep -q 'AccessKeySecret: ' "$scratch/server.log" \
  || { cat "$scratch/server.log"; fail "the running server has not logged the root key id and the generated secret"; }

timeout 30 "${in_image[@]}" "${healthcheck[@]}" || fail "the HEALTHCHECK command failed"
say "HEALTHCHECK: ${healthcheck[*]} exits 0"
issued=$(timeout 30 "${in_image[@]}" "${entrypoint[0]}" token issue) || fail "'${entrypoint[0]} token issue' without flags failed in the image"
say "token issue without flags: ok"

timeout 60 python3 - "$port" "$gateway_port" "$bucket" "$issued" <<'EOF' || { cat "$scratch/server.log"; fail "the client round trip failed"; }
import json, sys, urllib.request
import boto3
from botocore.config import Config
port, gateway_port, bucket, issued = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])

def s3(credentials):
    return boto3.client("s3", endpoint_url=f"http://127.0.0.1:{gateway_port}", region_name="us-east-1",
                        aws_access_key_id=credentials["AccessKeyId"], aws_secret_access_key=credentials["AccessKeySecret"],
                        aws_session_token=credentials["SecurityToken"],
                        config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                                      connect_timeout=5, read_timeout=10, retries={"max_attempts": 1}))

with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as response:
    vended = json.load(response)
assert vended["StatusCode"] == 200, vended
s3(vended).put_object(Bucket=bucket, Key="rootfs-check.txt", Body=b"up and down")
assert s3(vended).get_object(Bucket=bucket, Key="rootfs-check.txt")["Body"].read() == b"up and down"
# The token the CLI issued inside the image is accepted by the server.
assert s3(issued).get_object(Bucket=bucket, Key="rootfs-check.txt")["Body"].read() == b"up and down"
print(f"rootfs-check: token vended; object up and down in bucket {bucket}; the CLI's token accepted")
EOF

kill "$server_pid"
timeout 15 tail --pid="$server_pid" -f /dev/null || fail "the server did not stop on SIGTERM within 15 s"
wait "$server_pid" || fail "the server exited with $? on SIGTERM"
server_pid=""
say "ok"
