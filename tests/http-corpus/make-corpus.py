#!/usr/bin/env python3
"""Writes the hostile-request corpus: one NNN-name.http file per case (the
exact bytes a client sends) and expected.tsv (file, expected outcome, note).

The files are the data; this script only documents how they were made and
regenerates them byte for byte. Run it from anywhere:
    python3 tests/http-corpus/make-corpus.py
Outcome grammar: see README.md.
"""
import os

HERE = os.path.dirname(os.path.abspath(__file__))
H = b"Host: t\r\n"


def get(path=b"/index.html", extra=b"", version=b"HTTP/1.1", method=b"GET"):
    return method + b" " + path + b" " + version + b"\r\n" + H + extra + b"\r\n"


def post(body, extra=b"", path=b"/cgi-bin/echo"):
    return b"POST " + path + b" HTTP/1.1\r\n" + H + extra + b"\r\n" + body


cases = []


def case(name, data, expect, note):
    cases.append((name, data, expect, note))


# --- request line -----------------------------------------------------------
case("empty-method", b" / HTTP/1.1\r\n" + H + b"\r\n", "400,close", "request line starts with a space")
case("missing-target", b"GET HTTP/1.1\r\n" + H + b"\r\n", "400,close", "two fields only")
case("http-0.9-simple-request", b"GET /\r\n" + H + b"\r\n", "400,close", "no version (HTTP/0.9 style)")
case("double-space", b"GET  / HTTP/1.1\r\n" + H + b"\r\n", "400,close", "two spaces after the method")
case("tab-separator", b"GET\t/ HTTP/1.1\r\n" + H + b"\r\n", "400,close", "tab instead of space")
case("trailing-space", b"GET / HTTP/1.1 \r\n" + H + b"\r\n", "400,close", "space after the version")
case("lowercase-version", get(version=b"http/1.1"), "400,close", "version is case-sensitive")
case("version-without-minor", get(version=b"HTTP/1"), "400,close", "HTTP/1")
case("version-garbage", get(version=b"HTTP/x.y"), "400,close", "HTTP/x.y")
case("version-2.0", get(version=b"HTTP/2.0"), "505,close", "well-formed, unsupported major")
case("version-0.9", get(version=b"HTTP/0.9"), "505,close", "well-formed, unsupported")
case("version-1.2", get(version=b"HTTP/1.2"), "200", "higher minor: served as HTTP/1.1 (RFC 9110 2.5)")
case("version-9.9", get(version=b"HTTP/9.9"), "505,close", "unknown major")
case("version-1.10", get(version=b"HTTP/1.10"), "400,close", "two-digit minor is not HTTP-version syntax")
case("h2-preface", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "505,close", "HTTP/2 connection preface")
case("tls-client-hello", b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + bytes(range(32)), "400,close", "TLS on the HTTP port")
case("bare-lf-line-ends", b"GET /index.html HTTP/1.1\n" + b"Host: t\n\n", "200", "LF alone is accepted (RFC 9112 2.2)")
case("bare-cr-line-ends", b"GET /index.html HTTP/1.1\rHost: t\r\r", "400,close", "CR alone is not a line end")
case("leading-empty-line", b"\r\n" + get(), "200", "one empty line before the request is ignored")
case("many-leading-empty-lines", b"\r\n" * 20 + get(), "400,close", "more than 8 empty lines")
case("nul-in-method", b"G\x00T / HTTP/1.1\r\n" + H + b"\r\n", "400,close", "NUL byte in the method")
case("nul-in-target", get(path=b"/ind\x00ex.html"), "400,close", "raw NUL in the target")
case("ctl-in-target", get(path=b"/a\x01b"), "400,close", "raw control character in the target")
case("del-in-target", get(path=b"/a\x7fb"), "400,close", "raw DEL in the target")
case("raw-utf8-in-target", get(path="/café".encode()), "400,close", "non-ASCII must be percent-encoded")
case("space-in-target", b"GET /a b HTTP/1.1\r\n" + H + b"\r\n", "400,close", "unencoded space splits the line")
case("fragment-in-target", get(path=b"/index.html#top"), "400,close", "fragments are not sent")
case("asterisk-form-get", get(path=b"*"), "400,close", "asterisk-form is for OPTIONS only")
case("authority-form-get", get(path=b"example.org:80"), "400,close", "authority-form is for CONNECT only")
case("relative-target", get(path=b"index.html"), "400,close", "no leading slash")
case("absolute-form", get(path=b"http://example.org/index.html"), "200", "absolute-form must be accepted")
case("absolute-form-https-upper", get(path=b"HTTPS://example.org:443/index.html"), "200", "scheme is case-insensitive")
case("absolute-form-ftp", get(path=b"ftp://example.org/index.html"), "400,close", "other schemes")
case("absolute-form-userinfo", get(path=b"http://user:pw@example.org/index.html"), "400,close", "userinfo is refused")
case("absolute-form-no-authority", get(path=b"http:///index.html"), "400,close", "empty authority")

# --- Host and version -----------------------------------------------------------
case("missing-host-1.1", b"GET /index.html HTTP/1.1\r\n\r\n", "400,close", "HTTP/1.1 requires Host")
case("duplicate-host", b"GET /index.html HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "400,close", "two Host fields")
case("host-with-space", b"GET /index.html HTTP/1.1\r\nHost: a b\r\n\r\n", "400,close", "invalid Host")
case("host-with-slash", b"GET /index.html HTTP/1.1\r\nHost: a/b\r\n\r\n", "400,close", "invalid Host")
case("empty-host", b"GET /index.html HTTP/1.1\r\nHost:\r\n\r\n", "200", "empty Host is allowed")
case("http-1.0-no-host", b"GET /index.html HTTP/1.0\r\n\r\n", "200,close", "1.0 closes by default")
case("http-1.0-keep-alive", b"GET /index.html HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", "200", "1.0 keep-alive")

# --- header syntax ---------------------------------------------------------------
case("obs-fold", get(extra=b"X-Folded: a\r\n b\r\n"), "400,close", "obsolete line folding")
case("space-before-colon", b"GET /index.html HTTP/1.1\r\nHost : t\r\n\r\n", "400,close", "whitespace between name and colon")
case("no-colon", get(extra=b"NoColonHere\r\n"), "400,close", "header line without colon")
case("empty-header-name", get(extra=b": value\r\n"), "400,close", "empty field name")
case("nul-in-header-name", get(extra=b"X-A\x00B: v\r\n"), "400,close", "NUL in a field name")
case("nul-in-header-value", get(extra=b"X-A: v\x00w\r\n"), "400,close", "NUL in a field value")
case("cr-in-header-value", get(extra=b"X-A: v\rw\r\n"), "400,close", "bare CR in a field value")
case("ctl-in-header-value", get(extra=b"X-A: v\x01w\r\n"), "400,close", "control character in a value")
case("obs-text-header-value", get(extra="X-A: café\r\n".encode()), "200", "obs-text in a value is allowed")
case("non-ascii-header-name", get(extra="X-é: v\r\n".encode()), "400,close", "field names are tokens")
case("leading-space-first-header", b"GET /index.html HTTP/1.1\r\n Host: t\r\n\r\n", "400,close", "whitespace before the first field")
case("underscore-header", get(extra=b"X_Forwarded_For: 1.2.3.4\r\n"), "200", "allowed (not passed to CGI)")
case("header-value-9000", get(extra=b"X-Big: " + b"a" * 9000 + b"\r\n"), "431,close", "one field over the 8 KiB header limit")
case("headers-70", get(extra=b"".join(b"X-%d: v\r\n" % i for i in range(70))), "431,close", "more than 64 fields")
case("headers-total-over-8k", get(extra=b"".join(b"X-%d: " % i + b"v" * 250 + b"\r\n" for i in range(40))), "431,close", "40 fields of 250 bytes")
case("headers-64-exactly", get(extra=b"".join(b"X-%d: v\r\n" % i for i in range(63))), "200", "Host + 63 fields = the limit")
case("request-line-9000", get(path=b"/" + b"a" * 9000), "414,close", "request line over 8 KiB")
case("request-line-9000-unterminated", b"GET /" + b"a" * 9000, "414,close", "still arriving, already too long")
case("request-line-8000", get(path=b"/" + b"a" * 8000), "404", "long but within the limit")

# --- Content-Length and bodies -----------------------------------------------------
case("get-with-body", get(extra=b"Content-Length: 5\r\n") + b"hello", "200", "body read and ignored, framing kept")
case("post-echo", post(b"a=1&b=2", b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 7\r\n"), "200", "CGI POST")
case("post-echo-empty", post(b"", b"Content-Length: 0\r\n"), "200", "CGI POST without body")
case("content-length-negative", post(b"", b"Content-Length: -1\r\n"), "400,close", "negative")
case("content-length-plus", post(b"hello", b"Content-Length: +5\r\n"), "400,close", "sign")
case("content-length-hex", post(b"hello", b"Content-Length: 0x5\r\n"), "400,close", "hex")
case("content-length-inner-space", post(b"hello", b"Content-Length: 1 0\r\n"), "400,close", "space inside")
case("content-length-empty", post(b"hello", b"Content-Length:\r\n"), "400,close", "empty value")
case("content-length-list", post(b"hello", b"Content-Length: 5, 5\r\n"), "400,close", "list form refused")
case("content-length-conflict", post(b"hello", b"Content-Length: 5\r\nContent-Length: 6\r\n"), "400,close", "two different values")
case("content-length-duplicate-equal", post(b"hello", b"Content-Length: 5\r\nContent-Length: 5\r\n"), "200", "same value twice is one")
case("content-length-20-digits", post(b"", b"Content-Length: 99999999999999999999\r\n"), "400,close", "overflow")
case("content-length-too-large", post(b"", b"Content-Length: 16777217\r\n"), "413,close", "over the 16 MiB limit of a POST to a CGI")
case("content-length-body-short", post(b"abc", b"Content-Length: 10\r\n"), "wait,408,close", "body never completes")
case("content-length-body-long", post(b"abc" + get(), b"Content-Length: 3\r\n"), "200,200", "extra bytes are the next request")

# --- Transfer-Encoding (request bodies need Content-Length) --------------------------
case("te-chunked", post(b"5\r\nhello\r\n0\r\n\r\n", b"Transfer-Encoding: chunked\r\n"), "200", "chunked request body (RFC 9112 7.1)")
case("te-chunked-and-cl", post(b"0\r\n\r\n", b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"), "400,close", "CL.TE smuggling")
case("te-cl-reversed", post(b"0\r\n\r\n", b"Transfer-Encoding: chunked\r\nContent-Length: 5\r\n"), "400,close", "TE.CL smuggling")
case("te-chunked-identity", post(b"", b"Transfer-Encoding: chunked, identity\r\n"), "400,close", "chunked not last (RFC 9112 6.3)")
case("te-gzip", post(b"", b"Transfer-Encoding: gzip\r\n"), "400,close", "no chunked last: length unknown (RFC 9112 6.3)")
case("te-xchunked", post(b"", b"Transfer-Encoding: xchunked\r\n"), "400,close", "look-alike: no chunked last (RFC 9112 6.3)")
case("te-http-1.0", b"POST /cgi-bin/echo HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "400,close", "TE in HTTP/1.0")
case("te-twice", post(b"0\r\n\r\n", b"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"), "400,close", "chunked twice (RFC 9112 7)")
case("te-folded", post(b"0\r\n\r\n", b"Transfer-Encoding:\r\n chunked\r\n"), "400,close", "hidden by obs-fold")
case("te-tab", post(b"0\r\n\r\n", b"Transfer-Encoding:\tchunked\r\n"), "200", "tab is optional whitespace")
case("te-space-before-colon", post(b"0\r\n\r\n", b"Transfer-Encoding : chunked\r\n"), "400,close", "name with trailing space")
case("te-on-get", get(extra=b"Transfer-Encoding: chunked\r\n") + b"0\r\n\r\n", "200", "chunked body on GET: read and ignored")
case("te-empty", post(b"", b"Transfer-Encoding:\r\n"), "400,close", "empty coding list (RFC 9112 6.3)")

# --- methods ------------------------------------------------------------------------
for m in [b"PUT", b"DELETE", b"TRACE", b"PATCH", b"BREW", b"get", b"M" * 100]:
    name = m.decode().lower() if len(m) < 10 else "long-method"
    if m == b"get":
        name = "lowercase-get"
    if m in (b"PUT", b"DELETE", b"TRACE", b"PATCH"):
        case("method-" + name, get(method=m), "405", "known, not allowed here (Allow: GET, HEAD, OPTIONS)")
    else:
        case("method-" + name, get(method=m), "501,close", "not implemented (Allow: GET, HEAD, POST, OPTIONS)")
case("method-options-asterisk", b"OPTIONS * HTTP/1.1\r\n" + H + b"\r\n", "200", "the server's methods in Allow (RFC 9110 9.3.7)")
case("method-connect", b"CONNECT example.org:443 HTTP/1.1\r\nHost: example.org:443\r\n\r\n", "501,close", "no proxying")
case("method-bad-char", get(method=b"GE(T"), "400,close", "not a token")
case("post-static", post(b"x=1", b"Content-Length: 3\r\n", path=b"/index.html"), "405", "static files take GET and HEAD")
case("head", get(method=b"HEAD"), "200", "headers only")

# --- traversal ----------------------------------------------------------------------
for name, p, want in [
    ("dotdot", b"/../etc/passwd", "400,close"),
    ("encoded-dotdot", b"/%2e%2e/%2e%2e/etc/passwd", "400,close"),
    ("encoded-slash", b"/%2E%2E%2Fetc%2Fpasswd", "400,close"),
    ("mixed-encoded-slash", b"/sub/..%2f..%2fetc", "400,close"),
    ("encoded-backslash", b"/..%5c..%5cwindows", "400,close"),
    ("raw-backslash", b"/..\\..\\windows", "400,close"),
    ("encoded-nul", b"/%00", "400,close"),
    ("nul-extension", b"/index.html%00.txt", "400,close"),
    ("overlong-utf8-dot", b"/%c0%ae%c0%ae/etc/passwd", "400,close"),
    ("inside-root", b"/sub/../index.html", "200"),
    ("dot-segment", b"/./index.html", "200"),
    ("double-slash", b"//index.html", "200"),
    ("double-encoded", b"/%252e%252e/index.html", "404"),
    ("dot-encoded-dot", b"/.%2e/index.html", "400,close"),
    ("encoded-single-dot", b"/%2e/index.html", "200"),
    ("cgi-bin-dotdot", b"/cgi-bin/../index.html", "200"),
    ("deep-escape", b"/sub/%2e%2e/%2e%2e/%2e%2e/etc", "400,close"),
    ("bad-escape", b"/bad%zzescape", "400,close"),
    ("truncated-escape", b"/index.html%", "400,close"),
    ("invalid-utf8", b"/%ff", "400,close"),
    ("dotdot-at-root-end", b"/..", "400,close"),
]:
    case("traversal-" + name, get(path=p), want, p.decode("latin-1"))

# --- slow and partial clients ----------------------------------------------------------
case("partial-request-line", b"GET /index.html HT", "wait,408,close", "never completed")
case("partial-headers", b"GET /index.html HTTP/1.1\r\nHost: t\r\n", "wait,408,close", "no empty line")
case("idle-connection", b"", "wait,close", "connects and sends nothing: closed at the idle timeout")
case("only-empty-lines", b"\r\n\r\n", "wait,408,close", "empty lines only")
case("expect-continue-no-body", post(b"", b"Expect: 100-continue\r\nContent-Length: 5\r\n"), "100,wait,408,close", "promised body never sent")
case("expect-unknown", get(extra=b"Expect: teapot\r\n"), "417,close", "unsupported expectation")

# --- pipelining ---------------------------------------------------------------------
case("pipeline-three", get() * 3, "200,200,200", "three in one segment")
case("pipeline-bad-second", get() + b"BAD\r\n\r\n" + get(), "200,400,close", "the error closes; the third is never read")
case("pipeline-after-close", get(extra=b"Connection: close\r\n") + get(), "200,close", "nothing after Connection: close")
case("pipeline-head-then-get", get(method=b"HEAD") + get(path=b"/sub/note.txt"), "200,200", "HEAD has no body")

# --- CGI ----------------------------------------------------------------------------
case("cgi-echo-query", get(path=b"/cgi-bin/echo?x=1&y=%20"), "200", "query passed raw")
case("cgi-stats-json", get(path=b"/cgi-bin/stats?format=json"), "200", "stats")
case("cgi-no-name", get(path=b"/cgi-bin/"), "404", "no program named")
case("cgi-unknown-program", get(path=b"/cgi-bin/nonexistent"), "404", "the CGI answers Status: 404")
case("cgi-post-smuggled-request", post(get(), b"Content-Length: %d\r\n" % len(get())), "200", "a request inside a body is data")
case("cgi-proxy-header", get(path=b"/cgi-bin/echo", extra=b"Proxy: http://evil.example/\r\n"), "200", "httpoxy: not passed as HTTP_PROXY")

# --- ranges and conditionals -------------------------------------------------------------
case("range-first-byte", get(path=b"/file-1k.txt", extra=b"Range: bytes=0-0\r\n"), "206", "single byte")
case("range-past-end", get(path=b"/file-1k.txt", extra=b"Range: bytes=5000-\r\n"), "416", "unsatisfiable")
case("range-multiple", get(path=b"/file-1k.txt", extra=b"Range: bytes=0-1,3-4\r\n"), "206", "several ranges: multipart/byteranges")
case("range-garbage", get(path=b"/file-1k.txt", extra=b"Range: bytes=z-\r\n"), "200", "invalid Range ignored")
case("range-huge-start", get(path=b"/file-1k.txt", extra=b"Range: bytes=999999999999999999999999-\r\n"), "416", "saturated start")
case("range-reversed", get(path=b"/file-1k.txt", extra=b"Range: bytes=9-1\r\n"), "200", "last < first: ignored")
case("ims-garbage", get(extra=b"If-Modified-Since: yesterday\r\n"), "200", "bad date ignored")
case("inm-star", get(extra=b"If-None-Match: *\r\n"), "304", "any version")
case("directory-without-slash", get(path=b"/sub"), "301", "redirect to /sub/")

# --- chunked request bodies (RFC 9112 7.1) ------------------------------------------------
TE = b"Transfer-Encoding: chunked\r\n"
case("chunked-extensions", post(b"5;name=val;q=\"a b\"\r\nhello\r\n0;end\r\n\r\n", TE), "200", "chunk extensions ignored")
case("chunked-trailers", post(b"5\r\nhello\r\n0\r\nX-Sum: 1\r\nX-Other: 2\r\n\r\n", TE), "200", "trailer fields read and dropped")
case("chunked-leading-zeros", post(b"0005\r\nhello\r\n000\r\n\r\n", TE), "200", "leading zeros")
case("chunked-upper-hex", post(b"A\r\n0123456789\r\n0\r\n\r\n", TE), "200", "upper-case hex")
case("chunked-upper-coding", post(b"0\r\n\r\n", b"Transfer-Encoding: CHUNKED\r\n"), "200", "coding names are case-insensitive")
case("chunked-overflow", post(b"10000000000000000\r\n", TE), "400,close", "size over 64 bits")
case("chunked-too-large", post(b"1000001\r\n", TE), "413,close", "size over the 16 MiB limit of a POST to a CGI")
case("chunked-negative", post(b"-5\r\nhello\r\n0\r\n\r\n", TE), "400,close", "negative size")
case("chunked-hex-prefix", post(b"0x5\r\nhello\r\n0\r\n\r\n", TE), "400,close", "0x is not chunk-size syntax")
case("chunked-no-size", post(b"\r\nhello\r\n0\r\n\r\n", TE), "400,close", "empty size line")
case("chunked-bad-extension", post(b"5;\r\nhello\r\n0\r\n\r\n", TE), "400,close", "extension without a name")
case("chunked-data-too-long", post(b"5\r\nhello world\r\n0\r\n\r\n", TE), "400,close", "data longer than the size")
case("chunked-missing-crlf", post(b"5\r\nhello0\r\n\r\n", TE), "400,close", "no CRLF after the data")
case("chunked-bad-trailer", post(b"0\r\nnot a field\r\n\r\n", TE), "400,close", "trailer line without a colon")
case("chunked-cut-off", post(b"5\r\nhel", TE), "wait,408,close", "body never completes")
case("chunked-no-last-chunk", post(b"5\r\nhello\r\n", TE), "wait,408,close", "no last chunk")
case("chunked-gzip-then-chunked", post(b"0\r\n\r\n", b"Transfer-Encoding: gzip, chunked\r\n"), "501,close", "coding we do not implement (RFC 9112 6.1)")
case("chunked-two-lines", post(b"0\r\n\r\n", b"Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"), "501,close", "lines combine: gzip, chunked")
case("chunked-then-pipelined", post(b"3\r\nabc\r\n0\r\n\r\n", TE) + get(path=b"/sub/note.txt"), "200,200", "next request parsed after the trailer section")
case("chunked-smuggled-request", post(b"%x\r\n" % len(get()) + get() + b"\r\n0\r\n\r\n", TE), "200", "a request inside a chunk is data")
case("chunked-expect-continue", post(b"", b"Expect: 100-continue\r\n" + TE), "100,wait,408,close", "100 before a chunked body that never comes")
case("chunked-lf-only", post(b"5\nhello\n0\n\n", TE), "200", "LF alone ends chunk lines too")

# --- preconditions (RFC 9110 13) -----------------------------------------------------------
case("if-match-star", get(extra=b"If-Match: *\r\n"), "200", "any current version")
case("if-match-other", get(extra=b"If-Match: \"nope\"\r\n"), "412", "no tag matches")
case("if-match-list", get(extra=b"If-Match: \"a\", \"b\", W/\"c\"\r\n"), "412", "none of a list matches")
case("if-match-missing-file", get(path=b"/missing", extra=b"If-Match: *\r\n"), "404", "preconditions are for existing resources (13.2.1)")
case("ius-earlier", get(extra=b"If-Unmodified-Since: Sat, 01 Jan 2000 00:00:00 GMT\r\n"), "412", "modified since")
case("ius-later", get(extra=b"If-Unmodified-Since: Fri, 01 Jan 2100 00:00:00 GMT\r\n"), "200", "not modified since")
case("ius-garbage", get(extra=b"If-Unmodified-Since: soon\r\n"), "200", "invalid date ignored")
case("ius-with-if-match", get(extra=b"If-Match: *\r\nIf-Unmodified-Since: Sat, 01 Jan 2000 00:00:00 GMT\r\n"), "200", "IUS ignored with If-Match")
case("if-match-before-inm", get(extra=b"If-Match: \"nope\"\r\nIf-None-Match: *\r\n"), "412", "If-Match is evaluated first")
case("ius-before-ims", get(extra=b"If-Unmodified-Since: Sat, 01 Jan 2000 00:00:00 GMT\r\nIf-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT\r\n"), "412", "IUS is evaluated before IMS")
case("ims-later", get(extra=b"If-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT\r\n"), "304", "not modified")
case("inm-other-ims-later", get(extra=b"If-None-Match: \"nope\"\r\nIf-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT\r\n"), "200", "INM present: IMS ignored")
case("if-range-weak", get(path=b"/file-1k.txt", extra=b"Range: bytes=0-9\r\nIf-Range: W/\"x\"\r\n"), "200", "weak tags never match If-Range")

# --- Host, OPTIONS, 405, Expect ---------------------------------------------------------------
def host(v):
    return b"GET /index.html HTTP/1.1\r\nHost: " + v + b"\r\n\r\n"
case("host-port", host(b"localhost:8080"), "200", "host and port")
case("host-empty-port", host(b"localhost:"), "200", "empty port is allowed (RFC 3986 3.2.3)")
case("host-ipv6", host(b"[::1]:80"), "200", "IP literal")
case("host-port-letters", host(b"localhost:80a"), "400,close", "port is digits")
case("host-port-too-big", host(b"localhost:65536"), "400,close", "port over 65535")
case("host-two-colons", host(b"a:1:2"), "400,close", "two ports")
case("host-empty-label", host(b"a..b"), "400,close", "empty label")
case("host-only-port", host(b":80"), "400,close", "no host")
case("host-ipv6-unclosed", host(b"[::1"), "400,close", "unclosed IP literal")
case("host-userinfo", host(b"user@host"), "400,close", "userinfo is not part of Host")
case("host-trailing-dot", host(b"localhost."), "200", "a fully qualified name")
case("absolute-form-bad-port", get(path=b"http://example.org:99999/index.html"), "400,close", "authority checked as Host")
case("options-file", get(method=b"OPTIONS"), "200", "Allow: GET, HEAD, OPTIONS")
case("options-cgi", get(method=b"OPTIONS", path=b"/cgi-bin/echo"), "200", "Allow: GET, HEAD, POST, OPTIONS")
case("options-asterisk-1.0", b"OPTIONS * HTTP/1.0\r\n\r\n", "200,close", "asterisk-form in HTTP/1.0")
case("put-with-body", post(b"hello", b"Content-Length: 5\r\n", path=b"/index.html").replace(b"POST", b"PUT", 1), "405", "body read, framing kept")
case("delete-cgi", get(method=b"DELETE", path=b"/cgi-bin/echo"), "405", "Allow: GET, HEAD, POST, OPTIONS")
case("expect-continue-upper", post(b"hello", b"Expect: 100-Continue\r\nContent-Length: 5\r\n"), "200", "expectation is case-insensitive; body already here")
case("expect-continue-get", get(extra=b"Expect: 100-continue\r\n"), "200", "no body: no 100")

# --- multiple ranges (RFC 9110 14.6) ----------------------------------------------------------
R = b"/file-1k.txt"
case("ranges-three", get(path=R, extra=b"Range: bytes=0-9,100-199,-10\r\n"), "206", "three parts")
case("ranges-one-unsatisfiable", get(path=R, extra=b"Range: bytes=0-9,5000-6000\r\n"), "206", "unsatisfiable part dropped: single part")
case("ranges-all-unsatisfiable", get(path=R, extra=b"Range: bytes=5000-,6000-\r\n"), "416", "none satisfiable")
case("ranges-overlap-over-size", get(path=R, extra=b"Range: bytes=0-800,200-1023\r\n"), "200", "adds up to more than the file: whole file")
case("ranges-seventeen", get(path=R, extra=b"Range: bytes=" + b",".join(b"%d-%d" % (i, i) for i in range(17)) + b"\r\n"), "200", "more than 16 ranges: whole file")
case("ranges-empty-elements", get(path=R, extra=b"Range: bytes=,0-1,,2-3,\r\n"), "206", "empty list elements skipped")
case("ranges-head", get(method=b"HEAD", path=R, extra=b"Range: bytes=0-1,3-4\r\n"), "200", "Range is for GET only")
case("ranges-if-range-stale", get(path=R, extra=b"Range: bytes=0-1,3-4\r\nIf-Range: \"stale\"\r\n"), "200", "If-Range mismatch: whole file")

os.makedirs(HERE, exist_ok=True)
for f in os.listdir(HERE):
    if f.endswith(".http"):
        os.remove(os.path.join(HERE, f))
names = set()
with open(os.path.join(HERE, "expected.tsv"), "w") as idx:
    idx.write("# file\texpected outcome\tnote\n")
    for i, (name, data, expect, note) in enumerate(cases, 1):
        fn = "%03d-%s.http" % (i, name)
        assert fn not in names, fn
        names.add(fn)
        with open(os.path.join(HERE, fn), "wb") as f:
            f.write(data)
        idx.write("%s\t%s\t%s\n" % (fn, expect, note.replace("\t", " ")))
print(len(cases), "cases")
