//! `run --explain-denials` on the kernel, and `run` without it unchanged.
//! Needs Landlock ABI 7 (audit records) and root: the test turns kernel
//! auditing on for its duration (`CAP_AUDIT_CONTROL`) and puts back what
//! it found, and the records reach only `CAP_AUDIT_READ`.

use std::ffi::OsStr;
use std::fs;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

use strument_sandbox::probe;

use super::support::{FakeHome, assert_exit, show};

const AUDIT_GET: u16 = 1000;
const AUDIT_SET: u16 = 1001;
const AUDIT_STATUS_ENABLED: u32 = 1;

/// Sends one audit request and returns the `enabled` field of the
/// status the kernel answers with (after AUDIT_SET, asks again).
fn audit(kind: u16, enabled: u32) -> u32 {
    // SAFETY: socket takes integers; the descriptor is owned right away.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_AUDIT,
        )
    };
    assert!(
        fd >= 0,
        "NETLINK_AUDIT socket: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: just returned by socket.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut msg = Vec::new();
    let payload: Vec<u8> = if kind == AUDIT_SET {
        [AUDIT_STATUS_ENABLED, enabled, 0, 0, 0, 0, 0, 0]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect()
    } else {
        Vec::new()
    };
    let len = u32::try_from(16 + payload.len()).expect("small");
    msg.extend_from_slice(&len.to_ne_bytes());
    msg.extend_from_slice(&kind.to_ne_bytes());
    let flags = (libc::NLM_F_REQUEST | libc::NLM_F_ACK) as u16;
    msg.extend_from_slice(&flags.to_ne_bytes());
    msg.extend_from_slice(&1u32.to_ne_bytes());
    msg.extend_from_slice(&0u32.to_ne_bytes());
    msg.extend_from_slice(&payload);
    // SAFETY: sockaddr_nl is plain data; zeroed it addresses the kernel.
    let mut kernel: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    kernel.nl_family = libc::AF_NETLINK as libc::sa_family_t;
    // SAFETY: buffer and address valid for the sizes passed.
    let sent = unsafe {
        libc::sendto(
            fd.as_raw_fd(),
            msg.as_ptr().cast(),
            msg.len(),
            0,
            (&raw const kernel).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
        )
    };
    assert!(
        sent >= 0,
        "audit request: {}",
        std::io::Error::last_os_error()
    );
    let mut buf = [0u8; 8192];
    loop {
        // SAFETY: the buffer is valid for its length.
        let n = unsafe { libc::recv(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
        assert!(n >= 16, "audit reply: {}", std::io::Error::last_os_error());
        let kind_back = u16::from_ne_bytes([buf[4], buf[5]]);
        if kind_back == libc::NLMSG_ERROR as u16 {
            let err = i32::from_ne_bytes(buf[16..20].try_into().expect("4 bytes"));
            assert_eq!(err, 0, "the kernel refused the audit request");
            if kind == AUDIT_SET {
                return audit(AUDIT_GET, 0);
            }
            continue;
        }
        if kind_back == AUDIT_GET {
            return u32::from_ne_bytes(buf[20..24].try_into().expect("4 bytes"));
        }
    }
}

/// Puts kernel auditing back the way the test found it.
struct Restore(u32);

impl Drop for Restore {
    fn drop(&mut self) {
        audit(AUDIT_SET, self.0);
    }
}

#[test]
fn explain_denials_lists_each_refused_write_and_the_root_to_add() {
    let abi = probe().abi;
    assert!(
        abi >= 7,
        "--explain-denials needs Landlock ABI 7 audit records; this kernel has {abi}"
    );
    // SAFETY: geteuid has no preconditions.
    assert_eq!(
        unsafe { libc::geteuid() },
        0,
        "this test needs root: it turns kernel auditing on for its duration (CAP_AUDIT_CONTROL) \
         and the records reach only CAP_AUDIT_READ"
    );
    let h = FakeHome::new();
    let flag = [OsStr::new("--explain-denials")];
    let found = audit(AUDIT_GET, 0);
    let _restore = Restore(found);
    // Off (turned off here, whatever it was), the flag refuses before
    // anything runs, and says why.
    assert_eq!(audit(AUDIT_SET, 0), 0, "could not turn auditing off");
    let out = h.run(&flag, &["sh", "-c", "echo ran > ran"]);
    assert_eq!(out.status.code(), Some(5), "{}", show(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("auditing is off") && stderr.contains("explain"),
        "{stderr}"
    );
    assert!(
        !h.project.join("ran").exists(),
        "the command ran without its denials readable"
    );
    assert_eq!(audit(AUDIT_SET, 1), 1, "could not turn auditing on");

    let out = h.run(
        &flag,
        &[
            "sh",
            "-c",
            "echo evil >> ~/.bashrc; mkdir ~/newdir; echo in > inside; exit 3",
        ],
    );
    assert_exit(&out, 3, "the command's status passes through");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let home = h.home.display();
    for want in [
        format!(
            "refused writing a file (fs.write_file) on {home}/.bashrc: no root grants it; to allow it: --allow {home}/.bashrc"
        ),
        format!(
            "refused creating a directory (fs.make_dir) in {home}: no root grants it; to allow it: --allow {home}"
        ),
    ] {
        assert!(stderr.contains(&want), "missing {want:?}\n{}", show(&out));
    }
    assert_eq!(
        fs::read_to_string(h.project.join("inside")).ok().as_deref(),
        Some("in\n")
    );
    assert!(!h.home.join("newdir").exists());
    h.assert_sentinels_intact();

    // Nothing refused: said so, and the status is the command's.
    let out = h.run(&flag, &["sh", "-c", "echo fine > fine"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no access was refused"),
        "{}",
        show(&out)
    );
}

#[test]
fn run_without_the_flag_changes_nothing_in_status_or_output() {
    let h = FakeHome::new();
    let out = h.sh("echo out; echo err >&2; { echo evil > ~/.bashrc; } 2>/dev/null; exit 7");
    assert_eq!(out.status.code(), Some(7), "{}", show(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "out\n");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "err\n");
    h.assert_sentinels_intact();
}
