//! What the CPU offers (CPUID) against what seL4 5.0, as `kernel-config/`
//! configures it, and Iolite OS need from it.
//!
//! The root task checks once at boot, before it loads anything, so that a
//! machine that cannot run the system says which feature it lacks. Some of
//! the kernel's own needs are checked by the kernel before it can print
//! through its console (FSGSBASE and SYSCALL in its 32-bit entry code, which
//! then halts with a line on COM1), or stop it later with a message of its
//! own (PAT, an x2APIC the firmware left enabled): a root task that runs has
//! them, and the check says so. What only we need (the TSC for every
//! component's clock) or what the kernel uses without checking (FXSAVE, the
//! local APIC) is checked here first.
//!
//! The decision is a pure function of a CPUID reader, so it is host-tested
//! with the leaves of CPUs that lack each feature.

/// The register of a CPUID leaf a feature bit is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reg {
    /// EBX.
    Ebx,
    /// ECX.
    Ecx,
    /// EDX.
    Edx,
}

/// One feature: a CPUID bit, its name and who needs it for what.
#[derive(Clone, Copy, Debug)]
pub struct Feature {
    /// The name printed (Linux's `/proc/cpuinfo` flag where there is one).
    pub name: &'static str,
    /// CPUID leaf (EAX).
    pub leaf: u32,
    /// CPUID subleaf (ECX).
    pub subleaf: u32,
    /// The register holding the bit.
    pub reg: Reg,
    /// The bit.
    pub bit: u32,
    /// Who needs it, for the message when it is missing.
    pub why: &'static str,
}

const fn feature(name: &'static str, leaf: u32, reg: Reg, bit: u32, why: &'static str) -> Feature {
    Feature { name, leaf, subleaf: 0, reg, bit, why }
}

/// Without any of these the system cannot run.
pub const REQUIRED: [Feature; 7] = [
    feature("lm", 0x8000_0001, Reg::Edx, 29, "seL4 is built for x86_64 (long mode)"),
    feature("syscall", 0x8000_0001, Reg::Edx, 11, "seL4's system calls (SYSCALL/SYSRET)"),
    feature("fsgsbase", 7, Reg::Ebx, 0, "seL4 is configured with FSGSBASE"),
    feature("pat", 1, Reg::Edx, 16, "seL4 sets the page attribute table"),
    feature("apic", 1, Reg::Edx, 9, "seL4's timer and interrupts (xAPIC, IOAPIC)"),
    feature("fxsr", 1, Reg::Edx, 24, "seL4 saves FPU state with FXSAVE"),
    feature("tsc", 1, Reg::Edx, 4, "every component's clock reads the TSC"),
];

/// Without these the system runs, but less well: each is named at boot.
pub const RECOMMENDED: [Feature; 2] = [
    feature(
        "constant_tsc",
        0x8000_0007,
        Reg::Edx,
        8,
        "clocks assume the TSC rate measured at boot never changes (true under QEMU; frequency scaling breaks it)",
    ),
    feature("rdrand", 1, Reg::Ecx, 30, "component seeds come from the TSC alone"),
];

/// One CPUID result: EAX, EBX, ECX, EDX.
pub type Leaf = [u32; 4];

/// What [`check`] found.
#[derive(Clone, Copy, Debug)]
pub struct Report {
    /// The vendor string (`GenuineIntel`, `AuthenticAMD`, ...).
    pub vendor: [u8; 12],
    /// The brand string, NUL-padded (all NUL when the CPU has none).
    pub brand: [u8; 48],
    /// Family, model and stepping, with the extended fields folded in.
    pub signature: (u32, u32, u32),
    /// Bit i set: `REQUIRED[i]` is missing.
    pub missing_required: u32,
    /// Bit i set: `RECOMMENDED[i]` is missing.
    pub missing_recommended: u32,
}

impl Report {
    /// The vendor string as text.
    pub fn vendor(&self) -> &str {
        text(&self.vendor)
    }

    /// The brand string as text, trimmed.
    pub fn brand(&self) -> &str {
        text(&self.brand).trim()
    }

    /// True when every required feature is present.
    pub fn runs(&self) -> bool {
        self.missing_required == 0
    }

    /// The required features that are missing.
    pub fn missing(&self) -> impl Iterator<Item = &'static Feature> + '_ {
        REQUIRED.iter().enumerate().filter(|(i, _)| self.missing_required & 1 << i != 0).map(|(_, f)| f)
    }

    /// The recommended features that are missing.
    pub fn lacking(&self) -> impl Iterator<Item = &'static Feature> + '_ {
        RECOMMENDED.iter().enumerate().filter(|(i, _)| self.missing_recommended & 1 << i != 0).map(|(_, f)| f)
    }
}

fn text(bytes: &[u8]) -> &str {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    core::str::from_utf8(&bytes[..end]).unwrap_or("?")
}

/// Reads the features through `cpuid(leaf, subleaf)`. A leaf above the
/// CPU's highest (leaf 0's or 0x8000_0000's EAX) counts as all zeros, as
/// the instruction's result for it is undefined.
pub fn check(cpuid: impl Fn(u32, u32) -> Leaf) -> Report {
    let basic = cpuid(0, 0);
    let max_basic = basic[0];
    let max_extended = cpuid(0x8000_0000, 0)[0];
    let read = |leaf: u32, subleaf: u32| -> Leaf {
        let max = if leaf >= 0x8000_0000 { max_extended } else { max_basic };
        if leaf > max || (leaf >= 0x8000_0000 && max < 0x8000_0000) {
            [0; 4]
        } else {
            cpuid(leaf, subleaf)
        }
    };
    let mut vendor = [0u8; 12];
    for (chunk, reg) in vendor.chunks_mut(4).zip([basic[1], basic[3], basic[2]]) {
        chunk.copy_from_slice(&reg.to_le_bytes());
    }
    let mut brand = [0u8; 48];
    for (i, chunk) in brand.chunks_mut(16).enumerate() {
        let leaf = read(0x8000_0002 + i as u32, 0);
        for (bytes, reg) in chunk.chunks_mut(4).zip(leaf) {
            bytes.copy_from_slice(&reg.to_le_bytes());
        }
    }
    let eax = read(1, 0)[0];
    let base_family = eax >> 8 & 0xf;
    let family = if base_family == 0xf { base_family + (eax >> 20 & 0xff) } else { base_family };
    let model = if base_family == 0x6 || base_family == 0xf {
        (eax >> 16 & 0xf) << 4 | (eax >> 4 & 0xf)
    } else {
        eax >> 4 & 0xf
    };
    let has = |f: &Feature| {
        let leaf = read(f.leaf, f.subleaf);
        let reg = match f.reg {
            Reg::Ebx => leaf[1],
            Reg::Ecx => leaf[2],
            Reg::Edx => leaf[3],
        };
        reg & 1 << f.bit != 0
    };
    let missing =
        |features: &[Feature]| features.iter().enumerate().filter(|(_, f)| !has(f)).fold(0u32, |m, (i, _)| m | 1 << i);
    Report {
        vendor,
        brand,
        signature: (family, model, eax & 0xf),
        missing_required: missing(&REQUIRED),
        missing_recommended: missing(&RECOMMENDED),
    }
}

/// This CPU's CPUID, for [`check`].
#[cfg(target_arch = "x86_64")]
pub fn cpuid(leaf: u32, subleaf: u32) -> Leaf {
    let r = core::arch::x86_64::__cpuid_count(leaf, subleaf);
    [r.eax, r.ebx, r.ecx, r.edx]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Leaves shaped like QEMU's `qemu64,+fsgsbase` model (its vendor,
    /// brand and signature; family 15 model 107), with the bits this
    /// module reads set as that model has them.
    fn qemu64(leaf: u32, subleaf: u32) -> Leaf {
        let _ = subleaf;
        match leaf {
            0 => [0xd, 0x6874_7541, 0x444d_4163, 0x6974_6e65],
            1 => [0x0006_0fb1, 0, 0x8028_2201, 0x078b_fbfd],
            7 => [0, 1, 0, 0],
            0x8000_0000 => [0x8000_0008, 0, 0, 0],
            0x8000_0001 => [0, 0, 0x25, 0x2010_0800],
            0x8000_0002 => [0x554d_4551, 0x7269_5620, 0x6c61_7574, 0x5550_4320],
            0x8000_0003 => [0x7265_7620, 0x6e6f_6973, 0x352e_3220, 0x002b],
            0x8000_0004 => [0; 4],
            _ => [0; 4],
        }
    }

    fn without(leaf: u32, reg: usize, bit: u32) -> impl Fn(u32, u32) -> Leaf {
        move |l, s| {
            let mut r = qemu64(l, s);
            if l == leaf {
                r[reg] &= !(1 << bit);
            }
            r
        }
    }

    #[test]
    fn qemu64_with_fsgsbase_runs_without_the_recommended_ones() {
        let r = check(qemu64);
        assert_eq!(r.vendor(), "AuthenticAMD");
        assert_eq!(r.brand(), "QEMU Virtual CPU version 2.5+");
        assert_eq!(r.signature, (15, 107, 1));
        assert!(r.runs());
        let lacking: Vec<_> = r.lacking().map(|f| f.name).collect();
        assert_eq!(lacking, ["constant_tsc", "rdrand"]);
    }

    #[test]
    fn each_required_feature_is_named_when_missing() {
        for (i, f) in REQUIRED.iter().enumerate() {
            let reg = match f.reg {
                Reg::Ebx => 1,
                Reg::Ecx => 2,
                Reg::Edx => 3,
            };
            let r = check(without(f.leaf, reg, f.bit));
            assert!(!r.runs(), "{} missing, yet it runs", f.name);
            assert_eq!(r.missing_required, 1 << i, "{}", f.name);
            assert_eq!(r.missing().next().unwrap().name, f.name);
        }
    }

    #[test]
    fn leaves_past_the_highest_count_as_absent() {
        // A CPU whose highest basic leaf is 1: leaf 7 (FSGSBASE) is not
        // read, whatever the instruction would return for it.
        let old = |l: u32, s: u32| if l == 0 { [1, 0, 0, 0] } else { qemu64(l, s) };
        let r = check(old);
        assert_eq!(r.missing().map(|f| f.name).collect::<Vec<_>>(), ["fsgsbase"]);
        // No extended leaves at all: no long mode, no SYSCALL, no brand.
        let r = check(|l, s| if l >= 0x8000_0000 { [0; 4] } else { qemu64(l, s) });
        assert_eq!(r.missing().map(|f| f.name).collect::<Vec<_>>(), ["lm", "syscall"]);
        assert_eq!(r.brand(), "");
    }

    #[test]
    fn a_cpu_with_everything_lacks_nothing() {
        let full = |l: u32, s: u32| match l {
            1 => {
                let mut r = qemu64(l, s);
                r[2] |= 1 << 30;
                r
            }
            0x8000_0007 => [0, 0, 0, 1 << 8],
            _ => qemu64(l, s),
        };
        let r = check(full);
        assert!(r.runs());
        assert_eq!(r.lacking().count(), 0);
    }
}
