//! The IOL API (paper §2.4): `iol_read`/`iol_write` over any source/sink,
//! and the copying `read`/`write` compatibility path.
//!
//! * `iol_read(max)` returns an aggregate of *at most* `max` bytes (it may
//!   return less, unlike POSIX `read`); `Ok(None)` means nothing is available
//!   now, `Ok(Some(empty))` means end of stream.
//! * `iol_write(agg)` hands the aggregate over by reference.
//! * Snapshot semantics: what `iol_read` returns holds references to
//!   immutable buffers, so it never changes, whatever is written later.
//!   [`MemObject`] is the reference implementation of an object (file) with
//!   these semantics; the filesystem's cache applies the same rule.
//! * [`read()`]/[`write()`] copy between a caller's buffer and aggregates, and
//!   count what they copy.

use crate::aggregate::Aggregate;
use crate::channel::{ChannelRx, ChannelTx};
use crate::desc::{PoolId, FLAG_EOF};
use crate::domain::Domain;
use crate::{Error, Result};

/// Something aggregates can be read from (pipe, file, socket).
pub trait IolSource<'d> {
    /// Returns at most `max` bytes as an aggregate: `Ok(None)` if nothing
    /// is available now, `Ok(Some(empty))` at end of stream.
    fn iol_read(&mut self, max: usize) -> Result<Option<Aggregate<'d>>>;
}

/// Something aggregates can be written to (pipe, file, socket).
pub trait IolSink<'d> {
    /// Writes the whole aggregate by reference and returns its length. On
    /// failure (back-pressure, quota, dead peer) the aggregate is handed back.
    fn iol_write(&mut self, agg: Aggregate<'d>) -> core::result::Result<usize, (Error, Aggregate<'d>)>;
}

impl<'d> IolSource<'d> for ChannelRx<'d> {
    fn iol_read(&mut self, max: usize) -> Result<Option<Aggregate<'d>>> {
        loop {
            if let Some(mut p) = self.pending.take() {
                if p.len() > max {
                    let rest = p.split_off(max)?;
                    self.pending = Some(rest);
                }
                return Ok(Some(p));
            }
            if self.eof {
                return Ok(Some(Aggregate::new(self_domain(self))));
            }
            match self.recv()? {
                None => return Ok(None),
                Some(r) => {
                    if r.flags & FLAG_EOF != 0 {
                        self.eof = true;
                    }
                    if !r.agg.is_empty() {
                        self.pending = Some(r.agg);
                    }
                }
            }
        }
    }
}

fn self_domain<'d>(rx: &ChannelRx<'d>) -> &'d Domain {
    rx.domain()
}

/// Sends by reference; waking the receiver is the caller's (a channel's
/// [`ChannelTx::flush`] after the batch).
impl<'d> IolSink<'d> for ChannelTx<'d> {
    fn iol_write(&mut self, agg: Aggregate<'d>) -> core::result::Result<usize, (Error, Aggregate<'d>)> {
        let n = agg.len();
        self.send(agg, 0, 0)?;
        Ok(n)
    }
}

/// An in-memory object (file) with IO-Lite semantics: its contents are an
/// aggregate; reads return snapshots, writes replace ranges atomically with
/// respect to other reads and writes (single-threaded domain).
pub struct MemObject<'d> {
    content: Aggregate<'d>,
    pos: usize,
}

impl<'d> MemObject<'d> {
    /// An empty object.
    pub fn new(d: &'d Domain) -> Self {
        Self { content: Aggregate::new(d), pos: 0 }
    }

    /// Sets the position of the next read or write.
    pub fn seek(&mut self, pos: usize) {
        self.pos = pos;
    }

    /// Current length.
    pub fn len(&self) -> usize {
        self.content.len()
    }

    /// True if empty.
    pub fn is_empty(&self) -> bool {
        self.content.is_empty()
    }

    /// The whole current contents (a snapshot).
    pub fn snapshot(&self) -> Result<Aggregate<'d>> {
        self.content.duplicate()
    }
}

impl<'d> IolSource<'d> for MemObject<'d> {
    fn iol_read(&mut self, max: usize) -> Result<Option<Aggregate<'d>>> {
        let len = self.content.len();
        let start = self.pos.min(len);
        let n = max.min(len - start);
        let a = self.content.range(start, n)?;
        self.pos = start + n;
        Ok(Some(a))
    }
}

impl<'d> IolSink<'d> for MemObject<'d> {
    /// Replaces bytes `[pos, pos + agg.len())` (extending the object if
    /// needed) with the aggregate's buffers; the replaced buffers live on as
    /// long as earlier snapshots reference them.
    fn iol_write(&mut self, agg: Aggregate<'d>) -> core::result::Result<usize, (Error, Aggregate<'d>)> {
        let n = agg.len();
        let len = self.content.len();
        if self.pos > len {
            return Err((Error::InvalidArgument, agg));
        }
        let replaced = n.min(len - self.pos);
        self.content.replace_range(self.pos, replaced, agg)?;
        self.pos += n;
        Ok(n)
    }
}

/// Compatibility `read`: reads up to `dst.len()` bytes and copies them into
/// `dst` (counted as copied). Returns `Ok(None)` if nothing is available,
/// `Ok(Some(0))` at end of stream.
pub fn read<'d>(src: &mut impl IolSource<'d>, dst: &mut [u8]) -> Result<Option<usize>> {
    match src.iol_read(dst.len())? {
        None => Ok(None),
        Some(a) => Ok(Some(a.read_at(0, dst))),
    }
}

/// Compatibility `write`: copies `src` into a fresh buffer of `pool`
/// (counted as copied) and writes it by reference. On back-pressure the
/// bytes were not written (the caller still has them) and the error is
/// returned.
pub fn write<'d>(sink: &mut impl IolSink<'d>, d: &'d Domain, pool: PoolId, src: &[u8]) -> Result<usize> {
    let a = d.alloc_copy(pool, src)?;
    sink.iol_write(a).map_err(|(e, _)| e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::{channel_bytes, init_channel, Attach, Geometry};
    use crate::domain::PeerId;
    use crate::testing::{bytes, make, map, own};

    const P: PoolId = 1;
    const Q: PoolId = 2;

    /// # Safety
    /// `reg` is a fresh channel region, used by these two ends only.
    unsafe fn ends<'d>(w: &'d Domain, r: &'d Domain, reg: crate::RwRegion) -> (ChannelTx<'d>, ChannelRx<'d>) {
        let geometry = Geometry { fwd: 8, rel: 8 };
        // SAFETY: per the contract.
        unsafe {
            init_channel(reg, geometry).unwrap();
            (
                ChannelTx::attach(Attach { domain: w, peer: PeerId(0), region: reg, geometry }).unwrap(),
                ChannelRx::attach(Attach { domain: r, peer: PeerId(0), region: reg, geometry }).unwrap(),
            )
        }
    }

    #[test]
    fn iol_read_returns_snapshots() {
        let d = crate::Domain::new();
        own(&d, P, 16);
        let mut f = MemObject::new(&d);
        assert_eq!(f.iol_write(make(&d, P, b"hello ")).unwrap(), 6);
        assert_eq!(f.iol_write(make(&d, P, b"world")).unwrap(), 5);
        f.seek(0);
        let a1 = f.iol_read(100).unwrap().unwrap();
        assert_eq!(bytes(&a1), b"hello world");
        // Overwrite the start: a1 still sees the old contents (snapshot).
        f.seek(0);
        f.iol_write(make(&d, P, b"HELLO_")).unwrap();
        assert_eq!(bytes(&a1), b"hello world");
        f.seek(0);
        let a2 = f.iol_read(100).unwrap().unwrap();
        assert_eq!(bytes(&a2), b"HELLO_world");
        // The replaced buffer lives while a1 references it, then is reclaimed.
        assert_eq!(d.stats().buffers_in_use, 3);
        drop(a1);
        assert_eq!(d.stats().buffers_in_use, 2);
        // iol_read may return less than asked; at the end, nothing.
        f.seek(6);
        assert_eq!(bytes(&f.iol_read(3).unwrap().unwrap()), b"wor");
        assert_eq!(bytes(&f.iol_read(3).unwrap().unwrap()), b"ld");
        assert!(f.iol_read(3).unwrap().unwrap().is_empty());
        // Writing past the end is refused without losing the data.
        f.seek(100);
        let (e, back) = f.iol_write(make(&d, P, b"x")).unwrap_err();
        assert_eq!(e, Error::InvalidArgument);
        assert_eq!(bytes(&back), b"x");
        assert_eq!(d.stats().bytes_copied, 0);
        drop((a2, back, f));
        assert_eq!(d.stats().buffers_in_use, 0);
    }

    #[test]
    fn pipe_iol_read_splits_to_max_and_reports_eof() {
        let (w, r) = (crate::Domain::new(), crate::Domain::new());
        map(&r, P, own(&w, P, 8));
        let reg = crate::testing::region(channel_bytes(8, 8));
        // SAFETY: fresh region, one end each.
        let (mut tx, mut rx) = unsafe { ends(&w, &r, reg) };
        assert!(rx.iol_read(4).unwrap().is_none(), "nothing yet");
        tx.iol_write(make(&w, P, b"0123456789")).unwrap();
        let mut got = Vec::new();
        while let Some(a) = rx.iol_read(4).unwrap() {
            assert!(a.len() <= 4 && !a.is_empty());
            got.extend(bytes(&a));
        }
        assert_eq!(got, b"0123456789");
        tx.send_eof().unwrap();
        assert!(rx.iol_read(4).unwrap().unwrap().is_empty(), "EOF");
        assert!(rx.iol_read(4).unwrap().unwrap().is_empty(), "EOF stays");
        assert_eq!(w.stats().bytes_copied + r.stats().bytes_copied, 0, "IO-Lite path copies nothing");
    }

    #[test]
    fn compatibility_read_write_copy_and_count() {
        let (w, r) = (crate::Domain::new(), crate::Domain::new());
        map(&r, P, own(&w, P, 8));
        own(&r, Q, 8);
        let reg = crate::testing::region(channel_bytes(8, 8));
        // SAFETY: fresh region, one end each.
        let (mut tx, mut rx) = unsafe { ends(&w, &r, reg) };
        assert_eq!(write(&mut tx, &w, P, b"legacy bytes").unwrap(), 12);
        let mut buf = [0u8; 32];
        assert_eq!(read(&mut rx, &mut buf).unwrap(), Some(12));
        assert_eq!(&buf[..12], b"legacy bytes");
        assert_eq!(w.stats().bytes_copied, 12, "write copies in");
        assert_eq!(r.stats().bytes_copied, 12, "read copies out");
        assert_eq!(read(&mut rx, &mut buf).unwrap(), None);
        // Same bytes through either path.
        tx.iol_write(make(&w, P, b"legacy bytes")).unwrap();
        let a = rx.iol_read(32).unwrap().unwrap();
        assert!(a.eq_bytes(&buf[..12]));
    }
}
