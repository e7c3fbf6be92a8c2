//! After the fact: the accesses the kernel refused a command, read from
//! the audit records Landlock emits from ABI 7 on.

use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStringExt;
use std::path::PathBuf;
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use crate::abi::Feature;
use crate::error::DenialLogError;
use crate::explain::Verdict;
use crate::probe::Availability;
use crate::report::Report;
use crate::supervise::SignalForwarder;
use crate::sys;
use crate::terminal::TerminalFilter;
use std::sync::Arc;

/// `AUDIT_GET`: asks for the audit status.
const AUDIT_GET: u16 = 1000;
/// `AUDIT_LANDLOCK_ACCESS`: one refused access.
const AUDIT_LANDLOCK_ACCESS: u16 = 1423;
/// `AUDIT_LANDLOCK_DOMAIN`: a sandbox (domain) allocated or freed.
const AUDIT_LANDLOCK_DOMAIN: u16 = 1424;
/// `NLMSG_ERROR`: the kernel's answer to a refused request.
const NLMSG_ERROR: u16 = 2;
/// Size of `struct nlmsghdr`.
const NLMSG_HDRLEN: usize = 16;

/// One access the kernel refused the command, as its audit record says.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Denial {
    /// What was missing, in the kernel's words: `fs.write_file`,
    /// `fs.make_reg`, `fs.remove_file`, `fs.refer`, `ptrace`, …
    pub blockers: Vec<String>,
    /// The object the right was checked on, when it is a file: the file
    /// itself for `fs.write_file` and `fs.truncate`, the directory for
    /// `fs.make_*` and `fs.remove_*`.
    pub path: Option<PathBuf>,
    /// The record's fields as the kernel wrote them.
    pub record: String,
}

impl Denial {
    /// What was refused, for a person: each blocker in words with the
    /// kernel's name after it, such as `creating a file (fs.make_reg)`.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(strument_sandbox::Denial::describe_blocker("fs.make_reg"), "creating a file");
    /// ```
    #[must_use]
    pub fn what(&self) -> String {
        self.blockers
            .iter()
            .map(|b| format!("{} ({b})", Denial::describe_blocker(b)))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// One blocker of Landlock's audit vocabulary (`fs.write_file`,
    /// `fs.refer`, `ptrace`, …) in words; `an access` for one this
    /// version does not know.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::Denial;
    /// assert_eq!(Denial::describe_blocker("fs.refer"), "moving or linking between places");
    /// assert_eq!(Denial::describe_blocker("net.bind_udp"), "an access");
    /// ```
    #[must_use]
    pub fn describe_blocker(blocker: &str) -> &'static str {
        match blocker {
            "fs.write_file" => "writing a file",
            "fs.truncate" => "truncating a file",
            "fs.make_reg" => "creating a file",
            "fs.make_dir" => "creating a directory",
            "fs.make_sym" => "creating a symlink",
            "fs.make_sock" => "creating a socket",
            "fs.make_fifo" => "creating a fifo",
            "fs.make_char" => "creating a character device",
            "fs.make_block" => "creating a block device",
            "fs.remove_file" => "removing a file",
            "fs.remove_dir" => "removing a directory",
            "fs.refer" => "moving or linking between places",
            "fs.change_topology" => "mounting",
            "ptrace" => "tracing a less confined process",
            _ => "an access",
        }
    }

    /// Whether [`Denial::path`] is the directory something was created in
    /// or removed from (`fs.make_*`, `fs.remove_*`), rather than the file
    /// written.
    ///
    /// # Examples
    ///
    /// ```
    /// # fn check(d: &strument_sandbox::Denial) {
    /// let preposition = if d.in_directory() { "in" } else { "on" };
    /// # }
    /// ```
    #[must_use]
    pub fn in_directory(&self) -> bool {
        self.blockers
            .iter()
            .any(|b| b.starts_with("fs.make_") || b.starts_with("fs.remove_"))
    }

    /// What would have let the access through, judged against the policy's
    /// `report`; `None` when the record names no file.
    ///
    /// # Examples
    ///
    /// ```no_run
    /// use std::process::Command;
    /// use strument_sandbox::{Advice, Policy};
    ///
    /// let prepared = Policy { writable: vec!["/home/me/project".into()], ..Policy::default() }.prepare()?;
    /// let audited = prepared.status_with_denials(&mut Command::new("make"))?;
    /// for denial in &audited.denials {
    ///     if let Some(Advice::Allow(path)) = denial.advice(prepared.report()) {
    ///         eprintln!("{}: grant {} to allow it", denial.what(), path.display());
    ///     }
    /// }
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    #[must_use]
    pub fn advice(&self, report: &Report) -> Option<Advice> {
        let path = self.path.as_ref()?;
        Some(match report.explain(path) {
            Ok(e) => match e.verdict {
                Verdict::Denied { allow, .. } => Advice::Allow(allow),
                Verdict::Granted(root) => Advice::OtherEnd(root.path),
            },
            Err(err) => Advice::Unknown(err.to_string()),
        })
    }
}

/// What would have let a refused access through: [`Denial::advice`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Advice {
    /// No root grants the path; granting this one (the smallest that
    /// would) lets the write land.
    Allow(PathBuf),
    /// The path is writable through this root, so the refused access was
    /// the other end of a rename or link, outside the roots.
    OtherEnd(PathBuf),
    /// The path cannot be judged now (it moved, or a directory on the way
    /// is gone); the reason.
    Unknown(String),
}

impl std::fmt::Display for Advice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Advice::Allow(path) => {
                write!(f, "no root grants it; granting {} would", path.display())
            }
            Advice::OtherEnd(root) => write!(
                f,
                "writable through {}, so the other end of a rename or link was outside the roots",
                root.display()
            ),
            Advice::Unknown(why) => write!(f, "cannot explain: {why}"),
        }
    }
}

/// What [`Prepared::status_with_denials`](crate::Prepared::status_with_denials) observed.
#[derive(Debug)]
#[non_exhaustive]
pub struct Audited {
    /// The command's pid, for [`Prepared::refused_connects`](crate::Prepared::refused_connects).
    pub command: u32,
    /// How the command ended.
    pub status: ExitStatus,
    /// The refused accesses whose records arrived, in order.
    pub denials: Vec<Denial>,
    /// How many accesses the kernel refused the command's sandbox in all,
    /// logged or not, from the record it emits when the sandbox is freed;
    /// `None` when that record did not arrive (a process the command
    /// started outlives it, or nothing was refused).
    pub refused: Option<u64>,
    /// Whether records were lost because they arrived faster than they
    /// were read (`ENOBUFS`).
    pub lost: bool,
}

/// [`Prepared::status_with_denials`]: runs `cmd` under `ruleset` and
/// `filter`, with `forwarder` when given, reading the refusals it meets.
pub(crate) fn status_with_denials(
    availability: &Availability,
    ruleset: &Arc<OwnedFd>,
    filter: &TerminalFilter,
    connect: crate::connect::ChildHook,
    cmd: &mut Command,
    forwarder: Option<&SignalForwarder>,
) -> Result<Audited, DenialLogError> {
    if !availability.has(Feature::AuditLog) {
        return Err(DenialLogError::Abi {
            abi: availability.abi,
        });
    }
    let listener = sys::audit_socket().map_err(DenialLogError::Unreadable)?;
    sys::audit_join_readlog(&listener).map_err(DenialLogError::Unreadable)?;
    if audit_enabled() == Some(false) {
        return Err(DenialLogError::AuditOff);
    }
    sys::confine_before_exec_with(
        cmd,
        Arc::clone(ruleset),
        filter.clone(),
        connect,
        sys::RESTRICT_SELF_LOG_NEW_EXEC_ON,
    );
    if let Some(forwarder) = forwarder {
        forwarder.unblock_in(cmd);
    }
    let mut child = cmd.spawn().map_err(DenialLogError::Spawn)?;
    let mut log = Log::new(child.id());
    let status = match forwarder {
        Some(forwarder) => {
            let mut tick = || {
                log.receive(&listener, 50);
            };
            forwarder
                .wait_ticking(&child, Some(&mut tick))
                .map_err(DenialLogError::Wait)?
        }
        None => loop {
            if let Some(status) = child.try_wait().map_err(DenialLogError::Wait)? {
                break status;
            }
            log.receive(&listener, 50);
        },
    };
    // The last records and the sandbox's release trail the exit.
    let deadline = Instant::now() + Duration::from_secs(2);
    let mut quiet_since = Instant::now();
    while log.refused.is_none() && Instant::now() < deadline {
        if log.receive(&listener, 20) {
            quiet_since = Instant::now();
        } else if quiet_since.elapsed() > Duration::from_millis(300) {
            break;
        }
    }
    Ok(log.finish(status))
}

/// Whether kernel auditing is on, when this process may ask
/// (`CAP_AUDIT_CONTROL`); `None` when it may not or the answer is unclear.
fn audit_enabled() -> Option<bool> {
    let socket = sys::audit_socket().ok()?;
    let mut request = Vec::with_capacity(NLMSG_HDRLEN);
    request.extend_from_slice(&(NLMSG_HDRLEN as u32).to_ne_bytes());
    request.extend_from_slice(&AUDIT_GET.to_ne_bytes());
    request.extend_from_slice(&(libc::NLM_F_REQUEST as u16).to_ne_bytes());
    request.extend_from_slice(&1u32.to_ne_bytes()); // sequence
    request.extend_from_slice(&0u32.to_ne_bytes()); // port: the kernel
    sys::netlink_send(&socket, &request).ok()?;
    let mut buf = vec![0u8; 8192];
    for _ in 0..4 {
        let n = sys::netlink_recv(&socket, &mut buf, 1000).ok()?;
        let (kind, payload) = message(&buf[..n])?;
        match kind {
            // struct audit_status { u32 mask; u32 enabled; … }
            AUDIT_GET => return Some(u32_at(payload, 4)? != 0),
            NLMSG_ERROR => return None,
            _ => {}
        }
    }
    None
}

/// The type and payload of the first netlink message in a datagram.
fn message(datagram: &[u8]) -> Option<(u16, &[u8])> {
    let len = usize::try_from(u32_at(datagram, 0)?).ok()?;
    let kind = u16::from_ne_bytes(datagram.get(4..6)?.try_into().ok()?);
    let payload = datagram.get(NLMSG_HDRLEN..len.min(datagram.len()))?;
    Some((kind, payload))
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(bytes.get(at..at + 4)?.try_into().ok()?))
}

/// The records received so far, sorted out for one command.
struct Log {
    pid: String,
    domain: Option<String>,
    /// Every access record, with its domain: ours is known only once
    /// its domain record, which follows the first access record, arrives.
    accesses: Vec<(String, Denial)>,
    refused: Option<u64>,
    lost: bool,
    buf: Vec<u8>,
}

/// At most this many access records are kept, of every sandbox on the
/// machine, so that a flood elsewhere cannot exhaust memory.
const MAX_RECORDS: usize = 100_000;

impl Log {
    fn new(pid: u32) -> Log {
        Log {
            pid: pid.to_string(),
            domain: None,
            accesses: Vec::new(),
            refused: None,
            lost: false,
            buf: vec![0u8; 64 * 1024],
        }
    }

    /// Waits up to `timeout_ms` for one record; whether one arrived.
    fn receive(&mut self, socket: &OwnedFd, timeout_ms: i32) -> bool {
        let n = match sys::netlink_recv(socket, &mut self.buf, timeout_ms) {
            Ok(0) => return false,
            Ok(n) => n,
            Err(e) => {
                if e.raw_os_error() == Some(libc::ENOBUFS) {
                    self.lost = true;
                }
                return false;
            }
        };
        if let Some((kind, payload)) = message(&self.buf[..n]) {
            let text = String::from_utf8_lossy(payload);
            let fields = text
                .trim_end_matches('\0')
                .split_once("): ")
                .map_or("", |(_, rest)| rest)
                .to_owned();
            self.record(kind, &fields);
        }
        true
    }

    fn record(&mut self, kind: u16, fields: &str) {
        let Some(domain) = field(fields, "domain").map(str::to_owned) else {
            return;
        };
        match kind {
            AUDIT_LANDLOCK_DOMAIN => {
                if field(fields, "status") == Some("allocated")
                    && field(fields, "pid") == Some(self.pid.as_str())
                {
                    self.domain = Some(domain);
                } else if field(fields, "status") == Some("deallocated")
                    && self.domain.as_deref() == Some(domain.as_str())
                {
                    self.refused = field(fields, "denials").and_then(|d| d.parse().ok());
                }
            }
            AUDIT_LANDLOCK_ACCESS if self.accesses.len() < MAX_RECORDS => {
                let denial = Denial {
                    blockers: field(fields, "blockers")
                        .map(|b| b.split(',').map(str::to_owned).collect())
                        .unwrap_or_default(),
                    path: field(fields, "path").and_then(untrusted).map(PathBuf::from),
                    record: fields.to_owned(),
                };
                self.accesses.push((domain, denial));
            }
            _ => {}
        }
    }

    fn finish(self, status: ExitStatus) -> Audited {
        let domain = self.domain;
        Audited {
            command: self.pid.parse().unwrap_or(0),
            status,
            denials: self
                .accesses
                .into_iter()
                .filter(|(d, _)| Some(d) == domain.as_ref())
                .map(|(_, denial)| denial)
                .collect(),
            refused: self.refused,
            lost: self.lost,
        }
    }
}

/// The value of `key=` in an audit record's fields (values hold no
/// spaces: the kernel hex-encodes any that would).
fn field<'a>(fields: &'a str, key: &str) -> Option<&'a str> {
    fields
        .split(' ')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
}

/// Decodes a value the kernel logged with `audit_log_untrustedstring`:
/// quoted when printable, hex-encoded otherwise.
fn untrusted(value: &str) -> Option<std::ffi::OsString> {
    if let Some(quoted) = value.strip_prefix('"') {
        return Some(quoted.strip_suffix('"').unwrap_or(quoted).into());
    }
    if value.len() % 2 != 0 || value.is_empty() {
        return None;
    }
    let bytes = (0..value.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(value.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some(std::ffi::OsString::from_vec(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_untrusted_strings_decode_like_the_kernel_writes_them() {
        let fields =
            r#"domain=1e253f5e7 blockers=fs.make_reg,fs.refer path="/work/x" dev="vda" ino=5"#;
        assert_eq!(field(fields, "domain"), Some("1e253f5e7"));
        assert_eq!(field(fields, "blockers"), Some("fs.make_reg,fs.refer"));
        assert_eq!(
            untrusted(field(fields, "path").expect("path")),
            Some("/work/x".into())
        );
        // "/tmp/a b" has a space, so the kernel hex-encodes it.
        assert_eq!(untrusted("2F746D702F612062"), Some("/tmp/a b".into()));
        assert_eq!(untrusted("2F7"), None);
        assert_eq!(untrusted("zz"), None);
        assert_eq!(field(fields, "nope"), None);
    }

    #[test]
    fn only_the_commands_own_sandbox_is_reported() {
        let mut log = Log::new(42);
        log.record(
            AUDIT_LANDLOCK_ACCESS,
            r#"domain=aa blockers=fs.write_file path="/etc/x" dev="vda" ino=1"#,
        );
        log.record(
            AUDIT_LANDLOCK_DOMAIN,
            "domain=aa status=allocated mode=enforcing pid=7 uid=0",
        );
        log.record(
            AUDIT_LANDLOCK_ACCESS,
            r#"domain=bb blockers=fs.make_reg path="/root" dev="vda" ino=2"#,
        );
        log.record(
            AUDIT_LANDLOCK_DOMAIN,
            "domain=bb status=allocated mode=enforcing pid=42 uid=0",
        );
        log.record(
            AUDIT_LANDLOCK_DOMAIN,
            "domain=aa status=deallocated denials=9",
        );
        assert_eq!(log.refused, None);
        log.record(
            AUDIT_LANDLOCK_DOMAIN,
            "domain=bb status=deallocated denials=3",
        );
        assert_eq!(log.refused, Some(3));
        let mut log_denials = log.accesses.iter().filter(|(d, _)| d == "bb");
        let (_, denial) = log_denials.next().expect("our denial");
        assert_eq!(denial.blockers, ["fs.make_reg"]);
        assert_eq!(denial.path.as_deref(), Some(std::path::Path::new("/root")));
        assert!(log_denials.next().is_none());
    }

    #[test]
    fn netlink_messages_parse_and_truncated_ones_do_not() {
        let mut m = Vec::new();
        m.extend_from_slice(&20u32.to_ne_bytes());
        m.extend_from_slice(&AUDIT_LANDLOCK_ACCESS.to_ne_bytes());
        m.extend_from_slice(&[0; 10]);
        m.extend_from_slice(b"abcd");
        assert_eq!(message(&m), Some((AUDIT_LANDLOCK_ACCESS, &b"abcd"[..])));
        assert_eq!(message(&m[..3]), None);
        assert_eq!(message(&[]), None);
    }
}
