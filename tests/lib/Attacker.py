"""Robot Framework keywords for tests/robot/attack_tap.robot: the attacks
and the measurement of tests/lib/attacks.py (shared with bench/attack),
from a thread that has entered the TAP network (`Enter Tap Network`).

`Attack And Measure` runs one case: a normal keep-alive client of
/file-64k.bin (every body's SHA-256 checked against the site manifest, a
new connection every 20 requests) alone, during the attack (a process of
its own, so that it does not share the client's interpreter lock) and
after it, then waits for the memory gauges of /cgi-bin/stats to be back
at their level before. The checks are keywords of their own, so that the
suite says which one a case fails.
"""

import json
import re

import attacks
from robot.api import logger
from robot.api.deco import keyword, library
from robot.libraries.BuiltIn import BuiltIn

# Supervisor lines that say a component faulted, was restarted or held down.
RESTART_LINES = re.compile(r"^\[supervisor\] .*(FAULT|restart|stuck|stopped|died|held down)")


@library(scope="SUITE", auto_keywords=False)
class Attacker:
    """One case at a time; the last result is kept for the checks."""

    def __init__(self):
        self.result = None

    @keyword
    def attack_and_measure(self, case, seconds, manifest, before="5", after="5", settle="15"):
        """Runs attack `case` (attacks.CASES) for `seconds` between a
        normal client's `before` and `after` seconds; returns the result
        (rates, fractions, failures, the attack's own report, memory)."""
        if case not in attacks.CASES:
            raise AssertionError(f"no attack {case!r}; there are {sorted(attacks.CASES)}")
        sha = attacks.load_manifest(manifest)[attacks.NORMAL_PATH][1]
        r = attacks.measure(case, float(seconds), sha, manifest, before_s=float(before), after_s=float(after),
                            settle_s=float(settle))
        self.result = r
        logger.info(json.dumps(r, indent=1))
        logger.info(f"{case}: {r['before']:.1f} responses/s before, {r['during']:.1f} during"
                    f" ({r['during_fraction']:.2f}), {r['after']:.1f} after ({r['after_fraction']:.2f};"
                    f" by second {r['after_by_second']});"
                    f" normal client's failures {r['error_counts']}; memory back after {r['back_seconds']} s"
                    f" ({r['not_back']})", also_console=True)
        return r

    def _r(self):
        if self.result is None:
            raise AssertionError("no attack measured yet: Attack And Measure first")
        return self.result

    @keyword
    def attack_should_have_run(self):
        """The attack process ran and reported (no exception in it)."""
        a = self._r()["attack"]
        if "error" in a:
            raise AssertionError(f"the attack itself failed: {a['error']}")

    @keyword
    def normal_client_should_get_only_exact_bodies(self):
        bad = self._r()["bad_bodies"]
        if bad:
            raise AssertionError(f"the normal client got wrong bodies: {bad}")

    @keyword
    def normal_client_should_keep_its_rate(self, during_floor, after_floor):
        """During the attack at least `during_floor`, in the 5 s after it
        at least `after_floor` of the rate before; no request of the normal
        client failed after the attack ended."""
        r = self._r()
        msgs = []
        if r["during_fraction"] < float(during_floor):
            msgs.append(f"during the attack {r['during']:.1f} responses/s = {r['during_fraction']:.2f} of"
                        f" {r['before']:.1f} before (floor {during_floor}); failures {r['errors']['during']}")
        if r["after_fraction"] < float(after_floor):
            msgs.append(f"in the {r['after_s']:.0f} s after it {r['after']:.1f} responses/s ="
                        f" {r['after_fraction']:.2f} of {r['before']:.1f} before (floor {after_floor})")
        if r["error_counts"]["after"]:
            msgs.append(f"{r['error_counts']['after']} requests or connects of the normal client failed after"
                        f" the attack ended: {r['errors']['after']}")
        if msgs:
            raise AssertionError("; ".join(msgs))

    @keyword
    def memory_should_be_back_to_baseline(self):
        """Pool pages, heaps, connections and socket rings back to their
        level before the case (tests/lib/attacks.py GAUGES, with slack)."""
        r = self._r()
        if r["not_back"]:
            raise AssertionError(f"not back {r['settle_s']:.0f} s after the normal client stopped (now, before): {r['not_back']}")

    @keyword
    def no_component_should_have_restarted(self):
        """No supervisor line about a fault, restart or hold-down so far."""
        qemu = BuiltIn().get_library_instance("QemuSystem")
        bad = [line for line in qemu.serial_lines_so_far() if RESTART_LINES.search(line)]
        if bad:
            raise AssertionError(f"components faulted or restarted: {bad[:5]}")

    @keyword
    def attack_result(self, key):
        """One field of the attack's own report (e.g. syn_acks_to_bad)."""
        a = self._r()["attack"]
        if key not in a:
            raise AssertionError(f"the attack reported no {key!r}: {a}")
        return a[key]

    @keyword
    def serving_on_tap(self):
        """True when GET /file-64k.bin gets a whole 200 response (10 s timeout)."""
        try:
            attacks.fetch_whole(attacks.NORMAL_PATH, timeout=10)
            return True
        except (OSError, AssertionError, ValueError):
            return False
