//! Hand-written `no_std` bindings for the seL4 5.0.0 kernel ABI on x86_64
//! (pc99), for the Iolite kernel configuration in `kernel-config/`:
//! XAPIC + IOAPIC, no huge pages, no IOMMU, no VT-x, single core, non-MCS,
//! 256 priorities, 230 bootinfo untypeds, and the debug syscalls when the
//! `debug` feature (default) matches a `CONFIG_DEBUG_BUILD` kernel.
//!
//! Everything is written from the 5.0.0 headers and interface XML, not
//! generated; `tests/kernel_abi.rs` checks labels, syscall numbers, object
//! types and invocation encodings against the kernel tree named by the
//! `SEL4_SOURCE` environment variable.
//!
//! Layout:
//! - [`types`]: [`MessageInfo`], [`CapRights`], [`CapData`], [`PrioProps`],
//!   [`Error`], [`ObjectType`], [`VmAttributes`], [`UserContext`];
//! - [`constants`]: initial cap slots, object sizes, limits;
//! - [`ipc_buffer`](mod@ipc_buffer): [`IpcBuffer`] and the per-address-space pointer to it;
//! - [`syscalls`]: [`call`], [`send`], [`recv`], [`reply_recv`], ...;
//! - [`bootinfo`]: [`BootInfo`] and the untyped list;
//! - [`fault`]: fault labels and message layouts;
//! - [`invocation`]: one function per kernel method, plus the pure
//!   [`invocation::encode`] step and the [`invocation::labels`].
//!
//! All items are also re-exported at the crate root.

#![cfg_attr(not(test), no_std)]
#![warn(missing_docs)]

pub mod bootinfo;
pub mod constants;
pub mod fault;
pub mod invocation;
pub mod ipc_buffer;
pub mod syscalls;
pub mod types;

pub use bootinfo::*;
pub use constants::*;
pub use fault::Fault;
pub use invocation::*;
pub use ipc_buffer::{get_badge, get_mr, ipc_buffer, set_cap, set_ipc_buffer, set_mr, IpcBuffer};
pub use syscalls::*;
pub use types::*;
