"""Robot Framework keywords that run REDbot (HTTP lint; the `redbot` package
pinned in python-requirements.txt) against the guest's web server and hold
its findings to an allow-list.

REDbot's own command line (`redbot -o har URL`) checks a URL; for a request
with headers (a conditional GET that must be answered 304), which the CLI
cannot send, tests/lib/redbot_har.py does the same through REDbot's API.
Either way REDbot also makes its follow-up requests (If-None-Match,
If-Modified-Since, Range, Accept-Encoding, HEAD) and reports on them.

The allow-list is the table under "## REDbot" in components/httpd/README.md:
rows `| URL path | note id | why |`. A BAD note that is not listed fails;
so does a listed one that REDbot no longer reports (the table stays true).
"""

import json
import os
import re
import subprocess
import sys

from robot.api import logger
from robot.api.deco import keyword, library

HERE = os.path.dirname(os.path.abspath(__file__))


def _flatten(notes, url):
    for n in notes:
        yield {"url": url, "id": n["note_id"], "level": n["level"], "summary": n["summary"], "subject": n["subject"]}
        yield from _flatten(n.get("subnotes", []), url)


@library(scope="SUITE", auto_keywords=False)
class RedBot:
    def __init__(self, readme):
        self.readme = readme
        self.findings = []

    def _allowed(self):
        with open(self.readme) as f:
            text = f.read()
        m = re.search(r"^## REDbot\n(.*?)(?=^## |\Z)", text, re.S | re.M)
        if not m:
            raise AssertionError(f"no '## REDbot' section in {self.readme}")
        rows = []
        for line in m.group(1).splitlines():
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not line.startswith("|") or len(cells) < 3 or cells[0] in ("URL", "") or set(cells[0]) <= {"-"}:
                continue
            rows.append((cells[0].strip("`"), cells[1].strip("`"), cells[2]))
        return rows

    @keyword
    def run_redbot(self, url, outdir, *headers, expect_status=None):
        """REDbot checks `url` (GET with `headers`, each `Name: value`); its
        HAR is kept in `outdir`. Returns the notes (url, id, level,
        summary, subject), subnotes included, and remembers them."""
        bindir = os.path.dirname(sys.executable)
        if headers:
            cmd = [sys.executable, os.path.join(HERE, "redbot_har.py"), url, *headers]
        else:
            cmd = [os.path.join(bindir, "redbot"), "-o", "har", url]
        r = subprocess.run(cmd, capture_output=True, timeout=300)
        if r.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.decode()[-2000:]}")
        har = json.loads(r.stdout)
        name = re.sub(r"[^A-Za-z0-9]+", "_", url.split("//", 1)[-1] + ("_" + "_".join(headers) if headers else ""))
        with open(os.path.join(outdir, f"redbot-{name}.har"), "wb") as f:
            f.write(r.stdout)
        if "_red_error" in har["log"] or not har["log"]["entries"]:
            raise AssertionError(f"REDbot could not check {url}: {har['log'].get('_red_error')}")
        entry = har["log"]["entries"][0]
        status = entry["response"]["status"]
        if expect_status is not None and int(expect_status) != status:
            raise AssertionError(f"{url} {headers}: status {status}, want {expect_status}")
        path = "/" + url.split("//", 1)[-1].split("/", 1)[1]
        key = path + (" " + " ".join(h.split(":")[0] for h in headers) if headers else "")
        notes = list(_flatten(entry["_red_messages"], key))
        logger.info(f"{url} {headers} -> {status}:\n" + "\n".join(f"{n['level']:5} {n['id']}: {n['summary']}" for n in notes))
        self.findings += notes
        return notes

    @keyword
    def bad_findings_should_all_be_allowed(self):
        """Every BAD note of the URLs checked so far is in the README's
        allow-list, and every allow-list row was reported."""
        allowed = self._allowed()
        bad = [n for n in self.findings if n["level"] == "BAD"]
        unexplained = [n for n in bad if not any(u == n["url"] and i == n["id"] for u, i, _ in allowed)]
        stale = [(u, i) for u, i, _ in allowed if not any(u == n["url"] and i == n["id"] for n in bad)]
        logger.info(f"{len(self.findings)} notes, {len(bad)} BAD, {len(allowed)} allowed")
        problems = [f"not allowed: {n['url']} {n['id']}: {n['summary']}" for n in unexplained]
        problems += [f"allowed but not reported (remove the row): {u} {i}" for u, i in stale]
        if problems:
            raise AssertionError("\n".join(problems))
        return len(bad)
