//! The `stack_stats` counter page (`socket_api::StackCounter`): the
//! stack's, the checksum cache's, the domain's and our clients' counters,
//! published after every pass.

use netstack::api::SessionStats;
use netstack::TxChecksum;
use socket_api::{StackCounter as S, Values};

use super::glue::pools::{HDR_POOL, SOCK_POOL};
use super::pools::quarantined_pages;
use super::slot::Slot;
use super::{Node, CLIENT2};

impl Node {
    /// Publishes every counter of the `stack_stats` page.
    pub(super) fn publish(&mut self) {
        let s = self.stack.stats();
        let c = self.stack.checksum_cache_stats();
        let ds = self.d.stats();
        let ss = self.session_totals();
        let first = self.slots[0].stats();
        let second = self.slots.get(1).map(|s| s.stats()).unwrap_or_default();
        let broken = [self.port.link.rx_guard, self.port.link.tx_guard].iter().filter(|g| g.broken().is_some()).count()
            as u64
            + self.slots.iter().map(|s| s.channels_broken()).sum::<u64>();
        let mut v = Values::<S>::new();
        // Every counter of the page's declaration gets its value here: a new
        // one does not compile until it has a line.
        for &k in <S as socket_api::Counter>::ALL {
            v[k] = match k {
                S::CopyMode => self.stack.config().copy_mode.number(),
                S::ChecksumMode => match self.stack.config().checksum {
                    TxChecksum::Cached => 0,
                    TxChecksum::Software => 1,
                    TxChecksum::Offload => 2,
                },
                S::TxFrames => s.tx_frames,
                S::TxDropped => s.tx_dropped,
                S::RxFrames => s.rx_frames,
                S::TxPayloadByRef => s.tx_payload_by_ref,
                S::TxRetransmitted => s.tx_retransmitted,
                S::TxPayloadCopiedSocket => s.tx_payload_copied_socket,
                S::TxPayloadCopiedFrame => s.tx_payload_copied_frame,
                S::TxCopied => s.tx_copied(),
                S::TxCoalescedSegments => s.tx_coalesced_segments,
                S::RxPayload => s.rx_payload,
                S::RxPayloadCopied => s.rx_payload_copied,
                S::CsumHits => c.hits,
                S::CsumMisses => c.misses,
                S::CsumBytesCached => c.bytes_cached,
                S::CsumBytesSummed => c.bytes_summed,
                S::CsumHitRatePercent => c.hit_rate_percent(),
                S::BytesCopied => ds.bytes_copied,
                S::BytesByRefSent => ds.bytes_by_ref_sent,
                S::ConnectionsAccepted => first.accepted + second.accepted,
                S::Polls => self.polls,
                S::Wakeups => self.wakeups,
                S::ClientRequests => first.requests,
                S::ClientEvents => first.events,
                S::TxHeldBack => self.port.held_back,
                S::BusyCycles => self.busy_cycles,
                S::TxDeferred => s.tx_deferred,
                S::AcceptDeferred => s.accept_deferred,
                S::SocketBytes => self.stack.socket_memory() as u64,
                S::RejectedDescriptors => ds.rejected_descriptors,
                S::RejectedForeignPool => ds.rejected_foreign_pool,
                S::RejectedNotGranted => ds.rejected_not_granted,
                S::TxStaleWithheld => s.tx_stale_withheld,
                S::TxStaleResets => s.tx_stale_resets,
                S::TxCoalescedBytes => s.tx_coalesced_bytes,
                S::TxWithheld => s.tx_withheld,
                S::TxHeaderBytes => s.tx_header_bytes,
                S::TxNontcpFrameBytes => s.tx_nontcp_frame_bytes,
                S::RxFrameBytesFlattened => s.rx_frame_bytes_flattened,
                S::EventsDeferred => ss.events_deferred,
                S::EventsDropped => ss.events_dropped,
                S::SendsRefused => ss.sends_refused,
                S::SendFull => ss.send_full,
                S::ReceivePauses => ss.receive_pauses,
                S::Connections => self.stack.connections() as u64,
                S::HeapUsed => super::heap_used() as u64,
                S::SendQueuedBytes => self.stack.held_send_bytes() as u64,
                S::RxErrors => self.port.rx_errors,
                S::ChannelsBroken => broken,
                S::HdrPoolPagesInUse => self.d.pool_stats(HDR_POOL).map_or(0, |p| p.pages_in_use as u64),
                S::SockPoolPagesInUse => self.d.pool_stats(SOCK_POOL).map_or(0, |p| p.pages_in_use as u64),
                S::ListensRefused => ss.listens_refused,
                S::ClientsCutOff => self.slots.iter().map(|s| s.cut_off).sum(),
                S::ClientRestartRequests => self.slots.iter().map(|s| s.restart_requests).sum(),
                S::Client2Requests => second.requests,
                S::Client2Events => second.events,
                S::Client2Refused => second.refused,
                S::Client2Rejected => self.d.peer_rejections(CLIENT2).unwrap_or(0),
                S::BadReleases => ds.bad_releases,
                S::SendRetries => ss.send_retries,
                S::TimeWaitRecycled => s.time_wait_recycled,
                S::TxTsoFrames => s.tx_tso_frames,
                S::Tso => self.stack.config().tso as u64,
                S::TxTsoSplit => s.tx_tso_split,
                S::SendHeldBackBytes => self.slots.iter().map(Slot::held_back_bytes).sum::<usize>() as u64,
                S::SendRingBytesInUse => self.stack.send_ring_bytes() as u64,
                S::RxHandOffBytes => s.rx_hand_off,
                S::RxHandOffFallbackBytes => s.rx_hand_off_fallback,
                S::Restarts => self.restarts,
                S::QuarantinedPages => quarantined_pages(self.d) as u64,
                S::DrvReleasesDeferred => self.port.releases_deferred,
                S::SynDroppedBacklogFull => s.syn_dropped_backlog_full,
                // Receive-side bounds in pages.
                S::RxCoalescedBytes => s.rx_coalesced_bytes,
                S::RxPausedConnPages => s.rx_paused_conn_pages,
                S::RxOpenPagesSwept => s.rx_open_pages_swept,
                S::BacklogRecycled => s.backlog_recycled,
                S::SynRecvTimeouts => s.syn_recv_timeouts,
                S::SynCookiesSent => s.syn_cookies_sent,
                S::SynCookiesValidated => s.syn_cookies_validated,
                S::SynCookiesRejected => s.syn_cookies_rejected,
                S::SynDroppedPerAddress => s.syn_dropped_per_address,
                S::DeadConnsForgotten => s.dead_conns_forgotten,
                S::DeadInputDropped => s.dead_input_dropped,
            };
        }
        // What fs's memory budget charges us: the copies of response data
        // queued in the send rings (0 in iolite mode, which queues
        // references).
        v.set_io_bytes_held(v[S::SendRingBytesInUse]);
        self.stats.publish(&v);
    }

    /// The sessions' counters, summed over our clients.
    fn session_totals(&self) -> SessionStats {
        let mut ss = SessionStats::default();
        for st in self.slots.iter().map(|s| s.session_stats()) {
            ss.events_deferred += st.events_deferred;
            ss.events_dropped += st.events_dropped;
            ss.sends_refused += st.sends_refused;
            ss.send_full += st.send_full;
            ss.receive_pauses += st.receive_pauses;
            ss.listens_refused += st.listens_refused;
            ss.send_retries += st.send_retries;
        }
        ss
    }
}
