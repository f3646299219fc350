//! `site-config-check FILE`: the boot's check of `/.iolite/config`, on
//! the host (`tools/image/make-disk` runs it before it makes the disk):
//! the same parser and the same `/.iolite/config:LINE: ...` lines, exit
//! status 2 if the file is refused, 0 with a summary of what it sets.

fn main() {
    use std::io::Read;
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 2 {
        eprintln!("usage: site-config-check FILE");
        std::process::exit(2);
    }
    let mut bytes = Vec::new();
    // One byte past the limit is enough to refuse a file as too large.
    let read =
        std::fs::File::open(&args[1]).and_then(|f| f.take(site_config::MAX_FILE as u64 + 1).read_to_end(&mut bytes));
    if let Err(e) = read {
        eprintln!("site-config-check: {}: {e}", args[1]);
        std::process::exit(2);
    }
    let len = std::fs::metadata(&args[1]).map_or(bytes.len() as u64, |m| m.len());
    if len > site_config::MAX_FILE as u64 {
        eprintln!("{}:1: file too large: {len} bytes, at most {}", site_config::PATH, site_config::MAX_FILE);
        std::process::exit(2);
    }
    match site_config::parse(&bytes) {
        Ok(s) => println!("{}: ok: {}", site_config::PATH, site_config::summary(&s)),
        Err(errors) => {
            for e in errors {
                eprintln!("{e}");
            }
            std::process::exit(2);
        }
    }
}
