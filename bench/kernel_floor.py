"""What any broker pays per GB on this machine before it runs a line of its own: the kernel's share of
taking produce bytes off a loopback socket and writing them into a segment file (the page cache).

    python -m bench.kernel_floor [--mb 1000] [--chunk-kib 1024,16] [--rounds 3]

A sender process writes `--mb` MB over loopback TCP in `--chunk-kib` pieces (1 MB: librdkafka's default
batch.size; 16 KiB: the Java client's); the receiver (this process, one thread) `recv_into`s each piece
and `os.write`s it to a file in a temporary directory, as a broker appends a produce payload; nothing
else: no parsing, no CRC, no response. Prints the receiver's CPU seconds (utime + stime) per GB: a floor
under every broker's produce CPU s/GB in bench.matrix, minikafka's and Kafka's alike. With the client's
own CPU s/GB from the matrix, 2 cores ÷ (client + floor) is the most any broker could reach in a cell on
this machine (the "ceiling with the floor" of BENCHMARKS.md).
"""
from __future__ import annotations

import argparse
import os
import socket
import statistics
import tempfile
import threading
import time


def _send(port: int, total: int, chunk: int) -> None:
    payload = os.urandom(chunk)
    with socket.create_connection(("127.0.0.1", port)) as s:
        sent = 0
        while sent < total:
            s.sendall(payload)
            sent += chunk


def receive_and_write(total_mb: float, chunk_kib: int) -> float:
    """Receiver CPU seconds per GB for `total_mb` MB in `chunk_kib` KiB pieces."""
    chunk = chunk_kib * 1024
    total = int(total_mb * 1e6) // chunk * chunk
    with socket.create_server(("127.0.0.1", 0)) as server, tempfile.TemporaryDirectory(prefix="floor-") as tmp:
        port = server.getsockname()[1]
        sender = threading.Thread(target=_send, args=(port, total, chunk), daemon=True)
        # the sender's CPU is not what is measured: the receiver's is this thread's own (thread_time)
        sender.start()
        conn, _ = server.accept()
        buf = bytearray(chunk)
        view = memoryview(buf)
        fd = os.open(os.path.join(tmp, "00000000000000000000.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            got = 0
            c0 = time.thread_time()
            while got < total:
                n = 0
                while n < chunk:  # one whole piece, as a broker reads one whole request
                    r = conn.recv_into(view[n:], chunk - n)
                    if r == 0:
                        raise ConnectionError("sender closed early")
                    n += r
                os.write(fd, view)
                got += chunk
            cpu = time.thread_time() - c0
        finally:
            os.close(fd)
            conn.close()
        sender.join()
    return cpu / (total / 1e9)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mb", type=float, default=1000)
    ap.add_argument("--chunk-kib", default="1024,16")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    for kib in (int(k) for k in args.chunk_kib.split(",")):
        receive_and_write(min(args.mb, 200), kib)  # warm-up: page cache and socket buffers
        runs = [receive_and_write(args.mb, kib) for _ in range(args.rounds)]
        print(f"{kib} KiB pieces: receiver CPU s/GB median {statistics.median(runs):.2f} "
              f"(rounds: {', '.join(f'{r:.2f}' for r in runs)})", flush=True)


if __name__ == "__main__":
    main()
