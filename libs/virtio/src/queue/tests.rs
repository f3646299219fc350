//! The queue against a device written here: it reads the avail ring and
//! the descriptors as a device would and writes used entries, honest or not.

use super::*;

/// Queue memory (16-aligned, leaked) and a made-up physical address.
fn queue(n: u16, event_idx: bool) -> (Queue, *mut u8) {
    let layout = std::alloc::Layout::from_size_align(bytes(n), 4096).unwrap();
    // SAFETY: non-zero size; leaked, so it outlives the queue.
    let va = unsafe { std::alloc::alloc(layout) };
    // SAFETY: fresh memory only the queue and the test's device use.
    (unsafe { Queue::new(va, 0x8000_0000, bytes(n), n, event_idx) }.unwrap(), va)
}

fn rd16(va: *mut u8, off: usize) -> u16 {
    // SAFETY: inside the queue memory.
    unsafe { va.add(off).cast::<u16>().read_volatile() }
}

fn wr16(va: *mut u8, off: usize, v: u16) {
    // SAFETY: as above.
    unsafe { va.add(off).cast::<u16>().write_volatile(v) }
}

fn wr32(va: *mut u8, off: usize, v: u32) {
    // SAFETY: as above.
    unsafe { va.add(off).cast::<u32>().write_volatile(v) }
}

/// A chain as the device reads it: its head and (addr, len, flags) each.
type Chain = (u16, Vec<(u64, u32, u16)>);

/// The device's side: which chains it has seen, what it completed.
struct Device {
    va: *mut u8,
    n: u16,
    seen: u16,
    used: u16,
}

impl Device {
    /// The new chains' descriptors: (addr, len, flags) each.
    fn take(&mut self) -> Vec<Chain> {
        let avail = avail_offset(self.n);
        let idx = rd16(self.va, avail + 2);
        let mut out = Vec::new();
        while self.seen != idx {
            let head = rd16(self.va, avail + 4 + 2 * (self.seen % self.n) as usize);
            let mut descs = Vec::new();
            let mut i = head;
            loop {
                let p = 16 * i as usize;
                // SAFETY: inside the table.
                let (addr, len, flags, next) = unsafe {
                    let d = self.va.add(p);
                    (
                        d.cast::<u64>().read(),
                        d.add(8).cast::<u32>().read(),
                        d.add(12).cast::<u16>().read(),
                        d.add(14).cast::<u16>().read(),
                    )
                };
                descs.push((addr, len, flags));
                if flags & DESC_NEXT == 0 {
                    break;
                }
                i = next;
            }
            out.push((head, descs));
            self.seen = self.seen.wrapping_add(1);
        }
        out
    }

    fn complete(&mut self, id: u32, len: u32) {
        let used = used_offset(self.n);
        let e = used + 4 + 8 * (self.used % self.n) as usize;
        wr32(self.va, e, id);
        wr32(self.va, e + 4, len);
        self.used = self.used.wrapping_add(1);
        wr16(self.va, used + 2, self.used);
    }

    fn set_avail_event(&self, v: u16) {
        wr16(self.va, used_offset(self.n) + 4 + 8 * self.n as usize, v);
    }
}

fn rx(pa: u64) -> Buf {
    Buf { pa, len: 2048, write: true }
}

#[test]
fn layout_matches_the_specification() {
    assert_eq!(bytes(256), 4096 + 518 + 2 + 2054);
    let (q, _) = queue(256, true);
    assert_eq!(q.rings(), (0x8000_0000, 0x8000_1000, 0x8000_1208));
    assert!(matches!(unsafe { Queue::new(std::ptr::null_mut(), 0, 0, 3, false) }, Err(QueueError::Size(3))));
}

#[test]
fn chains_are_linked_and_published_once_per_batch() {
    let (mut q, va) = queue(8, true);
    let mut dev = Device { va, n: 8, seen: 0, used: 0 };
    let tx = [Buf { pa: 0x1000, len: 12, write: false }, Buf { pa: 0x2000, len: 54, write: false }];
    let h1 = q.push(&tx).unwrap();
    let h2 = q.push(&[rx(0x3000)]).unwrap();
    assert!(dev.take().is_empty(), "nothing is the device's before publish");
    // The device's avail_event is 0: it wants to hear of chain 0.
    assert!(q.publish());
    let chains = dev.take();
    assert_eq!(chains.len(), 2);
    assert_eq!(chains[0], (h1, vec![(0x1000, 12, DESC_NEXT), (0x2000, 54, 0)]));
    assert_eq!(chains[1], (h2, vec![(0x3000, 2048, DESC_WRITE)]));
    assert!(!q.publish(), "nothing new: no notification");
    assert_eq!((q.free(), q.in_flight()), (5, 2));
    dev.complete(h1 as u32, 0);
    dev.complete(h2 as u32, 1514);
    assert_eq!(q.pop(), Ok(Some(Used { head: h1, len: Some(0) })));
    assert_eq!(q.pop(), Ok(Some(Used { head: h2, len: Some(1514) })));
    assert_eq!(q.pop(), Ok(None));
    assert_eq!((q.free(), q.in_flight()), (8, 0));
    // used_event names the next entry: the device interrupts for it.
    assert_eq!(rd16(va, avail_offset(8) + 4 + 16), 2);
}

#[test]
fn event_index_suppresses_notifications_the_device_did_not_ask_for() {
    let (mut q, va) = queue(8, true);
    let mut dev = Device { va, n: 8, seen: 0, used: 0 };
    q.push(&[rx(0x1000)]).unwrap();
    assert!(q.publish());
    dev.take();
    // The device is busy and will look again at avail index 5 only.
    dev.set_avail_event(4);
    for pa in [0x2000, 0x3000] {
        q.push(&[rx(pa)]).unwrap();
        assert!(!q.publish(), "the device asked for index 4 only");
    }
    q.push(&[rx(0x4000)]).unwrap();
    q.push(&[rx(0x5000)]).unwrap();
    // This batch moves the index from 3 to 5, past 4.
    assert!(q.publish());
    // Without EVENT_IDX the NO_NOTIFY flag decides.
    let (mut q, va) = queue(8, false);
    q.push(&[rx(0x1000)]).unwrap();
    assert!(q.publish());
    wr16(va, used_offset(8), USED_NO_NOTIFY);
    q.push(&[rx(0x2000)]).unwrap();
    assert!(!q.publish());
}

#[test]
fn a_full_queue_takes_no_partial_chain() {
    let (mut q, _) = queue(4, false);
    let three = [rx(1 << 12), rx(2 << 12), rx(3 << 12)];
    assert!(q.push(&three).is_some());
    assert_eq!(q.push(&three[..2]), None);
    assert_eq!(q.free(), 1);
    assert!(q.push(&three[..1]).is_some());
    assert_eq!(q.push(&[]), None);
}

#[test]
fn a_used_index_ahead_of_the_chains_in_flight_breaks_the_queue() {
    let (mut q, va) = queue(8, true);
    let h = q.push(&[rx(0x1000)]).unwrap();
    q.publish();
    // Two entries claimed, one chain in flight.
    wr32(va, used_offset(8) + 4, h as u32);
    wr16(va, used_offset(8) + 2, 2);
    assert_eq!(q.pop(), Err(UsedError::Index(2, 0)));
    // Broken for good: even an honest index is not believed now.
    wr16(va, used_offset(8) + 2, 1);
    assert_eq!(q.pop(), Err(UsedError::Index(2, 0)));
    assert_eq!(q.push(&[rx(0x2000)]), None);
    // An index wrapped backwards is as far ahead.
    let (mut q, va) = queue(8, true);
    q.push(&[rx(0x1000)]).unwrap();
    wr16(va, used_offset(8) + 2, 0xffff);
    assert_eq!(q.pop(), Err(UsedError::Index(0xffff, 0)));
}

#[test]
fn a_used_id_that_heads_no_chain_breaks_the_queue() {
    for bad in [8u32, 1, u32::MAX] {
        let (mut q, va) = queue(8, true);
        let mut dev = Device { va, n: 8, seen: 0, used: 0 };
        // Chain of two: heads at 0, descriptor 1 is inside it.
        let h = q.push(&[rx(0x1000), rx(0x2000)]).unwrap();
        assert_eq!(h, 0);
        q.publish();
        dev.complete(bad, 0);
        assert_eq!(q.pop(), Err(UsedError::Id(bad)));
    }
    // The same head twice: the second is not in flight any more.
    let (mut q, va) = queue(8, true);
    let mut dev = Device { va, n: 8, seen: 0, used: 0 };
    let h = q.push(&[rx(0x1000)]).unwrap();
    q.push(&[rx(0x2000)]).unwrap();
    q.publish();
    dev.complete(h as u32, 60);
    dev.complete(h as u32, 60);
    assert_eq!(q.pop().unwrap().unwrap().head, h);
    assert_eq!(q.pop(), Err(UsedError::Id(h as u32)));
}

#[test]
fn a_length_beyond_the_writable_buffers_is_reported_not_believed() {
    let (mut q, va) = queue(8, true);
    let mut dev = Device { va, n: 8, seen: 0, used: 0 };
    let h = q.push(&[Buf { pa: 0x1000, len: 12, write: false }, rx(0x2000)]).unwrap();
    let t = q.push(&[Buf { pa: 0x3000, len: 60, write: false }]).unwrap();
    q.publish();
    dev.complete(h as u32, 2049);
    dev.complete(t as u32, 1);
    assert_eq!(q.pop(), Ok(Some(Used { head: h, len: None })));
    assert_eq!(q.pop(), Ok(Some(Used { head: t, len: None })));
    // The chains are free again all the same.
    assert_eq!(q.free(), 8);
}

#[test]
fn chains_are_freed_from_the_drivers_links_not_the_devices() {
    let (mut q, va) = queue(4, true);
    let mut dev = Device { va, n: 4, seen: 0, used: 0 };
    let h = q.push(&[rx(0x1000), rx(0x2000)]).unwrap();
    q.publish();
    // The device scribbles over the descriptors' next fields.
    for i in 0..4 {
        wr16(va, 16 * i + 14, 3);
    }
    dev.complete(h as u32, 0);
    q.pop().unwrap().unwrap();
    let mut free = q.free.clone();
    free.sort();
    assert_eq!(free, vec![0, 1, 2, 3]);
}

#[test]
fn indices_wrap_past_u16() {
    let (mut q, va) = queue(4, true);
    let mut dev = Device { va, n: 4, seen: 0, used: 0 };
    for k in 0..70_000u32 {
        let h = q.push(&[rx(0x1000 + (k as u64 % 4) * 0x1000)]).unwrap();
        q.publish();
        let chains = dev.take();
        assert_eq!(chains.len(), 1);
        dev.complete(h as u32, k % 2048);
        assert_eq!(q.pop(), Ok(Some(Used { head: h, len: Some(k % 2048) })));
    }
    assert_eq!(q.in_flight(), 0);
}
