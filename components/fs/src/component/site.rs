//! The site disk's `/.iolite/config` (docs/config.md): fs reads the disk
//! already, so it parses the file too (`site_config::parse`: untrusted
//! text, bounded, checked key by key) and publishes the typed values in
//! the `site_config` page, which only fs maps writable; netstack and httpd
//! read it and check it again. A file with any error is refused whole:
//! every error is printed as `/.iolite/config:LINE: what is wrong`, and
//! the page says "refused", so the others run on the assembly's
//! defaults. A restarted fs reads the same disk and publishes the same.
//!
//! Lines it prints (tests/robot/site_config.robot waits for them):
//!
//! ```text
//! [fs] /.iolite/config: address 10.0.3.15/24, gateway 10.0.3.2, listen_port 8081, ...
//! [fs] error: /.iolite/config:3: listen_port: 0 is not a port (1-65535)
//! [fs] error: /.iolite/config refused: assembly defaults for every key
//! [fs] no /.iolite/config: assembly defaults
//! ```

use alloc::format;
use alloc::string::String;
use alloc::vec;
use alloc::vec::Vec;

use component_runtime::{error, log};
use fs::{FileKind, Fs};
use site_config::page::{self, Source};
use site_config::{Settings, MAX_FILE, PATH};

use super::disk::Disk;
use super::glue;

/// Publishes `source` with `settings` in the page, if the assembly
/// connects it.
pub(super) fn publish(source: Source, settings: &Settings) {
    if glue::site_config::PEERS.is_empty() {
        return;
    }
    const _: () = assert!(glue::site_config::SIZE >= page::PAGE_BYTES);
    let bytes = page::encode(source, settings);
    // SAFETY: the site_config dataport, mapped read-write in fs alone
    // (the assembly's one `from` end) for our lifetime.
    unsafe { page::publish(glue::site_config::VADDR as *mut u8, &bytes) }
}

/// Reads, checks and publishes the file; logs what it sets or why not.
pub(super) fn load(fs: &mut Fs<'static, Disk>) {
    let (source, settings) = match read(fs) {
        Ok(Some(s)) => {
            log!("{PATH}: {}", site_config::summary(&s));
            (Source::File, s)
        }
        Ok(None) => {
            log!("no {PATH}: assembly defaults");
            (Source::NoFile, Settings::default())
        }
        Err(lines) => {
            for l in lines {
                error!("{l}");
            }
            error!("{PATH} refused: assembly defaults for every key");
            (Source::Refused, Settings::default())
        }
    };
    if let Some(l) = settings.log_level {
        component_runtime::console::set_level(l as u8);
    }
    publish(source, &settings);
    // The system's files are not the site's: no client finds them, by
    // their path or any link to them (httpd also answers 404 for the path).
    match fs.hide(PRIVATE.as_bytes()) {
        Ok(0) => {}
        Ok(n) => log!("{PRIVATE}: {n} objects hidden from clients"),
        Err(e) => error!("{PRIVATE}: cannot hide it: {e}"),
    }
}

/// The folder of the system's own files on the site disk.
const PRIVATE: &str = "/.iolite";

/// The file's values, `None` without a file, or the lines saying why not.
fn read(fs: &mut Fs<'static, Disk>) -> Result<Option<Settings>, Vec<String>> {
    let file = match fs.open(PATH.as_bytes()) {
        Ok(f) => f,
        Err(fs::FsError::NotFound) => return Ok(None),
        Err(e) => return Err(vec![format!("{PATH}:1: cannot open: {e}")]),
    };
    let st = file.stat();
    if st.kind != FileKind::File {
        return Err(vec![format!("{PATH}:1: not a regular file")]);
    }
    if st.size > MAX_FILE as u64 {
        return Err(vec![format!("{PATH}:1: file too large: {} bytes, at most {MAX_FILE}", st.size)]);
    }
    let mut bytes = vec![0u8; st.size as usize];
    match fs.read_into(&file, 0, &mut bytes) {
        Ok(n) => bytes.truncate(n),
        Err(e) => return Err(vec![format!("{PATH}:1: cannot read: {e}")]),
    }
    site_config::parse(&bytes).map(Some).map_err(|errs| errs.iter().map(|e| format!("{e}")).collect())
}
