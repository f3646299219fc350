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
//! * [`read`]/[`write`] copy between a caller's buffer and aggregates, and
//!   count what they copy.

use crate::aggregate::Aggregate;
use crate::channel::{ChannelRx, ChannelTx, Notify};
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

impl<'d, N: Notify> IolSource<'d> for ChannelRx<'d, N> {
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

fn self_domain<'d, N: Notify>(rx: &ChannelRx<'d, N>) -> &'d Domain {
    rx.domain()
}

impl<'d, N: Notify> IolSink<'d> for ChannelTx<'d, N> {
    fn iol_write(&mut self, agg: Aggregate<'d>) -> core::result::Result<usize, (Error, Aggregate<'d>)> {
        let n = agg.len();
        self.send(agg, 0, 0)?;
        self.flush();
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
