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
//!
//! Cost: an aggregate is a fixed array of [`MAX_SLICES`] slices, of which
//! only the first `slice_count()` are ever written or read (nothing is
//! zeroed, copied or scanned beyond them), and operations take or drop a
//! hold only for slices whose count really changes (a split inside a slice
//! takes one, an append that merges two slices drops one).

use core::mem::MaybeUninit;

use crate::desc::{PoolId, SliceDesc};
use crate::domain::Domain;
use crate::{Error, Result, MAX_SLICES};

/// A fixed-capacity list of slices. Only the first `n` entries are
/// initialised; creating, moving the contents of or clearing one never
/// touches the rest.
pub(crate) struct SliceVec<const N: usize> {
    n: usize,
    s: [MaybeUninit<SliceDesc>; N],
}

impl<const N: usize> SliceVec<N> {
    #[inline]
    pub(crate) const fn new() -> Self {
        Self { n: 0, s: [const { MaybeUninit::uninit() }; N] }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.n
    }

    #[inline]
    pub(crate) fn as_slice(&self) -> &[SliceDesc] {
        // SAFETY: entries [0, n) are initialised (every writer keeps this).
        unsafe { core::slice::from_raw_parts(self.s.as_ptr() as *const SliceDesc, self.n) }
    }

    #[inline]
    fn as_mut_slice(&mut self) -> &mut [SliceDesc] {
        // SAFETY: as above.
        unsafe { core::slice::from_raw_parts_mut(self.s.as_mut_ptr() as *mut SliceDesc, self.n) }
    }

    /// Appends one slice as is. Panics if full (callers size their lists).
    #[inline]
    pub(crate) fn push(&mut self, s: SliceDesc) {
        self.s[self.n].write(s);
        self.n += 1;
    }

    /// Appends one slice keeping the list normalised: a zero-length slice is
    /// dropped, a slice continuing the last one is merged into it. A full
    /// list is `TooManySlices` (a normalised list only grows, so the final
    /// result would not fit either).
    #[inline]
    pub(crate) fn push_norm(&mut self, s: &SliceDesc) -> Result<()> {
        if s.len == 0 {
            return Ok(());
        }
        if let Some(last) = self.as_mut_slice().last_mut() {
            if last.is_contiguous_with(s) && last.len as u64 + s.len as u64 <= u32::MAX as u64 {
                last.len += s.len;
                return Ok(());
            }
        }
        if self.n == N {
            return Err(Error::TooManySlices);
        }
        self.push(*s);
        Ok(())
    }

    /// Copies `list` in as is (it must fit).
    #[inline]
    fn set(&mut self, list: &[SliceDesc]) {
        let n = list.len();
        assert!(n <= N);
        // SAFETY: n ≤ N entries, `list` cannot overlap our own storage
        // while we hold `&mut self`.
        unsafe { core::ptr::copy_nonoverlapping(list.as_ptr(), self.s.as_mut_ptr() as *mut SliceDesc, n) };
        self.n = n;
    }
}

/// True if `list` is normalised (no empty slice, no mergeable neighbours).
#[inline]
fn is_normal(list: &[SliceDesc]) -> bool {
    list.iter().all(|s| s.len > 0)
        && list
            .windows(2)
            .all(|w| !(w[0].is_contiguous_with(&w[1]) && w[0].len as u64 + w[1].len as u64 <= u32::MAX as u64))
}

/// Takes one more local hold for each slice of `list`. On failure nothing
/// changes.
fn hold_all(d: &Domain, list: &[SliceDesc]) -> Result<()> {
    for (k, s) in list.iter().enumerate() {
        if let Err(e) = d.hold_local(s) {
            for t in &list[..k] {
                d.release_local(t);
            }
            return Err(e);
        }
    }
    Ok(())
}

/// Replaces the holds of `old` by holds for each of `new` (taken first, so
/// nothing is freed in between). On failure nothing changes.
fn reshuffle(d: &Domain, new: &[SliceDesc], old: &[&[SliceDesc]]) -> Result<()> {
    hold_all(d, new)?;
    for s in old.iter().flat_map(|l| l.iter()) {
        d.release_local(s);
    }
    Ok(())
}

/// Appends to `out` the pieces of `list` that lie in bytes `[from, to)`.
fn clip<const N: usize>(list: &[SliceDesc], from: u64, to: u64, out: &mut SliceVec<N>) -> Result<()> {
    let mut pos = 0u64;
    for s in list {
        let end = pos + s.len as u64;
        if end > from && pos < to {
            let a = from.saturating_sub(pos) as u32;
            let b = (to.min(end) - pos) as u32;
            out.push_norm(&SliceDesc { off: s.off + a, len: b - a, ..*s })?;
        }
        if end >= to {
            break;
        }
        pos = end;
    }
    Ok(())
}

/// Where byte `at` falls: `(k, inner)`, slice `k` starts `inner` bytes
/// before `at` (`inner == 0`: `at` is a slice boundary, `k` may be `n`).
fn locate(list: &[SliceDesc], at: u64) -> (usize, u32) {
    let mut pos = 0u64;
    for (k, s) in list.iter().enumerate() {
        let end = pos + s.len as u64;
        if at < end {
            return (k, (at - pos) as u32);
        }
        pos = end;
    }
    (list.len(), 0)
}

/// Ordered list of slices; see the module docs.
pub struct Aggregate<'d> {
    d: &'d Domain,
    v: SliceVec<MAX_SLICES>,
}

impl core::fmt::Debug for Aggregate<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Aggregate").field("len", &self.len()).field("slices", &self.descs()).finish()
    }
}

impl<'d> Aggregate<'d> {
    /// An empty aggregate.
    #[inline]
    pub fn new(d: &'d Domain) -> Self {
        Self { d, v: SliceVec::new() }
    }

    /// Builds an aggregate from slices that already carry one local hold
    /// each (≤ MAX_SLICES), normalising it.
    #[inline]
    pub(crate) fn from_held(d: &'d Domain, held: &[SliceDesc]) -> Self {
        let mut a = Self::new(d);
        a.set_held(held);
        a
    }

    /// [`Aggregate::from_held`] into this (empty) aggregate, in place.
    #[inline]
    pub(crate) fn set_held(&mut self, held: &[SliceDesc]) {
        debug_assert!(held.len() <= MAX_SLICES && self.v.n == 0);
        if is_normal(held) {
            self.v.set(held);
        } else {
            self.set_held_normalising(held);
        }
    }

    #[cold]
    fn set_held_normalising(&mut self, held: &[SliceDesc]) {
        for s in held {
            self.v.push_norm(s).expect("normalising never adds slices");
        }
        // Merged or dropped slices: take holds for the result, drop the
        // inputs' (cannot overflow: the result has no more slices per buffer).
        reshuffle(self.d, self.v.as_slice(), &[held]).expect("normalising never adds holds");
    }

    /// Forgets the holds (they were moved elsewhere, e.g. lent to a peer):
    /// the aggregate is left empty and its drop releases nothing. By
    /// reference, so the aggregate is not moved (copied) just to be
    /// forgotten.
    #[inline]
    pub(crate) fn forget_holds(&mut self) {
        self.v.n = 0;
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
        self.v.n == 0
    }

    /// Number of slices.
    pub fn slice_count(&self) -> usize {
        self.v.n
    }

    /// The slices as ⟨pool, buffer, generation, offset, length⟩, in order.
    /// ⟨pool, buffer, generation⟩ names the contents system-wide, so this is
    /// the key for content caches such as per-slice checksums (only for
    /// trusted pools, see [`Domain::pool_trust`]).
    #[inline]
    pub fn descs(&self) -> &[SliceDesc] {
        self.v.as_slice()
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
        match self.v.n {
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
    #[inline]
    pub fn duplicate(&self) -> Result<Aggregate<'d>> {
        hold_all(self.d, self.descs())?;
        let mut a = Self::new(self.d);
        a.v.set(self.descs());
        Ok(a)
    }

    /// A new aggregate referencing bytes `[offset, offset+len)` of this one.
    pub fn range(&self, offset: usize, len: usize) -> Result<Aggregate<'d>> {
        let end = offset.checked_add(len).ok_or(Error::InvalidArgument)?;
        if end > self.len() {
            return Err(Error::InvalidArgument);
        }
        let mut a = Self::new(self.d);
        // Pieces of a normalised list are normalised and no more numerous.
        clip(self.descs(), offset as u64, end as u64, &mut a.v)?;
        if let Err(e) = hold_all(self.d, a.v.as_slice()) {
            a.v.n = 0; // no holds were taken
            return Err(e);
        }
        Ok(a)
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

    fn join(&mut self, mut other: Aggregate<'d>, front: bool) -> core::result::Result<(), (Error, Aggregate<'d>)> {
        if !core::ptr::eq(self.d, other.d) {
            return Err((Error::InvalidArgument, other));
        }
        let (a, b) = if front { (other.descs(), self.descs()) } else { (self.descs(), other.descs()) };
        // Both lists are normalised: only the two slices at the junction can
        // merge (their buffer then needs one hold fewer).
        let merge = match (a.last(), b.first()) {
            (Some(x), Some(y)) => x.is_contiguous_with(y) && x.len as u64 + y.len as u64 <= u32::MAX as u64,
            _ => false,
        };
        let n = a.len() + b.len() - merge as usize;
        if n > MAX_SLICES {
            return Err((Error::TooManySlices, other));
        }
        // The two slices that merge are of one buffer: drop one hold on it.
        let released = if merge { Some(b[0]) } else { None };
        if front {
            let mut out = SliceVec::<MAX_SLICES>::new();
            out.set(a);
            for s in b {
                out.push_norm(s).expect("counted");
            }
            self.v.set(out.as_slice());
        } else {
            for s in other.descs() {
                self.v.push_norm(s).expect("counted");
            }
        }
        debug_assert_eq!(self.v.len(), n);
        other.forget_holds();
        if let Some(s) = released {
            self.d.release_local(&s);
        }
        Ok(())
    }

    /// `self` followed by `other`, as one aggregate. On failure both are
    /// handed back unchanged.
    #[allow(clippy::type_complexity)]
    pub fn concat(
        mut self,
        other: Aggregate<'d>,
    ) -> core::result::Result<Aggregate<'d>, (Error, Aggregate<'d>, Aggregate<'d>)> {
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
        let (k, inner) = locate(self.descs(), at as u64);
        let mut tail = Self::new(self.d);
        if inner == 0 {
            // At a slice boundary: the holds move over as they are.
            tail.v.set(&self.descs()[k..]);
            self.v.n = k;
            return Ok(tail);
        }
        // Inside slice k: both halves reference its buffer (one more hold).
        let s = self.descs()[k];
        self.d.hold_local(&s)?;
        tail.v.push(SliceDesc { off: s.off + inner, len: s.len - inner, ..s });
        for t in &self.descs()[k + 1..] {
            tail.v.push(*t);
        }
        self.v.as_mut_slice()[k].len = inner;
        self.v.n = k + 1;
        Ok(tail)
    }

    /// Keeps only the first `len` bytes (no-op if already shorter).
    pub fn truncate(&mut self, len: usize) {
        if len >= self.len() {
            return;
        }
        let (k, inner) = locate(self.descs(), len as u64);
        // Slice k keeps `inner` bytes (and its hold) if the cut is inside it.
        let keep = k + (inner > 0) as usize;
        for s in &self.descs()[keep..] {
            self.d.release_local(s);
        }
        if inner > 0 {
            self.v.as_mut_slice()[k].len = inner;
        }
        self.v.n = keep;
    }

    /// Drops the first `n` bytes (e.g. a consumed protocol header).
    pub fn advance(&mut self, n: usize) -> Result<()> {
        if n > self.len() {
            return Err(Error::InvalidArgument);
        }
        let (k, inner) = locate(self.descs(), n as u64);
        for s in &self.descs()[..k] {
            self.d.release_local(s);
        }
        let len = self.v.n;
        let list = self.v.as_mut_slice();
        if k < len {
            list[k].off += inner;
            list[k].len -= inner;
        }
        list.copy_within(k.., 0);
        self.v.n = len - k;
        Ok(())
    }

    /// Replaces bytes `[offset, offset+len)` by the contents of `new`
    /// (lengths may differ). On failure `self` is unchanged and `new` is
    /// handed back.
    pub fn replace_range(
        &mut self,
        offset: usize,
        len: usize,
        mut new: Aggregate<'d>,
    ) -> core::result::Result<(), (Error, Aggregate<'d>)> {
        let total = self.len();
        let end = match offset.checked_add(len) {
            Some(e) if e <= total && core::ptr::eq(self.d, new.d) => e,
            _ => return Err((Error::InvalidArgument, new)),
        };
        let mut out = SliceVec::<MAX_SLICES>::new();
        let built = clip(self.descs(), 0, offset as u64, &mut out)
            .and_then(|()| new.descs().iter().try_for_each(|s| out.push_norm(s)))
            .and_then(|()| clip(self.descs(), end as u64, total as u64, &mut out));
        if let Err(e) = built {
            return Err((e, new));
        }
        if let Err(e) = reshuffle(self.d, out.as_slice(), &[self.descs(), new.descs()]) {
            return Err((e, new));
        }
        self.v.set(out.as_slice());
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
        fill(&mut b.writable()[..len]);
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
        let dst = b.writable();
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
        if self.v.n <= 1 {
            return Ok(());
        }
        let c = self.copy_to_pool(pool)?;
        *self = c;
        Ok(())
    }
}

impl Drop for Aggregate<'_> {
    fn drop(&mut self) {
        for s in self.v.as_slice() {
            self.d.release_local(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{bytes, make, own};
    use crate::PAGE_SIZE;

    const P: PoolId = 1;

    fn dom(pages: u32) -> Domain {
        let d = Domain::new();
        own(&d, P, pages);
        d
    }

    /// Three one-slice aggregates "abc", "defg", "hi" concatenated.
    fn abc<'d>(d: &'d Domain) -> Aggregate<'d> {
        let mut a = make(d, P, b"abc");
        a.append(make(d, P, b"defg")).unwrap();
        a.append(make(d, P, b"hi")).unwrap();
        a
    }

    #[test]
    fn empty_aggregate_operations() {
        let d = dom(4);
        let mut a = Aggregate::new(&d);
        assert!(a.is_empty());
        assert_eq!(a.len(), 0);
        assert_eq!(a.slice_count(), 0);
        assert_eq!(a.contiguous(), Some(&[][..]));
        let b = a.split_off(0).unwrap();
        assert!(b.is_empty());
        assert_eq!(a.split_off(1).unwrap_err(), Error::InvalidArgument);
        a.truncate(0);
        a.advance(0).unwrap();
        a.append(Aggregate::new(&d)).unwrap();
        a.prepend(Aggregate::new(&d)).unwrap();
        let c = a.duplicate().unwrap();
        assert!(c.is_empty());
        assert_eq!(a.read_at(0, &mut [0u8; 4]), 0);
        assert!(a.range(0, 0).unwrap().is_empty());
        assert!(a.copy_to_pool(P).unwrap().is_empty());
        assert_eq!(d.stats().buffers_in_use, 0);
    }

    #[test]
    fn zero_length_slices_are_dropped() {
        let d = dom(4);
        let mut w = d.alloc(P, 10).unwrap();
        let z = w.seal_part(0).unwrap();
        assert!(z.is_empty());
        w.writable()[..3].copy_from_slice(b"xyz");
        let a = w.seal(3).unwrap();
        assert_eq!(a.slice_count(), 1);
        // A zero-length piece produced by split or range never appears.
        let mut b = a.duplicate().unwrap();
        let tail = b.split_off(3).unwrap();
        assert!(tail.is_empty());
        assert_eq!(tail.slice_count(), 0);
        assert_eq!(b.slice_count(), 1);
        drop((a, b, tail));
        assert_eq!(d.stats().buffers_in_use, 0);
    }

    #[test]
    fn append_prepend_concat_and_merge() {
        let d = dom(8);
        let a = abc(&d);
        assert_eq!(bytes(&a), b"abcdefghi");
        assert_eq!(a.slice_count(), 3);
        let mut p = make(&d, P, b"<");
        p.append(a).unwrap();
        let mut q = make(&d, P, b">");
        q.prepend(p).unwrap();
        assert_eq!(bytes(&q), b"<abcdefghi>");
        let r = make(&d, P, b"!").concat(q).unwrap();
        assert_eq!(bytes(&r), b"!<abcdefghi>");
        // Pieces sealed one after the other from one buffer merge back.
        let mut w = d.alloc(P, 8).unwrap();
        w.writable()[..8].copy_from_slice(b"01234567");
        let mut x = w.seal_part(4).unwrap();
        let y = w.seal(4).unwrap();
        x.append(y).unwrap();
        assert_eq!(x.slice_count(), 1);
        assert_eq!(x.contiguous(), Some(&b"01234567"[..]));
        drop((r, x));
        assert_eq!(d.stats().buffers_in_use, 0);
    }

    #[test]
    fn split_at_boundaries_and_inside() {
        let d = dom(8);
        for at in 0..=9 {
            let mut a = abc(&d);
            let b = a.split_off(at).unwrap();
            assert_eq!(bytes(&a), &b"abcdefghi"[..at]);
            assert_eq!(bytes(&b), &b"abcdefghi"[at..]);
            // Slice boundaries (3, 7) do not create extra slices.
            let pieces = a.slice_count() + b.slice_count();
            let inside = !(at == 0 || at == 3 || at == 7 || at == 9);
            assert_eq!(pieces, if inside { 4 } else { 3 }, "at {at}");
        }
        assert_eq!(d.stats().buffers_in_use, 0);
        let mut a = abc(&d);
        assert_eq!(a.split_off(10).unwrap_err(), Error::InvalidArgument);
        assert_eq!(bytes(&a), b"abcdefghi");
    }

    #[test]
    fn truncate_and_advance() {
        let d = dom(8);
        for n in (0..=10).rev() {
            let mut a = abc(&d);
            a.truncate(n);
            assert_eq!(bytes(&a), &b"abcdefghi"[..n.min(9)]);
        }
        let mut a = abc(&d);
        a.truncate(0);
        assert!(a.is_empty());
        assert_eq!(d.stats().buffers_in_use, 0, "truncate to 0 releases every buffer");
        let mut a = abc(&d);
        a.advance(5).unwrap();
        assert_eq!(bytes(&a), b"fghi");
        assert_eq!(a.advance(5).unwrap_err(), Error::InvalidArgument);
        assert_eq!(bytes(&a), b"fghi");
        drop(a);
        assert_eq!(d.stats().buffers_in_use, 0);
    }

    #[test]
    fn range_and_read_at() {
        let d = dom(8);
        let a = abc(&d);
        let r = a.range(2, 4).unwrap();
        assert_eq!(bytes(&r), b"cdef");
        assert_eq!(a.range(8, 2).unwrap_err(), Error::InvalidArgument);
        let mut buf = [0u8; 5];
        assert_eq!(a.read_at(6, &mut buf), 3);
        assert_eq!(&buf[..3], b"ghi");
        assert_eq!(a.read_at(100, &mut buf), 0);
        assert_eq!(d.stats().bytes_copied, 3);
        assert!(a.eq_bytes(b"abcdefghi"));
        assert!(!a.eq_bytes(b"abcdefghX"));
    }

    #[test]
    fn mutate_in_the_middle_keeps_old_holders_intact() {
        let d = dom(8);
        let a = abc(&d);
        let snapshot = a.duplicate().unwrap();
        let mut m = a;
        m.mutate(2, b"XYZ", P).unwrap(); // spans slices 1 and 2
        assert_eq!(bytes(&m), b"abXYZfghi");
        assert_eq!(bytes(&snapshot), b"abcdefghi");
        m.mutate_with(8, 1, P, |b| b[0] = b'!').unwrap();
        assert_eq!(bytes(&m), b"abXYZfgh!");
        m.mutate(0, b"", P).unwrap();
        assert_eq!(m.mutate(8, b"ab", P).unwrap_err(), Error::InvalidArgument);
        assert_eq!(bytes(&m), b"abXYZfgh!");
        assert_eq!(d.stats().bytes_copied, 3, "only the new bytes were written");
        drop((m, snapshot));
        assert_eq!(d.stats().buffers_in_use, 0);
    }

    #[test]
    fn replace_range_changes_length() {
        let d = dom(8);
        let mut a = abc(&d);
        a.replace_range(3, 4, make(&d, P, b"-")).unwrap();
        assert_eq!(bytes(&a), b"abc-hi");
        a.replace_range(0, 0, make(&d, P, b"[")).unwrap();
        a.replace_range(a.len(), 0, make(&d, P, b"]")).unwrap();
        assert_eq!(bytes(&a), b"[abc-hi]");
        let (e, back) = a.replace_range(5, 10, make(&d, P, b"?")).unwrap_err();
        assert_eq!(e, Error::InvalidArgument);
        assert_eq!(bytes(&back), b"?");
    }

    #[test]
    fn too_many_slices_changes_nothing() {
        let d = dom(64);
        let mut a = Aggregate::new(&d);
        for i in 0..MAX_SLICES {
            a.append(make(&d, P, &[i as u8, i as u8])).unwrap();
        }
        let full = bytes(&a);
        let (e, back) = a.append(make(&d, P, b"x")).unwrap_err();
        assert_eq!(e, Error::TooManySlices);
        assert_eq!(bytes(&back), b"x");
        let (e, _) = a.prepend(back).unwrap_err();
        assert_eq!(e, Error::TooManySlices);
        // Mutating inside a slice needs two more slices.
        assert_eq!(a.mutate(1, b"q", P).unwrap_err(), Error::TooManySlices);
        assert_eq!(bytes(&a), full);
        // Replacing whole slices does not.
        a.mutate(2, b"qq", P).unwrap();
        assert_eq!(a.slice_count(), MAX_SLICES);
        // flatten defragments (paper §2.8 case 3) and counts the copy.
        let before = d.stats().bytes_copied;
        a.flatten(P).unwrap();
        assert_eq!(a.slice_count(), 1);
        assert_eq!(d.stats().bytes_copied - before, 2 * MAX_SLICES as u64);
        a.mutate(1, b"q", P).unwrap();
        assert_eq!(a.slice_count(), 3);
        drop(a);
        assert_eq!(d.stats().buffers_in_use, 0);
    }

    #[test]
    fn holds_change_only_where_slices_do() {
        let d = dom(8);
        let mut w = d.alloc(P, 8).unwrap();
        w.writable()[..8].copy_from_slice(b"01234567");
        let mut a = w.seal(8).unwrap();
        let buf = a.descs()[0].buf;
        let local = |d: &Domain| d.holds(P, buf).unwrap().local;
        assert_eq!(local(&d), 1);
        // A split inside the slice: both halves hold the buffer.
        let b = a.split_off(3).unwrap();
        assert_eq!((a.slice_count(), b.slice_count(), local(&d)), (1, 1, 2));
        // Appending the halves back merges them: one hold again.
        a.append(b).unwrap();
        assert_eq!((a.slice_count(), local(&d)), (1, 1));
        assert_eq!(bytes(&a), b"01234567");
        // Prepending a continuation merges too.
        let mut t = a.split_off(5).unwrap();
        t.prepend(a).unwrap();
        assert_eq!((t.slice_count(), local(&d)), (1, 1));
        // Truncate and advance inside the slice keep its one hold.
        t.truncate(6);
        t.advance(2).unwrap();
        assert_eq!((bytes(&t), local(&d)), (b"2345".to_vec(), 1));
        t.advance(4).unwrap();
        assert!(t.is_empty());
        assert_eq!(d.stats().buffers_in_use, 0);
    }

    #[test]
    fn large_multi_page_buffer() {
        let d = dom(8);
        let data: Vec<u8> = (0..3 * PAGE_SIZE + 5).map(|i| (i % 251) as u8).collect();
        let a = make(&d, P, &data);
        assert_eq!(d.pool_stats(P).unwrap().pages_in_use, 4);
        assert_eq!(a.slice_count(), 1);
        assert_eq!(a.contiguous().unwrap(), &data[..]);
        drop(a);
        assert_eq!(d.pool_stats(P).unwrap().pages_in_use, 0);
        assert_eq!(d.pool_stats(P).unwrap().high_water_pages, 4);
    }

    mod prop {
        use super::*;
        use proptest::prelude::*;

        #[derive(Debug, Clone)]
        enum Op {
            Append(Vec<u8>),
            Prepend(Vec<u8>),
            Split(usize, bool),
            Truncate(usize),
            Advance(usize),
            Mutate(usize, Vec<u8>),
            Replace(usize, usize, Vec<u8>),
            Dup,
            Flatten,
            Range(usize, usize),
        }

        fn op() -> impl Strategy<Value = Op> {
            let data = proptest::collection::vec(any::<u8>(), 0..40);
            prop_oneof![
                data.clone().prop_map(Op::Append),
                data.clone().prop_map(Op::Prepend),
                (0usize..200, any::<bool>()).prop_map(|(a, b)| Op::Split(a, b)),
                (0usize..200).prop_map(Op::Truncate),
                (0usize..200).prop_map(Op::Advance),
                (0usize..200, data.clone()).prop_map(|(a, b)| Op::Mutate(a, b)),
                (0usize..200, 0usize..30, data).prop_map(|(a, b, c)| Op::Replace(a, b, c)),
                Just(Op::Dup),
                Just(Op::Flatten),
                (0usize..200, 0usize..60).prop_map(|(a, b)| Op::Range(a, b)),
            ]
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
            /// Every aggregate operation agrees with the same operation on a
            /// plain Vec<u8>, failures change nothing, and when everything is
            /// dropped every buffer is back in the pool.
            #[test]
            fn aggregate_matches_vec_model(ops in proptest::collection::vec(op(), 1..40)) {
                let d = dom(256);
                let mut a = Aggregate::new(&d);
                let mut m: Vec<u8> = Vec::new();
                let mut keep = Vec::new(); // other holders (snapshots)
                let mut models = Vec::new();
                for op in ops {
                    match op {
                        Op::Append(v) => match a.append(make(&d, P, &v)) {
                            Ok(()) => m.extend_from_slice(&v),
                            Err((e, back)) => { prop_assert_eq!(e, Error::TooManySlices); prop_assert!(back.eq_bytes(&v)); }
                        },
                        Op::Prepend(v) => match a.prepend(make(&d, P, &v)) {
                            Ok(()) => { let mut n = v.clone(); n.extend_from_slice(&m); m = n; }
                            Err((e, _)) => prop_assert_eq!(e, Error::TooManySlices),
                        },
                        Op::Split(at, keep_tail) => {
                            if at > m.len() { prop_assert!(a.split_off(at).is_err()); }
                            else {
                                let t = a.split_off(at).unwrap();
                                let tm = m.split_off(at);
                                prop_assert!(t.eq_bytes(&tm));
                                if keep_tail { keep.push(t); models.push(tm); }
                            }
                        }
                        Op::Truncate(n) => { a.truncate(n); m.truncate(n); }
                        Op::Advance(n) => {
                            if n > m.len() { prop_assert!(a.advance(n).is_err()); }
                            else { a.advance(n).unwrap(); m.drain(..n); }
                        }
                        Op::Mutate(off, v) => {
                            let r = a.mutate(off, &v, P);
                            if off + v.len() > m.len() { prop_assert!(r.is_err()); }
                            else if r.is_ok() { m[off..off + v.len()].copy_from_slice(&v); }
                            else { prop_assert_eq!(r.unwrap_err(), Error::TooManySlices); }
                        }
                        Op::Replace(off, len, v) => {
                            let r = a.replace_range(off, len, make(&d, P, &v));
                            if off + len > m.len() { prop_assert!(r.is_err()); }
                            else if r.is_ok() { m.splice(off..off + len, v.iter().copied()); }
                            else { prop_assert_eq!(r.unwrap_err().0, Error::TooManySlices); }
                        }
                        Op::Dup => { keep.push(a.duplicate().unwrap()); models.push(m.clone()); }
                        Op::Flatten => { a.flatten(P).unwrap(); prop_assert!(a.slice_count() <= 1); }
                        Op::Range(off, len) => {
                            let r = a.range(off, len);
                            if off + len > m.len() { prop_assert!(r.is_err()); }
                            else { prop_assert!(r.unwrap().eq_bytes(&m[off..off + len])); }
                        }
                    }
                    prop_assert_eq!(a.len(), m.len());
                    prop_assert_eq!(bytes(&a), m.clone());
                    prop_assert!(a.descs().iter().all(|s| s.len > 0));
                    prop_assert!(a.descs().windows(2).all(|w| !w[0].is_contiguous_with(&w[1])));
                    // Snapshots never change.
                    for (k, km) in keep.iter().zip(&models) { prop_assert!(k.eq_bytes(km)); }
                }
                drop(a);
                drop(keep);
                prop_assert_eq!(d.stats().buffers_in_use, 0);
            }
        }
    }
}
