//! Passing aggregates between domains: lending holds with a descriptor,
//! validating and accepting a received one, and the releases that return
//! holds hop by hop (README "Reference counting across components").

use super::{bump, settle, Domain, PeerId, PeerState};
use crate::aggregate::Aggregate;
use crate::desc::{AggDesc, RelDesc, SliceDesc};
use crate::pool::BufState;
use crate::{Error, Result, MAX_PEERS, MAX_SLICES};

impl Domain {
    /// Turns an aggregate into a wire descriptor granting its holds to peer
    /// `p` (the holds move from this domain's aggregates to `lent[p]`).
    /// On error (peer down, quota reached) the aggregate is handed back
    /// unchanged.
    pub fn lend<'d>(
        &'d self,
        mut agg: Aggregate<'d>,
        p: PeerId,
        tag: u64,
        flags: u32,
    ) -> core::result::Result<AggDesc, (Error, Aggregate<'d>)> {
        if let Err(e) = self.lend_holds(&agg, p, true) {
            return Err((e, agg));
        }
        let slices = agg.descs();
        let mut d = AggDesc { nslices: slices.len() as u32, flags, tag, ..AggDesc::default() };
        d.slices[..slices.len()].copy_from_slice(slices);
        agg.forget_holds();
        Ok(d)
    }

    /// The bookkeeping half of [`Domain::lend`]: checks that `agg` may be
    /// granted to `p` and gives `p` one hold per slice. With `move_local`
    /// the holds move from `local` to `lent[p]`, and on success the caller
    /// must put the slices on the wire and forget the aggregate's holds
    /// ([`Aggregate::forget_holds`]). Without, new holds are granted and
    /// the aggregate keeps its own (a send by reference). On error nothing
    /// changed.
    pub(crate) fn lend_holds(&self, agg: &Aggregate<'_>, p: PeerId, move_local: bool) -> Result<()> {
        let i = p.idx()?;
        let mut peers = self.peers.borrow_mut();
        let peer = &mut peers[i];
        if peer.state != PeerState::Active {
            return Err(Error::PeerDown);
        }
        let slices = agg.descs();
        // Check everything first, so that failure changes nothing.
        let mut new_bufs = 0u32;
        {
            let pools = self.pools.borrow();
            for (k, s) in slices.iter().enumerate() {
                let e = pools.iter().flatten().find(|e| e.id == s.pool).ok_or(Error::UnknownPool)?;
                if e.acl & (1 << i) == 0 {
                    return Err(Error::NotInAcl);
                }
                let m = &e.meta[s.buf as usize];
                let dup_before = slices[..k].iter().filter(|o| o.pool == s.pool && o.buf == s.buf).count();
                if m.lent[i] == 0 && dup_before == 0 {
                    new_bufs += 1;
                }
                if m.lent[i] as usize + dup_before + 1 > u16::MAX as usize {
                    return Err(Error::RefOverflow);
                }
            }
        }
        if peer.held_bufs.saturating_add(new_bufs) > peer.quota {
            peer.refusals += 1;
            bump(&self.c.quota_refusals, 1);
            return Err(Error::QuotaExceeded);
        }
        let mut pools = self.pools.borrow_mut();
        let mut total = 0u64;
        for s in slices {
            let e = pools.iter_mut().flatten().find(|e| e.id == s.pool).expect("checked");
            let m = &mut e.meta[s.buf as usize];
            if m.lent[i] == 0 {
                peer.held_bufs += 1;
            }
            m.lent[i] += 1;
            if move_local {
                m.local -= 1;
            }
            total += s.len as u64;
        }
        bump(&self.c.by_ref_sent, total);
        Ok(())
    }

    /// Validates a descriptor received from peer `p` and turns it into an
    /// aggregate holding the granted references (its bytes count as
    /// received by reference).
    ///
    /// Every slice is checked: pool known here, buffer index in range and the
    /// head of a live buffer, generation current, offset+length inside the
    /// buffer's sealed bytes and inside the pool. On any failure nothing is
    /// taken and the error is returned; the caller must return the holds to
    /// the sender (channels do this; [`Domain::rejected_releases`]).
    pub fn accept(&self, desc: &AggDesc, p: PeerId) -> Result<Aggregate<'_>> {
        self.accept_holds(desc.nslices, desc.slices(), p)?;
        // Normalising drops zero-length slices and merges contiguous ones;
        // the holds this frees are queued for return to `p` at once.
        let a = Aggregate::from_held(self, desc.slices());
        self.count_by_ref_received(a.len());
        Ok(a)
    }

    /// The bookkeeping half of [`Domain::accept`], for a descriptor given as
    /// its `nslices` field (as sent, unvalidated) and the slices read (at
    /// most [`MAX_SLICES`]), which the caller copied out of shared memory:
    /// validates them and takes the granted holds. On success the caller
    /// must wrap exactly these slices in an aggregate
    /// ([`Aggregate::from_held`]). The bytes are not counted as received by
    /// reference (a copying receiver counts them as copied).
    pub(crate) fn accept_holds(&self, nslices: u32, slices: &[SliceDesc], p: PeerId) -> Result<()> {
        let r = self.accept_inner(nslices, slices, p);
        if let Err(e) = r {
            bump(&self.c.rejected, 1);
            match e {
                Error::ForeignPool | Error::UnknownPool => bump(&self.c.rejected_foreign_pool, 1),
                Error::NotGranted => bump(&self.c.rejected_not_granted, 1),
                _ => {}
            }
            if let Ok(i) = p.idx() {
                self.peers.borrow_mut()[i].rejected += 1;
            }
        }
        r
    }

    pub(crate) fn count_by_ref_received(&self, n: usize) {
        bump(&self.c.by_ref_recv, n as u64);
    }

    fn accept_inner(&self, nslices: u32, slices: &[SliceDesc], p: PeerId) -> Result<()> {
        let i = p.idx()?;
        let granted_pools = {
            let peer = self.peers.borrow()[i];
            if peer.state != PeerState::Active {
                return Err(Error::PeerDown);
            }
            peer.pools
        };
        if nslices as usize > MAX_SLICES || slices.len() != nslices as usize {
            return Err(Error::TooManySlices);
        }
        {
            let pools = self.pools.borrow();
            for (k, s) in slices.iter().enumerate() {
                let e = pools.iter().flatten().find(|e| e.id == s.pool).ok_or(Error::UnknownPool)?;
                if granted_pools & (1 << e.slot) == 0 {
                    return Err(Error::ForeignPool);
                }
                e.validate(s)?;
                let m = &e.meta[s.buf as usize];
                // Our own buffer comes back only from a peer we lent it to
                // (and that has not returned it all): `validate` matched the
                // current generation, and our counts are of that generation.
                // A peer could otherwise name any live buffer of our pool,
                // e.g. make a network stack send its own receive buffers.
                if e.owned && m.lent[i] == 0 {
                    return Err(Error::NotGranted);
                }
                if !e.owned
                    && m.state == BufState::Held
                    && m.gen != s.gen
                    && (m.local > 0 || m.lent_total() > 0 || m.recv_total() > 0 || m.ret_total() > 0)
                {
                    // We still hold an older generation of this buffer: the
                    // owner recycled it early (or the sender lies).
                    return Err(Error::GenerationMismatch);
                }
                let dup_before = slices[..k].iter().filter(|o| o.pool == s.pool && o.buf == s.buf).count();
                if m.recv[i] as usize + dup_before + 1 > u16::MAX as usize {
                    return Err(Error::RefOverflow);
                }
            }
        }
        {
            let mut pools = self.pools.borrow_mut();
            let mut dirty = self.dirty.borrow_mut();
            for s in slices {
                let e = pools.iter_mut().flatten().find(|e| e.id == s.pool).expect("validated");
                let owned = e.owned;
                let m = &mut e.meta[s.buf as usize];
                if !owned {
                    m.gen = s.gen;
                    m.state = BufState::Held;
                    if m.recv_total() == 0 {
                        m.primary = i as u8;
                    }
                }
                m.recv[i] += 1;
                m.local += 1;
                // An owner returns holds on its own buffers at once.
                settle(e, &mut dirty, s.buf);
            }
        }
        Ok(())
    }

    /// The owner's half of passing a reference on through an untrusted
    /// peer. Peer `to` received a reference to our buffer `buf` (pool
    /// `pool`, generation `gen`) from some other peer, not from us. Its
    /// hold is on that peer's word only: a peer that never received the
    /// buffer could have made the reference up from the published
    /// generation, and one that did could return its own hold to us while
    /// `to` still transmits from the buffer. So `to` asks us to vouch: if
    /// a peer other than `to` holds the buffer at that generation now (we
    /// lent it and it has not all come back), `to` gets a hold of its own
    /// from us, which keeps the buffer until `to` returns it
    /// ([`Domain::take_vouched`] records it on `to`'s side).
    ///
    /// Errors, nothing changed: [`Error::NotGranted`] if no other peer
    /// holds the buffer at `gen` (a made-up or stale reference);
    /// [`Error::QuotaExceeded`] if `to` is at its quota; [`Error::PeerDown`],
    /// [`Error::NotInAcl`], [`Error::UnknownPool`] as for [`Domain::lend`].
    pub fn vouch(&self, pool: crate::desc::PoolId, buf: u32, gen: u32, to: PeerId) -> Result<()> {
        let i = to.idx()?;
        let mut peers = self.peers.borrow_mut();
        if peers[i].state != PeerState::Active {
            return Err(Error::PeerDown);
        }
        let mut pools = self.pools.borrow_mut();
        let e = pools.iter_mut().flatten().find(|e| e.id == pool).ok_or(Error::UnknownPool)?;
        if !e.owned {
            return Err(Error::UnknownPool);
        }
        if e.acl & (1 << i) == 0 {
            return Err(Error::NotInAcl);
        }
        if buf >= e.layout.pages {
            return Err(Error::BadBuffer);
        }
        let m = &mut e.meta[buf as usize];
        let held_elsewhere = (0..MAX_PEERS).any(|p| p != i && m.lent[p] > 0 && peers[p].state == PeerState::Active);
        if m.state != BufState::Sealed || m.gen != gen || !held_elsewhere {
            bump(&self.c.rejected_not_granted, 1);
            return Err(Error::NotGranted);
        }
        if m.lent[i] == u16::MAX {
            return Err(Error::RefOverflow);
        }
        let peer = &mut peers[i];
        if m.lent[i] == 0 {
            if peer.held_bufs >= peer.quota {
                peer.refusals += 1;
                bump(&self.c.quota_refusals, 1);
                return Err(Error::QuotaExceeded);
            }
            peer.held_bufs += 1;
        }
        m.lent[i] += 1;
        Ok(())
    }

    /// The receiver's half of [`Domain::vouch`]: the owner, peer `owner`,
    /// granted us a hold of our own on its buffer `buf` (pool `pool`,
    /// generation `gen`), which we hold now through another peer. The
    /// owner's hold becomes the one returned last, so the other peer's
    /// goes back as soon as nothing needs two. Call it while an aggregate
    /// here still holds a slice of the buffer.
    ///
    /// If nothing here uses the buffer any more, the owner's hold is taken
    /// and queued for return at once, and [`Error::GenerationMismatch`]
    /// says so. If another generation of it is in use here (the caller did
    /// not hold the slice while it asked), nothing is recorded and the
    /// owner keeps counting the hold until our next reset.
    pub fn take_vouched(&self, pool: crate::desc::PoolId, buf: u32, gen: u32, owner: PeerId) -> Result<()> {
        let i = owner.idx()?;
        self.with_pool(pool, |e, d| {
            if e.owned || buf >= e.layout.pages {
                return Err(Error::UnknownPool);
            }
            let m = &mut e.meta[buf as usize];
            let in_use = m.local > 0 || m.lent_total() > 0;
            if m.recv[i] == u16::MAX {
                return Err(Error::RefOverflow);
            }
            let r = if m.state == BufState::Held && m.gen == gen && in_use {
                m.primary = i as u8;
                Ok(())
            } else if in_use || m.recv_total() > 0 || m.ret_total() > 0 {
                // Another generation is in use here (a caller that did not
                // hold the slice while it asked): there is no way to keep
                // or return a hold of a generation we no longer track.
                return Err(Error::GenerationMismatch);
            } else {
                // Nothing here: take it and let it go (returned below).
                m.gen = gen;
                m.state = BufState::Held;
                Err(Error::GenerationMismatch)
            };
            let m = &mut e.meta[buf as usize];
            m.recv[i] += 1;
            settle(e, d, buf);
            r
        })?
    }

    /// The releases that give back every hold of a descriptor this domain
    /// rejected (one [`RelDesc`] per slice, verbatim). The sender validates
    /// them against its own records.
    pub fn rejected_releases(desc: &AggDesc) -> impl Iterator<Item = RelDesc> + '_ {
        desc.slices().iter().map(|s| RelDesc { pool: s.pool, buf: s.buf, gen: s.gen, count: 1 })
    }

    /// Applies a release received from peer `p`: `rel.count` holds that we
    /// granted to `p` come back. Releases that do not match a grant (wrong
    /// pool, buffer, generation, or more than was lent) are rejected and
    /// counted in [`Stats::bad_releases`]; they change nothing. Releases from
    /// a [`PeerState::Dying`] peer are ignored.
    pub fn apply_release(&self, rel: &RelDesc, p: PeerId) -> Result<()> {
        let i = p.idx()?;
        let mut peers = self.peers.borrow_mut();
        if peers[i].state != PeerState::Active {
            return Ok(());
        }
        let r = self.with_pool(rel.pool, |e, d| {
            if rel.buf >= e.layout.pages || rel.count == 0 {
                return Err(Error::BadBuffer);
            }
            let m = &mut e.meta[rel.buf as usize];
            if matches!(m.state, BufState::Free | BufState::Tail) || m.gen != rel.gen {
                return Err(Error::GenerationMismatch);
            }
            if (m.lent[i] as u32) < rel.count {
                return Err(Error::InvalidArgument);
            }
            m.lent[i] -= rel.count as u16;
            let emptied = m.lent[i] == 0;
            settle(e, d, rel.buf);
            Ok(emptied)
        });
        match r.and_then(|x| x) {
            Ok(emptied) => {
                if emptied {
                    peers[i].held_bufs -= 1;
                }
                bump(&self.c.releases_received, 1);
                Ok(())
            }
            Err(e) => {
                bump(&self.c.bad_releases, 1);
                Err(e)
            }
        }
    }

    /// Emits the releases owed to peer `p` (holds it granted us that we no
    /// longer need) through `emit`, which returns `false` when it cannot take
    /// more (ring full); the rest stays queued. Returns how many were emitted.
    pub fn drain_returns(&self, p: PeerId, mut emit: impl FnMut(RelDesc) -> bool) -> Result<usize> {
        let i = p.idx()?;
        let mut pools = self.pools.borrow_mut();
        let mut dirty = self.dirty.borrow_mut();
        let mut sent = 0usize;
        let mut blocked = false;
        // One pass: emit what is owed to `p`, and drop entries with nothing
        // owed to anyone any more (the last entry moves into their place).
        let mut k = 0;
        while k < dirty.len {
            let (slot, buf) = dirty.list[k];
            let Some(e) = pools[slot as usize].as_mut() else {
                dirty.len -= 1;
                dirty.list[k] = dirty.list[dirty.len];
                continue;
            };
            let m = &mut e.meta[buf as usize];
            if m.ret[i] > 0 && !blocked {
                let rel = RelDesc { pool: e.id, buf, gen: m.gen, count: m.ret[i] };
                if emit(rel) {
                    m.ret[i] = 0;
                    sent += 1;
                } else {
                    blocked = true;
                }
            }
            if m.ret == [0; MAX_PEERS] {
                m.dirty = false;
                dirty.len -= 1;
                dirty.list[k] = dirty.list[dirty.len];
                settle(e, &mut dirty, buf);
            } else {
                k += 1;
            }
        }
        if dirty.overflow && !blocked {
            // Some buffers did not fit in the dirty list: scan everything.
            let mut left = false;
            'scan: for e in pools.iter_mut().flatten() {
                for buf in 0..e.layout.pages {
                    let m = &mut e.meta[buf as usize];
                    if m.dirty || m.ret_total() == 0 {
                        continue;
                    }
                    if m.ret[i] > 0 {
                        let rel = RelDesc { pool: e.id, buf, gen: m.gen, count: m.ret[i] };
                        if !emit(rel) {
                            left = true;
                            break 'scan;
                        }
                        m.ret[i] = 0;
                        sent += 1;
                    }
                    if m.ret_total() > 0 {
                        left = true;
                    } else {
                        settle(e, &mut dirty, buf);
                    }
                }
            }
            dirty.overflow = left;
        }
        bump(&self.c.releases_sent, sent as u64);
        Ok(sent)
    }

    /// True if releases are queued for peer `p`.
    pub fn has_returns(&self, p: PeerId) -> bool {
        let Ok(i) = p.idx() else { return false };
        let pools = self.pools.borrow();
        let dirty = self.dirty.borrow();
        if dirty.overflow {
            return true;
        }
        dirty.list[..dirty.len]
            .iter()
            .any(|&(slot, buf)| pools[slot as usize].as_ref().is_some_and(|e| e.meta[buf as usize].ret[i] > 0))
    }
}
