"""Shared fixtures: start the real `tollgate` binary on loopback, with a scratch config."""
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROOT_SECRET = "interop-root-secret-0123456789abcdefghijklmnop"
# The root access key id of the S3 interop tests (`s3_helpers` hands it out too).
S3_ROOT_ACCESS_KEY_ID = "TGROOTINTEROP"


def binary() -> str:
    path = os.environ.get("TOLLGATE_BIN")
    if path:
        return path
    bin_dir = subprocess.run(["swift", "build", "--show-bin-path"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.strip()
    return str(Path(bin_dir) / "tollgate")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A running `tollgate serve`, with its scratch directory and captured output."""

    def __init__(self, config: dict, *, bucket: str = "tollgate", env: dict | None = None):
        self.dir = Path(tempfile.mkdtemp(prefix="tollgate-interop-"))
        self.env = env or {}
        shutil.copytree(ROOT / "policy", self.dir / "policy")
        self.port = free_port()
        self.gateway_port = free_port()
        self.bucket = bucket
        base = {
            "AccessKeyID": "", "AccessKeySecret": "", "RoleArn": "", "TokenExpireTime": "900",
            "PolicyFile": "policy/all_policy.txt", "ListenAddress": "127.0.0.1", "Port": self.port,
            "GatewayAddress": "127.0.0.1", "GatewayPort": self.gateway_port,
            "Variables": {"BUCKET_NAME": bucket},
            "Roles": {"read": "policy/bucket_read_policy.txt", "readwrite": "policy/bucket_read_write_policy.txt",
                      "isolated": "policy/user_isolated_policy.txt"},
        }
        base.update(config)
        self.tls, self.gateway_tls = "TLS" in base, "GatewayTLS" in base
        self.config_path = self.dir / "config.json"
        self.config_path.write_text(json.dumps(base, indent=2))
        self.log_path = self.dir / "server.log"
        self.process = None

    def configure(self, **members):
        """Adds or replaces top-level members of the config (before `start`)."""
        config = json.loads(self.config_path.read_text())
        config.update(members)
        self.config_path.write_text(json.dumps(config, indent=2))

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.port}"

    @property
    def gateway_url(self) -> str:
        return f"{'https' if self.gateway_tls else 'http'}://127.0.0.1:{self.gateway_port}"

    def start(self, timeout: float = 30) -> "Server":
        self.log = open(self.log_path, "ab")
        self.process = subprocess.Popen([binary(), "serve", "--config", str(self.config_path)],
                                        cwd=self.dir, stdout=self.log, stderr=subprocess.STDOUT, env={**os.environ, **self.env})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"tollgate exited with {self.process.returncode}:\n{self.output()}")
            try:
                # Readiness only: test_tls.py checks the certificate itself.
                unverified = ssl._create_unverified_context() if self.tls else None
                with urllib.request.urlopen(self.url + "/healthz", timeout=1, context=unverified) as response:
                    if response.status == 200:
                        return self.wait_for_gateway(deadline)
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"tollgate did not become healthy:\n{self.output()}")

    def wait_for_gateway(self, deadline: float) -> "Server":
        """The gateway listens on its own port, started by the same service group as the token
        endpoint: wait until it accepts connections too."""
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.gateway_port), timeout=1):
                    return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"gateway did not listen on {self.gateway_port}:\n{self.output()}")

    def stop(self):
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process:
            self.log.close()

    def kill(self):
        self.process.kill()
        self.process.wait()
        self.log.close()

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def audit_records(self, *access_key_ids: str, timeout: float = 5) -> dict:
        """The token audit file's records (`data/token-audit.jsonl`, the record of every issue),
        by access key id, once it holds every one of `access_key_ids` (the writer appends within
        moments of an issue) or `timeout` has passed."""
        path = self.dir / "data" / "token-audit.jsonl"
        deadline = time.monotonic() + timeout
        while True:
            text = path.read_text() if path.exists() else ""
            records = {r["access_key_id"]: r for r in map(json.loads, text.splitlines())}
            if all(key in records for key in access_key_ids) or time.monotonic() > deadline:
                return records
            time.sleep(0.05)

    def cli(self, *args, check=False, input=None):
        return subprocess.run([binary(), *args], cwd=self.dir, capture_output=True, text=True,
                              check=check, input=input, timeout=60, env={**os.environ, **self.env})

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


# MARK: Storage backends

# Modules that set `ON_RGW_TOO = True` run twice: once with their gateway on the local store, once
# on the S3 backend over the session's Ceph cluster (the `backend` fixture, "local" or "rgw", which
# their server fixtures pass to `Server.on`). What is expected to differ on RGW is listed in one
# place, `rgw_differences.py`.
BACKENDS = ("local", "rgw")


def pytest_generate_tests(metafunc):
    if "backend" in metafunc.fixturenames:
        backends = BACKENDS if getattr(metafunc.module, "ON_RGW_TOO", False) else ("local",)
        metafunc.parametrize("backend", backends, indirect=True, scope="module")


def pytest_collection_modifyitems(config, items):
    from rgw_differences import EXPECTED
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is None or callspec.params.get("backend") != "rgw":
            continue
        name = f"{Path(item.fspath).name}::{item.originalname}"
        reason = EXPECTED.get(name)
        if reason:
            item.add_marker(pytest.mark.xfail(strict=True, reason=f"on RGW: {reason}"))


@pytest.fixture(scope="module")
def backend(request):
    """Where the module's gateway stores objects: "local" (the data directory) or "rgw"."""
    return getattr(request, "param", "local")


def rgw_storage(cluster, directory: Path, prefix: str | None = None) -> dict:
    """config.json's `Storage` for the s3 backend over `cluster`, its keys in files in `directory`
    (so that every command reading the config finds them), in buckets of `prefix` (a fresh one)."""
    (directory / "rgw-access-key").write_text(cluster.access_key)
    (directory / "rgw-secret-key").write_text(cluster.secret_key)
    os.chmod(directory / "rgw-secret-key", 0o600)
    return {"Backend": "s3", "Endpoint": cluster.endpoint, "Region": cluster.region,
            "BucketPrefix": prefix or "i" + os.urandom(3).hex() + "-",
            "AccessKeyIDFile": "rgw-access-key", "AccessKeySecretFile": "rgw-secret-key",
            "BackendMinimumPartSize": int(cluster.env.get("RGW_MULTIPART_MIN_PART_SIZE", "1"))}


def on_backend(request, backend: str, config: dict, **options) -> Server:
    """A `Server` with `config`, storing on `backend`: for "rgw", the s3 backend over the session's
    Ceph cluster, in buckets of a prefix of its own."""
    if backend == "local":
        return Server(config, **options)
    cluster = request.getfixturevalue("rgw")
    server = Server(config, **options)
    server.configure(Storage=rgw_storage(cluster, server.dir))
    return server


@pytest.fixture(scope="module")
def gw(request, backend):
    """A gateway with the reference config and known root credentials, one per test module (on
    the module's backend); a module that needs another configuration defines its own `gw`."""
    s = on_backend(request, backend, {"AccessKeyID": S3_ROOT_ACCESS_KEY_ID, "AccessKeySecret": ROOT_SECRET}).start()
    yield s
    s.cleanup()


@pytest.fixture(scope="module")
def server():
    s = Server({"AccessKeySecret": ROOT_SECRET}).start()
    yield s
    s.cleanup()


class CephCluster:
    """A single-node Ceph cluster (monitor, OSD, RADOS Gateway with STS) from
    `.ci/ceph/cluster.sh`: `endpoint`, `access_key`, `secret_key` (an admin user with the caps
    roles, users, buckets, metadata and oidc-provider), `region`, and every line of its
    `cluster.env` in `env`."""

    SCRIPT = ROOT / ".ci" / "ceph" / "cluster.sh"

    def __init__(self, directory: Path, *, owned: bool):
        self.dir = directory
        self.owned = owned
        self.env = self.read_env()

    def read_env(self) -> dict:
        env = {}
        for line in (self.dir / "cluster.env").read_text().splitlines():
            if "=" in line and not line.startswith("#"):
                key, value = line.split("=", 1)
                env[key] = value
        return env

    @property
    def endpoint(self) -> str:
        return self.env["RGW_ENDPOINT"]

    @property
    def access_key(self) -> str:
        return self.env["RGW_ACCESS_KEY"]

    @property
    def secret_key(self) -> str:
        return self.env["RGW_SECRET_KEY"]

    @property
    def region(self) -> str:
        return self.env.get("RGW_REGION", "us-east-1")

    def run(self, command: str, timeout: float = 300):
        subprocess.run(["bash", str(self.SCRIPT), command, str(self.dir)], check=True, timeout=timeout,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        self.env = self.read_env()

    def stop_gateway(self):
        """Stops radosgw alone (the monitor and the OSD keep running): a backend outage."""
        self.run("rgw-stop")

    def start_gateway(self):
        """Starts radosgw again on the same port."""
        self.run("rgw-start")

    def s3(self):
        """A boto3 S3 client straight to RGW as the admin user (path style)."""
        import boto3
        from botocore.config import Config
        return boto3.client("s3", endpoint_url=self.endpoint, region_name=self.region,
                            aws_access_key_id=self.access_key, aws_secret_access_key=self.secret_key,
                            config=Config(signature_version="s3v4", s3={"addressing_style": "path"},
                                          retries={"max_attempts": 2}))


def ceph_installed() -> bool:
    return all(shutil.which(tool) for tool in ("ceph-mon", "ceph-osd", "radosgw", "radosgw-admin", "monmaptool", "ceph"))


@pytest.fixture(scope="session")
def rgw():
    """The Ceph cluster the RGW tests share, started once per session with
    `.ci/ceph/cluster.sh` and stopped at its end. `TOLLGATE_CEPH_DIR` names the directory of a
    cluster that is already running (its `cluster.env`), which is then used and left running.
    Without Ceph's packages the tests that need it skip, but fail under CI (`CI=true`)."""
    existing = os.environ.get("TOLLGATE_CEPH_DIR")
    if existing:
        yield CephCluster(Path(existing), owned=False)
        return
    if not ceph_installed():
        message = ("Ceph is not installed (apt-get install --no-install-recommends ceph-mon ceph-osd "
                   "radosgw ceph-common)")
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    directory = Path(tempfile.mkdtemp(prefix="tollgate-ceph-"))
    cluster = None
    try:
        subprocess.run(["bash", str(CephCluster.SCRIPT), "start", str(directory)], check=True, timeout=300,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        cluster = CephCluster(directory, owned=True)
        yield cluster
    finally:
        subprocess.run(["bash", str(CephCluster.SCRIPT), "stop", str(directory)], timeout=120,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        shutil.rmtree(directory, ignore_errors=True)


def get_json(url: str, method: str = "GET"):
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.headers, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read().decode()
