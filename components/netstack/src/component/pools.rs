//! Our pools and what each peer may reference: the pools the assembly
//! maps into us (ours, netdrv's receive pool, the client's), the grant
//! lists and quotas per peer, and the pages a dead incarnation of ours
//! left in use, quarantined until its death is settled.

use component_runtime::start::StartInfo;
use glue_rt::map_pool;
use iolite::{Domain, Trust};

use super::glue;
use super::glue::pools::{APP_POOL, HDR_POOL, RX_POOL, SOCK_POOL};
use super::{CLIENT, CLIENT2, NETDRV};

/// Maps every pool the assembly connects to us into `d`.
pub(super) fn map_pools(d: &'static Domain) {
    // SAFETY (all pools): the dataports are mapped as the assembly declares
    // for as long as we run, and used only through this domain.
    unsafe {
        map_pool!(owned d, HDR_POOL, glue::hdr_pool, Trust::Trusted).expect("hdr pool");
        map_pool!(owned d, SOCK_POOL, glue::sock_pool, Trust::Trusted).expect("sock pool");
        map_pool!(foreign d, RX_POOL, glue::rx_pool, Trust::Trusted).expect("rx pool");
        map_pool!(foreign d, APP_POOL, glue::app_pool, Trust::Trusted).expect("app pool");
        // Optional pools the client forwards slices of (web server: the
        // file cache, CGI output), where the assembly connects them.
        if let Some(id) = glue::pools::FILE_POOL {
            map_pool!(foreign d, id, glue::file_pool, Trust::Trusted).expect("file pool");
        }
        if let Some(id) = glue::pools::CGI_POOL {
            // Untrusted: its producer can rewrite its buffers, so no
            // checksum is ever cached for them.
            map_pool!(foreign d, id, glue::cgi_pool, Trust::Untrusted).expect("cgi pool");
        }
        if let Some(id) = glue::pools::CGI_REQ_POOL {
            map_pool!(foreign d, id, glue::cgi_req_pool, Trust::Trusted).expect("cgi request pool");
        }
        // The hand-off pool, where the assembly connects one: received
        // data of connections the client passes on (Request::HandOff).
        if let Some(id) = glue::pools::BODY_POOL {
            map_pool!(owned d, id, glue::body_pool, Trust::Trusted).expect("body pool");
        }
    }
}

/// Sets what each peer may reference in what it sends us, and how many
/// of our buffers a client may hold; true if the assembly connects a
/// second client (`client2`).
pub(super) fn grant(d: &'static Domain, start: &StartInfo) -> bool {
    // What each peer may reference in what it sends us: netdrv its received
    // frames, the client the pools it maps (never our headers or netdrv's
    // receive pool), and our own buffers only where we lent them to it.
    d.set_peer_pools_named(NETDRV, glue::attributes::LINK_REFS, glue::pools::ALL).expect("link grant list");
    d.set_peer_pools_named(CLIENT, glue::attributes::CLIENT_REFS, glue::pools::ALL).expect("client grant list");
    // A client may hold this many of our buffers (received data) at once.
    let _ = d.set_quota(CLIENT, glue::attributes::CLIENT_QUOTA as u32);
    let has_client2 = mapped(start, glue::client2::VADDR);
    if has_client2 {
        d.set_peer_pools_named(CLIENT2, glue::attributes::CLIENT2_REFS, glue::pools::ALL).expect("client2 grant list");
        let _ = d.set_quota(CLIENT2, glue::attributes::CLIENT2_QUOTA as u32);
    }
    has_client2
}

/// The pools we own (headers, received data, and the hand-off pool where
/// the assembly connects one): their pages a dead incarnation left in use
/// are quarantined in the next one.
pub(super) fn owned_pools() -> impl Iterator<Item = iolite::PoolId> {
    [HDR_POOL, SOCK_POOL].into_iter().chain(glue::pools::BODY_POOL)
}

/// Pages of our pools quarantined after a restart of ours.
pub(super) fn quarantined_pages(d: &Domain) -> u32 {
    owned_pools().map(|p| d.quarantined_pages(p).unwrap_or(0)).sum()
}

/// Whether the loader mapped a dataport at `vaddr` (an optional one the
/// assembly connects).
fn mapped(start: &StartInfo, vaddr: usize) -> bool {
    start.dataports().iter().any(|r| r.vaddr == vaddr as u64)
}
