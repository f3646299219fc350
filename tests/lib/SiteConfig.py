"""Sites with a /.iolite/config for tests/robot/site_config.robot: the
tree, a disk made without the host's check (a bad file must reach the
boot), and byte-exact fetches with curl, headers included.
"""

import hashlib
import os
import subprocess

from robot.api import logger
from robot.api.deco import keyword, library

GOOD = """# a deployment of its own (docs/config.md)
address = "10.0.2.20/24"
gateway = "10.0.2.2"
hostname = "shop-1.example"
listen_port = 8081
server_name = "shop-httpd/2 (iolite)"
index = ["home.html", "index.html"]
log_level = "info"
"""

# The address from QEMU's DHCP server instead of the assembly's static one.
DHCP = """dhcp = true
listen_port = 8082
"""

# Every error on its own line, as the boot reports them (line: message).
BAD = """# refused whole: the system runs on the assembly's defaults
address = "10.0.2.20/33"
listen_port = 0
colour = "blue"
hostname = 42
index = ["../up"]
"""
BAD_ERRORS = [
    '2: address: "10.0.2.20/33" prefix /33 is over 32',
    "3: listen_port: 0 is not a port (1-65535)",
    '4: unknown key "colour"',
    "5: hostname: expected a string, found an integer",
    "6: index: \"../up\" must be a file name (visible ASCII, no '/' or '\\', not . or ..)",
]


def _bytes(name, size):
    """Deterministic, distinct bytes per file (SHA-256 in counter mode)."""
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(f"site-config/{name}/{counter}".encode()).digest()
        counter += 1
    return bytes(out[:size])


@library(scope="SUITE")
class SiteConfig:
    @keyword
    def make_config_site(self, directory, which):
        """Writes a small site into `directory` (replaced) with the GOOD or
        BAD (or DHCP) /.iolite/config; returns the config's text."""
        subprocess.run(["rm", "-rf", directory], check=True)
        os.makedirs(os.path.join(directory, "sub"))
        os.makedirs(os.path.join(directory, ".iolite"))
        files = {
            "home.html": b"<!DOCTYPE html><title>shop</title><p>home</p>\n",
            "index.html": b"<!DOCTYPE html><title>shop</title><p>index</p>\n",
            "sub/index.html": b"<p>sub index</p>\n",
            "page.txt": _bytes("page", 3000),
            "blob.bin": _bytes("blob", 200 * 1024 + 7),
        }
        for rel, data in files.items():
            with open(os.path.join(directory, rel), "wb") as f:
                f.write(data)
        # A link into the system's folder: fs hides what it points at.
        os.symlink(".iolite/config", os.path.join(directory, "config-link"))
        text = {"good": GOOD, "bad": BAD, "dhcp": DHCP}[which]
        with open(os.path.join(directory, ".iolite", "config"), "w") as f:
            f.write(text)
        return text

    @keyword
    def bad_config_errors(self):
        """The lines the boot must print for the BAD file."""
        return [f"/.iolite/config:{e}" for e in BAD_ERRORS]

    @keyword
    def make_unchecked_disk(self, directory, image):
        """An ext2 disk of `directory` made by mke2fs alone, as a disk made
        elsewhere would be: no host check of its /.iolite/config."""
        subprocess.run(["rm", "-f", image], check=True)
        subprocess.run(["mke2fs", "-q", "-F", "-t", "ext2", "-b", "4096", "-m", "0", "-d", directory, image, "2048"],
                       check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)

    @keyword
    def get_with_curl(self, port, path, http10_without_host=False):
        """GETs `path` on 127.0.0.1:`port`; returns (status, headers dict
        with lower-case names, body bytes)."""
        cmd = ["curl", "-sS", "--max-time", "30", "-D", "-", "-o", "-", f"http://127.0.0.1:{port}{path}"]
        if http10_without_host:
            cmd[1:1] = ["-0", "-H", "Host:"]
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if r.returncode != 0:
            raise AssertionError(f"curl {path}: exit {r.returncode}: {r.stderr.decode().strip()}")
        head, _, body = r.stdout.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
        return status, headers, body

    @keyword
    def site_should_be_served_byte_exact(self, directory, port, server, index):
        """Every file of `directory` (outside .iolite, no symlinks) with status 200, its
        exact bytes and the `Server` header `server`; `/` and `/sub/` as the
        files `index` names (the first of the list present there)."""
        want = {}
        for base, dirs, names in os.walk(directory):
            dirs[:] = [d for d in dirs if d != ".iolite"]
            for n in names:
                full = os.path.join(base, n)
                if os.path.islink(full):
                    continue
                with open(full, "rb") as f:
                    want["/" + os.path.relpath(full, directory)] = f.read()
        for url, rel in (("/", index), ("/sub/", "sub/index.html")):
            with open(os.path.join(directory, rel), "rb") as f:
                want[url] = f.read()
        bad = []
        for url, data in sorted(want.items()):
            status, headers, body = self.get_with_curl(port, url)
            if status != 200 or body != data:
                bad.append(f"{url}: status {status}, {len(body)} bytes, want 200 and {len(data)} exact bytes")
            elif headers.get("server") != server:
                bad.append(f"{url}: Server {headers.get('server')!r}, want {server!r}")
        if bad:
            raise AssertionError("\n".join(bad))
        logger.info(f"{len(want)} URLs byte-exact, Server: {server}")
