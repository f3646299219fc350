//! HTTP dates (RFC 9110 §5.6.7), by hand.
//!
//! `httpdate` 1.0.3, the usual crate, works on `std::time::SystemTime` and
//! has no `no_std` mode; the component has no `std`. Formatting the one
//! preferred form and parsing the three accepted forms is about 120 lines:
//!
//! * IMF-fixdate: `Sun, 06 Nov 1994 08:49:37 GMT` (the only form we send)
//! * obsolete RFC 850: `Sunday, 06-Nov-94 08:49:37 GMT`
//! * obsolete asctime: `Sun Nov  6 08:49:37 1994`

const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]; // 1970-01-01 was a Thursday
const LONG_DAYS: [&str; 7] = ["Thursday", "Friday", "Saturday", "Sunday", "Monday", "Tuesday", "Wednesday"];
const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m as i64 + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Formats seconds since the Unix epoch as an IMF-fixdate (29 bytes).
pub fn format(secs: u64) -> [u8; 29] {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    let y = y.clamp(0, 9999) as u32;
    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    out[..3].copy_from_slice(DAYS[(days % 7) as usize].as_bytes());
    let two = |o: &mut [u8], v: u32| {
        o[0] = b'0' + (v / 10) as u8;
        o[1] = b'0' + (v % 10) as u8;
    };
    two(&mut out[5..7], d);
    out[8..11].copy_from_slice(MONTHS[m as usize - 1].as_bytes());
    two(&mut out[12..14], y / 100);
    two(&mut out[14..16], y % 100);
    two(&mut out[17..19], (rem / 3600) as u32);
    two(&mut out[20..22], (rem / 60 % 60) as u32);
    two(&mut out[23..25], (rem % 60) as u32);
    out
}

/// Writes `secs` as nginx's `$time_local` in UTC (`02/Dec/2026:06:10:00
/// +0000`: the access log's time).
pub fn write_log_time(w: &mut dyn core::fmt::Write, secs: u64) -> core::fmt::Result {
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    let (hh, mm, ss) = (rem / 3600, rem / 60 % 60, rem % 60);
    write!(w, "{d:02}/{}/{y:04}:{hh:02}:{mm:02}:{ss:02} +0000", MONTHS[m as usize - 1])
}

/// Writes `secs` as nginx's error log time (`2026/12/02 06:10:00`, UTC).
pub fn write_error_log_time(w: &mut dyn core::fmt::Write, secs: u64) -> core::fmt::Result {
    let (y, m, d) = civil_from_days((secs / 86_400) as i64);
    let rem = secs % 86_400;
    write!(w, "{y:04}/{m:02}/{d:02} {:02}:{:02}:{:02}", rem / 3600, rem / 60 % 60, rem % 60)
}

fn num(s: &str, digits: usize) -> Option<u32> {
    if s.len() != digits || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

fn month(s: &str) -> Option<u32> {
    MONTHS.iter().position(|m| *m == s).map(|i| i as u32 + 1)
}

fn hms(s: &str) -> Option<u64> {
    let mut it = s.split(':');
    let h = num(it.next()?, 2)?;
    let m = num(it.next()?, 2)?;
    let sec = num(it.next()?, 2)?;
    if it.next().is_some() || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    Some(u64::from(h) * 3600 + u64::from(m) * 60 + u64::from(sec.min(59)))
}

fn to_secs(y: i64, m: u32, d: u32, t: u64) -> Option<u64> {
    let dim = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    if !(1..=12).contains(&m) || d == 0 || d > dim[m as usize - 1] || y < 1970 {
        return None;
    }
    let days = days_from_civil(y, m, d);
    Some(days as u64 * 86_400 + t)
}

/// Parses any of the three HTTP date forms into seconds since the epoch.
/// Anything else (including dates before 1970) is `None`, and the header
/// that carried it is then ignored, as RFC 9110 §13.1.3 asks.
pub fn parse(b: &[u8]) -> Option<u64> {
    let s = core::str::from_utf8(b).ok()?.trim();
    if let Some((wd, rest)) = s.split_once(", ") {
        let rest = rest.trim_start();
        if DAYS.contains(&wd) {
            // IMF-fixdate: 06 Nov 1994 08:49:37 GMT
            let mut it = rest.split(' ');
            let d = num(it.next()?, 2)?;
            let m = month(it.next()?)?;
            let y = num(it.next()?, 4)?;
            let t = hms(it.next()?)?;
            if it.next()? != "GMT" || it.next().is_some() {
                return None;
            }
            return to_secs(i64::from(y), m, d, t);
        }
        if LONG_DAYS.contains(&wd) {
            // RFC 850: 06-Nov-94 08:49:37 GMT
            let mut it = rest.split(' ');
            let mut dmy = it.next()?.split('-');
            let d = num(dmy.next()?, 2)?;
            let m = month(dmy.next()?)?;
            let yy = num(dmy.next()?, 2)?;
            let t = hms(it.next()?)?;
            if dmy.next().is_some() || it.next()? != "GMT" || it.next().is_some() {
                return None;
            }
            // Two-digit years: 70–99 are 19xx, 00–69 are 20xx.
            let y = if yy >= 70 { 1900 + yy } else { 2000 + yy };
            return to_secs(i64::from(y), m, d, t);
        }
        return None;
    }
    // asctime: Sun Nov  6 08:49:37 1994
    let mut it = s.split(' ').filter(|p| !p.is_empty());
    let wd = it.next()?;
    if !DAYS.contains(&wd) {
        return None;
    }
    let m = month(it.next()?)?;
    let dd = it.next()?;
    let d = if dd.len() == 1 { num(dd, 1)? } else { num(dd, 2)? };
    let t = hms(it.next()?)?;
    let y = num(it.next()?, 4)?;
    if it.next().is_some() {
        return None;
    }
    to_secs(i64::from(y), m, d, t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_and_parses_all_three_forms() {
        assert_eq!(&format(784_111_777), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(&format(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(&format(1_700_000_000), b"Tue, 14 Nov 2023 22:13:20 GMT");
        assert_eq!(&format(951_782_400), b"Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(parse(b"Sun, 06 Nov 1994 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(parse(b"Sunday, 06-Nov-94 08:49:37 GMT"), Some(784_111_777));
        assert_eq!(parse(b"Sun Nov  6 08:49:37 1994"), Some(784_111_777));
        assert_eq!(parse(b"Tue, 14 Nov 2023 22:13:20 GMT"), Some(1_700_000_000));
        for bad in [
            &b"Sun, 06 Nov 1994 08:49:37 UTC"[..],
            b"Sun, 6 Nov 1994 08:49:37 GMT",
            b"Sun, 31 Feb 1994 08:49:37 GMT",
            b"Sun, 06 Foo 1994 08:49:37 GMT",
            b"Sun, 06 Nov 1994 24:00:00 GMT",
            b"yesterday",
            b"",
            b"Sun, 06 Nov 1960 08:49:37 GMT",
            b"\xff\xfe",
            b"Sun Nov  6 08:49:37 1994 extra",
        ] {
            assert_eq!(parse(bad), None, "{:?}", core::str::from_utf8(bad));
        }
        // Round trip over a range of instants.
        let mut t = 0u64;
        while t < 4_102_444_800 {
            assert_eq!(parse(&format(t)), Some(t));
            t += 86_400 * 37 + 3_607;
        }
    }
}
