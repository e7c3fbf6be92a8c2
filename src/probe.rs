//! Asking the running kernel what Landlock it offers.

use std::fmt;

use crate::abi::{self, Abi, Feature};
use crate::error::ProbeError;
use crate::sys;

/// What a probe of the running kernel found.
///
/// Produced by [`probe`]. `abi` is the Landlock ABI version the kernel
/// reports, or 0 when there is none; `error` says why, when there is none.
///
/// # Examples
///
/// ```
/// let availability = strument_sandbox::probe();
/// match &availability.error {
///     None => println!("Landlock ABI {}", availability.abi),
///     Some(why) => println!("no sandbox: {why} ({})", why.hint()),
/// }
/// assert_eq!(availability.supported(), availability.error.is_none());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Availability {
    /// The Landlock ABI version the kernel supports, or 0 for none.
    pub abi: u32,
    /// Why the probe found no Landlock, when it found none.
    pub error: Option<ProbeError>,
}

/// A restriction of the running kernel's Landlock that changes what a
/// confined command can do, reported rather than hidden.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Limitation {
    /// ABI 1 (Linux 5.13–5.18) has no `REFER` right: moving or hard-linking
    /// a file into another directory always fails with `EXDEV`, even
    /// between two writable directories. `mv` falls back to copy and
    /// delete; `git` and most build tools rename within one directory.
    CrossDirectoryRenameDenied,
    /// ABI 1 and 2 have no `TRUNCATE` right: truncating a file that is
    /// opened without `O_TRUNC` cannot be denied, so `truncate(2)` of a file
    /// outside the roots succeeds.
    TruncateUnrestricted,
    /// Before ABI 9 Landlock alone cannot stop connecting to a pathname unix
    /// socket. No longer reported: the connect supervisor closes the route
    /// on every kernel. Kept so that programs matching on it still build.
    UnixSocketsReachable,
    /// Before ABI 6 Landlock alone cannot stop connecting to an abstract
    /// unix socket outside the sandbox. No longer reported, as
    /// [`Limitation::UnixSocketsReachable`].
    AbstractSocketsReachable,
}

impl Limitation {
    /// A short, stable name for programs.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::Limitation;
    /// assert_eq!(Limitation::CrossDirectoryRenameDenied.name(), "cross-directory-rename-denied");
    /// ```
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Limitation::CrossDirectoryRenameDenied => "cross-directory-rename-denied",
            Limitation::TruncateUnrestricted => "truncate-unrestricted",
            Limitation::UnixSocketsReachable => "unix-sockets-reachable",
            Limitation::AbstractSocketsReachable => "abstract-sockets-reachable",
        }
    }
}

impl fmt::Display for Limitation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Limitation::CrossDirectoryRenameDenied => write!(
                f,
                "Landlock ABI 1 denies every rename or hard link into another directory (EXDEV), \
                 even between writable roots: `cargo build` fails (rustc moves its outputs between \
                 directories) while `go test` works; Linux {} or later (Landlock ABI {}) lifts this",
                Feature::Refer.since_linux(),
                Feature::Refer.since_abi()
            ),
            Limitation::TruncateUnrestricted => write!(
                f,
                "Landlock ABI < {} cannot deny truncate(2) of a file outside the roots \
                 (Linux {} or later can)",
                Feature::Truncate.since_abi(),
                Feature::Truncate.since_linux()
            ),
            Limitation::UnixSocketsReachable => write!(
                f,
                "Landlock ABI < {} cannot stop connecting to a unix socket: a local service \
                 (tmux, the session bus, docker, X11, an editor) can write for a confined command; \
                 Linux {} or later closes this",
                Feature::ResolveUnix.since_abi(),
                Feature::ResolveUnix.since_linux()
            ),
            Limitation::AbstractSocketsReachable => write!(
                f,
                "Landlock ABI < {} cannot stop connecting to an abstract unix socket of a process \
                 outside the sandbox; Linux {} or later closes this",
                Feature::Scopes.since_abi(),
                Feature::Scopes.since_linux()
            ),
        }
    }
}

impl Availability {
    /// Reports whether the kernel can enforce anything at all.
    ///
    /// # Examples
    ///
    /// ```
    /// if !strument_sandbox::probe().supported() {
    ///     eprintln!("running without a write sandbox");
    /// }
    /// ```
    #[must_use]
    pub fn supported(&self) -> bool {
        self.error.is_none() && Abi(self.abi).exists()
    }

    /// Whether `landlock_restrict_self` can confine every thread of the
    /// process at once (`LANDLOCK_RESTRICT_SELF_TSYNC`, ABI 8).
    ///
    /// # Examples
    ///
    /// ```
    /// let a = strument_sandbox::probe();
    /// assert_eq!(a.all_threads(), a.has(strument_sandbox::Feature::Tsync));
    /// ```
    #[must_use]
    pub fn all_threads(&self) -> bool {
        self.has(Feature::Tsync)
    }

    /// Whether the kernel has Landlock and its ABI has `feature`.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::{Availability, Feature};
    /// let abi2 = Availability { abi: 2, error: None };
    /// assert!(abi2.has(Feature::Refer));
    /// assert!(!abi2.has(Feature::Truncate));
    /// ```
    #[must_use]
    pub fn has(&self, feature: Feature) -> bool {
        self.supported() && Abi(self.abi).has(feature)
    }

    /// The `LANDLOCK_ACCESS_FS_*` bits the sandbox handles on this kernel:
    /// the filesystem write rights of its ABI, built version on version
    /// (0 when Landlock is unavailable). For programs that issue the
    /// syscalls themselves (the benchmark's floor measurement) or compare
    /// with the kernel's audit records.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::Availability;
    /// let abi1 = Availability { abi: 1, error: None };
    /// let abi3 = Availability { abi: 3, error: None };
    /// assert_eq!(abi1.handled_access_fs() & abi3.handled_access_fs(), abi1.handled_access_fs());
    /// assert_ne!(abi1.handled_access_fs(), abi3.handled_access_fs());
    /// ```
    #[must_use]
    pub fn handled_access_fs(&self) -> u64 {
        if self.supported() {
            Abi(self.abi).write_access().bits()
        } else {
            0
        }
    }

    /// What this kernel's Landlock cannot do that a confined command may
    /// notice. Empty when unsupported: nothing is enforced then.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::{Availability, Limitation};
    /// let abi1 = Availability { abi: 1, error: None };
    /// assert!(abi1.limitations().contains(&Limitation::CrossDirectoryRenameDenied));
    /// ```
    #[must_use]
    pub fn limitations(&self) -> Vec<Limitation> {
        let mut out = Vec::new();
        if !self.supported() {
            return out;
        }
        if !self.has(Feature::Refer) {
            out.push(Limitation::CrossDirectoryRenameDenied);
        }
        if !self.has(Feature::Truncate) {
            out.push(Limitation::TruncateUnrestricted);
        }
        // Unix sockets (pathname and abstract) are no limitation of any
        // ABI: the connect supervisor decides every connect.
        out
    }
}

/// Asks the kernel which Landlock ABI it supports.
///
/// This calls `landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)`
/// directly instead of inferring support from a best-effort restriction:
/// on a kernel without Landlock a best-effort restriction succeeds and
/// enforces nothing, and a sandbox believed present and absent is worse
/// than none. A recent kernel is not enough: Landlock must be built in and
/// enabled at boot, and it is missing from many VM and container kernels.
///
/// The answer is cheap (one syscall) and is not cached, so a test harness
/// that installs a seccomp filter sees the filtered answer. In builds with
/// debug assertions only (never `--release`), `STRUMENT_SANDBOX_TEST_ABI_CAP=N`
/// lowers the reported ABI to at most N, so tests can exercise older
/// kernels' behaviour; a report made under the cap carries a warning.
///
/// # Examples
///
/// ```
/// let availability = strument_sandbox::probe();
/// println!("Landlock ABI {}", availability.abi);
/// ```
#[must_use]
pub fn probe() -> Availability {
    match sys::landlock_abi_version() {
        Ok(version) => match u32::try_from(version) {
            Ok(abi) if Abi(abi).exists() => Availability {
                abi: abi::test_cap().map_or(abi, |cap| abi.min(cap)),
                error: None,
            },
            _ => unavailable(ProbeError::InvalidVersion { version }),
        },
        Err(libc::ENOSYS) => unavailable(ProbeError::NotBuilt),
        Err(libc::EOPNOTSUPP) => unavailable(ProbeError::DisabledAtBoot),
        Err(errno) => unavailable(ProbeError::Blocked { errno }),
    }
}

fn unavailable(error: ProbeError) -> Availability {
    Availability {
        abi: 0,
        error: Some(error),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limitations_follow_the_abi() {
        let at = |abi| Availability { abi, error: None }.limitations();
        assert_eq!(
            at(1)[..2],
            [
                Limitation::CrossDirectoryRenameDenied,
                Limitation::TruncateUnrestricted
            ]
        );
        assert_eq!(at(2)[..1], [Limitation::TruncateUnrestricted]);
        assert!(at(3).is_empty());
        assert!(at(6).is_empty());
        assert!(at(9).is_empty());
        let none = Availability {
            abi: 0,
            error: Some(ProbeError::NotBuilt),
        };
        assert!(none.limitations().is_empty());
        assert!(!none.supported());
    }

    #[test]
    fn every_probe_error_names_an_errno_and_a_fix() {
        for e in [
            ProbeError::NotBuilt,
            ProbeError::DisabledAtBoot,
            ProbeError::Blocked { errno: libc::EPERM },
        ] {
            assert!(e.errno().is_some(), "{e:?}");
            assert!(e.hint().len() > 20, "{e:?}");
            assert!(!e.to_string().is_empty());
        }
        assert!(
            ProbeError::Blocked { errno: libc::EPERM }
                .to_string()
                .contains("EPERM")
        );
    }
}
