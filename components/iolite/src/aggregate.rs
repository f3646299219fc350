//! Buffer aggregates: mutable ordered lists of slices of immutable buffers.
//!
//! Every slice of an [`Aggregate`] holds one reference on its buffer, taken
//! from and returned to the aggregate's [`Domain`] (dropping an aggregate
//! releases its references). Operations rearrange slices and never touch
//! payload bytes, except the explicitly copying ones ([`Aggregate::read_at`],
//! [`Aggregate::copy_to_pool`], [`Aggregate::flatten`], [`Aggregate::mutate`]),
//! which add to the domain's copied-bytes counter.
//!
//! Aggregates are normalised: they never contain zero-length slices, and
//! adjacent slices that continue each other in the same buffer are merged.
//! An aggregate has at most [`MAX_SLICES`] slices; an operation whose result
//! would need more fails with [`Error::TooManySlices`] and changes nothing
//! (use [`Aggregate::flatten`] to defragment, paper §2.8 case 3).

use crate::desc::{PoolId, SliceDesc};
use crate::domain::Domain;
use crate::{Error, Result, MAX_SLICES};

const SCRATCH: usize = 3 * MAX_SLICES;

/// Ordered list of slices; see the module docs.
pub struct Aggregate<'d> {
    d: &'d Domain,
    n: usize,
    s: [SliceDesc; MAX_SLICES],
}

impl core::fmt::Debug for Aggregate<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Aggregate").field("len", &self.len()).field("slices", &self.descs()).finish()
    }
}

/// Drops zero-length slices and merges contiguous neighbours.
fn normalize(input: &[SliceDesc], out: &mut [SliceDesc; SCRATCH]) -> usize {
    let mut n = 0;
    for s in input.iter().filter(|s| s.len > 0) {
        if n > 0 && out[n - 1].is_contiguous_with(s) && out[n - 1].len as u64 + s.len as u64 <= u32::MAX as u64 {
            out[n - 1].len += s.len;
        } else {
            out[n] = *s;
            n += 1;
        }
    }
    n
}

/// Replaces the holds of `old` by holds for each of `new` (taken first, so
/// nothing is freed in between). On failure nothing changes.
fn reshuffle(d: &Domain, new: &[&[SliceDesc]], old: &[&[SliceDesc]]) -> Result<()> {
    let mut taken = 0usize;
    let all = new.iter().flat_map(|l| l.iter());
    for s in all.clone() {
        if let Err(e) = d.hold_local(s) {
            for t in all.clone().take(taken) {
                d.release_local(t);
            }
            return Err(e);
        }
        taken += 1;
    }
    for s in old.iter().flat_map(|l| l.iter()) {
        d.release_local(s);
    }
    Ok(())
}

/// Cuts `list` at byte `at`: pieces before and after (a slice containing
/// `at` is split in two).
fn cut(list: &[SliceDesc], at: u64, head: &mut [SliceDesc; SCRATCH], hn: &mut usize, tail: &mut [SliceDesc; SCRATCH], tn: &mut usize) {
    let mut pos = 0u64;
    for s in list {
        let end = pos + s.len as u64;
        if end <= at {
            head[*hn] = *s;
            *hn += 1;
        } else if pos >= at {
            tail[*tn] = *s;
            *tn += 1;
        } else {
            let k = (at - pos) as u32;
            head[*hn] = SliceDesc { len: k, ..*s };
            *hn += 1;
            tail[*tn] = SliceDesc { off: s.off + k, len: s.len - k, ..*s };
            *tn += 1;
        }
        pos = end;
    }
}

impl<'d> Aggregate<'d> {
    /// An empty aggregate.
    pub fn new(d: &'d Domain) -> Self {
        Self { d, n: 0, s: [SliceDesc::default(); MAX_SLICES] }
    }

    /// Builds an aggregate from slices that already carry one local hold
    /// each (≤ MAX_SLICES), normalising it.
    pub(crate) fn from_held(d: &'d Domain, held: &[SliceDesc]) -> Self {
        debug_assert!(held.len() <= MAX_SLICES);
        let mut out = [SliceDesc::default(); SCRATCH];
        let n = normalize(held, &mut out);
        let mut a = Self::new(d);
        if n == held.len() && out[..n] == *held {
            a.s[..n].copy_from_slice(held);
            a.n = n;
            return a;
        }
        // Merged or dropped slices: take holds for the result, drop the
        // inputs' (cannot overflow: the result has no more slices per buffer).
        reshuffle(d, &[&out[..n]], &[held]).expect("normalising never adds holds");
        a.s[..n].copy_from_slice(&out[..n]);
        a.n = n;
        a
    }

    /// Forgets the holds (they were moved elsewhere, e.g. lent to a peer).
    pub(crate) fn forget_holds(mut self) {
        self.n = 0;
    }

    /// The domain this aggregate's references belong to.
    pub fn domain(&self) -> &'d Domain {
        self.d
    }

    /// Total payload bytes.
    pub fn len(&self) -> usize {
        self.descs().iter().map(|s| s.len as usize).sum()
    }

    /// True if the aggregate has no bytes.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Number of slices.
    pub fn slice_count(&self) -> usize {
        self.n
    }

    /// The slices as ⟨pool, buffer, generation, offset, length⟩, in order.
    /// ⟨pool, buffer, generation⟩ names the contents system-wide, so this is
    /// the key for content caches such as per-slice checksums (only for
    /// trusted pools, see [`Domain::pool_trust`]).
    pub fn descs(&self) -> &[SliceDesc] {
        &self.s[..self.n]
    }

    /// The slices' bytes, in order, without copying (read-only views of the
    /// shared buffers; valid while the aggregate lives).
    pub fn slices(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.descs().iter().map(move |s| {
            let p = self.d.slice_ptr(s);
            // SAFETY: the slice was validated when it entered this domain and
            // is held (its buffer cannot be freed or rewritten by the API
            // while we hold it; sealed bytes are immutable).
            unsafe { core::slice::from_raw_parts(p, s.len as usize) }
        })
    }

    /// The bytes as one slice if they are contiguous (at most one slice).
    pub fn contiguous(&self) -> Option<&[u8]> {
        match self.n {
            0 => Some(&[]),
            1 => self.slices().next(),
            _ => None,
        }
    }

    /// Compares the contents with `bytes` without copying.
    pub fn eq_bytes(&self, bytes: &[u8]) -> bool {
        if self.len() != bytes.len() {
            return false;
        }
        let mut pos = 0;
        for s in self.slices() {
            if s != &bytes[pos..pos + s.len()] {
                return false;
            }
            pos += s.len();
        }
        true
    }

    /// Copies bytes starting at `offset` into `dst`; returns how many were
    /// copied (short at the end). Counted as copied bytes.
    pub fn read_at(&self, offset: usize, dst: &mut [u8]) -> usize {
        let mut pos = 0usize;
        let mut done = 0usize;
        for s in self.slices() {
            if done == dst.len() {
                break;
            }
            let end = pos + s.len();
            if end > offset {
                let from = offset.saturating_sub(pos);
                let n = (s.len() - from).min(dst.len() - done);
                dst[done..done + n].copy_from_slice(&s[from..from + n]);
                done += n;
            }
            pos = end;
        }
        self.d.count_copy(done);
        done
    }

    /// Another aggregate with the same slices (references are added, no
    /// bytes are copied).
    pub fn duplicate(&self) -> Result<Aggregate<'d>> {
        reshuffle(self.d, &[self.descs()], &[])?;
        let mut a = Self::new(self.d);
        a.s = self.s;
        a.n = self.n;
        Ok(a)
    }

    /// A new aggregate referencing bytes `[offset, offset+len)` of this one.
    pub fn range(&self, offset: usize, len: usize) -> Result<Aggregate<'d>> {
        let end = offset.checked_add(len).ok_or(Error::InvalidArgument)?;
        if end > self.len() {
            return Err(Error::InvalidArgument);
        }
        let (mut h, mut hn, mut t, mut tn) = ([SliceDesc::default(); SCRATCH], 0, [SliceDesc::default(); SCRATCH], 0);
        cut(self.descs(), offset as u64, &mut h, &mut hn, &mut t, &mut tn);
        let (mut m, mut mn, mut rest, mut rn) = ([SliceDesc::default(); SCRATCH], 0, [SliceDesc::default(); SCRATCH], 0);
        cut(&t[..tn], len as u64, &mut m, &mut mn, &mut rest, &mut rn);
        let mut out = [SliceDesc::default(); SCRATCH];
        let n = normalize(&m[..mn], &mut out);
        reshuffle(self.d, &[&out[..n]], &[])?;
        let mut a = Self::new(self.d);
        a.s[..n].copy_from_slice(&out[..n]);
        a.n = n;
        Ok(a)
    }

    fn set(&mut self, list: &[SliceDesc]) {
        self.s[..list.len()].copy_from_slice(list);
        self.n = list.len();
    }

    /// Appends `other` after this aggregate's bytes. On failure (too many
    /// slices) both are unchanged and `other` is handed back.
    pub fn append(&mut self, other: Aggregate<'d>) -> core::result::Result<(), (Error, Aggregate<'d>)> {
        self.join(other, false)
    }

    /// Puts `other` before this aggregate's bytes. On failure both are
    /// unchanged and `other` is handed back.
    pub fn prepend(&mut self, other: Aggregate<'d>) -> core::result::Result<(), (Error, Aggregate<'d>)> {
        self.join(other, true)
    }

    fn join(&mut self, other: Aggregate<'d>, front: bool) -> core::result::Result<(), (Error, Aggregate<'d>)> {
        if !core::ptr::eq(self.d, other.d) {
            return Err((Error::InvalidArgument, other));
        }
        let mut all = [SliceDesc::default(); SCRATCH];
        let (a, b) = if front { (other.descs(), self.descs()) } else { (self.descs(), other.descs()) };
        all[..a.len()].copy_from_slice(a);
        all[a.len()..a.len() + b.len()].copy_from_slice(b);
        let mut out = [SliceDesc::default(); SCRATCH];
        let n = normalize(&all[..a.len() + b.len()], &mut out);
        if n > MAX_SLICES {
            return Err((Error::TooManySlices, other));
        }
        if n == a.len() + b.len() {
            // No merge: the holds just move over.
            self.set(&out[..n]);
            other.forget_holds();
            return Ok(());
        }
        if let Err(e) = reshuffle(self.d, &[&out[..n]], &[self.descs(), other.descs()]) {
            return Err((e, other));
        }
        self.set(&out[..n]);
        other.forget_holds();
        Ok(())
    }

    /// `self` followed by `other`, as one aggregate. On failure both are
    /// handed back unchanged.
    #[allow(clippy::type_complexity)]
    pub fn concat(mut self, other: Aggregate<'d>) -> core::result::Result<Aggregate<'d>, (Error, Aggregate<'d>, Aggregate<'d>)> {
        match self.append(other) {
            Ok(()) => Ok(self),
            Err((e, other)) => Err((e, self, other)),
        }
    }

    /// Splits at byte `at`: `self` keeps `[0, at)`, the returned aggregate
    /// has `[at, len)`. A slice containing `at` is shared by both halves.
    pub fn split_off(&mut self, at: usize) -> Result<Aggregate<'d>> {
        if at > self.len() {
            return Err(Error::InvalidArgument);
        }
        let (mut h, mut hn, mut t, mut tn) = ([SliceDesc::default(); SCRATCH], 0, [SliceDesc::default(); SCRATCH], 0);
        cut(self.descs(), at as u64, &mut h, &mut hn, &mut t, &mut tn);
        reshuffle(self.d, &[&h[..hn], &t[..tn]], &[self.descs()])?;
        self.set(&h[..hn]);
        let mut other = Self::new(self.d);
        other.set(&t[..tn]);
        Ok(other)
    }

    /// Keeps only the first `len` bytes (no-op if already shorter).
    pub fn truncate(&mut self, len: usize) {
        if len >= self.len() {
            return;
        }
        // Dropping a tail never needs more holds than it frees, except when
        // cutting inside a slice, which keeps the same count.
        let (mut h, mut hn, mut t, mut tn) = ([SliceDesc::default(); SCRATCH], 0, [SliceDesc::default(); SCRATCH], 0);
        cut(self.descs(), len as u64, &mut h, &mut hn, &mut t, &mut tn);
        // A cut inside a slice yields one more piece than there were slices;
        // that slice's hold stays with the shortened head piece.
        let cut_inside = hn + tn == self.n + 1;
        let drop_from = if cut_inside { 1 } else { 0 };
        for s in &t[drop_from..tn] {
            self.d.release_local(s);
        }
        let keep = hn;
        self.set(&h[..keep]);
    }

    /// Drops the first `n` bytes (e.g. a consumed protocol header).
    pub fn advance(&mut self, n: usize) -> Result<()> {
        if n > self.len() {
            return Err(Error::InvalidArgument);
        }
        let rest = self.split_off(n)?;
        let head = core::mem::replace(self, rest);
        drop(head);
        Ok(())
    }

    /// Replaces bytes `[offset, offset+len)` by the contents of `new`
    /// (lengths may differ). On failure `self` is unchanged and `new` is
    /// handed back.
    pub fn replace_range(&mut self, offset: usize, len: usize, new: Aggregate<'d>) -> core::result::Result<(), (Error, Aggregate<'d>)> {
        let end = match offset.checked_add(len) {
            Some(e) if e <= self.len() && core::ptr::eq(self.d, new.d) => e,
            _ => return Err((Error::InvalidArgument, new)),
        };
        let (mut h, mut hn, mut t, mut tn) = ([SliceDesc::default(); SCRATCH], 0, [SliceDesc::default(); SCRATCH], 0);
        cut(self.descs(), offset as u64, &mut h, &mut hn, &mut t, &mut tn);
        let (mut _m, mut _mn, mut rest, mut rn) = ([SliceDesc::default(); SCRATCH], 0, [SliceDesc::default(); SCRATCH], 0);
        cut(&t[..tn], (end - offset) as u64, &mut _m, &mut _mn, &mut rest, &mut rn);
        let mut all = [SliceDesc::default(); 2 * SCRATCH];
        let mut k = 0;
        for s in h[..hn].iter().chain(new.descs()).chain(&rest[..rn]) {
            all[k] = *s;
            k += 1;
        }
        // Normalise via two passes (the scratch holds at most SCRATCH).
        if k > SCRATCH {
            return Err((Error::TooManySlices, new));
        }
        let mut out = [SliceDesc::default(); SCRATCH];
        let n = normalize(&all[..k], &mut out);
        if n > MAX_SLICES {
            return Err((Error::TooManySlices, new));
        }
        if let Err(e) = reshuffle(self.d, &[&out[..n]], &[self.descs(), new.descs()]) {
            return Err((e, new));
        }
        self.set(&out[..n]);
        new.forget_holds();
        Ok(())
    }

    /// "Mutates" the aggregate (paper §2.1, §2.8): bytes `[offset,
    /// offset+bytes.len())` get the new values, which are written into a
    /// freshly allocated buffer of `pool` and chained in. The old buffers are
    /// untouched, so every other holder still sees the old data. The new
    /// bytes count as copied.
    pub fn mutate(&mut self, offset: usize, bytes: &[u8], pool: PoolId) -> Result<()> {
        if offset.checked_add(bytes.len()).is_none_or(|e| e > self.len()) {
            return Err(Error::InvalidArgument);
        }
        let new = self.d.alloc_copy(pool, bytes)?;
        self.replace_range(offset, bytes.len(), new).map_err(|(e, _)| e)
    }

    /// Like [`Aggregate::mutate`], but `fill` writes the new `len` bytes in
    /// place into the fresh buffer (no copy counted).
    pub fn mutate_with(&mut self, offset: usize, len: usize, pool: PoolId, fill: impl FnOnce(&mut [u8])) -> Result<()> {
        if offset.checked_add(len).is_none_or(|e| e > self.len()) {
            return Err(Error::InvalidArgument);
        }
        if len == 0 {
            return Ok(());
        }
        let mut b = self.d.alloc(pool, len)?;
        fill(&mut b.as_mut()[..len]);
        let new = b.seal(len).map_err(|(e, _)| e)?;
        self.replace_range(offset, len, new).map_err(|(e, _)| e)
    }

    /// A private, contiguous copy of the bytes in a fresh buffer of `pool`
    /// (counted as copied). This is what a copying boundary does.
    pub fn copy_to_pool(&self, pool: PoolId) -> Result<Aggregate<'d>> {
        let len = self.len();
        if len == 0 {
            return Ok(Self::new(self.d));
        }
        let mut b = self.d.alloc(pool, len)?;
        let dst = b.as_mut();
        let mut pos = 0;
        for s in self.slices() {
            dst[pos..pos + s.len()].copy_from_slice(s);
            pos += s.len();
        }
        self.d.count_copy(len);
        b.seal(len).map_err(|(e, _)| e)
    }

    /// Replaces a fragmented aggregate by one contiguous copy (paper §2.8
    /// case 3). No-op for ≤ 1 slice.
    pub fn flatten(&mut self, pool: PoolId) -> Result<()> {
        if self.n <= 1 {
            return Ok(());
        }
        let c = self.copy_to_pool(pool)?;
        *self = c;
        Ok(())
    }
}

impl Drop for Aggregate<'_> {
    fn drop(&mut self) {
        for s in &self.s[..self.n] {
            self.d.release_local(s);
        }
    }
}
