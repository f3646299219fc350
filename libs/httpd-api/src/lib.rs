//! What the web server (httpd) shares with the components that read it:
//! the counters of its `httpd_stats` page, which the cgi shows as the
//! `httpd` component of `/cgi-bin/stats` (in this order) and whose
//! standard *I/O bytes held* slot fs's memory budget charges (httpd puts
//! its application pool's pages in use there, × 4 KiB).
//!
//! httpd writes the page (`counters::CounterPage::publish`), the others map
//! it read-only. The names are part of the stats schema: Robot suites and
//! the bench scripts read them.
#![no_std]
#![deny(missing_docs)]

pub use counters::{Counter, CounterPage, Values};

counters::counters! {
    /// httpd's counters (its `httpd_stats` page): what the server counts
    /// (`httpd::HttpStats`), its IO-Lite domain's, and the component's own.
    /// They only grow, but for the gauges, whose docs say "now".
    pub enum HttpdCounter {
        /// Connections open now (the server's).
        ConnectionsActive = "connections_active",
        /// Connections accepted.
        ConnectionsAccepted = "connections_accepted",
        /// Connections refused at the limit (503).
        ConnectionsRefused = "connections_refused",
        /// Complete requests parsed (including rejected ones).
        Requests = "requests",
        /// 2xx responses.
        Responses2xx = "responses_2xx",
        /// 3xx responses.
        Responses3xx = "responses_3xx",
        /// 4xx responses.
        Responses4xx = "responses_4xx",
        /// 5xx responses.
        Responses5xx = "responses_5xx",
        /// 304 responses.
        NotModified = "not_modified",
        /// 206 responses.
        Partial = "partial",
        /// Fixed header parts reused from the header cache.
        HeaderCacheHits = "header_cache_hits",
        /// Fixed header parts generated (first use).
        HeaderCacheMisses = "header_cache_misses",
        /// Fixed header parts regenerated because the file changed.
        HeaderCacheInvalidations = "header_cache_invalidations",
        /// Header bytes generated (per-response parts and cache misses).
        HeaderBytesGenerated = "header_bytes_generated",
        /// Body bytes sent by reference (file data, CGI output).
        BodyBytesByRef = "body_bytes_by_ref",
        /// Requests handed to the CGI.
        CgiRequests = "cgi_requests",
        /// CGI requests that timed out (504).
        CgiTimeouts = "cgi_timeouts",
        /// CGI faults and invalid CGI output (502).
        CgiFailures = "cgi_failures",
        /// CGI responses streamed (their header sent before the program
        /// ended).
        CgiStreams = "cgi_streams",
        /// Parts of streamed CGI answers received.
        CgiStreamParts = "cgi_stream_parts",
        /// Streamed responses cut off (the connection closed after what
        /// was sent).
        CgiStreamsAborted = "cgi_streams_aborted",
        /// Request bodies streamed to the cgi in parts.
        CgiUploads = "cgi_uploads",
        /// Body parts handed to the cgi (after the call).
        CgiUploadParts = "cgi_upload_parts",
        /// Body bytes handed to the cgi in those parts, by reference.
        CgiUploadBytes = "cgi_upload_bytes",
        /// Body bytes read and dropped: the answer was complete before the
        /// body.
        CgiUploadDiscardedBytes = "cgi_upload_discarded_bytes",
        /// Streamed bodies that could not be completed.
        CgiUploadsAborted = "cgi_uploads_aborted",
        /// CGI requests held while the cgi was away.
        CgiQueued = "cgi_queued",
        /// Held requests handed to the new incarnation.
        CgiQueueServed = "cgi_queue_served",
        /// Held requests whose client left before the cgi came back.
        CgiQueueDropped = "cgi_queue_dropped",
        /// Requests refused with 503 while the cgi was away.
        CgiQueueRefused = "cgi_queue_refused",
        /// Held requests answered 503: the cgi did not come back in time.
        CgiQueueExpired = "cgi_queue_expired",
        /// Requests that timed out while arriving (408).
        RequestTimeouts = "request_timeouts",
        /// Idle keep-alive connections closed.
        IdleCloses = "idle_closes",
        /// Request heads not complete within the request timeout (408).
        HeadTimeouts408 = "head_timeouts_408",
        /// Request heads that arrived slower than the minimum input rate
        /// (408).
        HeadTooSlow = "head_too_slow",
        /// Request bodies that arrived slower than the minimum input rate
        /// (408).
        BodyTooSlow = "body_too_slow",
        /// Times a pending head's input was copied into one buffer (too
        /// many slices).
        InputFlattens = "input_flattens",
        /// Bytes copied by those flattenings.
        InputBytesFlattened = "input_bytes_flattened",
        /// Bytes httpd's IO-Lite domain copied.
        BytesCopied = "bytes_copied",
        /// Bytes the domain sent by reference.
        BytesByRefSent = "bytes_by_ref_sent",
        /// Bytes the domain received by reference.
        BytesByRefReceived = "bytes_by_ref_received",
        /// The domain's buffers in use now.
        BuffersInUse = "buffers_in_use",
        /// The domain's pages in use now.
        PagesInUse = "pages_in_use",
        /// The most pages the domain had in use at once.
        HighWaterPages = "high_water_pages",
        /// Buffer allocations that failed.
        AllocFailures = "alloc_failures",
        /// Bytes of CGI response headers copied for parsing (the body goes
        /// by reference).
        CgiHeaderBytesCopied = "cgi_header_bytes_copied",
        /// Request bytes copied into the per-connection parse buffer.
        RequestBytesCopiedToParse = "request_bytes_copied_to_parse",
        /// Of those, bytes of a request body (copied only because they
        /// arrived with the header).
        RequestBodyBytesCopiedToParse = "request_body_bytes_copied_to_parse",
        /// Request bodies flattened (more slices than an aggregate holds).
        BodiesFlattened = "bodies_flattened",
        /// Request body bytes copied by that flattening.
        BodyBytesFlattened = "body_bytes_flattened",
        /// CGI replies that came after their deadline (dropped).
        CgiLateReplies = "cgi_late_replies",
        /// Bytes a CGI sent beyond the `Content-Length` it announced.
        CgiStreamExcessBytes = "cgi_stream_excess_bytes",
        /// Credits and cancels for the cgi's streams lost to a full queue.
        CgiControlsDropped = "cgi_controls_dropped",
        /// Static file bytes copied on their way to netstack (copy modes).
        StaticBytesCopied = "static_bytes_copied",
        /// CGI reply bytes copied on their way to netstack (copy modes).
        CgiBytesCopied = "cgi_bytes_copied",
        /// Request bytes copied from netstack's buffers (copy modes).
        RequestBytesCopied = "request_bytes_copied",
        /// Request body bytes copied into the CGI request pool.
        CgiBodyBytesCopied = "cgi_body_bytes_copied",
        /// Request body bytes passed to the cgi by reference.
        CgiBodyBytesByRef = "cgi_body_bytes_by_ref",
        /// Hand-off switches asked of netstack (on and off).
        HandOffSwitches = "hand_off_switches",
        /// Body parts that waited for room.
        CgiBodyPartsDeferred = "cgi_body_parts_deferred",
        /// Input pauses asked of netstack.
        InputPauses = "input_pauses",
        /// File buffers in CGI replies that fs vouched for.
        CgiFileRefsVouched = "cgi_file_refs_vouched",
        /// File buffers in CGI replies fs did not vouch for (the cgi named
        /// a buffer it does not hold).
        CgiFileRefsUnheld = "cgi_file_refs_unheld",
        /// Descriptors rejected (forged or invalid references).
        RejectedDescriptors = "rejected_descriptors",
        /// Of them: a pool outside the sender's grant list.
        RejectedForeignPool = "rejected_foreign_pool",
        /// Of them: one of our buffers we had not lent to the sender.
        RejectedNotGranted = "rejected_not_granted",
        /// Requests to netstack that failed.
        SendErrors = "send_errors",
        /// Times a connection waited for send credit.
        SendCreditWaits = "send_credit_waits",
        /// Times the fs client reconnected.
        FsReconnects = "fs_reconnects",
        /// Files reopened after a reconnection.
        FsReopens = "fs_reopens",
        /// File references reused from the cache of references.
        FileRefsHits = "file_refs_hits",
        /// File references added to it.
        FileRefsInserts = "file_refs_inserts",
        /// File references evicted from it.
        FileRefsEvictions = "file_refs_evictions",
        /// Times it was cleared.
        FileRefsClears = "file_refs_clears",
        /// File references it keeps now.
        FileRefsKept = "file_refs_kept",
        /// Bytes those references hold.
        FileRefsBytes = "file_refs_bytes",
        /// fs calls tried again.
        FsRetries = "fs_retries",
        /// Times a new incarnation of the cgi attached.
        CgiRestarts = "cgi_restarts",
        /// Times netstack died under us.
        NetstackRestarts = "netstack_restarts",
        /// Connections that went with it.
        NetstackConnectionsLost = "netstack_connections_lost",
        /// Restarts of the cgi asked of the supervisor (timeouts).
        CgiRestartRequests = "cgi_restart_requests",
        /// Of those, requests it refused or could not carry out.
        CgiRestartFailures = "cgi_restart_failures",
        /// CGI requests answered 503 because the cgi was unavailable.
        CgiUnavailable = "cgi_unavailable",
        /// Times our priority was lent to the starved cgi.
        CgiPriorityLends = "cgi_priority_lends",
        /// The cgi's generation we are attached to now (0: not yet).
        CgiGeneration = "cgi_generation",
        /// Times httpd was woken.
        Wakeups = "wakeups",
        /// Idle keep-alive connections closed early to make room at the
        /// limit.
        IdleEvictions = "idle_evictions",
        /// Connections closed because the client took none of its output
        /// for the send timeout.
        SendTimeouts = "send_timeouts",
        /// File reads the source refused for now (busy).
        FileReadsDeferred = "file_reads_deferred",
        /// Times a static request waited for the file source.
        FileOpensDeferred = "file_opens_deferred",
        /// Requests answered 503: the source stayed busy too long.
        FileOpensExpired = "file_opens_expired",
        /// `/healthz` requests answered.
        HealthChecks = "health_checks",
        /// Access and error log lines made.
        AccessLogLines = "access_log_lines",
        /// Of them, lines dropped before the component took them.
        AccessLogLinesDropped = "access_log_lines_dropped",
        /// Bytes of request lines, referers and user agents copied into
        /// log lines (metadata, not payload).
        AccessLogBytesCopied = "access_log_bytes_copied",
        /// Log lines the component did not print: over its rate limit.
        AccessLogRateDropped = "access_log_rate_dropped",
        /// netstack connections open now (the component's).
        ConnectionsOpen = "connections_open",
        /// Of them, connections netstack said were full.
        ConnectionsSendFull = "connections_send_full",
        /// Heap bytes in use now.
        HeapUsed = "heap_used",
        /// Requests to netstack waiting for room now.
        NetstackRequestsQueued = "netstack_requests_queued",
        /// Requests to netstack refused (their queue full).
        NetstackRequestsRefused = "netstack_requests_refused",
        /// Pages of the application pool: fixed.
        PoolPages = "pool_pages",
        /// Of them, pages in use now.
        PoolPagesInUse = "pool_pages_in_use",
        /// The build's copy mode (0 iolite, 1 flash, 2 posix): fixed.
        CopyMode = "copy_mode",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_and_fit_a_page() {
        assert!(counters::names_are_valid::<HttpdCounter>());
        assert!(HttpdCounter::ALL.len() <= counters::CAPACITY);
        assert_eq!(HttpdCounter::ConnectionsActive.name(), "connections_active");
        assert_eq!(HttpdCounter::CopyMode.index(), HttpdCounter::ALL.len() - 1);
    }
}
