//! netdrv's device logic, apart from seL4: the e1000's descriptor rings,
//! receive into IO-Lite pool buffers, multi-descriptor transmit of
//! aggregates and the interrupt causes ([`e1000`]). It reaches the device
//! only through [`e1000_regs::RegisterFile`] and a [`e1000::Dma`]
//! translation, so the host tests drive it against a simulated device
//! (`e1000/fake.rs`); the component (`src/component/`, seL4 only) wires it
//! to the real registers, the loader's physical addresses and netstack's
//! link channels.
#![cfg_attr(not(test), no_std)]
#![deny(missing_docs)]
// Failing IO-Lite operations hand aggregates back by value.
#![allow(clippy::result_large_err)]

extern crate alloc;

pub mod e1000;
pub mod virtio_net;
