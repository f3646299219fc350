//! Escaping for generated text, and the test hooks' byte pattern.
//! ([`generate`], writing text straight into IO-Lite buffers, is
//! `iolite::gen`'s.)

use core::fmt;

pub use iolite::gen::generate;

/// Writes `s` as HTML text (escapes `& < > " '`).
pub fn html_escape(w: &mut dyn fmt::Write, s: &str) -> fmt::Result {
    let mut last = 0;
    for (i, c) in s.char_indices() {
        let rep = match c {
            '&' => "&amp;",
            '<' => "&lt;",
            '>' => "&gt;",
            '"' => "&quot;",
            '\'' => "&#39;",
            _ => continue,
        };
        w.write_str(&s[last..i])?;
        w.write_str(rep)?;
        last = i + 1;
    }
    w.write_str(&s[last..])
}

/// Writes `s` as the contents of a JSON string (without the quotes).
pub fn json_escape(w: &mut dyn fmt::Write, s: &str) -> fmt::Result {
    for c in s.chars() {
        match c {
            '"' => w.write_str("\\\"")?,
            '\\' => w.write_str("\\\\")?,
            '\n' => w.write_str("\\n")?,
            '\r' => w.write_str("\\r")?,
            '\t' => w.write_str("\\t")?,
            c if (c as u32) < 0x20 => write!(w, "\\u{:04x}", c as u32)?,
            c => w.write_char(c)?,
        }
    }
    Ok(())
}

/// Writes bytes as text: printable ASCII as is, anything else as `\xNN`.
pub fn bytes_escape(w: &mut dyn fmt::Write, b: &[u8]) -> fmt::Result {
    for &c in b {
        if (0x20..0x7f).contains(&c) && c != b'\\' {
            w.write_char(c as char)?;
        } else {
            write!(w, "\\x{c:02x}")?;
        }
    }
    Ok(())
}

/// The bytes `/cgi-bin/pattern?seed=S&size=N` answers with (a test hook):
/// 16-byte records `SSSSSSSSOOOOOOOO`, the seed and the record's byte
/// offset in lower-case hex, the last record cut at `buf.len()`. Every
/// response of another seed differs in every record, so a reference that
/// shows another response's pages cannot go unnoticed, and the offset says
/// where a wrong byte came from.
pub fn pattern(seed: u32, buf: &mut [u8]) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut rec = [0u8; 16];
    for (i, chunk) in buf.chunks_mut(16).enumerate() {
        let off = (i * 16) as u32;
        for k in 0..8 {
            rec[k] = HEX[(seed >> (28 - 4 * k)) as usize & 15];
            rec[8 + k] = HEX[(off >> (28 - 4 * k)) as usize & 15];
        }
        chunk.copy_from_slice(&rec[..chunk.len()]);
    }
}
