//! The server's counters: what [`Server::stats`] returns, and its part of
//! the `httpd` counter page ([`Server::counters`]).

use httpd_api::{HttpdCounter, Values};

use super::Server;
use crate::source::{Clock, FileSource};

/// Counters of the server (exported as the `httpd` component).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HttpStats {
    /// Connections accepted.
    pub connections_accepted: u64,
    /// Connections refused at the limit (503).
    pub connections_refused: u64,
    /// Connections open now.
    pub connections_active: u64,
    /// Complete requests parsed (including rejected ones).
    pub requests: u64,
    /// Responses by class.
    pub responses_2xx: u64,
    /// 3xx responses.
    pub responses_3xx: u64,
    /// 4xx responses.
    pub responses_4xx: u64,
    /// 5xx responses.
    pub responses_5xx: u64,
    /// 304 responses.
    pub not_modified: u64,
    /// 206 responses.
    pub partial: u64,
    /// Fixed header parts reused from the header cache.
    pub header_cache_hits: u64,
    /// Fixed header parts generated (first use).
    pub header_cache_misses: u64,
    /// Fixed header parts regenerated because the file changed.
    pub header_cache_invalidations: u64,
    /// Header bytes generated (per-response parts and cache misses).
    pub header_bytes_generated: u64,
    /// Body bytes sent by reference (file data, CGI output).
    pub body_bytes_by_ref: u64,
    /// Requests handed to the CGI.
    pub cgi_requests: u64,
    /// CGI requests that timed out (504).
    pub cgi_timeouts: u64,
    /// CGI faults and invalid CGI output (502).
    pub cgi_failures: u64,
    /// CGI replies that came after their deadline (dropped).
    pub cgi_late_replies: u64,
    /// Bytes of CGI response headers copied for parsing (the header only:
    /// the body goes by reference).
    pub cgi_header_bytes_copied: u64,
    /// CGI responses streamed (their header sent before the program ended).
    pub cgi_streams: u64,
    /// Parts of streamed CGI answers received.
    pub cgi_stream_parts: u64,
    /// Streamed responses cut off (the cgi failed or stopped answering,
    /// or ended short of its `Content-Length`): the connection closed
    /// after what was sent.
    pub cgi_streams_aborted: u64,
    /// Bytes a CGI sent beyond the `Content-Length` it announced (dropped).
    pub cgi_stream_excess_bytes: u64,
    /// File reads the source refused for now (busy): the response waits
    /// and is read again later instead of being cut short.
    pub file_reads_deferred: u64,
    /// Times a static request waited for the file source: refused for
    /// now (busy), or queued behind requests that were (the oldest try
    /// first). It is tried again later (`Config::source_wait_ms`).
    pub file_opens_deferred: u64,
    /// Requests answered 503 because the source stayed busy for
    /// `Config::source_wait_ms`.
    pub file_opens_expired: u64,
    /// Requests that timed out while arriving (408).
    pub request_timeouts: u64,
    /// Idle keep-alive connections closed.
    pub idle_closes: u64,
    /// Idle keep-alive connections closed early to make room for a new
    /// connection at the limit.
    pub idle_evictions: u64,
    /// Connections closed because the network took none of their pending
    /// output for `send_timeout_ms` (a client that stopped reading).
    pub send_timeouts: u64,
    /// Request bytes copied into the per-connection parse buffer (request
    /// lines and headers, and whatever followed them in the input then).
    pub request_bytes_copied_to_parse: u64,
    /// Of those, bytes that turned out to be a request body (payload, which
    /// also goes on by reference): copied only because they arrived with
    /// the header.
    pub request_body_bytes_copied_to_parse: u64,
    /// Request bodies flattened (more slices than an aggregate holds).
    pub bodies_flattened: u64,
    /// Request body bytes copied by that flattening (payload).
    pub body_bytes_flattened: u64,
    /// Request bodies streamed to the cgi in parts.
    pub cgi_uploads: u64,
    /// Body parts handed to the cgi (after the call).
    pub cgi_upload_parts: u64,
    /// Body bytes handed to the cgi in those parts, by reference.
    pub cgi_upload_bytes: u64,
    /// Body bytes read and dropped because the answer no longer needed
    /// them (it was complete before the body).
    pub cgi_upload_discarded_bytes: u64,
    /// Streamed bodies that could not be completed (the client stalled,
    /// half-closed or sent bad framing).
    pub cgi_uploads_aborted: u64,
    /// CGI requests held while the cgi was away ([`Server::cgi_down`]).
    pub cgi_queued: u64,
    /// Held requests handed to the new incarnation ([`Server::cgi_up`]).
    pub cgi_queue_served: u64,
    /// Held requests whose client left before the cgi came back.
    pub cgi_queue_dropped: u64,
    /// Requests refused with 503 while the cgi was away: the queue was
    /// full (by count or bytes), the body streams, or the cgi is held down.
    pub cgi_queue_refused: u64,
    /// Held requests answered 503 because the cgi did not come back within
    /// `cgi_queue_timeout_ms`.
    pub cgi_queue_expired: u64,

    // Slow and fragmented input (`Config::min_input_rate`,
    // `Config::max_input_slices`); each 408 here is in `request_timeouts`.
    /// Request heads not complete within `request_timeout_ms` (408).
    pub head_timeouts_408: u64,
    /// Requests whose head arrived slower than `min_input_rate` (408).
    pub head_too_slow: u64,
    /// Request bodies that arrived slower than `min_input_rate` (408).
    pub body_too_slow: u64,
    /// Times a pending head's input was copied into one buffer (it had
    /// more than `max_input_slices` slices).
    pub input_flattens: u64,
    /// Bytes copied by those flattenings.
    pub input_bytes_flattened: u64,
    /// `/healthz` requests answered.
    pub health_checks: u64,
    /// Access and error log lines made.
    pub access_log_lines: u64,
    /// Lines dropped: the component had not taken the ones before.
    pub access_log_lines_dropped: u64,
    /// Bytes of request lines, `Referer` and `User-Agent` copied (escaped)
    /// into log lines: metadata, not payload.
    pub access_log_bytes_copied: u64,
}

impl<'d, S: FileSource<'d>, C: Clock> Server<'d, S, C> {
    /// Sets the server's counters in `v` (the `httpd` page; the component
    /// sets its own): its [`HttpStats`] and its IO-Lite domain's.
    pub fn counters(&self, v: &mut Values<HttpdCounter>) {
        use HttpdCounter as H;
        let s = self.stats();
        v[H::ConnectionsActive] = s.connections_active;
        v[H::ConnectionsAccepted] = s.connections_accepted;
        v[H::ConnectionsRefused] = s.connections_refused;
        v[H::Requests] = s.requests;
        v[H::Responses2xx] = s.responses_2xx;
        v[H::Responses3xx] = s.responses_3xx;
        v[H::Responses4xx] = s.responses_4xx;
        v[H::Responses5xx] = s.responses_5xx;
        v[H::NotModified] = s.not_modified;
        v[H::Partial] = s.partial;
        v[H::HeaderCacheHits] = s.header_cache_hits;
        v[H::HeaderCacheMisses] = s.header_cache_misses;
        v[H::HeaderCacheInvalidations] = s.header_cache_invalidations;
        v[H::HeaderBytesGenerated] = s.header_bytes_generated;
        v[H::BodyBytesByRef] = s.body_bytes_by_ref;
        v[H::CgiRequests] = s.cgi_requests;
        v[H::CgiTimeouts] = s.cgi_timeouts;
        v[H::CgiFailures] = s.cgi_failures;
        v[H::CgiStreams] = s.cgi_streams;
        v[H::CgiStreamParts] = s.cgi_stream_parts;
        v[H::CgiStreamsAborted] = s.cgi_streams_aborted;
        v[H::CgiUploads] = s.cgi_uploads;
        v[H::CgiUploadParts] = s.cgi_upload_parts;
        v[H::CgiUploadBytes] = s.cgi_upload_bytes;
        v[H::CgiUploadDiscardedBytes] = s.cgi_upload_discarded_bytes;
        v[H::CgiUploadsAborted] = s.cgi_uploads_aborted;
        v[H::CgiQueued] = s.cgi_queued;
        v[H::CgiQueueServed] = s.cgi_queue_served;
        v[H::CgiQueueDropped] = s.cgi_queue_dropped;
        v[H::CgiQueueRefused] = s.cgi_queue_refused;
        v[H::CgiQueueExpired] = s.cgi_queue_expired;
        v[H::RequestTimeouts] = s.request_timeouts;
        v[H::IdleCloses] = s.idle_closes;
        v[H::HeadTimeouts408] = s.head_timeouts_408;
        v[H::HeadTooSlow] = s.head_too_slow;
        v[H::BodyTooSlow] = s.body_too_slow;
        v[H::InputFlattens] = s.input_flattens;
        v[H::InputBytesFlattened] = s.input_bytes_flattened;
        v[H::CgiHeaderBytesCopied] = s.cgi_header_bytes_copied;
        v[H::RequestBytesCopiedToParse] = s.request_bytes_copied_to_parse;
        v[H::RequestBodyBytesCopiedToParse] = s.request_body_bytes_copied_to_parse;
        v[H::BodiesFlattened] = s.bodies_flattened;
        v[H::BodyBytesFlattened] = s.body_bytes_flattened;
        v[H::CgiLateReplies] = s.cgi_late_replies;
        v[H::CgiStreamExcessBytes] = s.cgi_stream_excess_bytes;
        v[H::IdleEvictions] = s.idle_evictions;
        v[H::SendTimeouts] = s.send_timeouts;
        v[H::FileReadsDeferred] = s.file_reads_deferred;
        v[H::FileOpensDeferred] = s.file_opens_deferred;
        v[H::FileOpensExpired] = s.file_opens_expired;
        v[H::HealthChecks] = s.health_checks;
        v[H::AccessLogLines] = s.access_log_lines;
        v[H::AccessLogLinesDropped] = s.access_log_lines_dropped;
        v[H::AccessLogBytesCopied] = s.access_log_bytes_copied;
        let d = self.core.d.stats();
        v[H::BytesCopied] = d.bytes_copied;
        v[H::BytesByRefSent] = d.bytes_by_ref_sent;
        v[H::BytesByRefReceived] = d.bytes_by_ref_received;
        v[H::BuffersInUse] = d.buffers_in_use;
        v[H::PagesInUse] = d.pages_in_use;
        v[H::HighWaterPages] = d.high_water_pages;
        v[H::AllocFailures] = d.alloc_failures;
    }
}
