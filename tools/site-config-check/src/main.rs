//! `site-config-check [--forward HOST_PORT] FILE`: the boot's check of
//! `/.iolite/config`, on the host (`tools/image/make-disk` runs it before
//! it makes the disk): the same parser and the same
//! `/.iolite/config:LINE: ...` lines, exit status 2 if the file is
//! refused, 0 with a summary of what it sets.
//!
//! With `--forward HOST_PORT` it prints instead the `simulate --port`
//! argument that reaches the guest the file describes on QEMU's user
//! network (`HOST_PORT:ADDRESS:PORT`): `./iolite run` uses it, so the
//! site is at 127.0.0.1:HOST_PORT whatever address and port the file sets.

use site_config::Settings;

/// QEMU's user network (slirp): the guest must live in it to be reached.
const USER_NET: [u8; 3] = [10, 0, 2];
/// The assembly's address and port (camkes/iolite.camkes), what a file
/// that does not set them leaves.
const DEFAULT_ADDRESS: &str = "10.0.2.15";
const DEFAULT_PORT: u16 = 80;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (forward, path) = match args.as_slice() {
        [path] => (None, path),
        [flag, host, path] if flag == "--forward" => match host.parse::<u16>() {
            Ok(h) if h > 0 => (Some(h), path),
            _ => usage(),
        },
        _ => usage(),
    };
    let settings = match check(path) {
        Ok(s) => s,
        Err(lines) => {
            for l in lines {
                eprintln!("{l}");
            }
            std::process::exit(2);
        }
    };
    match forward {
        None => println!("{}: ok: {}", site_config::PATH, site_config::summary(&settings)),
        Some(host) => match forward_for(host, &settings) {
            Ok(arg) => println!("{arg}"),
            Err(why) => {
                eprintln!("site-config-check: {why}");
                std::process::exit(2);
            }
        },
    }
}

fn usage() -> ! {
    eprintln!("usage: site-config-check [--forward HOST_PORT] FILE");
    std::process::exit(2)
}

/// The file's settings, or the lines saying why it is refused.
fn check(path: &str) -> Result<Settings, Vec<String>> {
    use std::io::Read;
    let len = std::fs::metadata(path).map_err(|e| vec![format!("site-config-check: {path}: {e}")])?.len();
    if len > site_config::MAX_FILE as u64 {
        let max = site_config::MAX_FILE;
        return Err(vec![format!("{}:1: file too large: {len} bytes, at most {max}", site_config::PATH)]);
    }
    let mut bytes = Vec::new();
    // One byte past the limit is enough to refuse a file grown meanwhile.
    std::fs::File::open(path)
        .and_then(|f| f.take(site_config::MAX_FILE as u64 + 1).read_to_end(&mut bytes))
        .map_err(|e| vec![format!("site-config-check: {path}: {e}")])?;
    site_config::parse(&bytes).map_err(|errs| errs.iter().map(ToString::to_string).collect())
}

/// `HOST:ADDRESS:PORT` for `simulate --port`, or why user networking
/// cannot reach that guest.
fn forward_for(host: u16, s: &Settings) -> Result<String, String> {
    let port = s.listen_port.unwrap_or(DEFAULT_PORT);
    if s.dhcp == Some(true) {
        // QEMU's DHCP server gives the first address, the default one.
        return Ok(format!("{host}:{DEFAULT_ADDRESS}:{port}"));
    }
    match s.address {
        None => Ok(format!("{host}:{DEFAULT_ADDRESS}:{port}")),
        Some((a, 24)) if a[..3] == USER_NET => Ok(format!("{host}:{}.{}.{}.{}:{port}", a[0], a[1], a[2], a[3])),
        Some((a, p)) => Err(format!(
            "address {}.{}.{}.{}/{p} is outside QEMU's user network 10.0.2.0/24: boot with --tap \
             (SIMULATE_ARGS) or give the file an address in it",
            a[0], a[1], a[2], a[3]
        )),
    }
}
