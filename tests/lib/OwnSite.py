"""A web site of one's own for tests/robot/own_site.robot: a directory
tree with the names, depths, types and sizes a real site has (and a few a
careless server gets wrong), the trees `./iolite image --site` must
refuse, and a check of every served file with curl.

The expected Content-Type of each file is written here, not taken from
httpd's table, so that a wrong entry there fails the test.
"""

import hashlib
import json
import os
import socket
import subprocess
import urllib.parse

from robot.api import logger
from robot.api.deco import keyword, library

# name -> expected Content-Type; each file holds a few KiB of distinct bytes.
TYPED = {
    "index.html": "text/html; charset=utf-8",
    "style.CSS": "text/css; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "module.mjs": "text/javascript; charset=utf-8",
    "data.json": "application/json",
    "feed.xml": "application/xml",
    "logo.svg": "image/svg+xml",
    "photo.JPG": "image/jpeg",
    "icon.png": "image/png",
    "font.woff2": "font/woff2",
    "paper.pdf": "application/pdf",
    "clip.mp4": "video/mp4",
    "sound.mp3": "audio/mpeg",
    "sheet.xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    "archive.tar.gz": "application/gzip",
    "notes.txt": "text/plain; charset=utf-8",
    "README": "application/octet-stream",
    "blob.unknownext": "application/octet-stream",
}
# Names that must survive ext2, fs and httpd's percent-decoding unchanged.
ODD = [
    "with space.txt",
    "ünïcødé ñame.html",
    "100%.txt",
    "a+b=c&d.css",
    "semi;colon,comma.js",
    "quote'paren(1).json",
    "[brackets]{braces}.svg",
    "hash#question?.txt",
    "-leading-dash.txt",
    "..dots..txt",
    "x" * 251 + ".txt",  # 255 bytes, ext2's longest name
]
BIG_SIZE = 3 * 1024 * 1024 + 17


def _bytes(name, size):
    """Deterministic, distinct bytes for each file (SHA-256 in counter mode)."""
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(f"own-site/{name}/{counter}".encode()).digest()
        counter += 1
    return bytes(out[:size])


@library(scope="SUITE")
class OwnSite:
    @keyword
    def make_own_site(self, directory):
        """Writes the tree into `directory` (which must not exist) and a
        manifest beside it (`directory`.json: path, sha256, size, type per
        URL); returns the manifest's path."""
        os.makedirs(directory)
        expect = []

        def put(rel, data, ctype):
            full = os.path.join(directory, rel)
            os.makedirs(os.path.dirname(full), exist_ok=True)
            with open(full, "wb") as f:
                f.write(data)
            expect.append({"path": "/" + rel, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(), "type": ctype})

        for i, (name, ctype) in enumerate(TYPED.items()):
            put(name, _bytes(name, 1000 + 517 * i), ctype)
        for name in ODD:
            ext = name.rsplit(".", 1)[-1].lower()
            ctype = {"txt": "text/plain; charset=utf-8", "html": "text/html; charset=utf-8",
                     "css": "text/css; charset=utf-8", "js": "text/javascript; charset=utf-8",
                     "json": "application/json", "svg": "image/svg+xml"}[ext]
            put("odd/" + name, _bytes(name, 300 + len(name)), ctype)
        put("empty.txt", b"", "text/plain; charset=utf-8")
        # Nested folders, twelve deep, odd names on the way, an index in one.
        deep = "/".join(f"level {i} ü" for i in range(12))
        put(f"{deep}/leaf.html", _bytes("leaf", 4097), "text/html; charset=utf-8")
        put("nested/dir/index.html", _bytes("nested-index", 2222), "text/html; charset=utf-8")
        expect.append(dict(expect[-1], path="/nested/dir/"))
        # A large file: more than the cache's chunks and several TSO segments.
        put("big/large.bin", _bytes("large", BIG_SIZE), "application/octet-stream")
        # A relative symlink inside the tree: fs follows it, httpd types it
        # by the name asked for.
        os.symlink("../big/large.bin", os.path.join(directory, "odd", "link-to-large.dat"))
        expect.append(dict(expect[-1], path="/odd/link-to-large.dat"))
        manifest = directory.rstrip("/") + ".json"
        with open(manifest, "w") as f:
            json.dump(expect, f, indent=1)
        logger.info(f"{len(expect)} URLs in {directory}")
        return manifest

    @keyword
    def every_url_should_match_with_curl(self, manifest, port, host="127.0.0.1"):
        """GETs every URL of the manifest with curl (percent-encoded) and
        checks status 200, the body's SHA-256 and size, and Content-Type."""
        with open(manifest) as f:
            expect = json.load(f)
        bad = []
        for e in expect:
            url = f"http://{host}:{port}" + urllib.parse.quote(e["path"], safe="/")
            r = subprocess.run(
                ["curl", "-sS", "--path-as-is", "--max-time", "60", "-o", "-", "-w",
                 "\n%{http_code} %{content_type}", url],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            body, _, trailer = r.stdout.rpartition(b"\n")
            code, _, ctype = trailer.decode().partition(" ")
            digest = hashlib.sha256(body).hexdigest()
            if r.returncode != 0 or code != "200":
                bad.append(f"{e['path']}: curl {r.returncode} status {code} {r.stderr.decode().strip()}")
            elif len(body) != e["size"] or digest != e["sha256"]:
                bad.append(f"{e['path']}: {len(body)} bytes sha256 {digest}, want {e['size']} {e['sha256']}")
            elif ctype != e["type"]:
                bad.append(f"{e['path']}: Content-Type {ctype!r}, want {e['type']!r}")
        if bad:
            raise AssertionError(f"{len(bad)} of {len(expect)} URLs wrong:\n" + "\n".join(bad))
        logger.info(f"{len(expect)} URLs byte-exact with the right Content-Type")
        return len(expect)

    @keyword
    def make_refused_site(self, directory, kind):
        """A small valid tree plus one thing `./iolite image` must refuse:
        socket, fifo, absolute-symlink, escaping-symlink, symlink-loop,
        deep-path (over fs's 4096-byte paths) or huge-file (a sparse file
        over fs's 4 GiB). Returns the offending path relative to it."""
        os.makedirs(os.path.join(directory, "sub"))
        with open(os.path.join(directory, "index.html"), "w") as f:
            f.write("<p>fine</p>\n")
        target = os.path.join(directory, "sub", kind)
        rel = f"sub/{kind}"
        if kind == "socket":
            s = socket.socket(socket.AF_UNIX)
            s.bind(target)
            s.close()
        elif kind == "fifo":
            os.mkfifo(target)
        elif kind == "absolute-symlink":
            os.symlink("/etc/hostname", target)
        elif kind == "escaping-symlink":
            os.symlink("../../outside.html", target)
        elif kind == "symlink-loop":
            os.symlink(kind, target)  # itself
        elif kind == "huge-file":
            with open(target, "wb") as f:
                f.truncate((1 << 32) + 1)
        elif kind == "deep-path":
            # 21 levels of 200 bytes: 4221 bytes, over fs's limit (this
            # machine's PATH_MAX too, hence the relative creation).
            cwd = os.getcwd()
            try:
                os.chdir(os.path.join(directory, "sub"))
                for _ in range(21):
                    os.mkdir("d" * 200)
                    os.chdir("d" * 200)
                with open("deep.txt", "w") as f:
                    f.write("deep\n")
            finally:
                os.chdir(cwd)
            rel = "sub/" + "d" * 100  # the message shows the start of the path
        else:
            raise AssertionError(f"unknown kind {kind}")
        return rel
