"""Slow background clients for bench/slow (the paper's §4.4 "WAN" clients).

usage: slowclients.py HOST N RATE STATUS_FILE MANIFEST PATH...

N clients, each on its own TCP connection with a 2 KiB receive buffer
(SO_RCVBUF = 2048, set before connecting, so the window the server sees
stays small), request a document (client i starts with PATH i mod len),
read RATE bytes per second of it in 512-byte steps, check the body's
SHA-256 against the manifest, and ask for the next document on the same
connection (keep-alive), for as long as they run. A connection the server
closes is reopened. Every second STATUS_FILE gets a JSON line: clients
connected, responses started, documents completed, bytes read, bad bodies
(wrong length or SHA-256), errors (connect failures, resets, closes).
SIGTERM ends it.
"""
import asyncio
import hashlib
import json
import signal
import socket
import sys

host, n, rate, status_file, manifest_file = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
paths = sys.argv[6:]
STEP = 512
manifest = {}
with open(manifest_file) as f:
    for line in f:
        kind, p, size, sha = line.split()
        manifest[p] = (int(size), sha)
st = {"clients": n, "connected": 0, "started": 0, "completed": 0, "bytes": 0, "bad": 0, "errors": 0, "last_error": ""}


async def connect():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 2048)
    s.setblocking(False)
    await asyncio.get_running_loop().sock_connect(s, (host, 80))
    return s


async def read_exactly(s, n, paced):
    loop = asyncio.get_running_loop()
    buf = bytearray()
    while len(buf) < n:
        chunk = await loop.sock_recv(s, min(STEP if paced else 65536, n - len(buf)))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
        if paced:
            st["bytes"] += len(chunk)
            await asyncio.sleep(len(chunk) / rate)
    return bytes(buf)


async def read_head(s, pending):
    loop = asyncio.get_running_loop()
    while b"\r\n\r\n" not in pending:
        chunk = await loop.sock_recv(s, 512)
        if not chunk:
            raise ConnectionError("closed")
        pending += chunk
    head, rest = pending.split(b"\r\n\r\n", 1)
    return head.decode("latin-1"), rest


async def client(i):
    k = i
    s = None
    connected = False
    while True:
        try:
            if s is None:
                s = await connect()
                if not connected:
                    st["connected"] += 1
                    connected = True
            path = paths[k % len(paths)]
            k += 1
            await asyncio.get_running_loop().sock_sendall(s, f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            head, rest = await read_head(s, b"")
            st["started"] += 1
            length = next((int(line.split(":", 1)[1]) for line in head.split("\r\n")
                           if line.lower().startswith("content-length:")), None)
            size, sha = manifest[path]
            if not head.startswith("HTTP/1.1 200") or length != size:
                st["bad"] += 1
                raise ConnectionError(f"bad head for {path}: {head.splitlines()[0]!r}, length {length}")
            st["bytes"] += len(rest)
            body = rest + await read_exactly(s, size - len(rest), True)
            if hashlib.sha256(body[:size]).hexdigest() != sha:
                st["bad"] += 1
                st["last_error"] = f"{path}: wrong SHA-256"
            st["completed"] += 1
        except (OSError, ConnectionError) as e:
            st["errors"] += 1
            st["last_error"] = repr(e)[:200]
            if s is not None:
                s.close()
                if connected:
                    st["connected"] -= 1
                    connected = False
            s = None
            await asyncio.sleep(1)


async def report():
    while True:
        with open(status_file, "a") as f:
            f.write(json.dumps(st) + "\n")
        await asyncio.sleep(1)


async def main():
    loop = asyncio.get_running_loop()
    stop = loop.create_future()
    loop.add_signal_handler(signal.SIGTERM, stop.set_result, None)
    tasks = [asyncio.create_task(client(i)) for i in range(n)] + [asyncio.create_task(report())]
    await stop
    for t in tasks:
        t.cancel()
    with open(status_file, "a") as f:
        f.write(json.dumps(st) + "\n")


asyncio.run(main())
