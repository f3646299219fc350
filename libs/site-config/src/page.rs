//! The page fs publishes the file's values in (the assembly's
//! `site_config` connection: read-write in fs, read-only in netstack and
//! httpd), in a fixed little-endian layout:
//!
//! | offset | field |
//! | --- | --- |
//! | 0 | magic `IOCF` (u32), written last |
//! | 4 | layout version (u32) |
//! | 8 | [`Source`] (u32) |
//! | 12 | which fields are set (u32, `HAS_*` bits) |
//! | 16 | address (4), prefix (1), dhcp (1), listen port (u16) |
//! | 24 | gateway (4), log level (1), index count (1), 2 unused |
//! | 32 | hostname: length (1) + 63 bytes |
//! | 96 | server name: length (1) + 63 bytes |
//! | 160 | index names: 8 x (length (1) + 63 bytes) |
//! | 672 | FNV-1a of bytes 4..672 (u32) |
//!
//! The writer clears the magic, writes the fields and the checksum, then
//! the magic (a release store); a reader takes one copy of the page
//! ([`snapshot`]) and decodes only that copy ([`decode`]), so each field is
//! read once, and checks every field again as the parser did: a hostile
//! or half-written page gets an error, never a value the file could not
//! have set.

use alloc::string::String;
use alloc::vec::Vec;
use core::sync::atomic::{fence, Ordering};

use crate::{
    check_address, check_combination, check_gateway, check_hostname, check_index_name, check_server_name, Invalid,
    LogLevel, Settings, MAX_INDEX, MAX_INDEX_NAME, MAX_NAME,
};

/// Bytes of the page the layout uses.
pub const PAGE_BYTES: usize = 676;
const MAGIC: u32 = u32::from_le_bytes(*b"IOCF");
const VERSION: u32 = 1;
const SUM_AT: usize = 672;
/// [`decode`]'s error for a torn or corrupt page.
const CHECKSUM_MISMATCH: &str = "checksum mismatch";
const SLOT: usize = 64;
const HOSTNAME_AT: usize = 32;
const SERVER_AT: usize = 96;
const INDEX_AT: usize = 160;

const HAS_ADDRESS: u32 = 1 << 0;
const HAS_GATEWAY: u32 = 1 << 1;
const HAS_DHCP: u32 = 1 << 2;
const HAS_HOSTNAME: u32 = 1 << 3;
const HAS_PORT: u32 = 1 << 4;
const HAS_SERVER: u32 = 1 << 5;
const HAS_INDEX: u32 = 1 << 6;
const HAS_LOG_LEVEL: u32 = 1 << 7;
const HAS_ALL: u32 = (1 << 8) - 1;

const _: () = assert!(SLOT == MAX_NAME + 1 && SLOT == MAX_INDEX_NAME + 1);
const _: () = assert!(INDEX_AT + MAX_INDEX * SLOT == SUM_AT && SUM_AT + 4 == PAGE_BYTES);

/// Where the values came from (what the receivers say on serial).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Source {
    /// The file, valid: its values (keys it does not set: defaults).
    File = 1,
    /// No disk, or one fs could not mount: the assembly's defaults.
    NoDisk = 2,
    /// No `/.iolite/config` on the disk: the assembly's defaults.
    NoFile = 3,
    /// The file was refused (fs printed why): the assembly's defaults.
    Refused = 4,
}

impl Source {
    fn from_u32(v: u32) -> Option<Self> {
        match v {
            1 => Some(Self::File),
            2 => Some(Self::NoDisk),
            3 => Some(Self::NoFile),
            4 => Some(Self::Refused),
            _ => None,
        }
    }

    /// What it means, for a boot line.
    pub fn describe(self) -> &'static str {
        match self {
            Self::File => "values from /.iolite/config",
            Self::NoDisk => "no site disk: assembly defaults",
            Self::NoFile => "no /.iolite/config: assembly defaults",
            Self::Refused => "/.iolite/config refused: assembly defaults",
        }
    }
}

/// FNV-1a, 32 bits: catches a page read while a restarted fs rewrites it.
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

fn put_str(page: &mut [u8], at: usize, s: &str) {
    let n = s.len().min(SLOT - 1);
    page[at] = n as u8;
    page[at + 1..at + 1 + n].copy_from_slice(&s.as_bytes()[..n]);
}

/// The page's bytes for `source` and `settings` (all `None` unless the
/// source is [`Source::File`]), magic included: for [`publish`].
pub fn encode(source: Source, settings: &Settings) -> [u8; PAGE_BYTES] {
    let mut p = [0u8; PAGE_BYTES];
    p[0..4].copy_from_slice(&MAGIC.to_le_bytes());
    p[4..8].copy_from_slice(&VERSION.to_le_bytes());
    p[8..12].copy_from_slice(&(source as u32).to_le_bytes());
    let mut has = 0;
    if let Some((a, prefix)) = settings.address {
        has |= HAS_ADDRESS;
        p[16..20].copy_from_slice(&a);
        p[20] = prefix;
    }
    if let Some(d) = settings.dhcp {
        has |= HAS_DHCP;
        p[21] = u8::from(d);
    }
    if let Some(port) = settings.listen_port {
        has |= HAS_PORT;
        p[22..24].copy_from_slice(&port.to_le_bytes());
    }
    if let Some(g) = settings.gateway {
        has |= HAS_GATEWAY;
        p[24..28].copy_from_slice(&g);
    }
    if let Some(l) = settings.log_level {
        has |= HAS_LOG_LEVEL;
        p[28] = l as u8;
    }
    if let Some(h) = &settings.hostname {
        has |= HAS_HOSTNAME;
        put_str(&mut p, HOSTNAME_AT, h);
    }
    if let Some(s) = &settings.server_name {
        has |= HAS_SERVER;
        put_str(&mut p, SERVER_AT, s);
    }
    if let Some(names) = &settings.index {
        has |= HAS_INDEX;
        p[29] = names.len().min(MAX_INDEX) as u8;
        for (i, n) in names.iter().take(MAX_INDEX).enumerate() {
            put_str(&mut p, INDEX_AT + i * SLOT, n);
        }
    }
    p[12..16].copy_from_slice(&has.to_le_bytes());
    let sum = fnv1a(&p[4..SUM_AT]);
    p[SUM_AT..].copy_from_slice(&sum.to_le_bytes());
    p
}

/// Writes `bytes` (from [`encode`]) into the page at `dst`: magic cleared
/// first, set last, so a reader sees the old page, no page, or the new.
///
/// # Safety
/// `dst` points at [`PAGE_BYTES`] writable bytes that only this writer
/// writes (readers may read them at any time).
pub unsafe fn publish(dst: *mut u8, bytes: &[u8; PAGE_BYTES]) {
    // SAFETY (all writes): within the page, per the caller.
    unsafe {
        for i in 0..4 {
            core::ptr::write_volatile(dst.add(i), 0);
        }
        fence(Ordering::Release);
        for (i, &b) in bytes.iter().enumerate().skip(4) {
            core::ptr::write_volatile(dst.add(i), b);
        }
        fence(Ordering::Release);
        for (i, &b) in bytes.iter().enumerate().take(4) {
            core::ptr::write_volatile(dst.add(i), b);
        }
    }
}

/// One copy of the page at `src`, or `None` while its magic is not set
/// (the writer has not published yet, or is rewriting it).
///
/// # Safety
/// `src` points at [`PAGE_BYTES`] readable bytes (another domain may write
/// them at any time: they are only read here, volatile, once each).
pub unsafe fn snapshot(src: *const u8) -> Option<[u8; PAGE_BYTES]> {
    let mut p = [0u8; PAGE_BYTES];
    // SAFETY (all reads): within the page, per the caller.
    unsafe {
        for (i, b) in p.iter_mut().enumerate().take(4) {
            *b = core::ptr::read_volatile(src.add(i));
        }
        if u32::from_le_bytes([p[0], p[1], p[2], p[3]]) != MAGIC {
            return None;
        }
        fence(Ordering::Acquire);
        for (i, b) in p.iter_mut().enumerate().skip(4) {
            *b = core::ptr::read_volatile(src.add(i));
        }
    }
    Some(p)
}

fn get_str(p: &[u8; PAGE_BYTES], at: usize, field: &str) -> Result<String, Invalid> {
    let n = usize::from(p[at]);
    if n == 0 || n >= SLOT {
        return Err(alloc::format!("{field}: length {n} out of range"));
    }
    match core::str::from_utf8(&p[at + 1..at + 1 + n]) {
        Ok(s) => Ok(String::from(s)),
        Err(_) => Err(alloc::format!("{field}: not UTF-8")),
    }
}

/// Decodes and re-validates a copy of the page: where the values came from
/// and what they are, or what is wrong with it (the receiver then uses the
/// assembly's defaults).
pub fn decode(p: &[u8; PAGE_BYTES]) -> Result<(Source, Settings), Invalid> {
    let word = |at: usize| u32::from_le_bytes([p[at], p[at + 1], p[at + 2], p[at + 3]]);
    if word(0) != MAGIC || word(4) != VERSION {
        return Err(String::from("not a config page of this layout"));
    }
    if word(SUM_AT) != fnv1a(&p[4..SUM_AT]) {
        return Err(String::from(CHECKSUM_MISMATCH));
    }
    let source = Source::from_u32(word(8)).ok_or_else(|| String::from("unknown source"))?;
    let has = word(12);
    if has & !HAS_ALL != 0 || (source != Source::File && has != 0) {
        return Err(String::from("unknown or unexpected fields"));
    }
    let mut s = Settings::default();
    let why = |f: &str, e: Invalid| alloc::format!("{f}: {e}");
    if has & HAS_ADDRESS != 0 {
        let a = [p[16], p[17], p[18], p[19]];
        check_address(a, p[20]).map_err(|e| why("address", e))?;
        s.address = Some((a, p[20]));
    }
    if has & HAS_DHCP != 0 {
        s.dhcp = Some(match p[21] {
            0 => false,
            1 => true,
            _ => return Err(String::from("dhcp: not a boolean")),
        });
    }
    if has & HAS_PORT != 0 {
        let port = u16::from_le_bytes([p[22], p[23]]);
        if port == 0 {
            return Err(String::from("listen_port: 0"));
        }
        s.listen_port = Some(port);
    }
    if has & HAS_GATEWAY != 0 {
        let g = [p[24], p[25], p[26], p[27]];
        check_gateway(g, s.address).map_err(|e| why("gateway", e))?;
        s.gateway = Some(g);
    }
    if has & HAS_LOG_LEVEL != 0 {
        s.log_level = Some(LogLevel::from_u8(p[28]).ok_or_else(|| String::from("log_level: unknown"))?);
    }
    if has & HAS_HOSTNAME != 0 {
        let h = get_str(p, HOSTNAME_AT, "hostname")?;
        check_hostname(&h).map_err(|e| why("hostname", e))?;
        s.hostname = Some(h);
    }
    if has & HAS_SERVER != 0 {
        let v = get_str(p, SERVER_AT, "server_name")?;
        check_server_name(&v).map_err(|e| why("server_name", e))?;
        s.server_name = Some(v);
    }
    if has & HAS_INDEX != 0 {
        let n = usize::from(p[29]);
        if n == 0 || n > MAX_INDEX {
            return Err(String::from("index: count out of range"));
        }
        let mut names: Vec<String> = Vec::new();
        for i in 0..n {
            let name = get_str(p, INDEX_AT + i * SLOT, "index")?;
            check_index_name(&name).map_err(|e| why("index", e))?;
            if names.contains(&name) {
                return Err(String::from("index: a name twice"));
            }
            names.push(name);
        }
        s.index = Some(names);
    }
    check_combination(&s)?;
    Ok((source, s))
}

/// What a receiver got from the page ([`receive`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Received {
    /// A valid page: where its values came from, and the values.
    Values(Source, Settings),
    /// A page that fails its checks (the receiver uses its defaults).
    Invalid(Invalid),
    /// Nothing published within the wait (the receiver uses its defaults).
    TimedOut,
}

/// Waits up to `timeout_ms` (by `now_ms`, calling `pause` between looks)
/// for the page at `src`, then decodes one copy of it. A copy whose
/// checksum fails is looked at again within the wait (the writer may be
/// rewriting it after a restart), then reported.
///
/// # Safety
/// As [`snapshot`].
pub unsafe fn receive(src: *const u8, timeout_ms: u64, now_ms: impl Fn() -> u64, mut pause: impl FnMut()) -> Received {
    let start = now_ms();
    loop {
        let late = now_ms().saturating_sub(start) >= timeout_ms;
        // SAFETY: per the caller.
        if let Some(p) = unsafe { snapshot(src) } {
            match decode(&p) {
                Ok((source, s)) => return Received::Values(source, s),
                Err(e) if late || e != CHECKSUM_MISMATCH => return Received::Invalid(e),
                Err(_) => {}
            }
        }
        if late {
            return Received::TimedOut;
        }
        pause();
    }
}

impl Received {
    /// The receiver's boot line, and whether it is a warning (it uses
    /// the defaults for a reason other than "no file").
    pub fn report(&self, wait_ms: u64) -> (bool, String) {
        match self {
            Self::Values(Source::File, s) => (false, alloc::format!("site config: {}", crate::summary(s))),
            Self::Values(Source::Refused, _) => (true, String::from("site config: ") + Source::Refused.describe()),
            Self::Values(src, _) => (false, String::from("site config: ") + src.describe()),
            Self::Invalid(e) => (true, alloc::format!("site config page refused ({e}): assembly defaults")),
            Self::TimedOut => (true, alloc::format!("no site config from fs within {wait_ms} ms: assembly defaults")),
        }
    }

    /// The values to apply over the assembly's defaults (none unless the
    /// page carried a valid file's).
    pub fn into_settings(self) -> Settings {
        match self {
            Self::Values(Source::File, s) => s,
            _ => Settings::default(),
        }
    }
}
