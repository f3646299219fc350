//! A domain's peers: their quotas and grant lists, and the death
//! protocol (README "Death": a dead peer's grants are forgotten, what we
//! lent it is quarantined until its death is settled).

use super::{Domain, PeerId, PeerState};
use crate::desc::PoolId;
use crate::pool::NO_PEER;
use crate::{Error, Result, MAX_POOLS};

use super::settle;

impl Domain {
    /// Quota of peer `p`: the maximum number of distinct buffers it may hold
    /// from this domain at once (default: unlimited). Sends that would
    /// exceed it fail with [`Error::QuotaExceeded`] (back-pressure).
    pub fn set_quota(&self, p: PeerId, max_buffers: u32) -> Result<()> {
        let i = p.idx()?;
        self.peers.borrow_mut()[i].quota = max_buffers;
        Ok(())
    }

    /// Number of distinct buffers peer `p` currently holds from us.
    pub fn peer_held_buffers(&self, p: PeerId) -> Result<u32> {
        Ok(self.peers.borrow()[p.idx()?].held_bufs)
    }

    /// Number of sends to `p` refused by its quota.
    pub fn peer_refusals(&self, p: PeerId) -> Result<u64> {
        Ok(self.peers.borrow()[p.idx()?].refusals)
    }

    /// State of peer `p`.
    pub fn peer_state(&self, p: PeerId) -> Result<PeerState> {
        Ok(self.peers.borrow()[p.idx()?].state)
    }

    /// The grant list of peer `p`: the pools whose slices `p` may reference
    /// in what it sends us. A slice of any other pool is rejected
    /// ([`Error::ForeignPool`], counted in [`Stats::rejected_foreign_pool`]),
    /// even one of a pool mapped here. Every pool must be registered first
    /// (`UnknownPool` otherwise). By default a peer may reference every
    /// pool this domain knows; the system composition narrows each channel
    /// end to the pools its sender maps (README "Grant lists").
    ///
    /// Independently of the list, a slice of a pool this domain *owns* is
    /// accepted from `p` only while `p` holds a grant of that buffer from
    /// us ([`Error::NotGranted`]).
    pub fn set_peer_pools(&self, p: PeerId, pools: &[PoolId]) -> Result<()> {
        let i = p.idx()?;
        let mut mask = 0u32;
        {
            let table = self.pools.borrow();
            for id in pools {
                let e = table.iter().flatten().find(|e| e.id == *id).ok_or(Error::UnknownPool)?;
                mask |= 1 << e.slot;
            }
        }
        self.peers.borrow_mut()[i].pools = mask;
        Ok(())
    }

    /// [`Domain::set_peer_pools`] from a grant list as the assembly writes
    /// it, the names of our dataports (`<channel>_refs`), with `pools`
    /// naming each dataport's pool id (on the target the glue's
    /// `glue::pools::ALL`, the compiler's ids; id 0: no such pool). A name
    /// not in `pools`, or an absent pool, is `UnknownPool`: the compiler
    /// checked the list against the sender's mappings, so it means this
    /// component's table is out of date.
    pub fn set_peer_pools_named(&self, p: PeerId, names: &[&str], pools: &[(&str, PoolId)]) -> Result<()> {
        let mut ids = [0 as PoolId; MAX_POOLS];
        if names.len() > MAX_POOLS {
            return Err(Error::InvalidArgument);
        }
        for (slot, name) in ids.iter_mut().zip(names) {
            *slot = match pools.iter().find(|(n, _)| n == name) {
                Some(&(_, id)) if id != 0 => id,
                _ => return Err(Error::UnknownPool),
            };
        }
        self.set_peer_pools(p, &ids[..names.len()])
    }

    /// Descriptors from peer `p` that validation rejected.
    pub fn peer_rejections(&self, p: PeerId) -> Result<u64> {
        Ok(self.peers.borrow()[p.idx()?].rejected)
    }

    /// Peer `p` died. Holds it granted to us are forgotten (there is nobody
    /// to return them to); buffers we still use after that are *tainted* by
    /// `p` (we may have forwarded them: see [`Domain::tainted`]). Holds we
    /// granted to it are *quarantined*: kept, so their buffers are not
    /// reused while components downstream of `p` may still read them, until
    /// [`Domain::peer_settled`]. Sends to and descriptors from `p` are
    /// refused until [`Domain::peer_restarted`] (or `peer_settled`).
    /// Returns the number of buffers in quarantine for `p`.
    pub fn peer_failed(&self, p: PeerId) -> Result<u32> {
        let i = p.idx()?;
        let mut peers = self.peers.borrow_mut();
        peers[i].state = PeerState::Dying;
        peers[i].held_bufs = 0;
        let mut pools = self.pools.borrow_mut();
        let mut dirty = self.dirty.borrow_mut();
        let mut quarantined = 0;
        for e in pools.iter_mut().flatten() {
            for buf in 0..e.layout.pages {
                let m = &mut e.meta[buf as usize];
                if m.lent[i] > 0 {
                    m.quar[i] = m.quar[i].saturating_add(m.lent[i]);
                    m.lent[i] = 0;
                }
                if m.quar[i] > 0 {
                    quarantined += 1;
                }
                if m.recv[i] > 0 || m.ret[i] > 0 {
                    let granted = m.recv[i] > 0;
                    m.recv[i] = 0;
                    m.ret[i] = 0;
                    if m.primary == i as u8 {
                        m.primary = NO_PEER;
                    }
                    if granted && !e.owned && m.local + m.lent_total() > 0 && m.taint & 1 << i == 0 {
                        m.taint |= 1 << i;
                        dirty.tainted[i] += 1;
                    }
                    settle(e, &mut dirty, buf);
                }
            }
        }
        Ok(quarantined)
    }

    /// The dead peer `p` is back (a new incarnation attached): its slot is
    /// active again, with no holds. What the old incarnation was lent stays
    /// quarantined until [`Domain::peer_settled`].
    pub fn peer_restarted(&self, p: PeerId) -> Result<()> {
        let i = p.idx()?;
        let mut peers = self.peers.borrow_mut();
        peers[i].state = PeerState::Active;
        peers[i].held_bufs = 0;
        Ok(())
    }

    /// Buffers granted to us by peer `p` before it died that we still use
    /// (locally or lent on). While this is not 0, components downstream of
    /// us may still read data that came through `p`; once it is 0 we can
    /// tell the supervisor that we have settled `p`'s death.
    pub fn tainted(&self, p: PeerId) -> Result<u32> {
        Ok(self.dirty.borrow().tainted[p.idx()?])
    }

    /// Ends the quarantine of peer `p`: every hold lent to its dead
    /// incarnation(s) is dropped (buffers nobody else holds return to their
    /// pool). A slot still dying becomes active again, with no holds. Call
    /// it when the system knows nobody still uses data obtained through the
    /// dead peer (directly after [`Domain::peer_failed`] if `p` forwarded
    /// nothing). Returns the number of buffers whose holds were dropped.
    pub fn peer_settled(&self, p: PeerId) -> Result<u32> {
        let i = p.idx()?;
        let mut peers = self.peers.borrow_mut();
        let mut pools = self.pools.borrow_mut();
        let mut dirty = self.dirty.borrow_mut();
        let mut dropped = 0;
        for e in pools.iter_mut().flatten() {
            for buf in 0..e.layout.pages {
                let m = &mut e.meta[buf as usize];
                if m.quar[i] > 0 {
                    m.quar[i] = 0;
                    dropped += 1;
                    settle(e, &mut dirty, buf);
                }
            }
        }
        if peers[i].state == PeerState::Dying {
            peers[i].held_bufs = 0;
            peers[i].state = PeerState::Active;
        }
        Ok(dropped)
    }

    /// [`Domain::peer_failed`] followed by [`Domain::peer_settled`]: a
    /// dead peer's references are released at once. Returns the number of
    /// buffers whose holds were dropped.
    pub fn peer_died(&self, p: PeerId) -> Result<u32> {
        self.peer_failed(p)?;
        self.peer_settled(p)
    }
}
