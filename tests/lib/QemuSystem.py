"""Robot Framework keywords that boot Iolite OS in QEMU and read its serial console.

QEMU runs as a child process in its own process group (so that killing the
group also kills anything QEMU started), with the serial console on its
stdout. A reader thread collects the output; keywords wait for lines that
match a regular expression. Any kernel or user fault message fails the
waiting keyword at once, so a fault anywhere fails the test. The serial log is
written next to Robot's output and attached to the log of a failing test.

QEMU's stdin is a pipe into the serial port (``-serial mon:stdio``): test
images whose assembly grants fault injection (``<instance>.fault_injection``,
tests/variants) obey ``Inject Fault Into`` and ``Make Component Hang``, which
write a command line there (roottask/src/inject.rs reads it).
"""

import os
import re
import signal
import subprocess
import threading
import time

from robot.api import logger
from robot.api.deco import keyword, library
from robot.libraries.BuiltIn import BuiltIn

# What seL4 5.0 (debug build) and our runtime print when something faults.
# Sources: kernel/faulthandler.c ("Caught <fault> ... in thread"), assert.c,
# arch/x86/api/faults.c (kernel exception dump), component-runtime's panic
# handler and the supervisor's fault report.
FAULT_PATTERNS = [
    r"^Caught (cap fault|vm fault|unknown syscall|user exception|null fault|unknown fault)",
    r"seL4 failed assertion",
    r"seL4 called fail",
    r"^Halting\.\.\.",
    r"^\[[\w.-]+\] PANIC",
    r"^\[supervisor\] FAULT",
]


@library(scope="SUITE", auto_keywords=False)
class QemuSystem:
    """Starts, watches and always stops one QEMU running Iolite OS."""

    def __init__(self, build_dir=None, name=None):
        self.build_dir = os.path.abspath(build_dir or os.environ.get("IOLITE_BUILD_DIR", "build"))
        # A suite that boots several systems (one library instance each,
        # `Library QemuSystem DIR app1 AS App1`) names them, so that their
        # serial logs do not overwrite each other.
        self.name = name
        self.boots = 0
        self.process = None
        self.reader = None
        self.lines = []
        self.partial = ""
        self.cursor = 0
        # Lines checked for fault messages so far: those the waiting
        # keywords consumed (`cursor`), each once, under the expectations of
        # the test that consumed it.
        self.fault_cursor = 0
        self.lock = threading.Condition()
        self.started_at = None
        self.log_path = None
        self.expected_faults = []
        # When each complete line arrived (time.monotonic()), in step with
        # `lines`; and when the last injection command was written.
        self.line_times = []
        self.command_at = None

    # ---- lifecycle -------------------------------------------------------

    @keyword
    def start_system(self, *simulate_args):
        """Boots the image with ``build/simulate`` and the given arguments."""
        self._start([], simulate_args)

    @keyword
    def start_system_in_namespace(self, netns, *simulate_args):
        """As ``Start System``, inside the network namespace ``netns``
        (``ip netns exec``; see TapNetwork's ``Create Tap Network``)."""
        self._start(["ip", "netns", "exec", netns], simulate_args)

    def _start(self, prefix, simulate_args):
        if self.process is not None:
            raise AssertionError("a system is already running; stop it first")
        simulate = os.path.join(self.build_dir, "simulate")
        if not os.access(simulate, os.X_OK):
            raise AssertionError(f"{simulate} is missing: build first (./iolite build)")
        output_dir = BuiltIn().get_variable_value("${OUTPUT DIR}", ".")
        test_name = BuiltIn().get_variable_value("${TEST NAME}", None) or \
            BuiltIn().get_variable_value("${SUITE NAME}", "suite")
        safe = re.sub(r"[^\w.-]+", "_", test_name)
        self.boots += 1
        if self.name:
            safe = f"{self.name}-{self.boots}-{safe}"
        self.log_path = os.path.join(output_dir, f"serial-{safe}.log")
        self.lines, self.partial, self.cursor, self.fault_cursor = [], "", 0, 0
        self.line_times, self.command_at = [], None
        self.expected_faults = []
        self.started_at = time.monotonic()
        self.process = subprocess.Popen(
            [*prefix, simulate, *simulate_args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        logger.info(f"started {simulate} {' '.join(simulate_args)} (pid {self.process.pid}); serial log {self.log_path}")

    @keyword
    def stop_system(self):
        """Kills QEMU's whole process group and waits for it. Safe to call twice."""
        self._stop((signal.SIGTERM, signal.SIGKILL))

    @keyword
    def kill_system(self):
        """Kills QEMU's whole process group with SIGKILL at once (a machine
        losing power: the guest does nothing more, not even a reset on the
        wire) and waits for it; `Start System` may boot it again."""
        self._stop((signal.SIGKILL,))

    def _stop(self, signals):
        process, self.process = self.process, None
        if process is None:
            return
        for sig in signals:
            try:
                os.killpg(process.pid, sig)
            except ProcessLookupError:
                break
            try:
                process.wait(timeout=5)
                break
            except subprocess.TimeoutExpired:
                continue
        if self.reader is not None:
            self.reader.join(timeout=5)
        with open(self.log_path, "w", encoding="utf-8", errors="replace") as log:
            log.write("\n".join(self.lines + ([self.partial] if self.partial else [])) + "\n")

    @keyword
    def stop_system_and_attach_log_if_failed(self):
        """Teardown: stop QEMU; if the test failed, put the serial log in Robot's log."""
        self.stop_system()
        status = BuiltIn().get_variable_value("${TEST STATUS}", "PASS")
        if status == "FAIL" and self.log_path and os.path.exists(self.log_path):
            with open(self.log_path, encoding="utf-8", errors="replace") as log:
                text = log.read()
            logger.info("serial console (" + self.log_path + "):\n" + text[-20000:])

    @keyword
    def attach_serial_log_if_test_failed(self):
        """Test teardown for suites that share one QEMU: checks the console
        so far for faults under this test's `Expect Fault` declarations,
        which then end (the next test expects none); if the test failed,
        puts the console so far in Robot's log and leaves QEMU running."""
        status = BuiltIn().get_variable_value("${TEST STATUS}", "PASS")
        if status == "FAIL":
            with self.lock:
                text = self._tail(400)
            logger.info("serial console so far:\n" + text)
        with self.lock:
            try:
                self._scan_faults()
            finally:
                self.expected_faults = []

    def _read(self):
        stream = self.process.stdout
        while True:
            chunk = stream.read1(4096) if hasattr(stream, "read1") else stream.read(1)
            if not chunk:
                break
            text = chunk.decode("utf-8", errors="replace").replace("\r", "")
            with self.lock:
                pieces = (self.partial + text).split("\n")
                self.partial = pieces.pop()
                self.lines.extend(pieces)
                now = time.monotonic()
                self.line_times.extend([now] * len(pieces))
                self.lock.notify_all()
        with self.lock:
            if self.partial:
                self.lines.append(self.partial)
                self.line_times.append(time.monotonic())
                self.partial = ""
            self.lock.notify_all()

    # ---- fault injection ------------------------------------------------

    def _command(self, line):
        if self.process is None or self.process.stdin is None:
            raise AssertionError("no system is running")
        with self.lock:
            self.command_at = time.monotonic()
        self.process.stdin.write(line.encode() + b"\n")
        self.process.stdin.flush()
        logger.info(f"console command after {self.seconds_since_start():.2f} s: {line}")

    @keyword
    def inject_fault_into(self, component):
        """Makes ``component`` really fault: the supervisor points its
        thread at an unmapped address (roottask/src/inject.rs). Needs an
        image whose assembly grants it (``component.fault_injection = 1``);
        the supervisor reports the fault by name and restarts the component
        if it is restartable. Declares the fault report expected."""
        self.expect_fault(r"^\[supervisor\] FAULT in component " + re.escape(component) + r": .*ip 0xbad$")
        self._command(f"iolite-inject fault {component}")

    @keyword
    def make_component_hang(self, component):
        """Makes ``component`` stop making progress while it burns CPU at
        its priority: the supervisor points its thread at the endless loop
        its runtime has before its entry point (roottask/src/inject.rs).
        Needs the same grant as ``Inject Fault Into``."""
        self._command(f"iolite-inject hang {component}")

    @keyword
    def seconds_from_command_to_line(self, pattern, timeout="30s"):
        """Waits as ``Wait For Serial Line`` and returns the seconds from the
        last injection command to the arrival of the matching line (as
        QEMU printed it: the host reads the console as it comes)."""
        line = self.wait_for_serial_line(pattern, timeout)
        with self.lock:
            index = self.cursor - 1
            at = self.line_times[index] if index < len(self.line_times) else time.monotonic()
            sent = self.command_at
        if sent is None:
            raise AssertionError("no injection command was sent")
        elapsed = at - sent
        logger.info(f"{elapsed:.3f} s from the command to: {line}")
        return elapsed

    # ---- waiting ---------------------------------------------------------

    @keyword
    def expect_fault(self, pattern):
        """Declares that a line matching ``pattern`` is an expected fault report,
        so it does not fail the test (for tests that provoke a fault on purpose).
        The declaration holds until the test ends (`Attach Serial Log If Test
        Failed`, the shared-QEMU teardown, ends it) or QEMU is started again."""
        self.expected_faults.append(re.compile(pattern))

    def _scan_faults(self):
        """Checks the consumed lines not checked yet (caller holds the lock)."""
        while self.fault_cursor < min(self.cursor, len(self.lines)):
            line = self.lines[self.fault_cursor]
            self.fault_cursor += 1
            if any(p.search(line) for p in self.expected_faults):
                continue
            for pattern in FAULT_PATTERNS:
                if re.search(pattern, line):
                    raise AssertionError(f"fault on the serial console: {line!r}\n--- last lines ---\n" + self._tail())

    def _tail(self, count=40):
        return "\n".join(self.lines[-count:] + ([self.partial] if self.partial else []))

    def _wait_for_more(self, pattern, timeout, deadline):
        """Waits (lock held) for more console output; fails if QEMU exited or
        `deadline` passed before a line matched `pattern`."""
        if self.process is None or self.process.poll() is not None:
            if self.reader is None or not self.reader.is_alive():
                raise AssertionError(f"QEMU exited before a line matched {pattern!r}\n--- last lines ---\n" + self._tail())
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise AssertionError(f"no line matched {pattern!r} within {timeout}\n--- last lines ---\n" + self._tail())
        self.lock.wait(min(remaining, 0.5))

    @keyword
    def wait_for_serial_line(self, pattern, timeout="30s"):
        """Waits until a console line after the previous match matches ``pattern``
        (a Python regular expression, searched anywhere in the line).

        Fails on timeout, when QEMU exits, or at once on any fault message.
        Returns the matching line.
        """
        regex = re.compile(pattern)
        deadline = time.monotonic() + _seconds(timeout)
        with self.lock:
            while True:
                while self.cursor < len(self.lines):
                    line = self.lines[self.cursor]
                    self.cursor += 1
                    self._scan_faults()
                    if regex.search(line):
                        logger.info(f"matched after {self.seconds_since_start():.2f} s: {line}")
                        return line
                self._wait_for_more(pattern, timeout, deadline)

    @keyword
    def wait_for_serial_line_anywhere(self, pattern, timeout="30s", since=0):
        """Waits until any console line since the start (or since the mark
        ``since`` that `Serial Mark` gave) matches ``pattern``, without
        moving the point `Wait For Serial Line` continues from: for lines
        whose place among the others is not fixed (the root task's "system
        started" comes after components that initialised while it loaded
        the rest; the supervisor's report of a restart comes before or
        after the requester's report of the death). Fails on timeout, when
        QEMU exits, or on a fault."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + _seconds(timeout)
        since = int(since)
        with self.lock:
            while True:
                self._scan_faults()
                for line in self.lines[since:]:
                    if regex.search(line):
                        logger.info(f"seen after {self.seconds_since_start():.2f} s: {line}")
                        return line
                self._wait_for_more(pattern, timeout, deadline)

    @keyword
    def wait_for_serial_text(self, text, timeout="30s"):
        """Waits until ``text`` (plain, not a pattern) appears anywhere in the
        console output since the start, the unfinished last line included:
        for what is printed without a newline and then nothing more (the
        kernel's 32-bit entry code halts right after its message). Fails on
        timeout, when QEMU exits, or on a fault."""
        deadline = time.monotonic() + _seconds(timeout)
        with self.lock:
            while True:
                self._scan_faults()
                if any(text in line for line in self.lines) or text in self.partial:
                    logger.info(f"seen after {self.seconds_since_start():.2f} s: {text}")
                    return
                self._wait_for_more(repr(text), timeout, deadline)

    @keyword
    def serial_mark(self):
        """The number of whole console lines so far: pass it as ``since`` to
        `Wait For Serial Line Anywhere` to look only at lines after it."""
        with self.lock:
            return len(self.lines)

    @keyword
    def serial_line_seen(self, pattern):
        """Returns the first console line since the start that matches
        ``pattern`` (searched anywhere in the line), without moving the point
        `Wait For Serial Line` continues from. Fails if there is none yet: for
        facts printed once at boot (an address, a configuration)."""
        regex = re.compile(pattern)
        with self.lock:
            for line in self.lines:
                if regex.search(line):
                    return line
        raise AssertionError(f"no console line so far matches {pattern!r}\n--- last lines ---\n" + self._tail())

    @keyword
    def serial_lines_so_far(self):
        """Returns every complete console line since the start (a copy)."""
        with self.lock:
            return list(self.lines)

    @keyword
    def console_lines_should_be_whole(self, *names):
        """Fails unless every console line after the root task's banner that
        starts with ``[`` starts with one ``[name] `` prefix (lower-case name),
        and no line carries a prefix of one of ``names`` anywhere but at its
        start (two components' lines cut into each other). Returns the number
        of prefixed lines checked."""
        lines = self.serial_lines_so_far()
        start = next((i for i, l in enumerate(lines) if l.startswith("Iolite OS root task")), None)
        if start is None:
            raise AssertionError("no root task banner on the console")
        prefix = re.compile(r"^\[[a-z_]+\] ")
        inner = re.compile(r".\[(" + "|".join(re.escape(n) for n in names) + r")\]")
        bad = []
        checked = 0
        for line in lines[start + 1:]:
            if line.startswith("["):
                checked += 1
                if not prefix.match(line):
                    bad.append(line)
                    continue
            if inner.search(line):
                bad.append(line)
        if bad:
            raise AssertionError("console lines cut into each other or without a prefix:\n" + "\n".join(bad[:20]))
        return checked

    @keyword
    def serial_should_stay_quiet_about_faults(self, duration="2s"):
        """Keeps reading the console for ``duration`` and fails on any fault message."""
        end = time.monotonic() + _seconds(duration)
        with self.lock:
            while True:
                self.cursor = len(self.lines)
                self._scan_faults()
                remaining = end - time.monotonic()
                if remaining <= 0:
                    return
                self.lock.wait(min(remaining, 0.5))

    @keyword
    def seconds_since_start(self):
        """Seconds since QEMU was started."""
        return time.monotonic() - self.started_at

    @keyword
    def system_should_be_running(self):
        """Fails if QEMU has exited."""
        if self.process is None or self.process.poll() is not None:
            raise AssertionError("QEMU is not running\n--- last lines ---\n" + self._tail())


def _seconds(value):
    """Accepts Robot time strings ('30s', '1 min', '1.5') and numbers."""
    from robot.utils import timestr_to_secs
    return timestr_to_secs(value)
