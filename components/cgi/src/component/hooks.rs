//! The programs only test images have (`cgi.test_hooks = 1`, e.g.
//! tests/variants' `webtest`): crashes, spins, hostile replies, fs
//! clients that hog or reset, and the bench's blobs. Nothing calls into
//! this module unless `TEST_HOOKS` (a constant from the assembly) is set,
//! so the default image has neither the code nor the names, and the
//! library answers their paths 404.

use alloc::boxed::Box;
use alloc::string::String;
use alloc::vec::Vec;
use cgi::{Env, Programs};
use component_runtime::log;
use core::sync::atomic::{AtomicBool, Ordering};
use glue_rt::pools::rw;
use iolite::{AggDesc, Aggregate, ChannelRx, Copier, Domain, PoolId, SliceDesc, FLAG_EOF};

use super::fs::{reattach_fs, FsFragments};
use super::glue::pools::{CGI_POOL, CGI_REQ_POOL, FILE_POOL};
use super::{glue, now_ms, TEST_HOOKS};

/// Spins for `ms` (`/cgi-bin/slow`).
fn spin_ms(ms: u64) {
    let end = now_ms() + ms;
    while now_ms() < end {
        core::hint::spin_loop();
    }
}

/// A text/plain answer to request `id`.
fn plain(d: &'static Domain, id: u32, text: core::fmt::Arguments) -> (u32, Aggregate<'static>, bool) {
    match cgi::gen::generate(d, CGI_POOL, |w| write!(w, "Content-Type: text/plain\r\n\r\n{text}\n")) {
        Ok(a) => (id, a, true),
        Err(_) => (id, Aggregate::new(d), false),
    }
}

/// The programs only test images have (`TEST_HOOKS`); `None` for any
/// other name. In the default image nothing calls this, so neither the
/// code nor the names are in the binary, and the library answers 404.
pub(super) fn test_hook(
    d: &'static Domain,
    programs: &mut Programs<'static, FsFragments>,
    id: u32,
    script: &str,
    env: &Env,
) -> Option<(u32, Aggregate<'static>, bool)> {
    Some(match script {
        "/cgi-bin/noconfirm" => {
            // This incarnation confirms no death from now on: the
            // supervisor must not wait for it for ever (it restarts an
            // untrusted subscriber that does not confirm in time).
            NO_CONFIRM.store(true, Ordering::Relaxed);
            log!("test hook: confirming no death from now on");
            plain(d, id, format_args!("no confirmations"))
        }
        "/cgi-bin/crash" => {
            log!("crash requested");
            panic!("/cgi-bin/crash: crashing on purpose");
        }
        "/cgi-bin/spin" => {
            // A program that never answers and never faults: nothing but a
            // restart from outside gets this component serving again.
            log!("spinning forever");
            loop {
                core::hint::spin_loop();
            }
        }
        "/cgi-bin/restart" => {
            let query = env.get_str("QUERY_STRING").unwrap_or("");
            let name = cgi::programs::query_param(query, "component").unwrap_or("");
            let answer = match component_runtime::restart(name) {
                Ok(()) => String::from("restarted"),
                Err(e) => alloc::format!("not restarted: {e}"),
            };
            plain(d, id, format_args!("{answer}"))
        }
        "/cgi-bin/blob" => {
            // `size` bytes of a pattern (at most 1 MiB): bench/web's CGI
            // counterpart of the static files. The body is made once per
            // size and kept (immutable), then sent by reference after a
            // generated header, as a CGI that serves content it built.
            let size = cgi::programs::query_param(env.get_str("QUERY_STRING").unwrap_or(""), "size")
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(1024)
                .min(1 << 20);
            (id, blob(d, size).unwrap_or_else(|| Aggregate::new(d)), true)
        }
        "/cgi-bin/fshog" => {
            let query = env.get_str("QUERY_STRING").unwrap_or("");
            let paths = cgi::programs::query_param(query, "path").unwrap_or("/index.html");
            let f = programs.fragments_mut();
            let report = fs_hog(d, &mut f.copier, &mut f.link.chan, paths);
            plain(d, id, format_args!("{report}"))
        }
        "/cgi-bin/fsreset" => {
            let query = env.get_str("QUERY_STRING").unwrap_or("");
            let paths = cgi::programs::query_param(query, "path").unwrap_or("/index.html");
            let rounds = cgi::programs::query_param(query, "rounds")
                .and_then(|v| v.parse::<u32>().ok())
                .unwrap_or(10)
                .clamp(1, MAX_RESET_ROUNDS);
            // Our fragment cache holds fs pages too: a reset says we use
            // nothing we had, so it goes first.
            programs.drop_cache();
            let report = fs_reset_loop(d, programs.fragments_mut(), paths, rounds);
            plain(d, id, format_args!("{report}"))
        }
        "/cgi-bin/pattern" => {
            // `size` bytes (at most 1 MiB) that depend on `seed`, made
            // afresh for every request in new pages of our pool: tests hold
            // one response while others fill the pool with other seeds
            // (`cgi::gen::pattern`).
            let query = env.get_str("QUERY_STRING").unwrap_or("");
            let param = |k, default| {
                cgi::programs::query_param(query, k).and_then(|v| v.parse::<usize>().ok()).unwrap_or(default)
            };
            let (seed, size) = (param("seed", 0) as u32, param("size", 1024).min(1 << 20));
            match pattern(d, seed, size) {
                Some(a) => (id, a, true),
                None => (id, Aggregate::new(d), false),
            }
        }
        "/cgi-bin/hostile" => {
            let query = env.get_str("QUERY_STRING").unwrap_or("");
            match cgi::programs::query_param(query, "mode").unwrap_or("") {
                "forge" => hostile_forge(d, id, cgi::programs::query_param(query, "pools").unwrap_or("")),
                "garbage" => hostile_garbage(),
                "unheld" => hostile_unheld(d, id),
                _ => return None,
            }
            // Nothing more goes out on the reply ring (`MUTED`): httpd must
            // find the channel broken, fail this request and restart us.
            (id, Aggregate::new(d), false)
        }
        "/cgi-bin/slow" => {
            let ms = cgi::programs::query_param(env.get_str("QUERY_STRING").unwrap_or(""), "ms")
                .and_then(|v| v.parse().ok())
                .unwrap_or(1000u64);
            spin_ms(ms.min(60_000));
            plain(d, id, format_args!("slept {ms} ms"))
        }
        _ => return None,
    })
}

/// Set by `/cgi-bin/noconfirm` (test hook): this incarnation confirms no
/// death any more, as a hostile cgi that holds the death protocol up.
static NO_CONFIRM: AtomicBool = AtomicBool::new(false);

/// Confirms a death unless the test hook forbade it (`NO_CONFIRM`).
pub(super) fn confirm(component: usize, death: u64) {
    if !(TEST_HOOKS && NO_CONFIRM.load(Ordering::Relaxed)) {
        component_runtime::events::confirm_settled(component, death);
    }
}

/// Set by `/cgi-bin/hostile` once it has written the reply ring directly:
/// from then on this incarnation sends no replies (its typed producer no
/// longer knows the ring's state).
pub(super) static MUTED: AtomicBool = AtomicBool::new(false);

/// The producer end of channel B of `cgi_chan` (our replies to httpd), as
/// raw ring memory, continuing at the published head.
fn raw_reply_ring() -> Option<iolite::ring::RingProducer<AggDesc>> {
    let base = glue::cgi_chan::VADDR + cgi::chan::B_OFF;
    // SAFETY: channel B's forward ring, mapped read-write; we are its only
    // producer, and the typed one is not used again (`MUTED`).
    unsafe { iolite::ring::RingProducer::attach(rw(base, cgi::chan::CHANNEL_BYTES), cgi::chan::FWD_CAP).ok() }
}

/// `/cgi-bin/hostile?mode=forge&pools=A,B` (test hook): replies to request
/// `id` whose slices name what we may not reference, written straight into
/// the ring (the typed API cannot build them): pools `A`, `B`, ... (ids of
/// pools that are not ours, as an attacker reads them from the system's
/// description: the test names httpd's application pool and netstack's
/// socket pool, which httpd maps and our grant list leaves out), then a
/// wrong generation of a live buffer of our own pool, guessed generations
/// of httpd's request pool and of fs's file pool, an out-of-range buffer,
/// an out-of-range length, and too many slices. Each breaks the channel;
/// httpd reads up to the first of them.
fn hostile_forge(d: &'static Domain, id: u32, pools: &str) {
    let Some(mut ring) = raw_reply_ring() else { return };
    MUTED.store(true, Ordering::Relaxed);
    // A live buffer of our pool, kept for good (one page per call of this
    // hook), so that its generation is current when httpd checks the
    // forged one against it.
    let Some(live) = d.alloc(CGI_POOL, 64).ok().and_then(|b| b.seal(64).ok()) else { return };
    let live = *Box::leak(Box::new(live)).descs().first().expect("one slice");
    let slice = |pool, buf, gen, off, len| SliceDesc { pool, buf, gen, off, len };
    // At most what leaves the ring room for the six replies that follow.
    let foreign = pools.split(',').filter_map(|p| p.parse::<PoolId>().ok()).take(cgi::chan::FWD_CAP - 8);
    let forged = foreign.map(|p| slice(p, 0, 1, 0, 4096)).chain([
        slice(CGI_POOL, live.buf, live.gen ^ 0x0100_0000, 0, 64),
        slice(CGI_REQ_POOL, 0, 0x5eed_0001, 0, 64),
        slice(FILE_POOL, 0, 0x5eed_0002, 0, 4096),
        slice(CGI_POOL, u32::MAX, 1, 0, 64),
        slice(CGI_POOL, 0, 1, u32::MAX - 8, 4096),
    ]);
    let mut sent = 0;
    for s in forged {
        let mut desc = AggDesc { nslices: 1, flags: FLAG_EOF, tag: u64::from(id), ..AggDesc::default() };
        desc.slices[0] = s;
        if ring.push(desc).is_ok() {
            sent += 1;
        }
    }
    let desc = AggDesc { nslices: u32::MAX, flags: FLAG_EOF, tag: u64::from(id), ..AggDesc::default() };
    if ring.push(desc).is_ok() {
        sent += 1;
    }
    log!("hostile: {sent} forged replies written");
    glue::done::emit();
}

/// `/cgi-bin/hostile?mode=unheld` (test hook): a reply that looks right
/// in every field: a header from our own pool, then a slice of a live
/// buffer of fs's file pool, at its current published generation, that fs
/// never lent us (we map the pool and read the generation). Every check a
/// receiver can make on its own passes; only fs knows we do not hold it.
fn hostile_unheld(d: &'static Domain, id: u32) {
    let pages = d.pool_stats(FILE_POOL).map(|s| s.pages).unwrap_or(0);
    let unheld = (0..pages).find_map(|buf| {
        let (gen, sealed) = d.published(FILE_POOL, buf).ok()?;
        let ours = d.holds(FILE_POOL, buf).ok()?;
        let free = ours == iolite::Holds::default();
        (iolite::pool::gen_is_live(gen) && sealed >= 16 && free).then_some((buf, gen, sealed.min(4096)))
    });
    let Some((buf, gen, len)) = unheld else {
        log!("hostile: no live file buffer we do not hold");
        return;
    };
    let Ok(head) = cgi::gen::generate(d, CGI_POOL, |w| write!(w, "Content-Type: text/plain\r\n\r\n")) else {
        return;
    };
    let head = *Box::leak(Box::new(head)).descs().first().expect("one slice");
    let Some(mut ring) = raw_reply_ring() else { return };
    MUTED.store(true, Ordering::Relaxed);
    let mut desc = AggDesc { nslices: 2, flags: FLAG_EOF, tag: u64::from(id), ..AggDesc::default() };
    desc.slices[0] = head;
    desc.slices[1] = SliceDesc { pool: FILE_POOL, buf, gen, off: 0, len };
    let pushed = ring.push(desc).is_ok();
    log!("hostile: reply with file buffer {buf} (generation {gen:#x}, {len} bytes) written: {pushed}");
    glue::done::emit();
}

/// `/cgi-bin/hostile?mode=garbage` (test hook): impossible ring states in
/// the rings we produce into: channel B's head of `cgi_chan` (httpd reads
/// it) and the head of our release ring on `fs_channel` (fs reads it), far
/// beyond what the rings hold. Then an fs call, so fs looks at once.
fn hostile_garbage() {
    MUTED.store(true, Ordering::Relaxed);
    let head = |addr: usize| {
        // SAFETY: a ring's head word in a dataport mapped read-write; the
        // peer reads it atomically.
        unsafe { &*(addr as *const core::sync::atomic::AtomicU32) }
    };
    let tail = |addr: usize| head(addr + 64).load(Ordering::Acquire);
    let b = glue::cgi_chan::VADDR + cgi::chan::B_OFF;
    head(b).store(tail(b).wrapping_add(0x4000_0000), Ordering::Release);
    let rel = glue::fs_channel::VADDR + iolite::ring::ring_bytes::<AggDesc>(fs_api::FWD_CAP).div_ceil(64) * 64;
    head(rel).store(tail(rel).wrapping_add(0x7777_7777), Ordering::Release);
    log!("hostile: ring heads overwritten");
    let (mut size, mut mtime, mut kind, mut ino, mut generation) = (0, 0, 0, 0, 0);
    glue::fs::stat("/index.html", &mut size, &mut mtime, &mut kind, &mut ino, &mut generation);
    glue::done::emit();
}

/// Most rounds one `/cgi-bin/fsreset` runs (each reads its files and
/// resets once): well within httpd's CGI timeout on a loaded TCG guest.
const MAX_RESET_ROUNDS: u32 = 100;

/// fs's (pool pages in use, resets waited, resets released at once), from
/// its `stats` call; `None` if it failed.
fn fs_reset_figures() -> Option<(u64, u64, u64)> {
    let mut v = [0u64; 14];
    let [a, b, c, e, f, g, h, i, pages, j, k, l, waits, released] = &mut v;
    (glue::fs::stats(a, b, c, e, f, g, h, i, pages, j, k, l, waits, released) == 0).then_some((v[8], v[12], v[13]))
}

/// `/cgi-bin/fsreset?rounds=N&path=A,B` (test hook): a client that reads
/// files and resets its fs session in a loop, as a hostile cgi could to
/// make fs quarantine pages without end. Each round opens and reads every
/// path whole, keeping every buffer fs sends (held while we reset), then
/// calls `reset` (fs releases what we held: we are alive, so nothing of
/// ours is unsettled), forgets fs's grants and attaches to the fresh
/// channel (`reattach_fs`), and only then drops the buffers (they are
/// ours alone now: no release goes to fs). Reports
/// `rounds=N released=R waited=W max_pages=P held_at_reset=K bytes=B
/// mismatches=M errors=E sha256=H1,H2`: the resets fs released at once and
/// quarantined during the loop (its counters), the most pool pages fs had
/// in use after a reset, the most buffers we held at one, the bytes read,
/// the rounds whose bytes of a file differed from the first round's, the
/// opens and reads that failed, and each file's SHA-256 in the first
/// round (the test compares them with the site manifest). Files held by
/// `/cgi-bin/fshog` are not dropped: do not mix the two hooks.
fn fs_reset_loop(d: &'static Domain, f: &mut FsFragments, paths: &str, rounds: u32) -> String {
    use sha2::{Digest, Sha256};
    let paths: Vec<&str> = paths.split(',').filter(|p| !p.is_empty()).take(8).collect();
    let mut first: Vec<Option<[u8; 32]>> = alloc::vec![None; paths.len()];
    let (mut mismatches, mut errors, mut bytes, mut held_max, mut max_pages) = (0u32, 0u32, 0u64, 0u32, 0u64);
    let start = fs_reset_figures().unwrap_or_default();
    for round in 0..rounds {
        let mut held: Vec<Aggregate<'static>> = Vec::new();
        let mut round_ok = true;
        'paths: for (i, path) in paths.iter().enumerate() {
            let (mut size, mut ino) = (0, 0);
            let h = glue::fs::open(path, &mut size, &mut ino);
            if h < 0 {
                errors += 1;
                continue;
            }
            let mut hash = Sha256::new();
            let mut off = 0;
            while off < size {
                f.tag += 1;
                let tag = f.tag;
                let n = glue::fs::read(h as u32, off, size - off, tag);
                if n <= 0 {
                    errors += 1;
                    continue 'paths;
                }
                let mut got = 0i64;
                while got < n {
                    match f.copier.recv(&mut f.link.chan) {
                        Ok(Some(m)) if m.tag == tag => {
                            got += m.agg.len() as i64;
                            for s in m.agg.slices() {
                                hash.update(s);
                            }
                            held.push(m.agg);
                        }
                        Ok(Some(_)) => {}
                        _ => {
                            errors += 1;
                            continue 'paths;
                        }
                    }
                }
                off += n as u64;
            }
            bytes += size;
            let digest: [u8; 32] = hash.finalize().into();
            match first[i] {
                None if round == 0 => first[i] = Some(digest),
                Some(want) if want == digest => {}
                _ => round_ok = false,
            }
        }
        if !round_ok {
            mismatches += 1;
        }
        held_max = held_max.max(d.pool_stats(FILE_POOL).map(|s| s.buffers_in_use).unwrap_or(0));
        glue::fs::reset();
        reattach_fs(d, &mut f.link);
        drop(held);
        if let Some((pages, _, _)) = fs_reset_figures() {
            max_pages = max_pages.max(pages);
        }
    }
    let end = fs_reset_figures().unwrap_or_default();
    let mut hex = String::new();
    for (i, digest) in first.iter().enumerate() {
        if i > 0 {
            hex.push(',');
        }
        for b in digest.unwrap_or_default() {
            let _ = core::fmt::Write::write_fmt(&mut hex, format_args!("{b:02x}"));
        }
    }
    log!("fsreset: {rounds} rounds, {mismatches} mismatched, {errors} errors");
    alloc::format!(
        "rounds={rounds} released={} waited={} max_pages={max_pages} held_at_reset={held_max} bytes={bytes} mismatches={mismatches} errors={errors} sha256={hex}",
        end.2.saturating_sub(start.2),
        end.1.saturating_sub(start.1),
    )
}

/// Header + a fresh body of `/cgi-bin/pattern?seed=S&size=N`.
fn pattern(d: &'static Domain, seed: u32, size: usize) -> Option<Aggregate<'static>> {
    let mut head = cgi::gen::generate(d, CGI_POOL, |w| {
        write!(w, "Content-Type: application/octet-stream\r\nCache-Control: no-store\r\n\r\n")
    })
    .ok()?;
    if size > 0 {
        let mut b = d.alloc(CGI_POOL, size).ok()?;
        cgi::gen::pattern(seed, &mut b.writable()[..size]);
        head.append(b.seal(size).ok()?).ok()?;
    }
    Some(head)
}

/// Header + the cached body of `/cgi-bin/blob?size=N`.
fn blob(d: &'static Domain, size: usize) -> Option<Aggregate<'static>> {
    static mut BLOBS: Vec<(usize, Aggregate<'static>)> = Vec::new();
    // SAFETY: the component is single-threaded; only this function touches it.
    let blobs = unsafe { &mut *core::ptr::addr_of_mut!(BLOBS) };
    let mut head = cgi::gen::generate(d, CGI_POOL, |w| {
        write!(w, "Content-Type: application/octet-stream\r\nCache-Control: no-store\r\n\r\n")
    })
    .ok()?;
    if size == 0 {
        return Some(head);
    }
    if !blobs.iter().any(|(n, _)| *n == size) {
        if blobs.len() >= 6 {
            blobs.remove(0);
        }
        let mut b = d.alloc(CGI_POOL, size).ok()?;
        for (i, x) in b.writable()[..size].iter_mut().enumerate() {
            *x = (i % 251) as u8;
        }
        blobs.push((size, b.seal(size).ok()?));
    }
    let body = blobs.iter().find(|(n, _)| *n == size)?.1.duplicate().ok()?;
    head.append(body).ok()?;
    Some(head)
}

/// `/cgi-bin/fshog` (test hook): opens the comma-separated `paths` in turn
/// until fs refuses, then reads the open files, keeping every buffer
/// received, until fs refuses again (distinct files: the quota counts
/// distinct buffers).
/// Handles and buffers stay with this incarnation (a restart gives them
/// back: fs `reset`). Reports `opened=N open_error=E held_bytes=B
/// held_buffers=K read_error=F` (errors as fs returns them, -(code)).
fn fs_hog(d: &'static Domain, copier: &mut Copier<'static>, rx: &mut ChannelRx<'static>, paths: &str) -> String {
    static mut HOARD: Vec<Aggregate<'static>> = Vec::new();
    // SAFETY: the component is single-threaded; only this function touches it.
    let hoard = unsafe { &mut *core::ptr::addr_of_mut!(HOARD) };
    let mut handles = Vec::new();
    let mut paths = paths.split(',').cycle();
    let open_error = loop {
        let (mut size, mut ino) = (0, 0);
        let h = glue::fs::open(paths.next().unwrap_or(""), &mut size, &mut ino);
        if h < 0 {
            break h;
        }
        handles.push((h as u32, size));
        if handles.len() >= 4096 {
            break 0;
        }
    };
    let mut read_error = 0;
    let mut tag = 1u64 << 48;
    'files: for &(h, size) in &handles {
        let mut off = 0;
        while off < size {
            tag += 1;
            let n = glue::fs::read(h, off, size - off, tag);
            if n <= 0 {
                read_error = n;
                break 'files;
            }
            let mut got = 0i64;
            while got < n {
                match copier.recv(rx) {
                    Ok(Some(m)) if m.tag == tag => {
                        got += m.agg.len() as i64;
                        hoard.push(m.agg);
                    }
                    Ok(Some(_)) => {}
                    _ => break 'files,
                }
            }
            off += n as u64;
        }
    }
    let held: usize = hoard.iter().map(|a| a.len()).sum();
    let buffers = d.pool_stats(FILE_POOL).map(|s| s.buffers_in_use).unwrap_or(0);
    log!("fshog: {} open, {held} bytes held", handles.len());
    alloc::format!(
        "opened={} open_error={open_error} held_bytes={held} held_buffers={buffers} read_error={read_error}",
        handles.len()
    )
}
