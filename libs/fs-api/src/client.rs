//! The client side of an fs restart (libs/iolite/README.md "Death").
//!
//! fs is restartable: when it dies, the supervisor counts the death in the
//! system events page, rebuilds it, and makes a call its clients were
//! blocked in run again, now against the new incarnation. That incarnation
//! knows nothing of the old one: no open files (its handles carry its
//! incarnation, [`handle`], so an old one is refused with `BadHandle`), and
//! it has set every client's channel up afresh, so a client's receive end
//! of the channel is stale.
//!
//! [`Client`] hides this from the client's code. Before and after every
//! call it compares fs's death count with the one it knows; when fs died
//! it *reconnects* once per incarnation ([`Rpc::reset`], which also makes
//! the new incarnation set the channel up now, then the caller's
//! `reattach`: forget what the dead incarnation granted, attach to the
//! fresh channel), and a call during which fs died is made again. Files
//! are kept by path ([`OpenFile`]): one opened by an earlier incarnation is
//! opened again (lazily, at its next read) and must still be the same file
//! (inode and size: the image is read-only, so it is; anything else would
//! corrupt a body whose length was already promised), and the read is
//! retried. Closing a file of a dead incarnation makes no call.

use alloc::string::String;
use core::cell::Cell;

use crate::ErrorCode;

/// Bits of a handle that index the client's open-file table; the bits
/// above carry fs's incarnation ([`handle`]).
pub const HANDLE_SLOT_BITS: u32 = 16;
/// The incarnation bits of a handle.
pub const HANDLE_EPOCH_MASK: u32 = 0x7fff;

/// The handle fs gives out for table slot `slot` in incarnation `epoch`
/// (its death count when it started): a handle of an earlier incarnation
/// names no file of this one (until 32768 restarts later). Always
/// non-negative as an `i32`/`i64` RPC return.
pub const fn handle(epoch: u64, slot: u32) -> u32 {
    ((epoch as u32) & HANDLE_EPOCH_MASK) << HANDLE_SLOT_BITS | (slot & ((1 << HANDLE_SLOT_BITS) - 1))
}

/// The table slot of `handle` if it was given out in incarnation `epoch`.
pub const fn handle_slot(epoch: u64, handle: u32) -> Option<u32> {
    if handle >> HANDLE_SLOT_BITS == (epoch as u32) & HANDLE_EPOCH_MASK {
        Some(handle & ((1 << HANDLE_SLOT_BITS) - 1))
    } else {
        None
    }
}

/// What `open_read` says of a regular file besides its handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Opened {
    /// The handle; open only while `queued < size`.
    pub handle: u32,
    /// Size in bytes.
    pub size: u64,
    /// Modification time (seconds).
    pub mtime: u64,
    /// Inode number.
    pub ino: u32,
    /// Generation number.
    pub generation: u32,
    /// Bytes from offset 0 queued on the channel.
    pub queued: u64,
}

/// fs's calls as a client makes them (on target: the RPC glue).
pub trait Rpc {
    /// `open(path)`: (handle, size, inode).
    fn open(&mut self, path: &str) -> Result<(u32, u64, u32), ErrorCode>;
    /// `open_read(path, length, tag)`: stat, open and the first read in
    /// one call (the handle stays open only while `queued < size`).
    fn open_read(&mut self, path: &str, length: u64, tag: u64) -> Result<Opened, ErrorCode>;
    /// `read(handle, offset, length, tag)`: bytes queued on the channel.
    fn read(&mut self, handle: u32, offset: u64, length: u64, tag: u64) -> Result<u64, ErrorCode>;
    /// `close(handle)`.
    fn close(&mut self, handle: u32);
    /// `reset`: fs forgets this client's files and sets its channel up
    /// afresh (what a client does at its own start, too).
    fn reset(&mut self);
    /// How many times fs has died so far (its record in the system events
    /// page; 0 without one).
    fn fs_deaths(&self) -> u64;
}

/// Implements [`Rpc`] for a client's adapter over its generated fs glue:
/// `rpc_over_glue!(Type, glue::fs, component_runtime::events::page)`, where
/// `Type` has a field `fs_index: Option<usize>` (fs's record in the system
/// events page), `glue::fs` is the component's `FsIoLite` glue module and
/// the last path a function returning the events page, if any. The one
/// adapter every fs client (httpd, cgi) has.
#[macro_export]
macro_rules! rpc_over_glue {
    ($ty:ty, $($fs:ident)::+, $($page:ident)::+) => {
        impl $crate::client::Rpc for $ty {
            fn open(&mut self, path: &str) -> ::core::result::Result<(u32, u64, u32), $crate::ErrorCode> {
                let (mut size, mut ino) = (0, 0);
                let h = $($fs)::+::open(path, &mut size, &mut ino);
                $crate::client::ok_or_code(h).map(|h| (h as u32, size, ino))
            }
            fn open_read(
                &mut self,
                path: &str,
                length: u64,
                tag: u64,
            ) -> ::core::result::Result<$crate::client::Opened, $crate::ErrorCode> {
                let mut o = $crate::client::Opened::default();
                let h = $($fs)::+::open_read(
                    path,
                    length,
                    tag,
                    &mut o.size,
                    &mut o.mtime,
                    &mut o.ino,
                    &mut o.generation,
                    &mut o.queued,
                );
                $crate::client::ok_or_code(h).map(|h| $crate::client::Opened { handle: h as u32, ..o })
            }
            fn read(&mut self, handle: u32, offset: u64, length: u64, tag: u64) -> ::core::result::Result<u64, $crate::ErrorCode> {
                $crate::client::ok_or_code($($fs)::+::read(handle, offset, length, tag))
            }
            fn close(&mut self, handle: u32) {
                $($fs)::+::close(handle);
            }
            fn reset(&mut self) {
                $($fs)::+::reset();
            }
            fn fs_deaths(&self) -> u64 {
                match ($($page)::+(), self.fs_index) {
                    (Some(p), Some(i)) => p.state(i).0,
                    _ => 0,
                }
            }
        }
    };
}

/// An RPC return as a result: `>= 0` the value, `< 0` the error it names
/// (`Io` for a code fs does not have).
pub fn ok_or_code(ret: i64) -> Result<u64, ErrorCode> {
    if ret < 0 {
        Err(ErrorCode::from_ret(ret).unwrap_or(ErrorCode::Io))
    } else {
        Ok(ret as u64)
    }
}

/// A file a [`Client`] opened, kept by path so that it survives a restart
/// of fs.
#[derive(Debug)]
pub struct OpenFile {
    path: String,
    size: u64,
    ino: u32,
    handle: Cell<u32>,
    /// The fs incarnation (its death count) `handle` belongs to.
    incarnation: Cell<u64>,
    /// fs keeps no handle for it (`open_read` queued it whole); a read
    /// opens it again, as after a restart.
    whole: Cell<bool>,
}

impl OpenFile {
    /// Its size when it was opened.
    pub fn size(&self) -> u64 {
        self.size
    }
    /// Its inode number.
    pub fn ino(&self) -> u32 {
        self.ino
    }
    /// The handle fs gave it (in the incarnation that did).
    pub fn handle(&self) -> u32 {
        self.handle.get()
    }
}

/// What [`Client`] did about restarts of fs (counters).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryStats {
    /// Restarts of fs this client reconnected after.
    pub reconnects: u64,
    /// Files opened again on a new incarnation.
    pub reopens: u64,
    /// Calls made again because fs died during them.
    pub retries: u64,
}

/// How many times one operation is tried while fs keeps dying under it.
pub const MAX_ATTEMPTS: usize = 4;

/// An fs client that survives restarts of fs (see the module).
pub struct Client<R> {
    rpc: R,
    /// fs's death count this client is connected for.
    known: u64,
    stats: RecoveryStats,
}

impl<R: Rpc> Client<R> {
    /// A client connected to the current incarnation of fs (call it after
    /// the first `reset` or call that attached the channel).
    pub fn new(rpc: R) -> Self {
        let known = rpc.fs_deaths();
        Self { rpc, known, stats: RecoveryStats::default() }
    }

    /// The calls underneath.
    pub fn rpc(&mut self) -> &mut R {
        &mut self.rpc
    }

    /// The counters.
    pub fn stats(&self) -> RecoveryStats {
        self.stats
    }

    /// fs's death count this client is connected for.
    pub fn incarnation(&self) -> u64 {
        self.known
    }

    /// Reconnects if fs died since the last look: `reset` at the new
    /// incarnation, then `reattach` (the caller forgets the dead
    /// incarnation's holds and attaches to the fresh channel). Returns
    /// whether it did. fs dying during the reset is caught on the next
    /// look, so a loop of `reconnect` always ends connected to the latest.
    pub fn reconnect(&mut self, reattach: &mut impl FnMut()) -> bool {
        let mut did = false;
        for _ in 0..MAX_ATTEMPTS {
            let deaths = self.rpc.fs_deaths();
            if deaths == self.known {
                break;
            }
            self.rpc.reset();
            self.known = deaths;
            reattach();
            self.stats.reconnects += 1;
            did = true;
        }
        did
    }

    /// Runs `call` connected to the current incarnation; again if fs died
    /// during it (the result came from a dead incarnation, or from a new
    /// one that our stale state did not match).
    fn call<T>(&mut self, reattach: &mut impl FnMut(), mut call: impl FnMut(&mut Self) -> T) -> T {
        let mut attempt = 0;
        loop {
            self.reconnect(reattach);
            let before = self.known;
            let r = call(self);
            attempt += 1;
            if self.rpc.fs_deaths() == before || attempt >= MAX_ATTEMPTS {
                return r;
            }
            self.stats.retries += 1;
        }
    }

    /// Opens `path`.
    pub fn open(&mut self, path: &str, reattach: &mut impl FnMut()) -> Result<OpenFile, ErrorCode> {
        let (handle, size, ino) = self.call(reattach, |c| c.rpc.open(path))?;
        Ok(OpenFile {
            path: String::from(path),
            size,
            ino,
            handle: Cell::new(handle),
            incarnation: Cell::new(self.known),
            whole: Cell::new(false),
        })
    }

    /// Opens `path` and has fs queue its first `length` bytes with `tag`
    /// in the same call (receive them as after [`Client::read`]). Returns
    /// the file and what fs said of it; a file queued whole holds no
    /// handle at fs.
    pub fn open_read(
        &mut self,
        path: &str,
        length: u64,
        tag: u64,
        reattach: &mut impl FnMut(),
    ) -> Result<(OpenFile, Opened), ErrorCode> {
        let o = self.call(reattach, |c| c.rpc.open_read(path, length, tag))?;
        let file = OpenFile {
            path: String::from(path),
            size: o.size,
            ino: o.ino,
            handle: Cell::new(o.handle),
            incarnation: Cell::new(self.known),
            whole: Cell::new(o.queued >= o.size),
        };
        Ok((file, o))
    }

    /// Reads `[offset, offset + length)` of `file` (fs queues it on the
    /// channel with `tag`; the caller receives it, connected to the same
    /// incarnation this returns for). A file of a dead incarnation is
    /// opened again first; `Corrupt` if it is not the same file any more.
    pub fn read(
        &mut self,
        file: &OpenFile,
        offset: u64,
        length: u64,
        tag: u64,
        reattach: &mut impl FnMut(),
    ) -> Result<u64, ErrorCode> {
        self.call(reattach, |c| {
            if file.incarnation.get() != c.known || file.whole.get() {
                let (handle, size, ino) = c.rpc.open(&file.path)?;
                if (size, ino) != (file.size, file.ino) {
                    c.rpc.close(handle);
                    return Err(ErrorCode::Corrupt);
                }
                file.handle.set(handle);
                file.incarnation.set(c.known);
                file.whole.set(false);
                c.stats.reopens += 1;
            }
            c.rpc.read(file.handle.get(), offset, length, tag)
        })
    }

    /// Closes `file` (no call if its incarnation is dead: it has no files;
    /// nor if fs kept no handle for it).
    pub fn close(&mut self, file: OpenFile) {
        if !file.whole.get() && file.incarnation.get() == self.known && self.rpc.fs_deaths() == self.known {
            self.rpc.close(file.handle.get());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::vec::Vec;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// An fs with one file table per incarnation, whose death can be
    /// triggered before any call ("fs dies while the client is blocked in
    /// it": the call then reaches the new incarnation, as the supervisor
    /// makes it happen).
    #[derive(Default)]
    struct World {
        deaths: u64,
        /// Open slots of the current incarnation: path.
        table: Vec<Option<String>>,
        /// Whether our channel was set up by the current incarnation.
        channel_fresh: bool,
        /// Kill fs when the n-th call (1-based) arrives.
        die_at_call: Vec<usize>,
        calls: usize,
        log: Vec<String>,
    }

    #[derive(Clone, Default)]
    struct Fake(Rc<RefCell<World>>);

    const FILES: [(&str, u64, u32); 2] = [("/a.html", 1000, 12), ("/b.bin", 70000, 13)];

    impl Fake {
        fn arrive(&self, what: &str) {
            let mut w = self.0.borrow_mut();
            w.calls += 1;
            let n = w.calls;
            if w.die_at_call.contains(&n) {
                // The dead incarnation's state goes; the new one starts
                // with no files and sets every channel up afresh.
                w.deaths += 1;
                w.table.clear();
                w.channel_fresh = false;
            }
            let entry = alloc::format!("{what}@{}", w.deaths);
            w.log.push(entry);
        }
    }

    impl Rpc for Fake {
        fn open(&mut self, path: &str) -> Result<(u32, u64, u32), ErrorCode> {
            self.arrive("open");
            let mut w = self.0.borrow_mut();
            let &(_, size, ino) = FILES.iter().find(|f| f.0 == path).ok_or(ErrorCode::NotFound)?;
            let slot = w.table.iter().position(Option::is_none).unwrap_or(w.table.len());
            if slot == w.table.len() {
                w.table.push(None);
            }
            w.table[slot] = Some(String::from(path));
            Ok((handle(w.deaths, slot as u32), size, ino))
        }
        fn open_read(&mut self, path: &str, length: u64, _tag: u64) -> Result<Opened, ErrorCode> {
            self.arrive("open_read");
            let mut w = self.0.borrow_mut();
            let &(_, size, ino) = FILES.iter().find(|f| f.0 == path).ok_or(ErrorCode::NotFound)?;
            let queued = size.min(length);
            let mut handle = 0;
            if queued < size {
                let slot = w.table.iter().position(Option::is_none).unwrap_or(w.table.len());
                if slot == w.table.len() {
                    w.table.push(None);
                }
                w.table[slot] = Some(String::from(path));
                handle = super::handle(w.deaths, slot as u32);
            }
            Ok(Opened { handle, size, mtime: 7, ino, generation: 1, queued })
        }
        fn read(&mut self, h: u32, offset: u64, length: u64, _tag: u64) -> Result<u64, ErrorCode> {
            self.arrive("read");
            let w = self.0.borrow();
            let slot = handle_slot(w.deaths, h).ok_or(ErrorCode::BadHandle)?;
            let path = w.table.get(slot as usize).cloned().flatten().ok_or(ErrorCode::BadHandle)?;
            if !w.channel_fresh {
                // Queued on a channel the client is not attached to: the
                // client must not take this result (it calls again).
                drop(w);
                self.0.borrow_mut().log.push(String::from("stale channel"));
                let size = FILES.iter().find(|f| f.0 == path).unwrap().1;
                return Ok(size.saturating_sub(offset).min(length));
            }
            let size = FILES.iter().find(|f| f.0 == path).unwrap().1;
            Ok(size.saturating_sub(offset).min(length))
        }
        fn close(&mut self, h: u32) {
            self.arrive("close");
            let mut w = self.0.borrow_mut();
            if let Some(slot) = handle_slot(w.deaths, h) {
                if let Some(s) = w.table.get_mut(slot as usize) {
                    *s = None;
                }
            }
        }
        fn reset(&mut self) {
            self.arrive("reset");
            let mut w = self.0.borrow_mut();
            w.table.clear();
            w.channel_fresh = true;
        }
        fn fs_deaths(&self) -> u64 {
            self.0.borrow().deaths
        }
    }

    fn client(die_at_call: &[usize]) -> (Fake, Client<Fake>) {
        let f = Fake::default();
        f.0.borrow_mut().channel_fresh = true;
        f.0.borrow_mut().die_at_call = die_at_call.to_vec();
        (f.clone(), Client::new(f))
    }

    #[test]
    fn handles_carry_the_incarnation() {
        let h = handle(3, 7);
        assert_eq!(handle_slot(3, h), Some(7));
        assert_eq!(handle_slot(2, h), None, "an earlier incarnation's handle is refused");
        assert_eq!(handle_slot(4, h), None);
        assert!((handle(HANDLE_EPOCH_MASK as u64, 0xffff) as i32) >= 0, "a valid RPC return");
        assert_eq!(handle(0, 5), 5, "the first incarnation's handles are the slots");
    }

    #[test]
    fn without_a_restart_nothing_changes() {
        let (f, mut c) = client(&[]);
        let mut reattached = 0;
        let file = c.open("/b.bin", &mut || reattached += 1).unwrap();
        assert_eq!((file.size(), file.ino()), (70000, 13));
        assert_eq!(c.read(&file, 0, 65536, 1, &mut || reattached += 1), Ok(65536));
        assert_eq!(c.read(&file, 65536, 65536, 2, &mut || reattached += 1), Ok(70000 - 65536));
        c.close(file);
        assert_eq!(reattached, 0);
        assert_eq!(c.stats(), RecoveryStats::default());
        assert_eq!(f.0.borrow().log, ["open@0", "read@0", "read@0", "close@0"]);
        assert_eq!(f.0.borrow().table, [None]);
    }

    #[test]
    fn open_read_keeps_no_handle_for_a_file_queued_whole() {
        let (f, mut c) = client(&[]);
        let (small, o) = c.open_read("/a.html", 65536, 1, &mut || {}).unwrap();
        assert_eq!((o.size, o.queued, o.ino), (1000, 1000, 12));
        c.close(small);
        assert!(f.0.borrow().table.is_empty(), "fs opened nothing");
        // A longer file stays open for the rest, and is closed.
        let (big, o) = c.open_read("/b.bin", 65536, 2, &mut || {}).unwrap();
        assert_eq!(o.queued, 65536);
        assert_eq!(c.read(&big, 65536, 65536, 3, &mut || {}), Ok(70000 - 65536));
        c.close(big);
        assert_eq!(f.0.borrow().log, ["open_read@0", "open_read@0", "read@0", "close@0"]);
        assert_eq!(f.0.borrow().table, [None]);
        // Read again after all (its bytes were lost): opened by path first.
        let (again, _) = c.open_read("/a.html", 65536, 4, &mut || {}).unwrap();
        assert_eq!(c.read(&again, 0, 65536, 5, &mut || {}), Ok(1000));
        assert_eq!(c.stats().reopens, 1);
        c.close(again);
        assert_eq!(f.0.borrow().table, [None], "the reopened file is closed");
    }

    #[test]
    fn an_open_read_during_which_fs_dies_is_made_again() {
        let (f, mut c) = client(&[1]);
        let mut reattached = 0;
        let (file, o) = c.open_read("/b.bin", 4096, 1, &mut || reattached += 1).unwrap();
        assert_eq!((o.queued, reattached), (4096, 1));
        assert_eq!(f.0.borrow().log, ["open_read@1", "reset@1", "open_read@1"]);
        assert_eq!(handle_slot(1, file.handle()), Some(0), "a handle of the new incarnation");
        c.close(file);
        assert_eq!(f.0.borrow().table, [None]);
    }

    #[test]
    fn a_read_in_flight_when_fs_dies_is_retried_on_the_reopened_file() {
        // Call 2 (the first read) reaches a new incarnation: the client
        // was blocked in it when fs died.
        let (f, mut c) = client(&[2]);
        let mut reattached = 0;
        let file = c.open("/b.bin", &mut || reattached += 1).unwrap();
        let n = c.read(&file, 4096, 8192, 1, &mut || reattached += 1).unwrap();
        assert_eq!(n, 8192, "the read's bytes, from the new incarnation");
        assert_eq!(reattached, 1, "reattached once, after the reset");
        assert_eq!(c.incarnation(), 1);
        assert_eq!(c.stats(), RecoveryStats { reconnects: 1, reopens: 1, retries: 1 });
        // The stale handle was refused, then: reset, open again, read.
        assert_eq!(f.0.borrow().log, ["open@0", "read@1", "reset@1", "open@1", "read@1"]);
        assert_eq!(handle_slot(1, file.handle()), Some(0));
        c.close(file);
        assert_eq!(f.0.borrow().table, [None], "the new incarnation's file closed");
    }

    #[test]
    fn a_restart_between_calls_reconnects_before_the_next() {
        let (f, mut c) = client(&[]);
        let mut reattached = 0;
        let a = c.open("/a.html", &mut || reattached += 1).unwrap();
        let b = c.open("/b.bin", &mut || reattached += 1).unwrap();
        // fs dies while the client is elsewhere.
        {
            let mut w = f.0.borrow_mut();
            w.deaths += 1;
            w.table.clear();
            w.channel_fresh = false;
        }
        assert_eq!(c.read(&b, 0, 100, 1, &mut || reattached += 1), Ok(100));
        assert_eq!(c.read(&b, 100, 100, 2, &mut || reattached += 1), Ok(100), "reopened once");
        assert_eq!(c.read(&a, 0, 5000, 3, &mut || reattached += 1), Ok(1000));
        assert_eq!(reattached, 1);
        assert_eq!(c.stats(), RecoveryStats { reconnects: 1, reopens: 2, retries: 0 });
        assert_eq!(f.0.borrow().log, ["open@0", "open@0", "reset@1", "open@1", "read@1", "read@1", "open@1", "read@1"]);
        c.close(a);
        c.close(b);
        assert!(f.0.borrow().table.iter().all(Option::is_none));
    }

    #[test]
    fn a_file_of_a_dead_incarnation_closes_without_a_call() {
        let (f, mut c) = client(&[2]);
        let file = c.open("/a.html", &mut || {}).unwrap();
        // The close reaches the new incarnation: it must not close a file
        // of that incarnation (it has none of ours at this slot).
        let other = c.open("/b.bin", &mut || {}).unwrap();
        assert_eq!(c.incarnation(), 1);
        c.close(file);
        let log_len = f.0.borrow().log.len();
        assert_eq!(f.0.borrow().log[log_len - 1], "open@1", "no close for the dead incarnation's file");
        assert_eq!(c.read(&other, 0, 10, 1, &mut || {}), Ok(10), "the other file is untouched");
    }

    #[test]
    fn fs_dying_again_during_the_recovery_ends_on_the_latest_incarnation() {
        // The read dies (call 2), the reset reaches yet another
        // incarnation (call 3), the reopen dies too (call 5 is the
        // reopen after the second reset at call 4).
        let (f, mut c) = client(&[2, 3, 5]);
        let mut reattached = 0;
        let file = c.open("/a.html", &mut || reattached += 1).unwrap();
        assert_eq!(c.read(&file, 0, 4096, 1, &mut || reattached += 1), Ok(1000));
        assert_eq!(c.incarnation(), 3);
        assert_eq!(f.0.borrow().deaths, 3);
        assert!(f.0.borrow().channel_fresh);
        assert_eq!(reattached, 3, "once per incarnation it saw");
        let log = f.0.borrow().log.clone();
        assert_eq!(log.last().map(String::as_str), Some("read@3"), "the result came from a fresh channel: {log:?}");
        assert!(log.iter().any(|l| l == "stale channel"), "the case this test is for happened: {log:?}");
    }

    #[test]
    fn a_different_file_after_the_restart_is_an_error_not_other_bytes() {
        let (f, mut c) = client(&[]);
        let file = c.open("/a.html", &mut || {}).unwrap();
        // Pretend the path names another file now.
        let forged = OpenFile {
            path: file.path.clone(),
            size: 999,
            ino: 12,
            handle: Cell::new(0),
            incarnation: Cell::new(0),
            whole: Cell::new(false),
        };
        f.0.borrow_mut().deaths += 1;
        assert_eq!(c.read(&forged, 0, 10, 1, &mut || {}), Err(ErrorCode::Corrupt));
        assert!(f.0.borrow().table.iter().all(Option::is_none), "the reopened handle was closed");
    }

    #[test]
    fn a_genuinely_bad_handle_is_not_retried() {
        let (_f, mut c) = client(&[]);
        let file = c.open("/a.html", &mut || {}).unwrap();
        let bad = OpenFile {
            path: file.path.clone(),
            size: 1000,
            ino: 12,
            handle: Cell::new(9),
            incarnation: Cell::new(0),
            whole: Cell::new(false),
        };
        assert_eq!(c.read(&bad, 0, 10, 1, &mut || {}), Err(ErrorCode::BadHandle));
        assert_eq!(c.stats().retries, 0);
    }
}
