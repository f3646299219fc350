//! Log rings: how components hand whole console lines to the log server.
//!
//! When the assembly names a log server (`<instance>.log_server`), every
//! other component gets one page, its ring, mapped read-write at
//! [`LOG_RING_VADDR`] in it and read-only in the server, plus a send-only
//! capability to the server's notification. The console
//! ([`crate::console`]) then writes each line into one slot of the ring and
//! signals; the server prints it, whole, prefixed with the writer's name
//! from the spec.
//!
//! The ring is written only by its component and never read back by it:
//! the writer does not know how far the server has got, so it never waits
//! and never fails. It overwrites the oldest slot when the server is
//! behind; the server sees that from the slot numbers and reports the
//! lines it lost. The newest lines always get in, so a panic message is
//! never refused for lack of room.
//!
//! Layout (one page): a header slot whose first word is `head`, the number
//! of lines ever written; then [`SLOTS`] slots of [`SLOT_BYTES`]. Line `n`
//! lives in slot `n % SLOTS`: word 0 is the writer's TSC when it wrote the
//! line (the server prints lines of all rings in that order), word 1 the
//! length, the rest the bytes (at most [`LINE_MAX`], without the newline).
//!
//! Synchronisation is a sequence lock without a lock: the writer fences
//! before it overwrites a slot and publishes `head` after; the reader copies
//! a slot, fences, and re-reads `head`. If the writer may have started on
//! the slot meanwhile (`head` reached the line's number plus [`SLOTS`]),
//! the copy is thrown away and counted as lost. Every word is an atomic, so
//! a writer that scribbles over its page concurrently costs the reader
//! nothing worse than a garbled line of that writer's own.

use core::sync::atomic::{fence, AtomicU64, Ordering};

/// Where a writer's ring is mapped (read-write), next to the start page.
pub const LOG_RING_VADDR: u64 = crate::start::START_INFO_VADDR + 0xA000;
/// Where the log server's view of the rings starts: ring `i` (read-only) at
/// `LOG_RINGS_VADDR + i * LOG_RINGS_STRIDE`, an unmapped page between rings.
pub const LOG_RINGS_VADDR: u64 = crate::start::START_INFO_VADDR + 0x10_0000;
/// Distance between two rings in the server.
pub const LOG_RINGS_STRIDE: u64 = 0x2000;
/// Bytes of a ring.
pub const RING_BYTES: usize = 4096;
/// Bytes of one slot (and of the header).
pub const SLOT_BYTES: usize = 256;
const SLOT_WORDS: usize = SLOT_BYTES / 8;
/// Lines a ring holds.
pub const SLOTS: usize = RING_BYTES / SLOT_BYTES - 1;
/// Longest line a slot carries; longer lines are cut and end in `...`.
pub const LINE_MAX: usize = SLOT_BYTES - 16;

/// One ring, as both sides see it.
#[repr(C)]
pub struct Ring {
    head: AtomicU64,
    _header: [AtomicU64; SLOT_WORDS - 1],
    slots: [[AtomicU64; SLOT_WORDS]; SLOTS],
}

const _: () = assert!(core::mem::size_of::<Ring>() == RING_BYTES);

impl Ring {
    /// A zeroed ring (a fresh page is one), for tests.
    pub const fn new() -> Ring {
        #[allow(clippy::declare_interior_mutable_const)]
        const Z: AtomicU64 = AtomicU64::new(0);
        #[allow(clippy::declare_interior_mutable_const)]
        const S: [AtomicU64; SLOT_WORDS] = [Z; SLOT_WORDS];
        Ring { head: Z, _header: [Z; SLOT_WORDS - 1], slots: [S; SLOTS] }
    }

    /// Lines ever written.
    pub fn head(&self) -> u64 {
        self.head.load(Ordering::Acquire)
    }

    /// Appends one line (without its newline; cut to [`LINE_MAX`] bytes),
    /// stamped `stamp`. Never waits: the oldest line gives way.
    pub fn write_line(&self, stamp: u64, line: &[u8]) {
        let (line, cut) = if line.len() > LINE_MAX { (&line[..LINE_MAX - 3], true) } else { (line, false) };
        // Only this writer stores `head`, so a relaxed load sees its own
        // last store.
        let n = self.head.load(Ordering::Relaxed);
        let slot = &self.slots[(n % SLOTS as u64) as usize];
        // Orders the previous `head` store before the overwrite: a reader
        // that sees any byte of this line also sees head >= n, so it
        // notices that line n - SLOTS is gone.
        fence(Ordering::Release);
        let mut bytes = [0u8; LINE_MAX];
        bytes[..line.len()].copy_from_slice(line);
        let mut len = line.len();
        if cut {
            bytes[len..len + 3].copy_from_slice(b"...");
            len += 3;
        }
        slot[0].store(stamp, Ordering::Relaxed);
        slot[1].store(len as u64, Ordering::Relaxed);
        for (word, chunk) in slot[2..].iter().zip(bytes.chunks_exact(8)).take(len.div_ceil(8)) {
            word.store(u64::from_le_bytes(chunk.try_into().expect("8 bytes")), Ordering::Relaxed);
        }
        self.head.store(n + 1, Ordering::Release);
    }
}

impl Default for Ring {
    fn default() -> Self {
        Ring::new()
    }
}

/// A line the reader took from a ring.
#[derive(Clone, Copy)]
pub struct Line {
    /// The writer's stamp (TSC).
    pub stamp: u64,
    len: usize,
    bytes: [u8; LINE_MAX],
}

impl Line {
    /// The line's bytes, with every control byte (newlines included) shown
    /// as `?`, so that no writer can start a line of its own choosing (with
    /// another component's prefix) in the middle of one of its lines.
    pub fn text(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// The log server's state for one ring.
pub struct Reader {
    /// The next line number to read.
    next: u64,
    /// Lines lost since the last [`Reader::take_dropped`].
    dropped: u64,
    /// The line read but not yet printed.
    pending: Option<Line>,
}

impl Reader {
    /// A reader starting at line `next` (0 for a fresh ring; the ring's
    /// current head to skip what is in it).
    pub fn new(next: u64) -> Reader {
        Reader { next, dropped: 0, pending: None }
    }

    /// The next line, read from `ring` if none is pending; `None` if the
    /// ring has nothing new.
    pub fn peek(&mut self, ring: &Ring) -> Option<&Line> {
        while self.pending.is_none() {
            let head = ring.head.load(Ordering::Acquire);
            if head < self.next {
                // Only a writer scribbling on its own header does this:
                // start over from where it says it is.
                self.next = head;
                return None;
            }
            if head == self.next {
                return None;
            }
            // Line `head` may be being written into the slot of line
            // head - SLOTS: anything before head - SLOTS + 1 is gone.
            let oldest = head.saturating_sub(SLOTS as u64 - 1);
            if self.next < oldest {
                self.dropped += oldest - self.next;
                self.next = oldest;
            }
            let n = self.next;
            let slot = &ring.slots[(n % SLOTS as u64) as usize];
            let mut line = Line { stamp: slot[0].load(Ordering::Relaxed), len: 0, bytes: [0; LINE_MAX] };
            let len = (slot[1].load(Ordering::Relaxed) as usize).min(LINE_MAX);
            for (chunk, word) in line.bytes.chunks_exact_mut(8).zip(&slot[2..]).take(len.div_ceil(8)) {
                chunk.copy_from_slice(&word.load(Ordering::Relaxed).to_le_bytes());
            }
            fence(Ordering::Acquire);
            let after = ring.head.load(Ordering::Relaxed);
            self.next = n + 1;
            if !(n < after && after - n < SLOTS as u64) {
                self.dropped += 1;
                continue;
            }
            for b in &mut line.bytes[..len] {
                if *b < 0x20 || *b == 0x7f {
                    *b = b'?';
                }
            }
            line.len = len;
            self.pending = Some(line);
        }
        self.pending.as_ref()
    }

    /// Marks the pending line printed.
    pub fn consume(&mut self) {
        self.pending = None;
    }

    /// Lines lost since the last call (overwritten before they were read).
    pub fn take_dropped(&mut self) -> u64 {
        core::mem::take(&mut self.dropped)
    }
}

/// The lines per second the log server prints of one ring, as a token
/// bucket: up to [`LineBudget::BURST`] at once, refilled at
/// [`LineBudget::PER_SECOND`]. The server runs above the data path (so a
/// fault report gets out under load); printing a line through the serial
/// port costs it far more than writing one costs the writer, so without a
/// budget a component flooding the console would spend the server's
/// priority on its behalf. Lines beyond it are passed over and counted.
pub struct LineBudget {
    /// Thousandths of a line.
    tokens: u64,
    last_ms: u64,
}

impl LineBudget {
    /// Lines printed at once after a quiet spell.
    pub const BURST: u64 = 200;
    /// Lines per second in a sustained flood.
    pub const PER_SECOND: u64 = 200;

    /// A full budget at `now_ms`.
    pub fn new(now_ms: u64) -> LineBudget {
        LineBudget { tokens: Self::BURST * 1000, last_ms: now_ms }
    }

    /// Whether one more line may be printed at `now_ms` (taking it).
    pub fn take(&mut self, now_ms: u64) -> bool {
        let elapsed = now_ms.saturating_sub(self.last_ms);
        self.last_ms = self.last_ms.max(now_ms);
        self.tokens = (self.tokens + elapsed.saturating_mul(Self::PER_SECOND)).min(Self::BURST * 1000);
        if self.tokens < 1000 {
            return false;
        }
        self.tokens -= 1000;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn drain(reader: &mut Reader, ring: &Ring) -> std::vec::Vec<(u64, std::string::String)> {
        let mut out = std::vec::Vec::new();
        while let Some(line) = reader.peek(ring) {
            out.push((line.stamp, std::string::String::from_utf8(line.text().to_vec()).unwrap()));
            reader.consume();
        }
        out
    }

    #[test]
    fn lines_come_out_whole_and_in_order() {
        let ring = Ring::new();
        let mut reader = Reader::new(0);
        assert!(reader.peek(&ring).is_none());
        ring.write_line(10, b"ip 10.0.2.15/24 gateway 10.0.2.2");
        ring.write_line(11, b"");
        ring.write_line(12, b"listening");
        let lines = drain(&mut reader, &ring);
        assert_eq!(
            lines,
            vec![(10, "ip 10.0.2.15/24 gateway 10.0.2.2".into()), (11, "".into()), (12, "listening".into())]
        );
        assert_eq!(reader.take_dropped(), 0);
    }

    #[test]
    fn a_flood_loses_the_oldest_lines_and_counts_them() {
        let ring = Ring::new();
        let mut reader = Reader::new(0);
        ring.write_line(0, b"early");
        assert_eq!(drain(&mut reader, &ring).len(), 1);
        for i in 0..100u64 {
            ring.write_line(i, format!("flood {i}").as_bytes());
        }
        let lines = drain(&mut reader, &ring);
        // The slot of the next line is never trusted: SLOTS - 1 survive.
        assert_eq!(lines.len(), SLOTS - 1);
        let first = 100 - (SLOTS as u64 - 1);
        for (k, (stamp, text)) in lines.iter().enumerate() {
            assert_eq!(*stamp, first + k as u64);
            assert_eq!(text, &format!("flood {}", first + k as u64));
        }
        assert_eq!(reader.take_dropped(), first);
        assert_eq!(reader.take_dropped(), 0);
    }

    #[test]
    fn a_line_overwritten_while_read_is_dropped() {
        let ring = Ring::new();
        let mut reader = Reader::new(0);
        ring.write_line(1, b"one");
        // The writer laps the reader between its head check and its copy:
        // simulated by publishing head far ahead after the copy would start.
        ring.head.store(SLOTS as u64 + 1, Ordering::Release);
        assert!(drain(&mut reader, &ring).len() < SLOTS);
        assert!(reader.take_dropped() >= 2);
    }

    #[test]
    fn long_lines_are_cut_and_control_bytes_shown() {
        let ring = Ring::new();
        let mut reader = Reader::new(0);
        ring.write_line(1, &[b'x'; 1000]);
        ring.write_line(2, b"a\n[httpd] forged\rz\x1b");
        let lines = drain(&mut reader, &ring);
        assert_eq!(lines[0].1.len(), LINE_MAX);
        assert!(lines[0].1.ends_with("xx..."));
        assert_eq!(lines[1].1, "a?[httpd] forged?z?");
    }

    #[test]
    fn a_garbage_header_costs_nothing() {
        let ring = Ring::new();
        let mut reader = Reader::new(5);
        // Head behind the reader: the reader resynchronises.
        assert!(reader.peek(&ring).is_none());
        ring.head.store(u64::MAX, Ordering::Release);
        // Far ahead: everything before the last slots is counted lost, and
        // a garbage length is clamped.
        for slot in ring.slots.iter() {
            slot[1].store(u64::MAX, Ordering::Relaxed);
        }
        let lines = drain(&mut reader, &ring);
        assert!(lines.iter().all(|(_, t)| t.len() == LINE_MAX));
    }

    #[test]
    fn a_flood_gets_its_burst_then_its_rate() {
        let mut b = LineBudget::new(1_000);
        let burst = (0..1000).filter(|_| b.take(1_000)).count() as u64;
        assert_eq!(burst, LineBudget::BURST);
        // A second later: one second's worth, no more.
        let next = (0..1000).filter(|_| b.take(2_000)).count() as u64;
        assert_eq!(next, LineBudget::PER_SECOND);
        // 5 ms: one line at 200/s.
        assert!(b.take(2_005));
        assert!(!b.take(2_005));
        // A quiet spell refills only up to the burst; a clock going back
        // refills nothing.
        let after = (0..1000).filter(|_| b.take(60_000)).count() as u64;
        assert_eq!(after, LineBudget::BURST);
        assert!(!b.take(59_000));
    }
}
