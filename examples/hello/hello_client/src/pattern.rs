//! The contents hello_client writes into the shared `buffer` dataport and
//! hello_reader checks: the one definition of that protocol. hello_reader
//! compiles this same file (`#[path = "../../hello_client/src/pattern.rs"]`),
//! so writer and checker cannot drift apart.
//!
//! Layout (little-endian words):
//!
//! | offset | contents |
//! | --- | --- |
//! | 0 | [`MAGIC`] |
//! | 4 | round number, 1.. (0 while the client is rewriting the buffer) |
//! | 8 | FNV-1a of every byte from [`HEADER`] to the end |
//! | 12 | number of payload bytes (size - [`HEADER`]) |
//! | 16.. | [`payload_byte`]`(round, offset)` |
//!
//! The round word works as a sequence lock: the client zeroes it first and
//! writes it last, and the reader reads it before and after checking. The
//! reader runs at the client's priority and may be preempted half-way (or
//! the client may be), so a check that overlaps a rewrite is reported as
//! [`Check::Changing`] and retried, never as corruption.

/// "HELO".
pub const MAGIC: u32 = u32::from_le_bytes(*b"HELO");
/// Bytes before the payload.
pub const HEADER: usize = 16;
/// Payload bytes are written and checked in chunks of this size, so neither
/// side needs a buffer the size of the dataport on its 16 KiB stack.
const CHUNK: usize = 256;

/// The payload byte at `offset` in round `round`. Every byte differs from
/// round to round (the `round` term alone changes the low byte), so a stale
/// or half-written page cannot pass for the current round.
pub fn payload_byte(round: u32, offset: usize) -> u8 {
    let offset = offset as u32;
    (offset.wrapping_mul(31) ^ (offset >> 8) ^ round.wrapping_mul(0x9E)) as u8
}

/// FNV-1a's offset basis.
pub const FNV_START: u32 = 0x811C_9DC5;

/// 32-bit FNV-1a, continued from `hash` (start with [`FNV_START`]).
pub fn fnv1a(mut hash: u32, bytes: &[u8]) -> u32 {
    for &b in bytes {
        hash = (hash ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    hash
}

/// Fills a dataport of `size` bytes for `round` (which must not be 0)
/// through `write(offset, bytes)`.
#[allow(dead_code)] // the reader only checks
pub fn fill(round: u32, size: usize, mut write: impl FnMut(usize, &[u8])) {
    assert!(round != 0 && size > HEADER, "pattern: round 0 or dataport too small");
    // Announce the rewrite before touching the payload (see the module doc).
    write(4, &0u32.to_le_bytes());
    let mut hash = FNV_START;
    let mut chunk = [0u8; CHUNK];
    let mut offset = HEADER;
    while offset < size {
        let len = CHUNK.min(size - offset);
        for (i, b) in chunk[..len].iter_mut().enumerate() {
            *b = payload_byte(round, offset + i);
        }
        hash = fnv1a(hash, &chunk[..len]);
        write(offset, &chunk[..len]);
        offset += len;
    }
    write(0, &MAGIC.to_le_bytes());
    write(8, &hash.to_le_bytes());
    write(12, &((size - HEADER) as u32).to_le_bytes());
    // Last: the round number makes the buffer valid again.
    write(4, &round.to_le_bytes());
}

/// What [`check`] found.
#[allow(dead_code)] // the client only fills
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    /// The whole dataport holds round `round`'s pattern and checksum.
    Ok { round: u32, bytes: usize },
    /// The client rewrote the buffer during the check; try again.
    Changing,
    /// The header is wrong.
    BadHeader { magic: u32, round: u32, length: u32 },
    /// A payload byte is wrong (the first one found).
    BadByte { round: u32, offset: usize, found: u8, expected: u8 },
    /// Every byte matched but the stored checksum does not.
    BadChecksum { round: u32, stored: u32, computed: u32 },
}

fn read_word(read: &mut impl FnMut(usize, &mut [u8]), offset: usize) -> u32 {
    let mut word = [0u8; 4];
    read(offset, &mut word);
    u32::from_le_bytes(word)
}

/// Checks a dataport of `size` bytes through `read(offset, bytes)`.
#[allow(dead_code)] // the client only fills
pub fn check(size: usize, mut read: impl FnMut(usize, &mut [u8])) -> Check {
    let round = read_word(&mut read, 4);
    if round == 0 {
        return Check::Changing;
    }
    let magic = read_word(&mut read, 0);
    let stored = read_word(&mut read, 8);
    let length = read_word(&mut read, 12);
    let mut result = if magic != MAGIC || size <= HEADER || length as usize != size - HEADER {
        Check::BadHeader { magic, round, length }
    } else {
        check_payload(round, stored, size, &mut read)
    };
    // Only trust a failure if the buffer stayed the same round throughout.
    if read_word(&mut read, 4) != round {
        result = Check::Changing;
    }
    result
}

fn check_payload(round: u32, stored: u32, size: usize, read: &mut impl FnMut(usize, &mut [u8])) -> Check {
    let mut hash = FNV_START;
    let mut chunk = [0u8; CHUNK];
    let mut offset = HEADER;
    while offset < size {
        let len = CHUNK.min(size - offset);
        read(offset, &mut chunk[..len]);
        for (i, &found) in chunk[..len].iter().enumerate() {
            let expected = payload_byte(round, offset + i);
            if found != expected {
                return Check::BadByte { round, offset: offset + i, found, expected };
            }
        }
        hash = fnv1a(hash, &chunk[..len]);
        offset += len;
    }
    if hash != stored {
        return Check::BadChecksum { round, stored, computed: hash };
    }
    Check::Ok { round, bytes: size }
}
