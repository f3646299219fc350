//! The `FsIoLite` calls (camkes/interfaces/FsIoLite.idl4): each takes
//! the clients' releases and looks at the events page first
//! (`Server::begin`).

use component_runtime::log;
use fs::proto::{self, ErrorCode};
use fs::quarantine::Wait;
use iolite::PeerId;

use super::glue::pools::FILE_POOL;
use super::{caller, glue, open_channel, Server, TEST_HOOKS};

impl Server {
    /// Test images: a `stat` of `/.fault/fs/N` faults incarnation `N`
    /// (a write to an unmapped page: a real fault, which the supervisor
    /// reports and answers with a restart).
    /// `/.fault/fs-read/N` instead arms the fault for the next `read`,
    /// whichever client makes it: under load, a read in flight.
    pub(super) fn fault_hook(&mut self, path: &str) {
        if let Some(n) = path.strip_prefix("/.fault/fs-read/").and_then(|n| n.parse::<u64>().ok()) {
            if n == self.epoch {
                log!("test hook: the next read faults incarnation {n}");
                self.fault_next_read = true;
            }
            return;
        }
        let Some(n) = path.strip_prefix("/.fault/fs/").and_then(|n| n.parse::<u64>().ok()) else { return };
        if n == self.epoch {
            log!("test hook: faulting incarnation {n}");
            fault();
        }
    }
}

/// The test hooks' fault: a write to an unmapped page (0x10 is below
/// every mapping: the loader leaves the first page unmapped).
fn fault() {
    // SAFETY: none needed; the write faults and the supervisor restarts us.
    unsafe { core::ptr::write_volatile(0x10 as *mut u64, 0xdead) };
}

fn ret<T: Into<i64>>(r: Result<T, ErrorCode>) -> i64 {
    match r {
        Ok(v) => v.into(),
        Err(e) => e.ret(),
    }
}

impl glue::fs::FsIoLite for Server {
    fn open(&mut self, path: &str, size: &mut u64, ino: &mut u32) -> i64 {
        self.begin();
        let r = (|| {
            let file = self.fs.open(path.as_bytes()).map_err(ErrorCode::from)?;
            let st = file.stat();
            let handle = self.files.open(caller(), file)?;
            (*size, *ino) = (st.size, st.ino);
            Ok(i64::from(handle))
        })();
        self.end();
        ret(r)
    }

    fn open_read(
        &mut self,
        path: &str,
        length: u64,
        tag: u64,
        size: &mut u64,
        mtime: &mut u64,
        ino: &mut u32,
        generation: &mut u32,
        queued: &mut u64,
    ) -> i64 {
        self.begin();
        // A read armed by an earlier call faults here (this call may arm
        // the next one).
        let armed = TEST_HOOKS && self.fault_next_read;
        if TEST_HOOKS {
            self.fault_hook(path);
        }
        if armed {
            log!("test hook: faulting incarnation {} in a read (client {})", self.epoch, caller() + 1);
            fault();
        }
        let r = self.open_and_read(path, length, tag).map(|(handle, st, n)| {
            (*size, *mtime, *ino, *generation, *queued) = (st.size, u64::from(st.mtime), st.ino, st.generation, n);
            i64::from(handle)
        });
        self.end();
        ret(r)
    }

    fn close(&mut self, handle: u32) -> i32 {
        match self.files.close(caller(), handle) {
            Ok(()) => 0,
            Err(e) => e.ret() as i32,
        }
    }

    fn stat(
        &mut self,
        path: &str,
        size: &mut u64,
        mtime: &mut u64,
        kind: &mut u32,
        ino: &mut u32,
        generation: &mut u32,
    ) -> i32 {
        self.begin();
        if TEST_HOOKS {
            self.fault_hook(path);
        }
        let r = match self.fs.stat(path.as_bytes()) {
            Ok(st) => {
                (*size, *mtime, *kind, *ino, *generation) =
                    (st.size, u64::from(st.mtime), u32::from(proto::kind_code(st.kind)), st.ino, st.generation);
                0
            }
            Err(e) => ErrorCode::from(e).ret() as i32,
        };
        self.end();
        r
    }

    fn read(&mut self, handle: u32, offset: u64, length: u64, tag: u64) -> i64 {
        if TEST_HOOKS && self.fault_next_read {
            log!("test hook: faulting incarnation {} in a read (client {})", self.epoch, caller() + 1);
            fault();
        }
        self.begin();
        let r = self.read_file(handle, offset, length, tag);
        self.end();
        ret(r)
    }

    fn list_dir(&mut self, path: &str, tag: u64) -> i64 {
        self.begin();
        let r = self.list(path, tag);
        self.end();
        ret(r)
    }

    fn stats(
        &mut self,
        hits: &mut u64,
        misses: &mut u64,
        evictions: &mut u64,
        evictions_referenced: &mut u64,
        bytes_cached: &mut u64,
        disk_reads: &mut u64,
        disk_bytes: &mut u64,
        copied_bytes: &mut u64,
        pool_pages_in_use: &mut u64,
        data_bytes: &mut u64,
        dma_bytes: &mut u64,
        bounce_bytes: &mut u64,
        reset_waits: &mut u64,
        reset_released: &mut u64,
    ) -> i32 {
        self.begin();
        self.update_budget();
        self.end();
        let s = self.fs.stats();
        *hits = s.cache.hits;
        *misses = s.cache.misses;
        *evictions = s.cache.evictions;
        *evictions_referenced = s.cache.evictions_referenced;
        *bytes_cached = s.cache.bytes_cached;
        *disk_reads = s.disk.reads;
        *disk_bytes = s.disk.bytes;
        *copied_bytes = s.cache.copied_bytes + self.d.stats().bytes_copied;
        *pool_pages_in_use = self.d.pool_stats(FILE_POOL).map(|p| u64::from(p.pages_in_use)).unwrap_or(0);
        *data_bytes = s.disk.data_bytes;
        let drv = self.fs.volume().device().stats();
        (*dma_bytes, *bounce_bytes) = (drv.dma_bytes, drv.bounce_bytes);
        (*reset_waits, *reset_released) = (self.quarantines.waited, self.quarantines.released_at_once);
        0
    }

    fn reset(&mut self) -> i32 {
        let client = caller();
        // The old incarnation is gone: its files close, and its channel
        // starts empty. What we lent it may have been forwarded and still
        // be in use downstream: it stays quarantined until the system says
        // so (without an events page, we can only release it at once).
        let peer = PeerId(client as u8);
        let dropped = match self.deaths.page() {
            Some(page) => {
                // Only the client's own death concerns what it held
                // (`fs::quarantine`): a death elsewhere left unsettled
                // keeps none of its pages out of use.
                let record = self.clients[client].index();
                let wait = Wait::at_reset(record, page.len(), |i| page.state(i));
                let n = self.d.peer_failed(peer).unwrap_or(0);
                let _ = self.d.peer_restarted(peer);
                if self.quarantines.reset(client, wait) {
                    log!("client {} reset ({} buffers quarantined)", client + 1, n);
                    None
                } else {
                    Some(self.d.peer_settled(peer).unwrap_or(0))
                }
            }
            None => Some(self.d.peer_died(peer).unwrap_or(0)),
        };
        self.files.close_all(client);
        // Its channel starts empty, its guard healthy.
        self.clients[client].reattach(open_channel(self.d, client), self.d);
        self.resets += 1;
        if let Some(dropped) = dropped {
            log!("client {} reset ({} buffers released)", client + 1, dropped);
        }
        self.poll_events();
        0
    }

    fn vouch(&mut self, buf: u32, generation: u32) -> i32 {
        let client = caller();
        // Releases first: a hold the other client gave back is not vouched
        // for.
        self.begin();
        let r = match self.d.vouch(FILE_POOL, buf, generation, PeerId(client as u8)) {
            Ok(()) => 0,
            Err(iolite::Error::QuotaExceeded) => ErrorCode::ChannelBusy.ret(),
            Err(_) => ErrorCode::NotHeld.ret(),
        };
        r as i32
    }

    fn budget(
        &mut self,
        budget: &mut u64,
        budget_low: &mut u64,
        memory_budget: &mut u64,
        floor: &mut u64,
        charged_httpd: &mut u64,
        charged_netstack: &mut u64,
        charged_fs_held: &mut u64,
        shrinks: &mut u64,
        grows: &mut u64,
        shrink_evictions: &mut u64,
        updates: &mut u64,
    ) -> i32 {
        self.begin();
        self.update_budget();
        self.end();
        *budget = self.fs.cache().budget() as u64;
        match &self.elastic {
            Some(e) => {
                let s = e.stats();
                (*budget_low, *memory_budget, *floor) = (s.low, e.model().memory(), e.model().floor() as u64);
                (*charged_httpd, *charged_netstack, *charged_fs_held) =
                    (s.charged.httpd, s.charged.netstack, s.charged.fs_held);
                (*shrinks, *grows, *shrink_evictions, *updates) = (s.shrinks, s.grows, s.shrink_evictions, s.updates);
            }
            None => {
                *budget_low = *budget;
                *memory_budget = 0;
                *floor = 0;
                *charged_httpd = 0;
                *charged_netstack = 0;
                *charged_fs_held = 0;
                *shrinks = 0;
                *grows = 0;
                *shrink_evictions = 0;
                *updates = 0;
            }
        }
        0
    }

    fn set_budget(&mut self, bytes: u64) -> i32 {
        if !self.admin {
            return ErrorCode::Denied.ret() as i32;
        }
        self.begin();
        // A fixed budget from now on: the memory model would undo it.
        if self.elastic.take().is_some() {
            log!("memory budget off: the cache budget is fixed from now on");
        }
        log!("budget {bytes}");
        self.fs.cache().shrink_to(bytes.min(usize::MAX as u64) as usize);
        self.end();
        0
    }
}
