//! The fault-injection commands of test images (the supervisor's side is
//! roottask/src/inject.rs, which says why and how): parsed here, where
//! host tests reach them. Only a root task built for a spec that grants
//! injection uses this, so only its binary contains it.

/// What a command asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Injection {
    /// Make the component fault (instruction fetch from [`FAULT_IP`]).
    Fault,
    /// Make it spin in user mode at its priority, forever.
    Hang,
}

/// A parsed command: what, and the component's name.
#[derive(Debug, PartialEq, Eq)]
pub struct Command<'a> {
    /// Fault or hang.
    pub what: Injection,
    /// The instance name as written.
    pub name: &'a str,
}

/// Parses one console line; `None` for anything that is not a command
/// (people may type at the console; that is ignored).
pub fn parse(line: &[u8]) -> Option<Command<'_>> {
    let line = core::str::from_utf8(line).ok()?.trim();
    let mut words = line.split_ascii_whitespace();
    if words.next()? != "iolite-inject" {
        return None;
    }
    let what = match words.next()? {
        "fault" => Injection::Fault,
        "hang" => Injection::Hang,
        _ => return None,
    };
    let name = words.next()?;
    words.next().is_none().then_some(Command { what, name })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_parsed() {
        assert_eq!(parse(b"iolite-inject fault cgi"), Some(Command { what: Injection::Fault, name: "cgi" }));
        assert_eq!(parse(b"  iolite-inject hang  ticker \r"), Some(Command { what: Injection::Hang, name: "ticker" }));
    }

    #[test]
    fn anything_else_is_ignored() {
        for line in [
            &b""[..],
            b"iolite-inject",
            b"iolite-inject fault",
            b"iolite-inject crash cgi",
            b"iolite-inject fault cgi httpd",
            b"inject fault cgi",
            b"iolite-inject fault \xff",
        ] {
            assert_eq!(parse(line), None, "{:?}", line);
        }
    }
}
