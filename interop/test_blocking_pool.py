"""One execution model: every piece of blocking work in `tollgate serve` (the local store's file
system calls, the token audit file, revocations, config reloads) runs on the one pool the service
group owns, and the process ends cleanly when that pool is shut down last. Checked from outside,
by the threads the process has: NIO names the pool's threads `TP-#n` and its process-wide
singleton pool's `SGLTN-TP-#n`, which the server must never start."""
import json
import signal
import time
from pathlib import Path

import pytest

from conftest import ROOT_SECRET, Server, get_json
from s3_helpers import ROOT_ACCESS_KEY_ID, root_client

# ServeCommand.blockingThreads
POOL_THREADS = 8


def thread_names(pid: int) -> list[str]:
    names = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            names.append((task / "comm").read_text().strip())
        except OSError:
            pass  # a thread that ended meanwhile
    return names


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="needs Linux's /proc")
def test_blocking_work_runs_on_the_one_pool_and_it_stops_last():
    server = Server({"AccessKeySecret": ROOT_SECRET, "AccessKeyID": ROOT_ACCESS_KEY_ID}).start()
    try:
        # Work of every kind that blocks: objects in the local store, a token (an audit line),
        # a revocation written by the CLI and read by the server, a config reload.
        s3 = root_client(server)
        s3.put_object(Bucket=server.bucket, Key="pool/a.txt", Body=b"x" * 300_000)
        assert s3.get_object(Bucket=server.bucket, Key="pool/a.txt")["Body"].read() == b"x" * 300_000
        status, _, body = get_json(server.url + "/")
        assert status == 200 and json.loads(body)["StatusCode"] == 200, body
        revoked = server.cli("token", "revoke", "--config", str(server.config_path), "--subject", "someone-else")
        assert revoked.returncode == 0, revoked.stderr
        config = json.loads(server.config_path.read_text())
        config["TokenExpireTime"] = "901"
        server.config_path.write_text(json.dumps(config, indent=2))
        deadline = time.monotonic() + 20
        while "config reloaded" not in server.output() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert "config reloaded" in server.output(), server.output()[-2000:]
        time.sleep(2.5)  # the revocation watcher's and the audit file's next rounds

        names = thread_names(server.process.pid)
        assert not [n for n in names if n.startswith("SGLTN-TP")], f"blocking work on NIO's singleton pool: {sorted(names)}"
        assert sorted(n for n in names if n.startswith("TP-#")) == [f"TP-#{i}" for i in range(POOL_THREADS)], sorted(names)

        server.process.send_signal(signal.SIGTERM)
        assert server.process.wait(timeout=30) == 0, server.output()[-2000:]
        assert "error" not in server.output().lower().split("config reloaded")[-1], server.output()[-2000:]
    finally:
        server.cleanup()
