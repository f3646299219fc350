"""Robot Framework keywords for several appliances behind haproxy
(tests/robot/cluster.robot): the namespace, bridge, dnsmasq and haproxy of
tools/cluster/cluster.py, haproxy's stats from its socket, and a load of
real HTTP/1.1 keep-alive clients (http.client) inside the namespace whose
every body is checked against the site manifest's SHA-256.

The appliances themselves are QemuSystem instances, one per appliance
(`Library QemuSystem DIR app1 AS App1`), booted in the namespace with the
TAP device, MAC and disk `Appliance Arguments` gives.
"""

import hashlib
import http.client
import os
import sys
import threading
import time

from robot.api import logger
from robot.api.deco import keyword, library

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools", "cluster"))
import cluster as C  # noqa: E402  (the network and haproxy: shared with bench/cluster)


class _Load:
    """Client threads fetching the paths in turn through haproxy until
    stopped; every outcome recorded with when its request began."""

    def __init__(self, ns, clients, paths, manifest):
        self.ns, self.paths, self.manifest = ns, paths, manifest
        self.stop = threading.Event()
        self.lock = threading.Lock()
        # (start, end, server, path) of every byte-exact response.
        self.ok = []
        # (start, server or None, path, what): responses cut after their
        # header (server known) and every other failure.
        self.cut = []
        self.failed = []
        self.threads = [threading.Thread(target=self._client, args=(i,), daemon=True) for i in range(clients)]
        for t in self.threads:
            t.start()

    def _client(self, i):
        C.setns(self.ns)
        conn = None
        k = i
        while not self.stop.is_set():
            path = self.paths[k % len(self.paths)]
            k += 1
            size, sha = self.manifest[path]
            start = time.monotonic()
            server = None
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(C.HOST_SIDE, C.FRONTEND_PORT, timeout=60)
                conn.request("GET", path)
                r = conn.getresponse()
                server = r.getheader("X-Served-By")
                body = r.read()
                if r.status != 200:
                    raise AssertionError(f"status {r.status} {body[:200]!r}")
                digest = hashlib.sha256(body).hexdigest()
                if len(body) != size or digest != sha:
                    raise AssertionError(f"{len(body)} bytes, SHA-256 {digest}; want {size}, {sha}")
                if r.will_close:
                    conn.close()
                    conn = None
                with self.lock:
                    self.ok.append((start, time.monotonic(), server, path))
            except http.client.IncompleteRead as e:
                with self.lock:
                    self.cut.append((start, server, path, f"cut after {len(e.partial)} body bytes"))
                conn.close()
                conn = None
            except Exception as e:  # every other outcome is a failure, said
                with self.lock:
                    self.failed.append((start, server, path, f"{type(e).__name__}: {e}"))
                if conn is not None:
                    conn.close()
                conn = None
        if conn is not None:
            conn.close()


@library(scope="SUITE", auto_keywords=False)
class Cluster:
    """One cluster network per suite, and the loads run through it."""

    def __init__(self):
        self.cluster = None
        self.load = None
        self.marks = {}

    @keyword
    def create_cluster_network(self, count):
        """The namespace, bridge and `count` TAP devices, and dnsmasq on the
        bridge with a fixed lease per appliance; returns the namespace."""
        self.cluster = C.Cluster(count)
        self.cluster.create()
        self.cluster.start_dhcp()
        logger.info(f"namespace {self.cluster.name}, bridge {C.BRIDGE} {C.HOST_SIDE}/24, work dir {self.cluster.workdir}")
        return self.cluster.name

    @keyword
    def delete_cluster_network(self):
        """Stops the load, haproxy and dnsmasq, puts their logs in Robot's
        log and removes the namespace. Safe to call twice."""
        if self.load is not None:
            self.load.stop.set()
            for t in self.load.threads:
                t.join(timeout=90)
            self.load = None
        if self.cluster is None:
            return
        c, self.cluster = self.cluster, None
        c.delete()
        for name in ("dnsmasq.log", "haproxy.log"):
            path = os.path.join(c.workdir, name)
            if os.path.exists(path):
                with open(path, errors="replace") as f:
                    logger.info(f"{name}:\n{f.read()[-8000:]}")

    @keyword
    def appliance_arguments(self, n, disk):
        """`simulate` arguments for appliance n: its TAP, its MAC, the disk."""
        n = int(n)
        return ["--tap", C.tap(n), "--mac", C.mac(n), "--disk", disk]

    @keyword
    def appliance_address(self, n):
        """The address dnsmasq leases appliance n."""
        return C.address(int(n))

    @keyword
    def router_address(self):
        """The bridge's address: the router and DHCP server the lease names."""
        return C.HOST_SIDE

    @keyword
    def start_haproxy(self, count, check="/healthz"):
        """haproxy (tools/cluster/cluster.py's configuration, with the
        X-Served-By header) in front of appliances 1..count; logs the
        configuration."""
        cfg = self.cluster.start_haproxy(range(1, int(count) + 1), check=check, served_by=True)
        with open(cfg) as f:
            logger.info(f"{cfg}:\n{f.read()}")

    @keyword
    def wait_until_haproxy_says(self, n, status, timeout=120):
        """Waits until haproxy's health checks give appliance n `status`
        (UP or DOWN); returns the seconds it took."""
        took = self.cluster.wait_for_status(C.server_name(int(n)), status, float(timeout))
        logger.info(f"haproxy: {C.server_name(int(n))} {status} after {took:.1f} s")
        return round(took, 1)

    @keyword
    def haproxy_server_stats(self, n):
        """haproxy's `show stat` row of appliance n: status, stot (sessions
        in all), hrsp_2xx, chkfail, ..."""
        row = self.cluster.server_stats()[C.server_name(int(n))]
        logger.info(f"{C.server_name(int(n))}: status {row['status']}, stot {row['stot']}, "
                    f"hrsp_2xx {row['hrsp_2xx']}, retries {row['wretr']}, redispatches {row['wredis']}, "
                    f"check failures {row['chkfail']}, down {row['chkdown']} times")
        return row

    @keyword
    def fetch_through_haproxy(self, count, manifest, *paths):
        """`count` GETs on one keep-alive connection through haproxy,
        cycling through `paths`, each body checked against the manifest;
        returns {server name: responses}."""
        man = _manifest(manifest)
        paths = list(paths)

        def run():
            served = {}
            conn = http.client.HTTPConnection(C.HOST_SIDE, C.FRONTEND_PORT, timeout=60)
            try:
                for i in range(int(count)):
                    path = paths[i % len(paths)]
                    conn.request("GET", path)
                    r = conn.getresponse()
                    body = r.read()
                    if r.status != 200 or hashlib.sha256(body).hexdigest() != man[path][1]:
                        raise AssertionError(f"{path}: status {r.status}, {len(body)} bytes, not the file")
                    server = r.getheader("X-Served-By")
                    served[server] = served.get(server, 0) + 1
            finally:
                conn.close()
            return served
        served = self.cluster.in_ns(run)
        logger.info(f"served by {served}")
        return served

    @keyword
    def start_load_through_haproxy(self, clients, manifest, *paths):
        """`clients` keep-alive clients fetch `paths` in turn through
        haproxy until `Stop Load`, each body checked byte for byte."""
        self.load = _Load(self.cluster.name, int(clients), list(paths), _manifest(manifest))
        self.marks = {}

    @keyword
    def mark_load(self, name):
        """Notes the time now as `name` (e.g. `kill`, `restart`) for `Stop
        Load`'s accounting."""
        self.marks[name] = time.monotonic()

    @keyword
    def stop_load(self):
        """Stops the clients; returns what they saw: ok (byte-exact
        responses), per_server, per_server_after (each mark: responses
        begun after it), cut (responses cut after their header: server,
        whether begun before each mark) and failed (every other failure,
        with its message)."""
        load, self.load = self.load, None
        load.stop.set()
        for t in load.threads:
            t.join(timeout=90)
        if any(t.is_alive() for t in load.threads):
            raise AssertionError("a client did not finish within 90 s of the stop")
        t0 = min([s for s, _, _, _ in load.ok] + [s for s, _, _, _ in load.cut + load.failed] or [0])
        result = {"ok": len(load.ok), "per_server": {}, "per_server_after": {}, "cut": [], "failed": []}
        for _, _, server, _ in load.ok:
            result["per_server"][server] = result["per_server"].get(server, 0) + 1
        for mark, at in self.marks.items():
            after = {}
            for start, _, server, _ in load.ok:
                if start > at:
                    after[server] = after.get(server, 0) + 1
            result["per_server_after"][mark] = after
        for start, server, path, what in load.cut:
            result["cut"].append({"at": round(start - t0, 2), "server": server, "path": path, "what": what,
                                  "before": {m: start < at for m, at in self.marks.items()}})
        for start, server, path, what in load.failed:
            result["failed"].append({"at": round(start - t0, 2), "server": server, "path": path, "what": what})
        slowest = max((end - start for start, end, _, _ in load.ok), default=0)
        result["slowest_s"] = round(slowest, 2)
        marks = {m: round(at - t0, 2) for m, at in self.marks.items()}
        logger.info(f"load: {result['ok']} byte-exact responses, by server {result['per_server']}, after the marks "
                    f"{result['per_server_after']} (marks at {marks} s); slowest {slowest:.2f} s; "
                    f"cut {result['cut']}; failed {result['failed']}")
        return result


def _manifest(path):
    """{path: (size, sha256)} from a site.manifest."""
    out = {}
    with open(path) as f:
        for line in f:
            parts = line.split()
            if len(parts) == 4 and parts[0] == "file":
                out[parts[1]] = (int(parts[2]), parts[3])
    return out
