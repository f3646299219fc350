//! Asking the supervisor to restart another component, or to lend it the
//! asker's priority.
//!
//! Who may restart whom is declared in the assembly
//! (`httpd.may_restart = ["cgi"];`) and carried in the system spec; the
//! supervisor refuses anything else. A component asks through the fault
//! endpoint capability it already holds (the one [`exit`](crate::exit)
//! uses), so no new capability is needed, and the supervisor knows the
//! requester from the badge, which the requester cannot forge.
//!
//! The message: label [`SUPERVISOR_RESTART_LABEL`], MR0 the target's
//! instance name length in bytes, MR1.. the name, 8 bytes per word (little
//! endian, zero padded). The reply's label is 0 when the target was
//! restarted, else a [`RestartError`] code.

use crate::start::MAX_NAME_LEN;

/// Message label of a restart request; next to
/// [`SUPERVISOR_EXIT_LABEL`](crate::start::SUPERVISOR_EXIT_LABEL), far from
/// the kernel's fault labels (0..=5).
pub const SUPERVISOR_RESTART_LABEL: u64 = 0xE418;

/// Message label of a request to lend the target the requester's priority
/// (its assembly priority) until [`SUPERVISOR_RETURN_PRIORITY_LABEL`].
///
/// A component that waits for another one's work lends it its priority
/// while it waits, so that the worker, if it runs below busy components,
/// is not starved (and so not mistaken for one that hangs). Whoever may
/// restart a component (`may_restart`) may lend it priority: both rights
/// are about whether it makes progress for the requester. The lend holds
/// across a restart of the target (its new incarnation starts at it, and
/// is rebuilt at it).
pub const SUPERVISOR_LEND_PRIORITY_LABEL: u64 = 0xE41A;

/// Message label of a request to end a lend
/// ([`SUPERVISOR_LEND_PRIORITY_LABEL`]): the target runs at its own
/// priority again.
pub const SUPERVISOR_RETURN_PRIORITY_LABEL: u64 = 0xE41B;

/// Words a name takes at most (MR1..).
pub const MAX_NAME_WORDS: usize = MAX_NAME_LEN.div_ceil(8);

/// Words of the longest request: the length word and the name.
pub const MAX_REQUEST_WORDS: usize = 1 + MAX_NAME_WORDS;

/// Why a restart did not happen (the reply label, or a local failure).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u64)]
pub enum RestartError {
    /// The assembly does not let the requester restart that component.
    Refused = 1,
    /// No component of that name.
    NoSuchComponent = 2,
    /// The supervisor tried and could not rebuild it (see its log).
    Failed = 3,
    /// The request could not be decoded.
    Malformed = 4,
    /// The name is empty or longer than [`MAX_NAME_LEN`]; nothing was sent.
    BadName = 5,
    /// This protection domain has no supervisor (the root task).
    NoSupervisor = 6,
}

impl RestartError {
    /// The error a reply label stands for (`None` for 0, success, and for
    /// labels no supervisor sends, which [`restart`] reports as
    /// `Malformed`).
    pub fn from_label(label: u64) -> Option<RestartError> {
        use RestartError::*;
        [Refused, NoSuchComponent, Failed, Malformed, BadName, NoSupervisor].into_iter().find(|e| *e as u64 == label)
    }
}

impl core::fmt::Display for RestartError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            RestartError::Refused => "refused: the assembly does not grant it (may_restart)",
            RestartError::NoSuchComponent => "no such component",
            RestartError::Failed => "the supervisor could not rebuild it",
            RestartError::Malformed => "malformed request or reply",
            RestartError::BadName => "bad component name",
            RestartError::NoSupervisor => "no supervisor",
        })
    }
}

/// The request's message registers for `name`, and how many are used.
pub fn encode_request(name: &str) -> Result<([u64; MAX_REQUEST_WORDS], usize), RestartError> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() > MAX_NAME_LEN {
        return Err(RestartError::BadName);
    }
    let mut words = [0u64; MAX_REQUEST_WORDS];
    words[0] = bytes.len() as u64;
    for (i, chunk) in bytes.chunks(8).enumerate() {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        words[1 + i] = u64::from_le_bytes(w);
    }
    Ok((words, 1 + bytes.len().div_ceil(8)))
}

/// The target's name from a request's message registers (`words`: the
/// message as received, its length from the message info), into `buf`.
/// Untrusted input: every inconsistency is `Malformed`.
pub fn decode_request<'b>(words: &[u64], buf: &'b mut [u8; MAX_NAME_LEN]) -> Result<&'b str, RestartError> {
    let len = *words.first().ok_or(RestartError::Malformed)? as usize;
    if len == 0 || len > MAX_NAME_LEN || words.len() != 1 + len.div_ceil(8) {
        return Err(RestartError::Malformed);
    }
    for (i, w) in words[1..].iter().enumerate() {
        let b = w.to_le_bytes();
        let n = (len - i * 8).min(8);
        if b[n..].iter().any(|&x| x != 0) {
            return Err(RestartError::Malformed);
        }
        buf[i * 8..i * 8 + n].copy_from_slice(&b[..n]);
    }
    core::str::from_utf8(&buf[..len]).map_err(|_| RestartError::Malformed)
}

/// Asks the supervisor to restart the component named `name` (an instance
/// name of the assembly) and waits until it did, or refused. The caller
/// must be granted it in the assembly (`<me>.may_restart = ["<name>"]`).
pub fn restart(name: &str) -> Result<(), RestartError> {
    request(SUPERVISOR_RESTART_LABEL, name)
}

/// Lends the component named `name` our priority until
/// [`return_priority`] (see [`SUPERVISOR_LEND_PRIORITY_LABEL`]); needs the
/// same grant as [`restart`].
pub fn lend_priority(name: &str) -> Result<(), RestartError> {
    request(SUPERVISOR_LEND_PRIORITY_LABEL, name)
}

/// Ends a [`lend_priority`]: `name` runs at its own priority again.
pub fn return_priority(name: &str) -> Result<(), RestartError> {
    request(SUPERVISOR_RETURN_PRIORITY_LABEL, name)
}

/// Sends a request about the component `name` and waits for the answer.
fn request(label: u64, name: &str) -> Result<(), RestartError> {
    let (words, n) = encode_request(name)?;
    let slot = crate::supervisor_slot();
    if slot == 0 {
        return Err(RestartError::NoSupervisor);
    }
    // MR0-3 travel in registers, the rest through our IPC buffer.
    for (i, &w) in words.iter().enumerate().take(n).skip(4) {
        sel4::set_mr(i, w);
    }
    let info = sel4::MessageInfo::new(label, 0, 0, n as sel4::Word);
    let (reply, _) = sel4::call(slot, info, [words[0], words[1], words[2], words[3]]);
    match reply.label() {
        0 => Ok(()),
        l => Err(RestartError::from_label(l).unwrap_or(RestartError::Malformed)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_supervisor_label_is_distinct_and_no_fault_label() {
        let labels = [
            crate::start::SUPERVISOR_EXIT_LABEL,
            SUPERVISOR_RESTART_LABEL,
            crate::events::SUPERVISOR_SETTLED_LABEL,
            SUPERVISOR_LEND_PRIORITY_LABEL,
            SUPERVISOR_RETURN_PRIORITY_LABEL,
        ];
        for (i, a) in labels.iter().enumerate() {
            // The kernel's fault messages use labels 0..=5.
            assert!(*a > 5, "{a:#x}");
            assert!(labels[i + 1..].iter().all(|b| b != a), "{a:#x} twice");
        }
    }

    #[test]
    fn names_round_trip_through_message_registers() {
        for name in ["cgi", "httpd", "a", "exactly8", "ninechars", &"n".repeat(MAX_NAME_LEN)] {
            let (words, n) = encode_request(name).unwrap();
            assert_eq!(n, 1 + name.len().div_ceil(8));
            assert!(words[n..].iter().all(|&w| w == 0));
            let mut buf = [0u8; MAX_NAME_LEN];
            assert_eq!(decode_request(&words[..n], &mut buf), Ok(name));
        }
    }

    #[test]
    fn bad_names_are_not_sent_and_bad_requests_are_refused() {
        assert_eq!(encode_request(""), Err(RestartError::BadName));
        assert_eq!(encode_request(&"n".repeat(MAX_NAME_LEN + 1)), Err(RestartError::BadName));
        let mut buf = [0u8; MAX_NAME_LEN];
        let (words, n) = encode_request("cgi").unwrap();
        // Length word disagreeing with the message length.
        assert_eq!(decode_request(&words[..n + 1], &mut buf), Err(RestartError::Malformed));
        assert_eq!(decode_request(&words[..1], &mut buf), Err(RestartError::Malformed));
        assert_eq!(decode_request(&[], &mut buf), Err(RestartError::Malformed));
        assert_eq!(decode_request(&[0], &mut buf), Err(RestartError::Malformed));
        assert_eq!(
            decode_request(&[MAX_NAME_LEN as u64 + 1; MAX_REQUEST_WORDS], &mut buf),
            Err(RestartError::Malformed)
        );
        // Bytes after the name, and names that are not UTF-8.
        assert_eq!(decode_request(&[3, u64::from_le_bytes(*b"cgiX\0\0\0\0")], &mut buf), Err(RestartError::Malformed));
        assert_eq!(decode_request(&[2, 0xffff], &mut buf), Err(RestartError::Malformed));
    }

    #[test]
    fn reply_labels_map_to_errors() {
        assert_eq!(RestartError::from_label(0), None);
        for e in [RestartError::Refused, RestartError::NoSuchComponent, RestartError::Failed, RestartError::Malformed] {
            assert_eq!(RestartError::from_label(e as u64), Some(e));
        }
        assert_eq!(RestartError::from_label(0xE417), None);
    }
}
