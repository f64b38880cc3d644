"""The Alibaba STS stand-in of the interop tests (interop/upstream_standins.py: every request's
signature checked with Alibaba's own Python code) as a process for bench/upstream.sh:
    python3 bench/aliyun_standin.py PORT_FILE DELAY_MS
writes the port it listens on to PORT_FILE and serves until killed."""
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "interop"))
from upstream_standins import AliyunSTSStandIn  # noqa: E402

standin = AliyunSTSStandIn(delay=int(sys.argv[2]) / 1000)
Path(sys.argv[1]).write_text(str(standin.httpd.server_address[1]))
stop = threading.Event()
signal.signal(signal.SIGTERM, lambda *_: stop.set())
signal.signal(signal.SIGINT, lambda *_: stop.set())
stop.wait()
print(f"stand-in: {len(standin.requests)} AssumeRole answered, {len(standin.refused)} refused", file=sys.stderr)
standin.close()
