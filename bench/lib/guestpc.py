"""Where the guest's time goes, by component and function: samples of the
vCPU's instruction pointer and CR3 taken through QEMU's gdbstub.

perf sees the guest only as "translated code" plus QEMU's own helpers;
it cannot say which of our components (or the kernel) a TLB refill or a
translated block belonged to. Stopping the vCPU at random moments and
reading RIP and CR3 can: the time QEMU spends for a guest instruction
(translating it, refilling the software TLB for its loads, the device
emulation of its MMIO access, waiting for QEMU's big lock to do that)
is time the vCPU does not move past it, so where the samples land is
where the guest's wall-clock time goes. With one client that is what
sets the request rate; it is not host CPU (bench/profile measures that):
a vCPU halted in the idle loop, or blocked on the lock while QEMU's main
loop works on another host core, costs this core nothing.

A sample: `^C` (the vCPU stops at the next translated block's boundary:
after an MMIO access, at the instruction after it), two `p` packets
(RIP, CR3), `c`. A stop costs the guest ~0.1-1 ms, so the load runs
slower while sampled; the shares, not the absolute rates, are the result.

The bias to keep in mind: QEMU's gdbstub runs in its main loop, which
also receives the frames from the TAP device, holding QEMU's big lock.
A `^C` sent while the main loop is busy is seen only when it is done;
meanwhile the vCPU runs on until its next MMIO access, which waits for
that lock. So the instructions right after MMIO accesses (the e1000's
RDT writes, ICR reads) collect the main loop's busy time as well as
their own: a hot spot there says "the vCPU waits on device emulation
here", not that the access itself is slow. Measure a change there with
bench/profile (host CPU per request, same run), not with these shares.

Attribution: a RIP in the kernel's window is "kernel" (its ELF's
symbols; the idle loop is `idle_thread`). The components are all linked
at 0x400000, so a user RIP alone cannot tell them apart: each CR3 (one
address space, one component) is narrowed down to the ELF whose code
holds the bytes the guest has at its sampled RIPs (read through the
stub until one candidate is left; "user?" if none or several remain).
"""
import bisect
import os
import random
import re
import socket
import subprocess
import time


class Gdb:
    """A minimal GDB remote-protocol client (no-ack mode)."""

    def __init__(self, path, timeout=30):
        deadline = time.time() + timeout
        while True:
            try:
                self.s = socket.socket(socket.AF_UNIX)
                self.s.connect(path)
                break
            except OSError:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)
        self.buf = b""
        # QEMU stops the VM when a debugger connects; acks until no-ack mode.
        # QEMU may announce the stop before it answers anything: the
        # answer to qSupported is the packet that lists features.
        reply = self._send(b"qSupported:xmlRegisters=i386", ack=True)
        while b"PacketSize" not in reply:
            reply = self._read_packet()
            self.s.sendall(b"+")
        self._send(b"QStartNoAckMode", ack=True)
        self.noack = True

    def _read_packet(self):
        while True:
            start = self.buf.find(b"$")
            if start >= 0:
                end = self.buf.find(b"#", start)
                if end >= 0 and len(self.buf) >= end + 3:
                    body = self.buf[start + 1:end]
                    self.buf = self.buf[end + 3:]
                    return body
            chunk = self.s.recv(65536)
            if not chunk:
                raise ConnectionError("gdbstub closed")
            self.buf += chunk

    def _send(self, body, ack=False):
        pkt = b"$" + body + b"#" + b"%02x" % (sum(body) & 0xFF)
        self.s.sendall(pkt)
        reply = self._read_packet()
        if ack:
            self.s.sendall(b"+")
        return reply

    def command(self, body):
        return self._send(body.encode() if isinstance(body, str) else body)

    def interrupt(self):
        self.s.sendall(b"\x03")
        return self._read_packet()

    def cont(self):
        self.s.sendall(b"$c#63")

    def target_registers(self):
        """{register name: number} (target.xml)."""
        def fetch(annex):
            out, off = b"", 0
            while True:
                r = self.command(f"qXfer:features:read:{annex}:{off:x},4000")
                if not r or r[:1] not in b"ml":
                    raise RuntimeError(f"qXfer {annex}: {r!r}")
                out += r[1:]
                off += len(r) - 1
                if r[:1] == b"l":
                    return out.decode()

        # The target's description includes its register sets by name
        # (`xi:include`, a prefix the document leaves unbound: regexes,
        # not an XML parser). A register's number is its `regnum` if it
        # has one, else one more than the register before it (GDB's rule:
        # QEMU's file is not in number order).
        names, n = {}, 0
        for href in re.findall(r'<xi:include href="([^"]+)"', fetch("target.xml")):
            text = re.sub(r"<!--.*?-->", "", fetch(href), flags=re.S)  # it comments registers out
            for attrs in re.findall(r'<reg ([^>]*)>', text):
                num = re.search(r'regnum="(\d+)"', attrs)
                n = int(num.group(1)) if num else n
                names[re.search(r'name="([^"]+)"', attrs).group(1)] = n
                n += 1
        return names


def le(hexbytes):
    return int.from_bytes(bytes.fromhex(hexbytes.decode()), "little")


class Symbols:
    """Function symbols of one ELF (nm), and its loadable bytes."""

    def __init__(self, name, elf):
        self.name, self.elf = name, elf
        out = subprocess.run(["nm", "-C", "--defined-only", "-S", elf], capture_output=True, text=True).stdout
        syms = []
        for line in out.splitlines():
            parts = line.split(None, 3)
            if len(parts) == 4 and parts[2] in "tTwW":
                syms.append((int(parts[0], 16), int(parts[1], 16), parts[3]))
        syms.sort()
        self.addrs = [a for a, _, _ in syms]
        self.syms = syms
        self.segments = []
        with open(elf, "rb") as f:
            data = f.read()
        ro = subprocess.run(["readelf", "-lW", elf], capture_output=True, text=True).stdout
        for line in ro.splitlines():
            p = line.split()
            if p and p[0] == "LOAD":
                off, vaddr, filesz = int(p[1], 16), int(p[2], 16), int(p[4], 16)
                self.segments.append((vaddr, data[off:off + filesz]))

    def bytes_at(self, addr, n):
        for vaddr, blob in self.segments:
            if vaddr <= addr and addr + n <= vaddr + len(blob):
                return blob[addr - vaddr:addr - vaddr + n]
        return None

    def function(self, addr):
        i = bisect.bisect_right(self.addrs, addr) - 1
        if i < 0:
            return None
        a, size, name = self.syms[i]
        if size and addr >= a + size:
            return None
        return name


def short(name, width=70):
    """A Rust symbol without its hash and generic noise, shortened."""
    if name.endswith("]"):
        return name
    parts = name.split("::")
    if parts and parts[-1].startswith("h") and len(parts[-1]) == 17:
        parts = parts[:-1]
    s = "::".join(parts)
    return s if len(s) <= width else "..." + s[-(width - 3):]


class Sampler:
    """Samples one QEMU's vCPU through its gdbstub socket."""

    def __init__(self, sock, kernel_elf, component_elves):
        self.g = Gdb(sock)
        names = self.g.target_registers()
        self.rip, self.cr3 = names["rip"], names["cr3"]
        self.kernel = Symbols("kernel", kernel_elf)
        self.components = [Symbols(n, e) for n, e in sorted(component_elves.items())]
        self.candidates = {}  # CR3 -> names of the components it may be
        self.samples = []
        self.g.cont()

    def _reg(self, n):
        return le(self.g.command(f"p{n:x}"))

    def _narrow(self, cr3, rip):
        """Narrows the components CR3 may belong to by the code at RIP:
        one address space is one component, but a function can sit at the
        same address with the same bytes in several ELFs (memcpy), so one
        sample may not decide it; samples at other places do."""
        left = self.candidates.setdefault(cr3, {c.name for c in self.components})
        if len(left) <= 1:
            return
        mem = self.g.command(f"m{rip:x},20")
        if not mem or mem.startswith(b"E"):
            return
        got = bytes.fromhex(mem.decode())
        match = {c.name for c in self.components if c.name in left and c.bytes_at(rip, len(got)) == got}
        if match:
            self.candidates[cr3] = match

    def owner(self, cr3):
        left = self.candidates.get(cr3, set())
        return next(iter(left)) if len(left) == 1 else "user?"

    def sample(self):
        self.g.interrupt()
        rip, cr3 = self._reg(self.rip), self._reg(self.cr3)
        if rip < 0xFFFF800000000000:
            self._narrow(cr3, rip)
        self.samples.append((cr3, rip))
        self.g.cont()

    def run(self, seconds, mean_interval=0.004):
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(random.expovariate(1 / mean_interval))
            self.sample()

    def _attributed(self):
        for cr3, rip in self.samples:
            yield ("kernel" if rip >= 0xFFFF800000000000 else self.owner(cr3)), rip

    def report(self, top=25):
        """(component shares, function shares) over the samples."""
        n = len(self.samples) or 1
        by_comp, by_func = {}, {}
        for comp, rip in self._attributed():
            by_comp[comp] = by_comp.get(comp, 0) + 1
            if comp == "kernel":
                f = self.kernel.function(rip) or f"0x{rip:x}"
            else:
                sym = next((c for c in self.components if c.name == comp), None)
                f = (sym.function(rip) if sym else None) or f"0x{rip:x}"
            key = (comp, short(f))
            by_func[key] = by_func.get(key, 0) + 1
        comps = sorted(((k, v / n) for k, v in by_comp.items()), key=lambda x: -x[1])
        funcs = sorted(((k, v / n) for k, v in by_func.items()), key=lambda x: -x[1])[:top]
        return len(self.samples), comps, funcs

    def hot_lines(self, top=20):
        """The `top` most sampled instruction addresses with their source
        lines (addr2line, inlined frames innermost first): (component,
        address, share, [function at file:line, ...])."""
        n = len(self.samples) or 1
        by_addr = {}
        for comp, rip in self._attributed():
            by_addr[(comp, rip)] = by_addr.get((comp, rip), 0) + 1
        out = []
        for (comp, rip), k in sorted(by_addr.items(), key=lambda x: -x[1])[:top]:
            elf = self.kernel.elf if comp == "kernel" else next(
                (c.elf for c in self.components if c.name == comp), None)
            frames = []
            if elf:
                # The sampled RIP is where the vCPU stopped: the block
                # before it did the work; the line of RIP - 1 is inside
                # the instruction that ended it.
                r = subprocess.run(["addr2line", "-f", "-i", "-C", "-e", elf, f"0x{rip - 1:x}"],
                                   capture_output=True, text=True).stdout.splitlines()
                for f, loc in zip(r[0::2], r[1::2]):
                    frames.append(f"{short(f, 50)} at {'/'.join(loc.split('/')[-2:])}")
            out.append((comp, rip, k / n, frames))
        return out


def elves_of(build):
    """{component: ELF} of an image's build directory, and its kernel ELF."""
    d = os.path.join(build, "system", "elves")
    elves = {f[:-4]: os.path.join(d, f) for f in os.listdir(d) if f.endswith(".elf")}
    elves["roottask"] = os.path.join(build, "images", "roottask.elf")
    kernel = next(os.path.join(build, k, "kernel.elf") for k in ("kernel-debug", "kernel-release")
                  if os.path.exists(os.path.join(build, k, "kernel.elf")))
    return kernel, elves
