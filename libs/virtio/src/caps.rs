//! The virtio vendor capabilities in PCI configuration space (virtio 1.0
//! §4.1.4): where the common configuration, the notification area, the
//! ISR byte and the device-specific configuration are, each as a BAR, an
//! offset and a length.
//!
//! Configuration space comes from the device's side of the bus, so the
//! walk is bounded (at most [`MAX_CAPS`] entries, pointers inside the
//! 256-byte space and past the standard header), and every structure's
//! bounds are checked when it is used ([`Layout::check`]).

/// Most capabilities followed: a list that loops or never ends stops here.
pub const MAX_CAPS: usize = 48;
/// PCI capability ID of a vendor-specific capability (virtio's).
pub const CAP_VENDOR: u8 = 0x09;
/// The common configuration structure's size (virtio 1.0 §4.1.4.3).
pub const COMMON_BYTES: u32 = 0x38;

const CFG_COMMON: u8 = 1;
const CFG_NOTIFY: u8 = 2;
const CFG_ISR: u8 = 3;
const CFG_DEVICE: u8 = 4;

/// One structure: `length` bytes at `offset` in BAR `bar`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Region {
    /// The BAR (0..=5).
    pub bar: u8,
    /// Byte offset in the BAR.
    pub offset: u32,
    /// Length in bytes.
    pub length: u32,
}

/// Where a device's structures are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The common configuration.
    pub common: Region,
    /// The notification area.
    pub notify: Region,
    /// A queue's doorbell is at `queue_notify_off * notify_multiplier` in
    /// the notification area.
    pub notify_multiplier: u32,
    /// The ISR status byte.
    pub isr: Region,
    /// The device-specific configuration (a NIC's MAC address), if any.
    pub device: Option<Region>,
}

/// Why a device's capabilities are not usable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CapError {
    /// The status register says there is no capability list.
    NoList,
    /// A capability pointer outside 0x40..0x100 or not 4-aligned.
    BadPointer(u8),
    /// More than [`MAX_CAPS`] entries: a loop.
    TooMany,
    /// A required structure (common, notify, ISR) is missing.
    Missing(&'static str),
    /// A structure too short for what it holds, or one in a BAR other
    /// than the common configuration's (only one BAR is mapped).
    Bad(&'static str),
    /// A structure that does not fit the window mapped for its BAR.
    OutsideWindow(&'static str),
}

impl core::fmt::Display for CapError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CapError::NoList => f.write_str("no capability list"),
            CapError::BadPointer(p) => write!(f, "capability pointer {p:#x} outside 0x40..0x100 or unaligned"),
            CapError::TooMany => write!(f, "more than {MAX_CAPS} capabilities (a loop)"),
            CapError::Missing(s) => write!(f, "no virtio {s} capability"),
            CapError::Bad(s) => write!(f, "the virtio {s} capability is too short or in another BAR"),
            CapError::OutsideWindow(s) => write!(f, "the virtio {s} structure is outside the mapped BAR"),
        }
    }
}

/// Walks the capability list through `read32` (a dword of configuration
/// space at a 4-aligned offset) and returns the virtio structures. The
/// first capability of each type wins, as the specification asks.
pub fn parse(mut read32: impl FnMut(u8) -> u32) -> Result<Layout, CapError> {
    const STATUS_CAP_LIST: u32 = 1 << (16 + 4);
    if read32(0x04) & STATUS_CAP_LIST == 0 {
        return Err(CapError::NoList);
    }
    let (mut common, mut notify, mut isr, mut device) = (None, None, None, None);
    let mut mult = 0;
    let mut ptr = (read32(0x34) & 0xff) as u8;
    let mut seen = 0;
    while ptr != 0 {
        if !(0x40..=0xfc).contains(&ptr) || !ptr.is_multiple_of(4) {
            return Err(CapError::BadPointer(ptr));
        }
        seen += 1;
        if seen > MAX_CAPS {
            return Err(CapError::TooMany);
        }
        let head = read32(ptr);
        let (id, next, len, cfg_type) = (head as u8, (head >> 8) as u8, (head >> 16) as u8, (head >> 24) as u8);
        // A virtio capability is at least 16 bytes, all inside the space.
        if id == CAP_VENDOR && len >= 16 && ptr as usize + len as usize <= 0x100 {
            let region =
                Region { bar: (read32(ptr + 4) & 0xff) as u8, offset: read32(ptr + 8), length: read32(ptr + 12) };
            match cfg_type {
                CFG_COMMON if common.is_none() => common = Some(region),
                CFG_NOTIFY if notify.is_none() && len >= 20 => {
                    notify = Some(region);
                    mult = read32(ptr + 16);
                }
                CFG_ISR if isr.is_none() => isr = Some(region),
                CFG_DEVICE if device.is_none() => device = Some(region),
                _ => {}
            }
        }
        ptr = next;
    }
    let layout = Layout {
        common: common.ok_or(CapError::Missing("common"))?,
        notify: notify.ok_or(CapError::Missing("notify"))?,
        notify_multiplier: mult,
        isr: isr.ok_or(CapError::Missing("ISR"))?,
        device,
    };
    let bar = layout.common.bar;
    let named = [("common", layout.common, COMMON_BYTES), ("notify", layout.notify, 2), ("ISR", layout.isr, 1)];
    for (name, r, min) in named.into_iter().chain(layout.device.map(|d| ("device", d, 1))) {
        if r.bar != bar || r.bar > 5 || r.length < min {
            return Err(CapError::Bad(name));
        }
    }
    Ok(layout)
}

impl Layout {
    /// Checks every structure against a window of `len` bytes mapped for
    /// the BAR (the driver's mapping need not cover the whole BAR).
    pub fn check(&self, len: u64) -> Result<(), CapError> {
        let regions = [("common", self.common), ("notify", self.notify), ("ISR", self.isr)];
        for (name, r) in regions.into_iter().chain(self.device.map(|d| ("device", d))) {
            if r.offset as u64 + r.length as u64 > len {
                return Err(CapError::OutsideWindow(name));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A configuration space of dwords, capabilities written by hand.
    struct Space([u32; 64]);

    impl Space {
        /// QEMU's virtio-net-pci layout: common, ISR, device, notify in BAR 4.
        fn qemu() -> Space {
            let mut s = Space([0; 64]);
            s.0[1] = 1 << 20; // status: capability list
            s.0[0x34 / 4] = 0x40;
            s.cap(0x40, 0x50, 1, 4, 0x0000, 0x1000, None);
            s.cap(0x50, 0x60, 3, 4, 0x1000, 0x1000, None);
            s.cap(0x60, 0x70, 4, 4, 0x2000, 0x1000, None);
            s.cap(0x70, 0x00, 2, 4, 0x3000, 0x1000, Some(4));
            s
        }

        #[allow(clippy::too_many_arguments)]
        fn cap(&mut self, at: u8, next: u8, cfg: u8, bar: u8, offset: u32, length: u32, mult: Option<u32>) {
            let len = if mult.is_some() { 20 } else { 16 };
            let i = at as usize / 4;
            self.0[i] = CAP_VENDOR as u32 | (next as u32) << 8 | len << 16 | (cfg as u32) << 24;
            self.0[i + 1] = bar as u32;
            self.0[i + 2] = offset;
            self.0[i + 3] = length;
            if let Some(m) = mult {
                self.0[i + 4] = m;
            }
        }

        fn read(&self) -> impl FnMut(u8) -> u32 + '_ {
            |off| self.0[off as usize / 4]
        }
    }

    #[test]
    fn qemus_layout_is_found() {
        let s = Space::qemu();
        let l = parse(s.read()).unwrap();
        assert_eq!(l.common, Region { bar: 4, offset: 0, length: 0x1000 });
        assert_eq!(l.isr, Region { bar: 4, offset: 0x1000, length: 0x1000 });
        assert_eq!(l.device, Some(Region { bar: 4, offset: 0x2000, length: 0x1000 }));
        assert_eq!(l.notify, Region { bar: 4, offset: 0x3000, length: 0x1000 });
        assert_eq!(l.notify_multiplier, 4);
        assert_eq!(l.check(0x4000), Ok(()));
        assert_eq!(l.check(0x3fff), Err(CapError::OutsideWindow("notify")));
    }

    #[test]
    fn hostile_lists_are_refused() {
        let mut s = Space::qemu();
        s.0[1] = 0;
        assert_eq!(parse(s.read()), Err(CapError::NoList));
        // A loop: the last capability points back at the first.
        let mut s = Space::qemu();
        s.cap(0x70, 0x40, 2, 4, 0x3000, 0x1000, Some(4));
        assert_eq!(parse(s.read()), Err(CapError::TooMany));
        // Into the standard header, and unaligned.
        for p in [0x10, 0x85] {
            let mut s = Space::qemu();
            s.0[0x34 / 4] = p;
            assert_eq!(parse(s.read()), Err(CapError::BadPointer(p as u8)));
        }
        // No notify capability.
        let mut s = Space::qemu();
        s.cap(0x60, 0x00, 4, 4, 0x2000, 0x1000, None);
        assert_eq!(parse(s.read()), Err(CapError::Missing("notify")));
        // A common configuration too short, and an ISR in another BAR.
        let mut s = Space::qemu();
        s.cap(0x40, 0x50, 1, 4, 0, 0x20, None);
        assert_eq!(parse(s.read()), Err(CapError::Bad("common")));
        let mut s = Space::qemu();
        s.cap(0x50, 0x60, 3, 2, 0x1000, 0x1000, None);
        assert_eq!(parse(s.read()), Err(CapError::Bad("ISR")));
        // An offset that wraps past the window.
        let mut s = Space::qemu();
        s.cap(0x60, 0x70, 4, 4, u32::MAX, 0x1000, None);
        assert_eq!(parse(s.read()).unwrap().check(0x4000), Err(CapError::OutsideWindow("device")));
    }

    #[test]
    fn the_first_of_each_type_wins_and_others_are_skipped() {
        let mut s = Space::qemu();
        // A second common configuration after the first, and a foreign
        // capability (MSI-X, id 0x11) in between.
        s.cap(0x70, 0x90, 2, 4, 0x3000, 0x1000, Some(4));
        s.cap(0x90, 0xa0, 1, 4, 0x8000, 0x1000, None);
        s.0[0xa0 / 4] = 0x11;
        let l = parse(s.read()).unwrap();
        assert_eq!(l.common.offset, 0);
    }
}
