//! IO-Lite for Iolite OS: immutable shared I/O buffers, buffer aggregates,
//! pools with ACLs, cross-component reference counting and zero-copy
//! channels (Pai, Druschel, Zwaenepoel, OSDI '99, §2.1–2.3, 2.8, 2.9).
//!
//! The library is kernel-free and works over raw shared-memory regions, so it
//! is tested on the host; the seL4 side supplies the dataports and signals
//! its seL4 notifications when a channel's `flush` says the peer asked. See `README.md` for the model: types,
//! lifetimes, who owns what, the wire format, and the design decisions.
//!
//! Quick tour:
//! * [`Domain`]: the IO-Lite state of one protection domain (its own pools,
//!   the foreign pools it can read, holds, peers, quotas, counters).
//! * [`BufMut`]: a buffer being filled by its producer; [`BufMut::seal`]
//!   turns it into an immutable [`Aggregate`] and the writer is gone.
//! * [`Aggregate`]: an ordered list of slices; every operation works on slices,
//!   never on payload bytes (except the explicit, counted copy operations).
//! * [`ChannelTx`]/[`ChannelRx`]: an IO-Lite pipe; aggregates go one way,
//!   releases come back. [`Copier`]: the copy modes' stage after a
//!   receiving end.
//! * [`iol`]: `iol_read`/`iol_write` and the copying compatibility path.
//! * [`StaticMeta`], [`StaticRegion`], [`static_meta!`], [`static_pool!`]:
//!   bookkeeping tables and private pools as plain statics (no `static mut`).
//!
//! Immutability is in the types. A sealed writer is gone:
//!
//! ```compile_fail
//! fn f(w: iolite::BufMut<'_>) {
//!     let _a = w.seal(1);
//!     w.remaining(); // error: use of moved value
//! }
//! ```
//!
//! An aggregate yields only shared slices:
//!
//! ```compile_fail
//! fn f(a: &iolite::Aggregate<'_>) {
//!     let _s: &mut [u8] = a.slices().next().unwrap(); // error: expected &mut
//! }
//! ```
//!
//! And a consumer's view of a pool offers no mutable pointer:
//!
//! ```compile_fail
//! fn f(r: iolite::RoRegion) {
//!     let _p: *mut u8 = r.as_ptr(); // error: expected *mut, found *const
//! }
//! ```

#![cfg_attr(not(test), no_std)]
#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
// Failing operations hand the aggregate back by value (nothing is lost);
// an aggregate is a few hundred bytes, which is fine.
#![allow(clippy::result_large_err)]

pub mod aggregate;
pub mod channel;
pub mod copy;
pub mod desc;
pub mod domain;
pub mod duplex;
pub mod gen;
pub mod guard;
pub mod iol;
pub mod mode;
pub mod pool;
pub mod region;
pub mod ring;
pub mod statics;
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use aggregate::Aggregate;
pub use channel::{channel_bytes, init_channel, Attach, ChannelRx, ChannelTx, Geometry, Receive, Received};
pub use copy::{Copier, Copying};
pub use desc::{AggDesc, PoolId, RelDesc, SliceDesc, FLAG_EOF, FLAG_RECLAIM};
pub use domain::{BufMut, Domain, Holds, PeerId, PeerState, PoolStats, Stats};
pub use duplex::{init_duplex, Duplex, DuplexAttach, Side, Want};
pub use gen::generate;
pub use guard::{Guard, Next};
pub use mode::{Boundary, CopyMode, BUILD_COPY_MODE};
pub use pool::{BufMeta, PoolLayout, Trust, PAGE_SIZE};
pub use region::{RoRegion, RwRegion};
pub use statics::{StaticMeta, StaticRegion};

/// Maximum number of slices in one aggregate (inline, fixed capacity).
pub const MAX_SLICES: usize = 16;
/// Maximum number of pools (own and foreign) one domain knows.
pub const MAX_POOLS: usize = 16;
/// The first id of a component's private pools: ids from here up are never
/// given to a pool of the assembly (the compiler numbers those 1, 2, ...;
/// `glue::pools`), so a pool shared with nobody (where a copying mode
/// copies into) takes one without meeting a shared pool's id.
pub const FIRST_PRIVATE_POOL: PoolId = 1 << 31;
/// Maximum number of peers (channels' far ends) one domain exchanges holds with.
pub const MAX_PEERS: usize = 6;

/// Every failure of the library. None of them panics or loses data: an
/// operation that fails leaves its inputs as they were (or hands them back).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The pool has no free run of pages large enough.
    PoolExhausted,
    /// The pool id is not known to this domain (not mapped here).
    UnknownPool,
    /// Allocation was requested from a pool this domain only reads.
    NotOwner,
    /// Buffer index out of range, or not the head of a live buffer.
    BadBuffer,
    /// The generation does not match the buffer's current generation
    /// (stale or forged reference).
    GenerationMismatch,
    /// Offset/length outside the buffer's sealed bytes or the pool.
    OutOfBounds,
    /// The result would need more than [`MAX_SLICES`] slices.
    TooManySlices,
    /// The peer's quota of held buffers would be exceeded (back-pressure).
    QuotaExceeded,
    /// The peer is dead or being cleaned up.
    PeerDown,
    /// Peer id out of range.
    BadPeer,
    /// A ring is full (back-pressure; retry after the peer drains it).
    Full,
    /// A shared ring's indices or header are inconsistent (corrupt peer).
    CorruptRing,
    /// A reference count would overflow.
    RefOverflow,
    /// A copy was required (copy mode) but no pool to copy into was given.
    NoCopyPool,
    /// A fixed-capacity table (pools, dirty list) is full.
    TableFull,
    /// Region too small, misaligned, or geometry invalid.
    BadRegion,
    /// Argument out of range (e.g. split point past the end).
    InvalidArgument,
    /// The peer is not in the ACL of a slice's pool (it cannot read it).
    NotInAcl,
    /// A received slice names a pool outside the sender's grant list
    /// ([`Domain::set_peer_pools`]).
    ForeignPool,
    /// A received slice names one of the receiver's own buffers that the
    /// receiver had not lent to the sender: a reference the sender cannot
    /// have been granted.
    NotGranted,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        core::fmt::Debug::fmt(self, f)
    }
}

/// Result type of the library.
pub type Result<T> = core::result::Result<T, Error>;
