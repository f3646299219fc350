//! The NIC netdrv found, behind one face for the round: the e1000 or
//! e1000e (`netdrv::e1000`) or a virtio-net device (`netdrv::virtio_net`), both
//! zero copy, both counting into the same `drv_stats` names.

use e1000_regs::Mmio;
use iolite::Aggregate;
use netdrv::e1000::{Counter, Interrupt, Pull, E1000};
use netdrv::virtio_net::VirtioNet;
use nic_api::Values;

use super::StartDma;

/// The driver of the device found.
// One for the component's life, in its `Driver`: boxing the larger
// variant would buy nothing but an indirection per call.
#[allow(clippy::large_enum_variant)]
pub(super) enum Nic {
    /// An 82540EM or 82574L (the driver knows which).
    E1000(E1000<'static, Mmio, StartDma>),
    /// A virtio 1.0 network device.
    Virtio(VirtioNet<'static, virtio::Mmio, StartDma>),
}

/// What an interrupt (or a poll) found.
pub(super) struct Woke {
    /// The new link state, if it changed.
    pub link: Option<bool>,
    /// A cause register that cannot be the device's (e1000 only).
    pub bogus: Option<u32>,
}

macro_rules! both {
    ($self:ident, $n:ident => $e:expr) => {
        match $self {
            Nic::E1000($n) => $e,
            Nic::Virtio($n) => $e,
        }
    };
}

impl Nic {
    /// The model's name in log lines: "e1000", "e1000e" or "virtio-net".
    pub fn name(&self) -> &'static str {
        match self {
            Nic::E1000(n) => n.model().name(),
            Nic::Virtio(_) => "virtio-net",
        }
    }

    pub fn tx_reap(&mut self) -> usize {
        both!(self, n => n.tx_reap())
    }

    pub fn rx_drain(&mut self, max: usize, deliver: impl FnMut(Aggregate<'static>) -> bool) -> usize {
        both!(self, n => n.rx_drain(max, deliver))
    }

    pub fn rx_refill(&mut self) {
        both!(self, n => n.rx_refill())
    }

    pub fn rx_ready(&self) -> bool {
        both!(self, n => n.rx_ready())
    }

    pub fn tx_post(&mut self, pull: impl FnMut() -> Pull<'static>) {
        both!(self, n => n.tx_post(pull))
    }

    pub fn tx_waiting(&self) -> bool {
        both!(self, n => n.tx_waiting())
    }

    pub fn count(&mut self, c: Counter, v: u64) {
        both!(self, n => n.count(c, v))
    }

    pub fn set_counter(&mut self, c: Counter, v: u64) {
        both!(self, n => n.set_counter(c, v))
    }

    pub fn counters(&self) -> &Values<Counter> {
        both!(self, n => n.counters())
    }

    pub fn link_up(&mut self) -> bool {
        both!(self, n => n.link_up())
    }

    /// Whether TCP segmentation offload is carried out (offered netstack).
    pub fn tso(&self, asked: bool) -> bool {
        match self {
            Nic::E1000(_) => asked,
            Nic::Virtio(n) => n.tso(),
        }
    }

    /// Reads (and so clears) the interrupt causes.
    pub fn interrupt(&mut self) -> Woke {
        match self {
            Nic::E1000(n) => match n.interrupt() {
                Interrupt::Causes { link, .. } => Woke { link, bogus: None },
                Interrupt::NotTheDevice(icr) => Woke { link: None, bogus: Some(icr) },
            },
            Nic::Virtio(n) => Woke { link: n.interrupt().link, bogus: None },
        }
    }

    /// What stopped a virtio device, if its used ring could not be true.
    pub fn device_error(&self) -> Option<virtio::queue::UsedError> {
        match self {
            Nic::E1000(_) => None,
            Nic::Virtio(n) => n.device_error(),
        }
    }
}
