#!/usr/bin/env python3
"""The disk's ceiling for durable 1 MiB PUTs, for bench/gateway.sh: THREADS writers for SECONDS,
each doing what the store does for one object and nothing else (no HTTP, no hashing, no index):
write the body to a new file in one of the object directories, fsync it, fsync that directory,
and, as PUTs to bench/gateway.sh's 64 keys replace each other, delete the file the key held
before (the store deletes a replaced version's file). Prints objects per second. The gateway
cannot PUT faster than this on the same disk while it fsyncs every object, whatever nginx
(which does not fsync) manages.

  disk_ceiling.py DIRECTORY SECONDS THREADS [BYTES]
"""
import os
import sys
import threading
import time


def main(directory, seconds, threads, size=1024 * 1024):
    body = os.urandom(size)
    for a in range(16):
        os.makedirs(os.path.join(directory, "objects", f"{a:02x}"), exist_ok=True)
    deadline = time.monotonic() + seconds
    counts = [0] * threads

    def writer(index):
        n = 0
        held = {}  # key -> the file holding its current version
        while time.monotonic() < deadline:
            target_dir = os.path.join(directory, "objects", f"{n % 16:02x}")
            path = os.path.join(target_dir, f"{index}-{n}")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, body)
                os.fsync(fd)
            finally:
                os.close(fd)
            dfd = os.open(target_dir, os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(dfd)
            finally:
                os.close(dfd)
            key = n % 64
            if key in held:
                os.unlink(held[key])
            held[key] = path
            n += 1
        counts[index] = n

    started = time.monotonic()
    workers = [threading.Thread(target=writer, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    print(f"{sum(counts) / (time.monotonic() - started):.1f}")


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), *(int(a) for a in sys.argv[4:5]))
