//! virtio 1.0 ("modern") devices over PCI, for drivers that bring their own
//! memory: the rings live in pages the caller owns and names by physical
//! address, and every buffer a chain points at stays the caller's.
//!
//! * [`caps`]: the vendor capabilities in configuration space (common,
//!   notify, ISR, device configuration), read through any 32-bit reader
//!   (netdrv's is pci_config's RPC), bounded and checked.
//! * [`transport`]: the common configuration structure: reset, status,
//!   feature negotiation ([`transport::negotiate`]: `VIRTIO_F_VERSION_1`
//!   required), queue set-up and notification, the ISR.
//! * [`queue`]: a split virtqueue with `VIRTIO_F_EVENT_IDX`: descriptor
//!   chains, one avail-index write per batch and a notification only when
//!   the device asked for it, used-ring entries read once and checked (a
//!   device is a peer too: an index, id or length it wrote is never
//!   followed unchecked).
//!
//! The device registers are reached through [`Regs`], so everything here
//! runs on the host against simulated devices.
#![cfg_attr(not(test), no_std)]
#![deny(missing_docs)]

extern crate alloc;

pub mod caps;
pub mod queue;
pub mod transport;

mod mmio;
pub use mmio::Mmio;

/// Feature bit: the device is a virtio 1.0 device (required here).
pub const F_VERSION_1: u64 = 1 << 32;
/// Feature bit: `used_event` / `avail_event` notification suppression.
pub const F_EVENT_IDX: u64 = 1 << 29;
/// Feature bit: indirect descriptor tables (refused: a chain fits the ring).
pub const F_INDIRECT_DESC: u64 = 1 << 28;
/// Feature bit: the device needs an IOMMU's addresses (refused: we give
/// physical addresses).
pub const F_ACCESS_PLATFORM: u64 = 1 << 33;
/// Feature bit: packed virtqueues (refused: split queues only).
pub const F_RING_PACKED: u64 = 1 << 34;

/// Byte access to a device's register window (a BAR, or the part of one
/// the driver maps). Offsets are the driver's; an implementation checks
/// them against its window.
pub trait Regs {
    /// Reads the byte at `offset`.
    fn read8(&self, offset: usize) -> u8;
    /// Reads the little-endian 16-bit register at `offset`.
    fn read16(&self, offset: usize) -> u16;
    /// Reads the little-endian 32-bit register at `offset`.
    fn read32(&self, offset: usize) -> u32;
    /// Writes the byte at `offset`.
    fn write8(&mut self, offset: usize, value: u8);
    /// Writes the 16-bit register at `offset`.
    fn write16(&mut self, offset: usize, value: u16);
    /// Writes the 32-bit register at `offset`.
    fn write32(&mut self, offset: usize, value: u32);
}
