"""Where the test clients reach the guest's server.

Suites on QEMU's user networking pass the host port it forwards
(``8080``: 127.0.0.1:8080); suites on a TAP network pass the guest's own
address (``10.0.2.15:80``) and make their connections from inside the
namespace (TapNetwork's ``Enter Tap Network``).
"""

LOOPBACK = "127.0.0.1"


def parse(address):
    """``PORT`` or ``HOST:PORT`` -> (host, port)."""
    text = str(address)
    host, sep, port = text.rpartition(":")
    if not sep:
        host = LOOPBACK
    try:
        number = int(port)
    except ValueError:
        raise ValueError(f"not a port or HOST:PORT: {text!r}") from None
    if not 0 < number < 65536:
        raise ValueError(f"port out of range: {text!r}")
    return host, number
