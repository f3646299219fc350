"""Differential testing of the web server against Debian's nginx.

nginx (the test's own process, on a free loopback port, with a config
file written here) serves the same files as our image: the contents of
build/images/site.img, dumped with debugfs. /cgi-bin/ is proxied to our
server (nginx has no CGI), so requests that reach a CGI are parsed and
framed by nginx and answered by our CGI programs.

Every case of tests/http-corpus is sent raw on a fresh connection to both
servers (then the write side is shut, and the answer read until the
server closes). Compared: the statuses of all responses; Allow,
Content-Range, Transfer-Encoding; whether the connection stays open
(Connection, with HTTP/1.1's default); ETag presence; and for 2xx
responses of static files Content-Length and the body bytes (multipart
bodies part by part: each part's Content-Range and bytes, as boundaries
are random by design). Error pages' wording, and CGI bodies (they show
the client's port and the proxy's fields), are not compared.

Cases whose outcome depends on timeouts ("wait" in expected.tsv) are not
run: the two servers' timeouts are configuration, not protocol.

A difference is justified when components/httpd/README.md lists the case
in its "Differences from nginx" table with both statuses as observed
(comma-separated per response; "none" when no HTTP/1.x response came).
A row may list several cases (each in backquotes) sharing one reason.
"""
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time

NGINX = "/usr/sbin/nginx"


def _free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def _exchange(port, data, timeout=5.0):
    # QEMU's forwarder refuses while the guest's previous connection is
    # still being torn down: retry for a while.
    for attempt in range(40):
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
            break
        except ConnectionRefusedError:
            if attempt == 39:
                raise
            time.sleep(0.25)
    try:
        if data:
            s.sendall(data)
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass
        out = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            except ConnectionResetError:
                break
            if not chunk:
                break
            out += chunk
        return out
    finally:
        s.close()


def _parse(stream, methods):
    """Responses in a byte stream: (version, status, headers dict of
    lists, body). HEAD responses (by the request methods, in order) and
    1xx/204/304 have no body."""
    out = []
    i = 0
    while stream:
        end = stream.find(b"\r\n\r\n")
        if end < 0:
            break
        head = stream[:end].decode("latin-1").split("\r\n")
        stream = stream[end + 4:]
        m = re.match(r"HTTP/(\d\.\d) (\d{3})", head[0])
        if not m:
            break
        version, status = m.group(1), int(m.group(2))
        hs = {}
        for line in head[1:]:
            k, _, v = line.partition(":")
            hs.setdefault(k.strip().lower(), []).append(v.strip())
        if status < 200:
            out.append((version, status, hs, b""))
            continue
        method = methods[i] if i < len(methods) else "GET"
        i += 1
        if method == "HEAD" or status in (204, 304):
            body = b""
        elif "chunked" in ",".join(hs.get("transfer-encoding", [])).lower():
            body = b""
            while True:
                line, _, stream = stream.partition(b"\r\n")
                n = int(line.split(b";")[0] or b"0", 16)
                if n == 0:
                    _, _, stream = stream.partition(b"\r\n\r\n") if not stream.startswith(b"\r\n") else (b"", b"", stream[2:])
                    break
                body += stream[:n]
                stream = stream[n + 2:]
        elif "content-length" in hs:
            n = int(hs["content-length"][0])
            body, stream = stream[:n], stream[n:]
        else:
            body, stream = stream, b""
        out.append((version, status, hs, body))
    return out


def _methods(data):
    return [m.decode("latin-1") for m in re.findall(rb"(?:^|\n)([A-Z]+) \S+ HTTP/", data)]


def _parts(hs, body):
    ct = hs.get("content-type", [""])[0]
    m = re.search(r"boundary=(\S+)", ct)
    if not ct.startswith("multipart/byteranges") or not m:
        return None
    delim = b"--" + m.group(1).encode()
    parts = []
    for chunk in body.split(delim)[1:]:
        if chunk.startswith(b"--"):
            break
        head, _, data = chunk.partition(b"\r\n\r\n")
        cr = re.search(rb"Content-Range: (.*)", head, re.I)
        parts.append(((cr.group(1).strip() if cr else b""), data[:-2] if data.endswith(b"\r\n") else data))
    return parts


def _keeps_open(version, hs):
    conn = ",".join(hs.get("connection", [])).lower()
    if "close" in conn:
        return False
    return version == "1.1" or "keep-alive" in conn


def _summary(resps, cgi):
    """What is compared of a response stream."""
    out = []
    for version, status, hs, body in resps:
        s = {"status": status}
        for k in ("allow", "content-range", "transfer-encoding"):
            if k in hs:
                s[k] = ", ".join(hs[k]).lower().replace(" ", "")
        s["open"] = _keeps_open(version, hs) if status >= 200 else None
        s["etag"] = "etag" in hs
        if 200 <= status < 300 and not cgi:
            parts = _parts(hs, body)
            if parts is not None:
                s["parts"] = parts
            else:
                s["content-length"] = hs.get("content-length", [None])[0]
                s["body"] = body
        out.append(s)
    return out


class NginxDiff:
    ROBOT_LIBRARY_SCOPE = "SUITE"

    def __init__(self, corpus, readme):
        self.corpus = corpus
        self.readme = readme
        self.proc = None
        self.dir = None
        self.port = None

    def start_nginx(self, site_image, our_port):
        """Dumps the site image and starts nginx on a free port."""
        if not os.path.exists(NGINX):
            raise AssertionError("nginx is missing: ./iolite setup installs nginx-light")
        self.dir = tempfile.mkdtemp(prefix="iolite-nginx-")
        os.chmod(self.dir, 0o755)  # nginx's workers run as www-data
        site = os.path.join(self.dir, "site")
        os.mkdir(site)
        subprocess.run(["debugfs", "-R", "rdump / " + site, site_image], check=True, capture_output=True)
        self.port = _free_port()
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(f"""
daemon off;
worker_processes 1;
pid {self.dir}/nginx.pid;
error_log {self.dir}/error.log;
events {{ worker_connections 64; }}
http {{
    include /etc/nginx/mime.types;
    access_log off;
    server_tokens off;
    client_body_temp_path {self.dir}/body;
    proxy_temp_path {self.dir}/proxy;
    fastcgi_temp_path {self.dir}/fastcgi;
    uwsgi_temp_path {self.dir}/uwsgi;
    scgi_temp_path {self.dir}/scgi;
    client_max_body_size 64k;
    server {{
        listen 127.0.0.1:{self.port};
        root {site};
        location /cgi-bin/ {{
            proxy_pass http://127.0.0.1:{our_port};
            proxy_http_version 1.1;
            proxy_set_header Host $http_host;
            proxy_set_header Connection "";
            proxy_ignore_client_abort on;
        }}
    }}
}}
""")
        self.proc = subprocess.Popen([NGINX, "-c", conf, "-p", self.dir], stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return self.port
            except OSError:
                if self.proc.poll() is not None:
                    raise AssertionError("nginx did not start: " + self.proc.stderr.read().decode())
                time.sleep(0.1)
        raise AssertionError("nginx did not listen")

    def stop_nginx(self):
        if self.proc:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
            self.proc = None
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def _justified(self):
        """Case → (our statuses, nginx's statuses) from the README table."""
        text = open(self.readme, encoding="utf-8").read()
        section = text.split("## Differences from nginx", 1)
        if len(section) < 2:
            return {}
        table = {}
        for line in section[1].split("\n## ", 1)[0].splitlines():
            cols = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cols) >= 4 and cols[0].startswith("`") and cols[0].endswith("`"):
                for case in re.findall(r"`([^`]+)`", cols[0]):
                    table[case] = (cols[1], cols[2])
        return table

    def compare_with_nginx(self, our_port):
        """Runs the corpus against both; returns the summary line. Fails
        on any difference not justified in the README."""
        index = os.path.join(self.corpus, "expected.tsv")
        cases = []
        for line in open(index, encoding="utf-8"):
            if line.startswith("#") or not line.strip():
                continue
            name, expect = line.split("\t")[:2]
            cases.append((name, expect))
        justified = self._justified()
        same, diff_ok, bad, skipped = 0, [], [], 0
        for name, expect in cases:
            if "wait" in expect.split(","):
                skipped += 1
                continue
            data = open(os.path.join(self.corpus, name), "rb").read()
            methods = _methods(data)
            cgi = b" /cgi-bin" in data.split(b"\r\n", 1)[0] or b"/cgi-bin/" in data.split(b"\n", 1)[0]
            ours = _summary(_parse(_exchange(our_port, data), methods), cgi)
            try:
                theirs = _summary(_parse(_exchange(self.port, data), methods), cgi)
            except OSError as e:
                log = open(os.path.join(self.dir, "error.log"), errors="replace").read()[-2000:]
                raise AssertionError(f"{name}: nginx: {e} (exit {self.proc.poll()}); error.log: {log}")
            if ours == theirs:
                same += 1
                continue
            os_ = ",".join(str(r["status"]) for r in ours) or "none"
            ns = ",".join(str(r["status"]) for r in theirs) or "none"
            if name in justified and justified[name] == (os_, ns):
                diff_ok.append(name)
            else:
                detail = [(a, b) for a, b in zip(ours, theirs) if a != b] or [(ours, theirs)]
                a, b = detail[0]
                if isinstance(a, dict) and isinstance(b, dict):
                    a = {k: v for k, v in a.items() if b.get(k) != v}
                    b = {k: v for k, v in b.items() if a.get(k, object()) != v or k in a}
                bad.append(f"{name}: ours {os_} / nginx {ns}: {str(a)[:300]} vs {str(b)[:300]}")
        n = same + len(diff_ok) + len(bad)
        line = f"{n} cases, {same} same as nginx, {len(diff_ok)} different (justified)"
        if bad:
            line += f", {len(bad)} different (unjustified)"
        line += f"; {skipped} timeout cases not run"
        print(line)
        for b in bad:
            print("UNJUSTIFIED " + b)
        stale = sorted(set(justified) - set(diff_ok))
        for s in stale:
            print("README lists a difference that did not occur: " + s)
        self.report = (line, bad, stale)
        return line

    def differences_should_all_be_justified(self):
        line, bad, stale = self.report
        if bad or stale:
            raise AssertionError(line + "\n" + "\n".join(bad) + "\n" + "\n".join("stale: " + s for s in stale))
