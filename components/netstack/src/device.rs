//! smoltcp's `Device` over a [`NicPort`]: where frames become aggregates.
//!
//! Transmit, zero-copy (iolite mode): smoltcp writes a frame into a scratch
//! buffer; for a segment of a zero-copy socket it writes the headers only
//! (the patched `TcpRepr::emit` skips the payload). The device layer parses
//! the headers, finds the connection by its 4-tuple and the payload's stream
//! offset by `seq - send_seq_base`, and builds the frame as an aggregate:
//! the headers copied into a small object of the stack's pool (header bytes
//! only), then the payload range of the connection's send queue, by
//! reference. Retransmissions map to the same stream range, hence to the same
//! slices. It then completes the TCP checksum: in software from the
//! pseudo-header, the header and the per-slice cached sums
//! ([`ChecksumCache`]), or by asking the NIC ([`TxOffload`]).
//!
//! Transmit, copy modes (flash/posix): smoltcp copies the payload from its
//! socket ring straight into a frame buffer of the stack's pool (the
//! driver's TX buffer), as a conventional stack does; counted.
//!
//! TCP segmentation offload (`Config::tso`, where the NIC offers it): the
//! capabilities tell smoltcp the device takes TCP/IPv4 frames of up to
//! [`TSO_MAX_FRAME`] bytes, so a segment may carry up to 64 KiB (within
//! the peer's window, the congestion window and what is queued); smoltcp
//! then gives the MSS in the packet's metadata (`TxToken::set_meta`). Such
//! a frame is built as any other (by reference in iolite mode, copied in
//! the copy modes) and goes to the NIC as one [`TxOffload::Tso`] request:
//! the IPv4 header checksum 0 and the pseudo-header sum without its length
//! in the TCP checksum field, which the e1000 completes per segment. No
//! payload byte is summed for it.

use alloc::collections::BTreeMap;
use alloc::vec::Vec;
use core::num::NonZeroUsize;
use iolite::{Aggregate, Domain, PoolId, SliceDesc, PAGE_SIZE};
use nic_api::TSO_MAX_FRAME;
use smoltcp::iface::SocketHandle;
use smoltcp::phy::{self, Checksum, ChecksumCapabilities, DeviceCapabilities, Medium, PacketMeta};
use smoltcp::time::Instant;

use crate::admission::Admission;
use crate::conn::{Conn, Tuple};
use crate::csum::ChecksumCache;
use crate::frame::{parse_tcp, NicPort, TcpFrame, TxFrame, TxOffload};
use crate::{ConnId, NetStats, TxChecksum};

mod admit;
mod transmit;

use admit::Verdict;

/// Everything the device layer touches during one `Interface::poll`.
pub(crate) struct Dev<'a, 'd, P: NicPort<'d>> {
    pub d: &'d Domain,
    pub port: &'a mut P,
    pub pool: PoolId,
    pub zero_copy: bool,
    pub checksum: TxChecksum,
    pub mtu: usize,
    /// The NIC cuts TCP segments (see the module docs).
    pub tso: bool,
    pub conns: &'a mut [Conn<'d>],
    /// 4-tuple → index in `conns`.
    pub tuples: &'a BTreeMap<Tuple, usize>,
    pub cache: &'a mut ChecksumCache,
    pub stats: &'a mut NetStats,
    pub scratch: &'a mut Vec<u8>,
    /// Set when smoltcp was refused a transmit token (NIC queue or frame
    /// pool full): it keeps the segments and emits them on a later poll, so
    /// the owner must poll again once the driver gives buffers back.
    pub blocked: bool,
    /// The last stale slice found this poll (for the owner's report).
    pub stale: Option<SliceDesc>,
    /// Connections a received segment is for (`NetStack::touched`), and
    /// whether a frame could not be attributed.
    pub touched: &'a mut Vec<ConnId>,
    pub touched_all: &'a mut bool,
    /// The sockets of the connections received segments are for, and
    /// whether a frame could not be attributed: what `NetStack::poll`
    /// looks at afterwards besides what smoltcp dispatched.
    pub dirty: &'a mut Vec<SocketHandle>,
    pub dirty_all: bool,
    /// The index of the connection the last frame was for: a burst is one
    /// connection's, and the 4-tuple index is deep with hundreds of them.
    pub last_conn: Option<usize>,
    /// Connection requests: per listened port, the backlog's sockets this
    /// poll (see `admit`), the per-address budgets, SYN cookies.
    pub adm: &'a mut Admission<'d>,
    /// Our MAC address (the source of SYN-ACKs made for cookies).
    pub mac: [u8; 6],
    /// Our IPv4 address, if any: only SYNs for it are answered with cookies.
    pub addr: Option<[u8; 4]>,
    /// The receive window of a socket (what a cookie's SYN-ACK advertises,
    /// at most 65535: it offers no window scaling).
    pub recv_window: usize,
}

/// Pages of the stack's pool that segments smoltcp sends on its own (data,
/// ACKs, retransmissions) leave free, so that the replies it makes to
/// received frames (ACKs, RSTs, ARP) still find room. A port should likewise
/// accept some frames beyond what `can_transmit` admits (see `NicPort`).
pub(crate) const REPLY_RESERVE_PAGES: u32 = 4;

/// A received frame.
pub(crate) struct Rx<'d> {
    agg: Aggregate<'d>,
}

/// Permission to transmit one frame.
pub(crate) struct Tx<'b, 'a, 'd, P: NicPort<'d>> {
    dev: &'b mut Dev<'a, 'd, P>,
    /// The MSS smoltcp asks the NIC to cut the frame by (segmentation
    /// offload), from the packet's metadata.
    mss: Option<usize>,
}

impl<'a, 'd, P: NicPort<'d>> phy::Device for Dev<'a, 'd, P> {
    type RxToken<'b>
        = Rx<'d>
    where
        Self: 'b;
    type TxToken<'b>
        = Tx<'b, 'a, 'd, P>
    where
        Self: 'b;

    fn receive(&mut self, _t: Instant) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        // Always take received frames, even when transmit room is short:
        // they carry the ACKs that free send windows, and a frame left with
        // the driver makes it drop the ones behind it (its channel to us is
        // sized for one batch). The reply token may then find no room (its
        // frame is dropped and counted in `tx_dropped`); replies carry no
        // data (ACKs, RSTs, ARP), and `REPLY_RESERVE_PAGES` plus the NIC
        // port's slack make that rare.
        loop {
            // The ACKs of cookies whose sockets were just made go first
            // (they were received already).
            let agg = match self.adm.inject.pop_front() {
                Some(agg) => agg,
                None => {
                    let agg = self.port.receive()?;
                    self.stats.rx_frames += 1;
                    agg
                }
            };
            match agg.contiguous().map(|bytes| parse_tcp(bytes, bytes.len())) {
                Some(Some(t)) => {
                    match self.admit(&agg, &t) {
                        Verdict::Pass => {}
                        Verdict::Consumed => continue,
                        Verdict::Cookie(h) => {
                            self.adm.cookie_acks.push((agg, h));
                            continue;
                        }
                        Verdict::Follows => {
                            self.adm.cookie_followers.push(agg);
                            continue;
                        }
                    }
                    self.touch(&t);
                }
                // Not TCP/IPv4 (ARP, ICMP, garbage): for no connection.
                Some(None) => {}
                None => {
                    // Flattened by the token below (a copy of the whole frame).
                    self.stats.rx_frame_bytes_flattened += agg.len() as u64;
                    *self.touched_all = true;
                    self.dirty_all = true;
                }
            }
            return Some((Rx { agg }, Tx { dev: self, mss: None }));
        }
    }

    fn transmit(&mut self, _t: Instant) -> Option<Self::TxToken<'_>> {
        // Refuse rather than accept a frame we might have to drop: smoltcp
        // then keeps the segment (its state does not advance) and sends it on
        // a later poll. A dropped segment would only be sent again after a
        // retransmission timeout (seconds), which is what made the copy
        // modes collapse when their frame pool filled up.
        if self.tx_room(REPLY_RESERVE_PAGES) {
            Some(Tx { dev: self, mss: None })
        } else {
            self.blocked = true;
            self.stats.tx_deferred += 1;
            None
        }
    }

    fn capabilities(&self) -> DeviceCapabilities {
        capabilities(self.mtu, self.tso)
    }
}

/// The device's capabilities as smoltcp sees them. smoltcp's `Interface`
/// reads them once, when it is made (`NetStack::new`, from a stand-in
/// device), not from the device of each poll: both must give these.
pub(crate) fn capabilities(mtu: usize, tso: bool) -> DeviceCapabilities {
    let mut c = DeviceCapabilities::default();
    c.medium = Medium::Ethernet;
    c.max_transmission_unit = mtu;
    let mut cs = ChecksumCapabilities::default();
    // smoltcp verifies received TCP checksums but computes none on
    // transmit: the device layer does (cache or NIC offload). Computing it
    // anyway would sum every frame's payload area for nothing (in iolite
    // mode an area smoltcp never wrote), since the device layer overwrites
    // the field.
    cs.tcp = Checksum::Rx;
    c.checksum = cs;
    // Segmentation offload: TCP/IPv4 frames up to TSO_MAX_FRAME bytes
    // (Ethernet header included), cut by the NIC.
    c.segmentation.tcpv4 = NonZeroUsize::new(TSO_MAX_FRAME).filter(|_| tso);
    c
}

impl phy::RxToken for Rx<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        match self.agg.contiguous() {
            Some(bytes) => f(bytes),
            None => {
                // A driver hands over one slice per frame; anything else is
                // flattened (counted in `rx_frame_bytes_flattened`, and by
                // `read_at` in the domain's copies).
                let mut v = alloc::vec![0u8; self.agg.len()];
                self.agg.read_at(0, &mut v);
                f(&v)
            }
        }
    }
}

impl<'d, P: NicPort<'d>> phy::TxToken for Tx<'_, '_, 'd, P> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        if self.dev.zero_copy {
            self.dev.emit_zero_copy(len, f, self.mss)
        } else {
            self.dev.emit_copy(len, f, self.mss)
        }
    }

    fn set_meta(&mut self, meta: PacketMeta) {
        // Only where the capabilities offered it (smoltcp sets it only then).
        self.mss = meta.segmentation_offload_size.map(|m| usize::from(m.get())).filter(|_| self.dev.tso);
    }
}

impl<'a, 'd, P: NicPort<'d>> Dev<'a, 'd, P> {
    /// Whether one more frame can be built and queued now, keeping
    /// `reserve` pages of the pool free. A frame needs at most
    /// `mtu / PAGE_SIZE` pages, rounded up (one for MTU 1514: headers, and
    /// whole frames in the copy modes, are packed into shared pages), and a
    /// one-page allocation cannot fail while a page is free.
    fn tx_room(&self, reserve: u32) -> bool {
        // A whole TSO frame in the copy modes; headers only in iolite mode.
        let frame = if self.tso && !self.zero_copy { TSO_MAX_FRAME } else { self.mtu };
        let need = frame.div_ceil(PAGE_SIZE).max(1) as u32;
        self.port.can_transmit() && self.d.pool_stats(self.pool).is_ok_and(|s| s.free_pages >= need + reserve)
    }

    fn scratch(&mut self, len: usize) -> &mut [u8] {
        if self.scratch.len() < len {
            self.scratch.resize(len, 0);
        }
        &mut self.scratch[..len]
    }

    fn send(&mut self, frame: TxFrame<'d>) {
        let tso = matches!(frame.offload, TxOffload::Tso(_));
        match self.port.transmit(frame) {
            Ok(()) => {
                self.stats.tx_frames += 1;
                self.stats.tx_tso_frames += tso as u64;
            }
            Err(_dropped) => self.stats.tx_dropped += 1,
        }
    }

    /// The index of the connection with 4-tuple `tuple`, if any.
    fn conn_of(&mut self, tuple: &Tuple) -> Option<usize> {
        let hit = self.last_conn.filter(|&i| self.conns.get(i).is_some_and(|c| c.tuple.as_ref() == Some(tuple)));
        let i = hit.or_else(|| {
            self.tuples
                .get(tuple)
                .copied()
                .filter(|&i| self.conns.get(i).is_some_and(|c| c.tuple.as_ref() == Some(tuple)))
        })?;
        self.last_conn = Some(i);
        Some(i)
    }

    /// Marks the connection a received frame is for as touched: its user
    /// may have something to do after this poll (data, space, a close).
    /// Frames for no connection (SYNs for a listener, ARP) touch none.
    fn touch(&mut self, t: &TcpFrame) {
        // Ours is the frame's destination.
        let Some(i) = self.conn_of(&(t.dst, t.dport, t.src, t.sport)) else { return };
        let c = &mut self.conns[i];
        self.dirty.push(c.handle);
        if !c.touched {
            c.touched = true;
            self.touched.push(c.id);
        }
    }
}
