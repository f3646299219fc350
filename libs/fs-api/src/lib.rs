//! The fs component's client protocol, shared by fs and its clients (httpd,
//! cgi, the fs_reader example): what `FsIoLite.idl4` and the client's IO-Lite
//! channel mean, without the filesystem behind them. A client depends on
//! this crate, never on the `fs` implementation.
//!
//! RPC carries paths, handles, counts and counters; data never travels in
//! messages. `read` and `list_dir` queue aggregates of the fs pool on the
//! client's IO-Lite channel (fs → client), and the client returns its
//! holds on the channel's release ring.
#![cfg_attr(not(test), no_std)]
#![deny(missing_docs)]

extern crate alloc;

use alloc::vec::Vec;

use iolite::{PeerId, PoolId, MAX_SLICES, PAGE_SIZE};

pub mod client;

// The file cache's pool (the `file_pool` dataport: RW in fs, R in
// clients) has the id the compiler derives from the assembly: fs and every
// client take it from their glue (`glue::pools::FILE_POOL`).
/// A client's private pool (where the `posix` copy mode copies into): shared
/// with nobody, so an id no pool of the assembly has.
pub const PRIVATE_POOL: PoolId = iolite::FIRST_PRIVATE_POOL;
/// fs's peer slot for its client, and the client's for fs (one channel).
pub const PEER: PeerId = PeerId(0);
/// Forward ring: aggregate descriptors in flight (336 bytes each).
pub const FWD_CAP: usize = 64;
/// Release ring. Each entry names a distinct live buffer of the fs pool,
/// so a ring with at least one entry per pool page never fills.
pub const REL_CAP: usize = 2048;
/// The smallest channel dataport.
pub const CHANNEL_BYTES: usize = iolite::channel_bytes(FWD_CAP, REL_CAP);
/// The file cache's unit (fs's default chunk): a `read` message holds one
/// slice per chunk the range touches.
pub const CHUNK_BYTES: usize = 4 * PAGE_SIZE;
/// The longest `read` that fs answers with one aggregate wherever the range
/// starts: it touches at most [`MAX_SLICES`] chunks.
pub const ONE_MESSAGE_READ: usize = (MAX_SLICES - 1) * CHUNK_BYTES;

/// Errors on the wire: an RPC returns `-(code)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i64)]
pub enum ErrorCode {
    /// No such file or directory.
    NotFound = 1,
    /// Not a regular file (open, read).
    NotAFile = 2,
    /// Not a directory (a path component, or list_dir).
    NotADirectory = 3,
    /// Over 4 GiB, or a listing too large for one buffer.
    TooLarge = 4,
    /// A name over 255 bytes or a path over 4096.
    NameTooLong = 5,
    /// More than 8 symlinks in one lookup.
    TooManySymlinks = 6,
    /// The disk failed.
    Io = 7,
    /// The image is corrupt.
    Corrupt = 8,
    /// The image uses an unsupported feature.
    Unsupported = 9,
    /// The cache's pool is exhausted.
    NoMemory = 10,
    /// No such open file.
    BadHandle = 11,
    /// The open-file table is full.
    TooManyOpen = 12,
    /// The channel is full (or the client holds its whole quota): release
    /// what was received, then ask again.
    ChannelBusy = 13,
    /// Not allowed (an administrative call without `admin`).
    Denied = 14,
    /// `vouch`: no other client holds that buffer at that generation (the
    /// reference was made up, or is stale).
    NotHeld = 15,
}

impl ErrorCode {
    /// Every code, in order.
    pub const ALL: [ErrorCode; 15] = [
        ErrorCode::NotFound,
        ErrorCode::NotAFile,
        ErrorCode::NotADirectory,
        ErrorCode::TooLarge,
        ErrorCode::NameTooLong,
        ErrorCode::TooManySymlinks,
        ErrorCode::Io,
        ErrorCode::Corrupt,
        ErrorCode::Unsupported,
        ErrorCode::NoMemory,
        ErrorCode::BadHandle,
        ErrorCode::TooManyOpen,
        ErrorCode::ChannelBusy,
        ErrorCode::Denied,
        ErrorCode::NotHeld,
    ];

    /// The RPC return value for this error (negative).
    pub const fn ret(self) -> i64 {
        -(self as i64)
    }

    /// The error a negative RPC return value names (`None` for success or
    /// an unknown code).
    pub fn from_ret(ret: i64) -> Option<ErrorCode> {
        ErrorCode::ALL.iter().copied().find(|c| c.ret() == ret)
    }
}

/// What a path names (stat's `kind`, a listing's kind byte).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A device node, FIFO or socket (never served).
    Other,
}

/// `FileKind` on the wire (stat's `kind`, a listing's kind byte).
pub const fn kind_code(kind: FileKind) -> u8 {
    match kind {
        FileKind::File => 1,
        FileKind::Dir => 2,
        FileKind::Symlink => 3,
        FileKind::Other => 4,
    }
}

/// The `FileKind` a wire code names (unknown codes are `Other`).
pub const fn kind_from_code(code: u32) -> FileKind {
    match code {
        1 => FileKind::File,
        2 => FileKind::Dir,
        3 => FileKind::Symlink,
        _ => FileKind::Other,
    }
}

/// One entry of a listing: `u32` inode (little-endian), `u8` kind code,
/// `u8` name length, then the name. Records follow each other unpadded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirRecord<'a> {
    /// Inode number.
    pub ino: u32,
    /// Kind code ([`kind_code`]).
    pub kind: u8,
    /// Name bytes (1..=255).
    pub name: &'a [u8],
}

/// Bytes of one record with a name of `name_len` bytes.
pub const fn record_len(name_len: usize) -> usize {
    6 + name_len
}

/// Appends a record to `out`. Names over 255 bytes cannot occur in ext2
/// and are cut (never reached).
pub fn encode_record(out: &mut Vec<u8>, ino: u32, kind: FileKind, name: &[u8]) {
    let name = &name[..name.len().min(255)];
    out.extend_from_slice(&ino.to_le_bytes());
    out.push(kind_code(kind));
    out.push(name.len() as u8);
    out.extend_from_slice(name);
}

/// Splits a listing into records; `None` if it is malformed (a record runs
/// past the end).
pub fn decode_records(mut bytes: &[u8]) -> Option<Vec<DirRecord<'_>>> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        if bytes.len() < 6 {
            return None;
        }
        let ino = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        let (kind, n) = (bytes[4], bytes[5] as usize);
        let name = bytes.get(6..6 + n)?;
        out.push(DirRecord { ino, kind, name });
        bytes = &bytes[6 + n..];
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_codes_round_trip() {
        for (i, c) in ErrorCode::ALL.iter().enumerate() {
            assert_eq!(*c as i64, i as i64 + 1, "codes are 1.. in order (the idl4 lists them)");
            assert_eq!(ErrorCode::from_ret(c.ret()), Some(*c));
        }
        assert_eq!(ErrorCode::from_ret(0), None);
        assert_eq!(ErrorCode::NotFound.ret(), -1);
        assert_eq!(ErrorCode::from_ret(-16), None, "unknown codes are not guessed");
    }

    #[test]
    fn listing_records_round_trip() {
        let mut buf = Vec::new();
        encode_record(&mut buf, 12, FileKind::File, b"index.html");
        encode_record(&mut buf, 2, FileKind::Dir, "日本語".as_bytes());
        assert_eq!(buf.len(), record_len(10) + record_len(9));
        let r = decode_records(&buf).unwrap();
        assert_eq!(
            r,
            [
                DirRecord { ino: 12, kind: 1, name: b"index.html" },
                DirRecord { ino: 2, kind: 2, name: "日本語".as_bytes() }
            ]
        );
        assert_eq!(decode_records(&buf[..buf.len() - 1]), None);
        assert_eq!(decode_records(&[1, 0, 0]), None);
        assert_eq!(kind_from_code(u32::from(kind_code(FileKind::Symlink))), FileKind::Symlink);
    }

    #[test]
    fn wire_numbers_match_the_idl() {
        // camkes/interfaces/FsIoLite.idl4: kind 1 file, 2 directory, 3
        // symlink, 4 other; the codes as listed there.
        let kinds = [FileKind::File, FileKind::Dir, FileKind::Symlink, FileKind::Other];
        assert_eq!(kinds.map(kind_code), [1, 2, 3, 4]);
        assert_eq!(kind_from_code(99), FileKind::Other);
        assert_eq!((ErrorCode::ChannelBusy.ret(), ErrorCode::Denied.ret(), ErrorCode::NotHeld.ret()), (-13, -14, -15));
        // A read of ONE_MESSAGE_READ bytes from the middle of a chunk touches
        // MAX_SLICES chunks, no more.
        let start = CHUNK_BYTES / 2;
        let chunks = (start + ONE_MESSAGE_READ).div_ceil(CHUNK_BYTES) - start / CHUNK_BYTES;
        assert_eq!(chunks, MAX_SLICES);
    }
}
