//! A split virtqueue (virtio 1.0 §2.4) in memory the caller owns.
//!
//! * **Layout:** the descriptor table (16 bytes each), the driver area
//!   (avail ring: flags, idx, ring, `used_event`) right after it, the
//!   device area (used ring: flags, idx, ring of (id, len), `avail_event`)
//!   at the next 4-byte boundary ([`bytes`]).
//! * **Chains:** [`Queue::push`] links free descriptors into a chain and
//!   puts its head in the avail ring, unpublished; [`Queue::publish`]
//!   writes the avail index once for the whole batch and says whether the
//!   device wants a notification (its `avail_event` with
//!   `VIRTIO_F_EVENT_IDX`, else its `NO_NOTIFY` flag).
//! * **The device is a peer:** [`Queue::pop`] reads the used index, the
//!   entry's id and its length once each. An index more than the chains
//!   in flight ahead, or an id that is not the head of a chain in flight,
//!   breaks the queue for good ([`UsedError`]: nothing it says afterwards
//!   is believed); a length beyond what the chain lets the device write is
//!   reported as `None`. Chains are freed from the driver's own record of
//!   their links, never from descriptors in shared memory.
//! * After every pop the driver's `used_event` names the next entry, so
//!   the device interrupts once per batch it completes.

use alloc::vec::Vec;
use core::sync::atomic::{fence, Ordering};

/// Descriptor flag: the chain goes on at `next`.
const DESC_NEXT: u16 = 1;
/// Descriptor flag: the device writes this buffer (else it reads it).
const DESC_WRITE: u16 = 2;
/// Used ring flag: the device asks not to be notified.
const USED_NO_NOTIFY: u16 = 1;

/// Bytes of a queue of `n` descriptors.
pub const fn bytes(n: u16) -> usize {
    used_offset(n) + 6 + 8 * n as usize
}

const fn avail_offset(n: u16) -> usize {
    16 * n as usize
}

const fn used_offset(n: u16) -> usize {
    (avail_offset(n) + 6 + 2 * n as usize).next_multiple_of(4)
}

/// One buffer of a chain.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Buf {
    /// Its physical address.
    pub pa: u64,
    /// Its length.
    pub len: u32,
    /// The device writes it (receive); else it reads it (transmit).
    pub write: bool,
}

/// A chain the device is done with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Used {
    /// The chain's head descriptor, as [`Queue::push`] returned it.
    pub head: u16,
    /// Bytes the device wrote into it; `None` if it claims more than the
    /// chain's writable buffers hold.
    pub len: Option<u32>,
}

/// What a device wrote into the used ring that cannot be true.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsedError {
    /// The used index ran ahead of the chains in flight (index, last seen).
    Index(u16, u16),
    /// An entry names a descriptor that heads no chain in flight.
    Id(u32),
}

impl core::fmt::Display for UsedError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            UsedError::Index(i, last) => write!(f, "used index {i} runs ahead of the chains in flight (last {last})"),
            UsedError::Id(id) => write!(f, "used entry names descriptor {id}, which heads no chain in flight"),
        }
    }
}

/// Why a queue could not be laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueError {
    /// The size is 0, not a power of two, or above 32768.
    Size(u16),
    /// The memory is smaller than [`bytes`] or not 16-byte aligned.
    Memory,
}

/// A split virtqueue.
pub struct Queue {
    n: u16,
    base: *mut u8,
    pa: u64,
    event_idx: bool,
    /// Free descriptors (a stack).
    free: Vec<u16>,
    /// The driver's own record of each chain's links, by descriptor.
    next: Vec<u16>,
    /// Descriptors in the chain headed here (0: no chain in flight).
    chain: Vec<u16>,
    /// Bytes the device may write into the chain headed here.
    writable: Vec<u32>,
    in_flight: u16,
    /// The avail index to publish (its slots up to here are filled).
    avail_idx: u16,
    /// The avail index the device last saw.
    published: u16,
    /// The next used entry to read.
    last_used: u16,
    broken: Option<UsedError>,
}

impl Queue {
    /// A queue of `n` descriptors in `bytes(n)` bytes at `va` (physical
    /// address `pa`), zeroed; `event_idx`: `VIRTIO_F_EVENT_IDX` was
    /// negotiated.
    ///
    /// # Safety
    /// `va..va + len` must be memory only this queue and the device use,
    /// for as long as the queue lives, at physical address `pa`.
    pub unsafe fn new(va: *mut u8, pa: u64, len: usize, n: u16, event_idx: bool) -> Result<Queue, QueueError> {
        if n == 0 || !n.is_power_of_two() || n > 32768 {
            return Err(QueueError::Size(n));
        }
        if len < bytes(n) || !(va as usize).is_multiple_of(16) || !pa.is_multiple_of(16) {
            return Err(QueueError::Memory);
        }
        // SAFETY: ours (the caller's promise), and in range (checked).
        unsafe { core::ptr::write_bytes(va, 0, bytes(n)) };
        Ok(Queue {
            n,
            base: va,
            pa,
            event_idx,
            free: (0..n).rev().collect(),
            next: alloc::vec![0; n as usize],
            chain: alloc::vec![0; n as usize],
            writable: alloc::vec![0; n as usize],
            in_flight: 0,
            avail_idx: 0,
            published: 0,
            last_used: 0,
            broken: None,
        })
    }

    /// The physical addresses of the descriptor table, the driver area and
    /// the device area (for [`crate::transport::Transport::set_up_queue`]).
    pub fn rings(&self) -> (u64, u64, u64) {
        (self.pa, self.pa + avail_offset(self.n) as u64, self.pa + used_offset(self.n) as u64)
    }

    /// Descriptors in the queue.
    pub fn size(&self) -> u16 {
        self.n
    }

    /// Free descriptors.
    pub fn free(&self) -> usize {
        self.free.len()
    }

    /// Chains the device has and has not given back.
    pub fn in_flight(&self) -> usize {
        self.in_flight as usize
    }

    /// Why the queue is broken, if a used entry could not be true.
    pub fn broken(&self) -> Option<UsedError> {
        self.broken
    }

    fn at16(&self, offset: usize) -> *mut u16 {
        debug_assert!(offset + 2 <= bytes(self.n));
        self.base.wrapping_add(offset).cast()
    }

    fn write16(&self, offset: usize, v: u16) {
        // SAFETY: inside the queue's memory (every caller's offset is).
        unsafe { self.at16(offset).write_volatile(v.to_le()) }
    }

    fn read16(&self, offset: usize) -> u16 {
        // SAFETY: as in `write16`; the device writes here, so volatile.
        u16::from_le(unsafe { self.at16(offset).read_volatile() })
    }

    fn read32(&self, offset: usize) -> u32 {
        // SAFETY: as in `read16` (4-aligned: the used ring is).
        u32::from_le(unsafe { self.base.wrapping_add(offset).cast::<u32>().read_volatile() })
    }

    fn write_desc(&self, i: u16, b: Buf, flags: u16, next: u16) {
        let p = self.base.wrapping_add(16 * i as usize);
        // SAFETY: descriptor i < n, inside the table; not the device's
        // until published.
        unsafe {
            p.cast::<u64>().write_volatile(b.pa.to_le());
            p.add(8).cast::<u32>().write_volatile(b.len.to_le());
            p.add(12).cast::<u16>().write_volatile(flags.to_le());
            p.add(14).cast::<u16>().write_volatile(next.to_le());
        }
    }

    /// Links `bufs` into a chain and puts it in the avail ring (seen by the
    /// device at the next [`Queue::publish`]); returns its head, or `None`
    /// (nothing written) if there are not enough free descriptors.
    pub fn push(&mut self, bufs: &[Buf]) -> Option<u16> {
        if bufs.is_empty() || bufs.len() > self.free.len() || self.broken.is_some() {
            return None;
        }
        let ids: Vec<u16> = (0..bufs.len()).map(|_| self.free.pop().expect("counted")).collect();
        let mut writable = 0u32;
        for (k, (&b, &i)) in bufs.iter().zip(&ids).enumerate() {
            let next = ids.get(k + 1).copied();
            let flags = if b.write { DESC_WRITE } else { 0 } | if next.is_some() { DESC_NEXT } else { 0 };
            self.write_desc(i, b, flags, next.unwrap_or(0));
            self.next[i as usize] = next.unwrap_or(0);
            if b.write {
                writable = writable.saturating_add(b.len);
            }
        }
        let head = ids[0];
        self.chain[head as usize] = bufs.len() as u16;
        self.writable[head as usize] = writable;
        self.in_flight += 1;
        let slot = 4 + 2 * (self.avail_idx % self.n) as usize;
        self.write16(avail_offset(self.n) + slot, head);
        self.avail_idx = self.avail_idx.wrapping_add(1);
        Some(head)
    }

    /// Hands every chain pushed since the last call to the device with one
    /// avail index write; returns whether the device asked to be notified
    /// of them (false also when there was nothing new).
    pub fn publish(&mut self) -> bool {
        if self.avail_idx == self.published {
            return false;
        }
        fence(Ordering::Release);
        self.write16(avail_offset(self.n) + 2, self.avail_idx);
        // The index before the device's event: it may have gone to sleep
        // just before our write.
        fence(Ordering::SeqCst);
        let (old, new) = (self.published, self.avail_idx);
        self.published = new;
        if self.event_idx {
            let event = self.read16(used_offset(self.n) + 4 + 8 * self.n as usize);
            new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
        } else {
            self.read16(used_offset(self.n)) & USED_NO_NOTIFY == 0
        }
    }

    /// Whether the device has given back a chain not popped yet (an
    /// entry [`Queue::pop`] will look at; it may still be refused).
    pub fn has_used(&self) -> bool {
        self.broken.is_none() && self.read16(used_offset(self.n) + 2) != self.last_used
    }

    /// The next chain the device is done with, if any; its descriptors are
    /// free again. An error breaks the queue for good.
    pub fn pop(&mut self) -> Result<Option<Used>, UsedError> {
        if let Some(e) = self.broken {
            return Err(e);
        }
        let idx = self.read16(used_offset(self.n) + 2);
        let pending = idx.wrapping_sub(self.last_used);
        if pending == 0 {
            return Ok(None);
        }
        if pending > self.in_flight {
            return Err(*self.broken.insert(UsedError::Index(idx, self.last_used)));
        }
        fence(Ordering::Acquire);
        let entry = used_offset(self.n) + 4 + 8 * (self.last_used % self.n) as usize;
        let (id, len) = (self.read32(entry), self.read32(entry + 4));
        if id >= self.n as u32 || self.chain[id as usize] == 0 {
            return Err(*self.broken.insert(UsedError::Id(id)));
        }
        let head = id as u16;
        let mut i = head;
        for _ in 0..core::mem::take(&mut self.chain[head as usize]) {
            self.free.push(i);
            i = self.next[i as usize];
        }
        self.in_flight -= 1;
        self.last_used = self.last_used.wrapping_add(1);
        if self.event_idx {
            // Interrupt when the device uses the next one.
            self.write16(avail_offset(self.n) + 4 + 2 * self.n as usize, self.last_used);
        }
        let len = (len <= self.writable[head as usize]).then_some(len);
        Ok(Some(Used { head, len }))
    }
}

#[cfg(test)]
mod tests;
