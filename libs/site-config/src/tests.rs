//! Every error with its line, and the page's round trip and refusals.

use alloc::string::{String, ToString};
use alloc::vec::Vec;
use alloc::{format, vec};

use crate::page::{decode, encode, publish, snapshot, Source, PAGE_BYTES};
use crate::{parse, LogLevel, Settings, MAX_FILE};

/// The errors of `text` as the boot prints them.
fn errors(text: &str) -> Vec<String> {
    parse(text.as_bytes()).expect_err("refused").iter().map(ToString::to_string).collect()
}

fn one(text: &str) -> String {
    let e = errors(text);
    assert_eq!(e.len(), 1, "{e:?}");
    e.into_iter().next().unwrap()
}

const FULL: &str = r#"# a deployment
address = "192.168.7.20/24"
gateway = "192.168.7.1"
dhcp = false
hostname = "shop-1.example"
listen_port = 8081
server_name = "shop/2 (iolite)"
index = ["home.html", "index.html"]
log_level = "warn"
"#;

#[test]
fn a_full_file_sets_every_key() {
    let s = parse(FULL.as_bytes()).unwrap();
    assert_eq!(
        s,
        Settings {
            address: Some(([192, 168, 7, 20], 24)),
            gateway: Some([192, 168, 7, 1]),
            dhcp: Some(false),
            hostname: Some("shop-1.example".into()),
            listen_port: Some(8081),
            server_name: Some("shop/2 (iolite)".into()),
            index: Some(vec!["home.html".into(), "index.html".into()]),
            log_level: Some(LogLevel::Warn),
        }
    );
}

#[test]
fn an_empty_file_sets_nothing() {
    assert_eq!(parse(b"").unwrap(), Settings::default());
    assert_eq!(parse(b"# only a comment\n\n").unwrap(), Settings::default());
    assert_eq!(parse(b"dhcp = true\n").unwrap().dhcp, Some(true));
    // Integers in TOML's other forms are still integers.
    assert_eq!(parse(b"listen_port = 0x1f90\n").unwrap().listen_port, Some(8080));
    assert_eq!(parse(b"listen_port = 8_080\n").unwrap().listen_port, Some(8080));
}

#[test]
fn unknown_keys_and_sections_are_refused_at_their_line() {
    assert_eq!(one("hostname = \"a\"\nport = 80\n"), "/.iolite/config:2: unknown key \"port\"");
    assert_eq!(one("\n\n[network]\naddress = \"10.0.0.2/8\"\n"), "/.iolite/config:3: unknown key \"network\"");
    assert_eq!(
        one("\n[writes]\nprefix = \"/up\"\n"),
        "/.iolite/config:2: [writes] is reserved for writable prefixes and their secret: writes are not supported yet"
    );
}

#[test]
fn bad_addresses() {
    let cases = [
        ("address = \"10.0.0.300/24\"", "is not an IPv4 address with a prefix length (a.b.c.d/N)"),
        ("address = \"10.0.0.2\"", "needs a prefix length (a.b.c.d/N)"),
        ("address = \"10.0.0.2/33\"", "prefix /33 is over 32"),
        ("address = \"10.0.0.2/0\"", "prefix /0 leaves no network"),
        ("address = \"010.0.0.2/8\"", "is not an IPv4 address with a prefix length (a.b.c.d/N)"),
        ("address = \"10.0.0.2/x\"", "is not an IPv4 address with a prefix length (a.b.c.d/N)"),
        ("address = \"127.0.0.1/8\"", "is a loopback address"),
        ("address = \"224.0.0.1/24\"", "is a multicast address"),
        ("address = \"10.0.0.0/24\"", "is the network's own address"),
        ("address = \"10.0.0.255/24\"", "is the network's broadcast address"),
    ];
    for (line, why) in cases {
        let value = line.split(" = ").nth(1).unwrap();
        assert_eq!(one(&format!("\n{line}\n")), format!("/.iolite/config:2: address: {value} {why}"), "{line}");
    }
    assert_eq!(parse(b"address = \"10.0.0.2/32\"\n").unwrap().address, Some(([10, 0, 0, 2], 32)));
}

#[test]
fn bad_gateways() {
    assert_eq!(
        one("gateway = \"10.0.4.1\"\naddress = \"10.0.3.15/24\"\n"),
        "/.iolite/config:1: gateway: \"10.0.4.1\" is outside 10.0.3.15/24, the address's network"
    );
    assert_eq!(
        one("address = \"10.0.3.15/24\"\ngateway = \"10.0.3.15\"\n"),
        "/.iolite/config:2: gateway: \"10.0.3.15\" is the address itself"
    );
    assert_eq!(
        one("address = \"10.0.3.15/24\"\ngateway = \"10.0.3\"\n"),
        "/.iolite/config:2: gateway: \"10.0.3\" is not an IPv4 address (a.b.c.d)"
    );
    assert_eq!(one("\ngateway = \"10.0.3.1\"\n"), "/.iolite/config:1: gateway needs address in the same file");
    assert_eq!(
        one("address = \"10.0.3.15/24\"\n\ndhcp = true\n"),
        "/.iolite/config:3: dhcp and a static address or gateway: set one or the other"
            .replace("dhcp and", "dhcp = true and")
    );
}

#[test]
fn bad_ports() {
    assert_eq!(one("\n\nlisten_port = 0\n"), "/.iolite/config:3: listen_port: 0 is not a port (1-65535)");
    assert_eq!(one("listen_port = 65536\n"), "/.iolite/config:1: listen_port: 65536 is not a port (1-65535)");
    assert_eq!(one("listen_port = -1\n"), "/.iolite/config:1: listen_port: -1 is not a port (1-65535)");
    assert_eq!(one("listen_port = \"80\"\n"), "/.iolite/config:1: listen_port: expected an integer, found a string");
    assert_eq!(one("listen_port = 80.0\n"), "/.iolite/config:1: listen_port: expected an integer, found a float");
}

#[test]
fn wrong_types() {
    assert_eq!(one("dhcp = 1\n"), "/.iolite/config:1: dhcp: expected a boolean, found an integer");
    assert_eq!(one("hostname = [\"a\"]\n"), "/.iolite/config:1: hostname: expected a string, found an array");
    assert_eq!(one("address = 10\n"), "/.iolite/config:1: address: expected a string, found an integer");
    assert_eq!(
        one("index = \"index.html\"\n"),
        "/.iolite/config:1: index: expected an array of file names, found a string"
    );
    assert_eq!(one("index = [\"a.html\",\n  3]\n"), "/.iolite/config:2: index: expected a string, found an integer");
    assert_eq!(one("server_name = true\n"), "/.iolite/config:1: server_name: expected a string, found a boolean");
    assert_eq!(one("log_level = 2\n"), "/.iolite/config:1: log_level: expected a string, found an integer");
    assert_eq!(one("hostname = 1979-05-27\n"), "/.iolite/config:1: hostname: expected a string, found a date-time");
}

#[test]
fn bad_names() {
    assert_eq!(
        one("hostname = \"-x\"\n"),
        "/.iolite/config:1: hostname: \"-x\" must be DNS labels (letters, digits, inner hyphens) separated by dots"
    );
    let long = "a".repeat(64);
    assert_eq!(
        one(&format!("hostname = \"{long}\"\n")),
        format!("/.iolite/config:1: hostname: \"{long}\" must be 1 to 63 bytes")
    );
    assert_eq!(
        one("server_name = \"a\\r\\nX-Evil: 1\"\n"),
        "/.iolite/config:1: server_name: \"a\\r\\nX-Evil: 1\" must be visible ASCII (spaces only inside)"
    );
    assert_eq!(
        one("index = [\"../etc\"]\n"),
        "/.iolite/config:1: index: \"../etc\" must be a file name (visible ASCII, no '/' or '\\', not . or ..)"
    );
    assert_eq!(one("index = []\n"), "/.iolite/config:1: index: must name 1 to 8 files, not 0");
    assert_eq!(one("index = [\"a\", \"a\"]\n"), "/.iolite/config:1: index: \"a\" named twice");
    assert_eq!(
        one("log_level = \"debug\"\n"),
        "/.iolite/config:1: log_level: \"debug\" is not \"error\", \"warn\" or \"info\""
    );
}

#[test]
fn syntax_errors_have_their_line() {
    assert_eq!(one("hostname = \"a\"\nhostname = \"b\"\n"), "/.iolite/config:2: TOML: duplicate key");
    assert_eq!(one("\n\naddress = \"10.0.0.2/8\n"), "/.iolite/config:3: TOML: invalid basic string, expected `\"`");
    assert_eq!(one("a = [\n\nb = \n"), "/.iolite/config:3: TOML: unexpected `=` in array, expected value, `]`");
    assert!(one("\nlisten_port 80\n").starts_with("/.iolite/config:2: TOML: "));
}

#[test]
fn not_utf8_and_too_large() {
    assert_eq!(one_bytes(b"hostname = \"a\"\n# caf\xe9\n"), "/.iolite/config:2: not UTF-8");
    let big = vec![b'#'; MAX_FILE + 1];
    assert_eq!(one_bytes(&big), format!("/.iolite/config:1: file too large: {} bytes, at most 16384", MAX_FILE + 1));
    // The limit itself is fine.
    assert!(parse(&vec![b'#'; MAX_FILE]).is_ok());
}

fn one_bytes(b: &[u8]) -> String {
    let e = parse(b).expect_err("refused");
    assert_eq!(e.len(), 1);
    e[0].to_string()
}

#[test]
fn every_error_is_reported_in_line_order_and_bounded() {
    let e = errors("listen_port = 0\nfoo = 1\nhostname = \"_\"\nlog_level = \"loud\"\n");
    let lines: Vec<&str> = e.iter().map(|l| l.split(':').nth(1).unwrap()).collect();
    assert_eq!(lines, ["1", "2", "3", "4"]);
    let many: String = (0..40).map(|i| format!("k{i} = 1\n")).collect();
    let e = errors(&many);
    assert_eq!(e.len(), crate::MAX_ERRORS);
    assert_eq!(e.last().unwrap(), "/.iolite/config:16: and 25 more errors");
}

#[test]
fn the_page_round_trips() {
    let s = parse(FULL.as_bytes()).unwrap();
    let p = encode(Source::File, &s);
    assert_eq!(decode(&p).unwrap(), (Source::File, s));
    for src in [Source::NoDisk, Source::NoFile, Source::Refused] {
        assert_eq!(decode(&encode(src, &Settings::default())).unwrap(), (src, Settings::default()));
    }
    // Through memory as fs writes it and netstack reads it.
    let mut mem = [0u8; PAGE_BYTES];
    // SAFETY: a local buffer of the page's size.
    assert!(unsafe { snapshot(mem.as_ptr()) }.is_none());
    // SAFETY: as above.
    unsafe { publish(mem.as_mut_ptr(), &p) };
    // SAFETY: as above.
    assert_eq!(unsafe { snapshot(mem.as_ptr()) }.unwrap(), p);
}

/// A page a hostile writer could make: right checksum, wrong values.
fn forged(edit: impl Fn(&mut [u8; PAGE_BYTES])) -> String {
    let mut p = encode(Source::File, &parse(FULL.as_bytes()).unwrap());
    edit(&mut p);
    let sum = p[4..672].iter().fold(0x811c_9dc5u32, |h, &b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193));
    p[672..].copy_from_slice(&sum.to_le_bytes());
    decode(&p).expect_err("refused")
}

#[test]
fn the_receiver_revalidates_every_field() {
    assert_eq!(forged(|p| p[20] = 40), "address: prefix /40 is over 32");
    assert_eq!(forged(|p| p[16] = 239), "address: is a multicast address");
    assert_eq!(forged(|p| p[22..24].copy_from_slice(&[0, 0])), "listen_port: 0");
    assert_eq!(forged(|p| p[24] = 11), "gateway: is outside 192.168.7.20/24, the address's network");
    assert_eq!(forged(|p| p[21] = 7), "dhcp: not a boolean");
    assert_eq!(forged(|p| p[28] = 9), "log_level: unknown");
    assert_eq!(forged(|p| p[32] = 64), "hostname: length 64 out of range");
    assert_eq!(
        forged(|p| p[33] = b'_'),
        "hostname: must be DNS labels (letters, digits, inner hyphens) separated by dots"
    );
    assert_eq!(forged(|p| p[97] = b'\n'), "server_name: must be visible ASCII (spaces only inside)");
    assert_eq!(forged(|p| p[161] = b'/'), "index: must be a file name (visible ASCII, no '/' or '\\', not . or ..)");
    assert_eq!(forged(|p| p[29] = 9), "index: count out of range");
    assert_eq!(forged(|p| p[29] = 0), "index: count out of range");
    assert_eq!(forged(|p| p[13] |= 2), "unknown or unexpected fields");
    assert_eq!(forged(|p| p[8] = 2), "unknown or unexpected fields");
    assert_eq!(forged(|p| p[8] = 9), "unknown source");
    assert_eq!(forged(|p| p[21] = 1), "dhcp = true and a static address or gateway: set one or the other");
    // A torn or corrupt page fails its checksum.
    let mut p = encode(Source::File, &Settings::default());
    p[100] ^= 1;
    assert_eq!(decode(&p).unwrap_err(), "checksum mismatch");
    p[4] = 2;
    assert_eq!(decode(&p).unwrap_err(), "not a config page of this layout");
}
