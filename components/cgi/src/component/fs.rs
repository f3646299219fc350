//! The cgi's client of fs: the page's fragments (and the test hooks'
//! files) read by reference over the fs channel, through a client that
//! survives restarts of fs.

use component_runtime::link::Link;
use component_runtime::log;
use glue_rt::pools::rw;
use iolite::{Aggregate, Attach, ChannelRx, Copier, Domain, Geometry};

use cgi::FragmentSource;

use super::{glue, FS};

/// The page's fragments, read from fs by reference, through a client that
/// survives restarts of fs (`fs_api::client`: reset and reattach once per
/// death of fs, the read retried).
pub(super) struct FsFragments {
    d: &'static Domain,
    /// fs: its channel (file data comes on it) and its death watch.
    pub(super) link: Link<ChannelRx<'static>>,
    /// The copy modes copy file data at our end (flash does not).
    pub(super) copier: Copier<'static>,
    pub(super) tag: u64,
    client: fs_api::client::Client<FsGlue>,
}

/// fs's calls through the RPC glue.
struct FsGlue {
    /// fs's record in the system events page.
    fs_index: Option<usize>,
}

fs_api::rpc_over_glue!(FsGlue, glue::fs, component_runtime::events::page);

/// Attaches our end of the fs channel (fs set it up before answering the
/// call that preceded this).
pub(super) fn attach_fs(d: &'static Domain) -> ChannelRx<'static> {
    // SAFETY: the fs_channel dataport, mapped read-write for our lifetime;
    // the only receiver (the end this replaces is dropped).
    unsafe {
        ChannelRx::attach(Attach {
            domain: d,
            peer: FS,
            region: rw(glue::fs_channel::VADDR, glue::fs_channel::SIZE),
            geometry: Geometry { fwd: fs_api::FWD_CAP, rel: fs_api::REL_CAP },
        })
    }
    .expect("fs channel")
}

/// After a death of fs: forget what it granted (what we still use, e.g.
/// fragments in replies httpd and netstack hold, is tainted until it comes
/// back), and attach to the channel the new incarnation set up.
pub(super) fn reattach_fs(d: &'static Domain, link: &mut Link<ChannelRx<'static>>) {
    link.fail(d);
    link.reattach(attach_fs(d), d);
}

impl FsFragments {
    /// The client of fs over `link` (attached), with its copy stage.
    pub(super) fn new(d: &'static Domain, link: Link<ChannelRx<'static>>, copier: Copier<'static>) -> FsFragments {
        let client = fs_api::client::Client::new(FsGlue { fs_index: link.index() });
        FsFragments { d, link, copier, tag: 0, client }
    }

    fn reconnect(&mut self) -> bool {
        let (d, link) = (self.d, &mut self.link);
        self.client.reconnect(&mut || reattach_fs(d, link))
    }

    /// fs died: reconnect at once (what we still use of the dead
    /// incarnation counts as tainted from then); the caller drops the
    /// fragment cache (its buffers are the dead incarnation's). The link
    /// confirms once the taint is gone (httpd, netstack and the NIC gave
    /// back the fragments we forwarded).
    pub(super) fn fs_died(&mut self, death: u64) {
        self.reconnect();
        log!("fs died (death {death}): reconnected, {} of its buffers still in use", self.d.tainted(FS).unwrap_or(0));
    }
}

impl FragmentSource<'static> for FsFragments {
    fn version(&mut self, path: &str) -> Option<u64> {
        if path.len() > 768 {
            return None;
        }
        let (mut size, mut mtime, mut kind, mut ino, mut generation) = (0, 0, 0, 0, 0);
        if glue::fs::stat(path, &mut size, &mut mtime, &mut kind, &mut ino, &mut generation) < 0
            || fs_api::kind_from_code(kind) != fs_api::FileKind::File
        {
            return None;
        }
        // FNV-1a over ⟨ino, generation, mtime, size⟩.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for w in [u64::from(ino), u64::from(generation), mtime, size] {
            for b in w.to_le_bytes() {
                h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
            }
        }
        Some(h)
    }

    fn read(&mut self, path: &str) -> Option<Aggregate<'static>> {
        let (d, link) = (self.d, &mut self.link);
        let file = self.client.open(path, &mut || reattach_fs(d, link)).ok()?;
        self.tag += 1;
        let tag = self.tag;
        let len = file.size().min(fs_api::ONE_MESSAGE_READ as u64);
        let (d, link) = (self.d, &mut self.link);
        let n = match self.client.read(&file, 0, len, tag, &mut || reattach_fs(d, link)) {
            Ok(n) => n as i64,
            Err(_) => -1,
        };
        self.client.close(file);
        let mut out = Aggregate::new(self.d);
        if n <= 0 {
            return (n == 0).then_some(out);
        }
        while (out.len() as i64) < n {
            match self.copier.recv(&mut self.link.chan) {
                Ok(Some(m)) if m.tag == tag => {
                    if out.append(m.agg).is_err() {
                        return None;
                    }
                }
                Ok(Some(_)) => {}
                _ => return None,
            }
        }
        Some(out)
    }
}
