//! The common configuration structure (virtio 1.0 §4.1.4.3): reset,
//! status, feature negotiation, queue set-up, notification, the ISR and
//! the device-specific configuration, all at the offsets the capabilities
//! gave ([`crate::caps::Layout`]) and checked against them.

use crate::caps::Layout;
use crate::{Regs, F_VERSION_1};

const DEVICE_FEATURE_SELECT: usize = 0x00;
const DEVICE_FEATURE: usize = 0x04;
const DRIVER_FEATURE_SELECT: usize = 0x08;
const DRIVER_FEATURE: usize = 0x0c;
const MSIX_CONFIG: usize = 0x10;
const NUM_QUEUES: usize = 0x12;
const DEVICE_STATUS: usize = 0x14;
const CONFIG_GENERATION: usize = 0x15;
const QUEUE_SELECT: usize = 0x16;
const QUEUE_SIZE: usize = 0x18;
const QUEUE_MSIX_VECTOR: usize = 0x1a;
const QUEUE_ENABLE: usize = 0x1c;
const QUEUE_NOTIFY_OFF: usize = 0x1e;
const QUEUE_DESC: usize = 0x20;
const QUEUE_DRIVER: usize = 0x28;
const QUEUE_DEVICE: usize = 0x30;
/// No MSI-X vector: interrupts come as INTx, announced in the ISR.
const NO_VECTOR: u16 = 0xffff;

/// Device status: the guest found the device.
pub const STATUS_ACKNOWLEDGE: u8 = 1;
/// Device status: the guest has a driver for it.
pub const STATUS_DRIVER: u8 = 2;
/// Device status: the driver is ready.
pub const STATUS_DRIVER_OK: u8 = 4;
/// Device status: feature negotiation is complete.
pub const STATUS_FEATURES_OK: u8 = 8;
/// Device status: the device met an error it cannot recover from alone.
pub const STATUS_NEEDS_RESET: u8 = 64;
/// Device status: the driver gave up on the device.
pub const STATUS_FAILED: u8 = 128;
/// ISR bit: a used ring changed.
pub const ISR_QUEUE: u8 = 1;
/// ISR bit: the device configuration changed.
pub const ISR_CONFIG: u8 = 2;
/// Looks at the device status after a reset before giving up.
pub const RESET_POLLS: u32 = 100_000;

/// Why the transport refused to go on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportError {
    /// The device status did not read 0 after [`RESET_POLLS`] looks.
    ResetStuck,
    /// The device does not offer `VIRTIO_F_VERSION_1` (a legacy-only device).
    NoVersion1,
    /// Feature bits the driver requires that the device does not offer.
    Missing(u64),
    /// The device cleared FEATURES_OK: it refused what we accepted.
    FeaturesRefused,
    /// The queue does not exist (size 0) or is not a power of two.
    BadQueue(u16, u16),
    /// The queue's doorbell lies outside the notification area.
    BadNotify(u16),
}

impl core::fmt::Display for TransportError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            TransportError::ResetStuck => write!(f, "device status not 0 after {RESET_POLLS} looks: reset stuck"),
            TransportError::NoVersion1 => f.write_str("no VIRTIO_F_VERSION_1: a legacy device (not driven here)"),
            TransportError::Missing(b) => write!(f, "required features {b:#x} not offered"),
            TransportError::FeaturesRefused => f.write_str("the device refused the features accepted (FEATURES_OK)"),
            TransportError::BadQueue(q, n) => write!(f, "queue {q} has size {n} (absent or not a power of two)"),
            TransportError::BadNotify(q) => write!(f, "queue {q}'s doorbell is outside the notification area"),
        }
    }
}

/// The features to accept: what the device offers of `wanted`, plus
/// `VERSION_1`; an error if it lacks `VERSION_1` or any of `required`.
pub fn negotiate(offered: u64, wanted: u64, required: u64) -> Result<u64, TransportError> {
    if offered & F_VERSION_1 == 0 {
        return Err(TransportError::NoVersion1);
    }
    if offered & required != required {
        return Err(TransportError::Missing(required & !offered));
    }
    Ok(offered & (wanted | required | F_VERSION_1))
}

/// A queue as the device was told: its size and where its doorbell is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueSetup {
    /// Descriptors in the queue.
    pub size: u16,
    /// The doorbell's offset in the register window.
    pub doorbell: usize,
}

/// A modern virtio device's common configuration.
pub struct Transport<R: Regs> {
    regs: R,
    layout: Layout,
}

impl<R: Regs> Transport<R> {
    /// The device whose window `regs` maps, structures where `layout`
    /// says (checked by the caller with [`Layout::check`]).
    pub fn new(regs: R, layout: Layout) -> Transport<R> {
        Transport { regs, layout }
    }

    /// The register window (tests reach the simulated device through it).
    pub fn regs(&mut self) -> &mut R {
        &mut self.regs
    }

    fn common(&self) -> usize {
        self.layout.common.offset as usize
    }

    /// The device status.
    pub fn status(&self) -> u8 {
        self.regs.read8(self.common() + DEVICE_STATUS)
    }

    fn set_status(&mut self, s: u8) {
        let at = self.common() + DEVICE_STATUS;
        self.regs.write8(at, s);
    }

    /// Resets the device (it stops using every queue) and acknowledges it
    /// with a driver; `yield_now` runs between looks at the status.
    pub fn reset(&mut self, mut yield_now: impl FnMut()) -> Result<(), TransportError> {
        self.set_status(0);
        let mut polls = 0;
        while self.status() != 0 {
            polls += 1;
            if polls >= RESET_POLLS {
                return Err(TransportError::ResetStuck);
            }
            yield_now();
        }
        self.set_status(STATUS_ACKNOWLEDGE);
        self.set_status(STATUS_ACKNOWLEDGE | STATUS_DRIVER);
        Ok(())
    }

    /// The 64 feature bits the device offers.
    pub fn device_features(&mut self) -> u64 {
        let c = self.common();
        let mut f = 0;
        for half in 0..2u32 {
            self.regs.write32(c + DEVICE_FEATURE_SELECT, half);
            f |= (self.regs.read32(c + DEVICE_FEATURE) as u64) << (32 * half);
        }
        f
    }

    /// Negotiates ([`negotiate`]) and sets FEATURES_OK; the device must
    /// keep it set. Returns the features accepted.
    pub fn set_features(&mut self, wanted: u64, required: u64) -> Result<u64, TransportError> {
        let offered = self.device_features();
        let accepted = negotiate(offered, wanted, required)?;
        let c = self.common();
        for half in 0..2u32 {
            self.regs.write32(c + DRIVER_FEATURE_SELECT, half);
            self.regs.write32(c + DRIVER_FEATURE, (accepted >> (32 * half)) as u32);
        }
        self.set_status(STATUS_ACKNOWLEDGE | STATUS_DRIVER | STATUS_FEATURES_OK);
        if self.status() & STATUS_FEATURES_OK == 0 {
            self.set_status(STATUS_FAILED);
            return Err(TransportError::FeaturesRefused);
        }
        // Configuration changes come as INTx too.
        self.regs.write16(c + MSIX_CONFIG, NO_VECTOR);
        Ok(accepted)
    }

    /// Queues the device has.
    pub fn queues(&self) -> u16 {
        self.regs.read16(self.common() + NUM_QUEUES)
    }

    /// The size queue `q` would have with at most `max` descriptors (the
    /// device's, halved until it fits).
    pub fn queue_size(&mut self, q: u16, max: u16) -> Result<u16, TransportError> {
        let c = self.common();
        self.regs.write16(c + QUEUE_SELECT, q);
        let mut n = self.regs.read16(c + QUEUE_SIZE);
        if n == 0 || !n.is_power_of_two() {
            return Err(TransportError::BadQueue(q, n));
        }
        while n > max.max(1) {
            n /= 2;
        }
        Ok(n)
    }

    /// Tells the device queue `q`'s size and ring addresses (descriptor
    /// table, driver area, device area) and enables it.
    pub fn set_up_queue(&mut self, q: u16, size: u16, rings: (u64, u64, u64)) -> Result<QueueSetup, TransportError> {
        let c = self.common();
        self.regs.write16(c + QUEUE_SELECT, q);
        self.regs.write16(c + QUEUE_SIZE, size);
        self.regs.write16(c + QUEUE_MSIX_VECTOR, NO_VECTOR);
        for (at, pa) in [(QUEUE_DESC, rings.0), (QUEUE_DRIVER, rings.1), (QUEUE_DEVICE, rings.2)] {
            self.regs.write32(c + at, pa as u32);
            self.regs.write32(c + at + 4, (pa >> 32) as u32);
        }
        let off = self.regs.read16(c + QUEUE_NOTIFY_OFF) as u64 * self.layout.notify_multiplier as u64;
        if off + 2 > self.layout.notify.length as u64 {
            return Err(TransportError::BadNotify(q));
        }
        self.regs.write16(c + QUEUE_ENABLE, 1);
        Ok(QueueSetup { size, doorbell: self.layout.notify.offset as usize + off as usize })
    }

    /// Sets DRIVER_OK: the device may use the queues.
    pub fn driver_ok(&mut self) {
        self.set_status(STATUS_ACKNOWLEDGE | STATUS_DRIVER | STATUS_FEATURES_OK | STATUS_DRIVER_OK);
    }

    /// Marks the device FAILED: the driver gave up on it (it may stop
    /// using the queues; a reset is the way back).
    pub fn set_failed(&mut self) {
        let s = self.status();
        self.set_status(s | STATUS_FAILED);
    }

    /// Rings queue `q`'s doorbell.
    pub fn notify(&mut self, setup: QueueSetup, q: u16) {
        self.regs.write16(setup.doorbell, q);
    }

    /// Reads (and so clears) the ISR status; deasserts INTx.
    pub fn isr(&mut self) -> u8 {
        self.regs.read8(self.layout.isr.offset as usize)
    }

    /// Copies the device configuration from `offset` into `out`, again
    /// until the configuration generation is the same before and after (at
    /// most a few times); `false` if `out` does not fit the structure or
    /// it never settled.
    pub fn device_config(&self, offset: usize, out: &mut [u8]) -> bool {
        let Some(dev) = self.layout.device else { return false };
        if offset + out.len() > dev.length as usize {
            return false;
        }
        let base = dev.offset as usize + offset;
        for _ in 0..4 {
            let before = self.regs.read8(self.common() + CONFIG_GENERATION);
            for (i, b) in out.iter_mut().enumerate() {
                *b = self.regs.read8(base + i);
            }
            if self.regs.read8(self.common() + CONFIG_GENERATION) == before {
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::F_EVENT_IDX;

    #[test]
    fn version_1_is_required_and_only_what_is_wanted_is_accepted() {
        assert_eq!(negotiate(F_EVENT_IDX, F_EVENT_IDX, 0), Err(TransportError::NoVersion1));
        let offered = F_VERSION_1 | F_EVENT_IDX | 1 << 15 | 1;
        assert_eq!(negotiate(offered, F_EVENT_IDX | 1 << 11, 0), Ok(F_VERSION_1 | F_EVENT_IDX));
        assert_eq!(negotiate(offered, 0, 1 << 5 | 1), Err(TransportError::Missing(1 << 5)));
    }
}
