//! The Landlock ABI: what each version adds, in one place.
//!
//! Every "does this kernel have X" question in the crate is asked here, by
//! the name of the feature, so that supporting a new ABI means adding a
//! row to [`Feature`] and nothing else compares version numbers.

use std::fmt;

use landlock::{AccessFs, BitFlags, Scope, make_bitflags};

use crate::root::Rights;

/// A Landlock feature that arrived with a given ABI version.
///
/// The ABI a kernel reports is cumulative: ABI N has every feature of the
/// versions before it. [`Availability::has`](crate::Availability::has)
/// asks whether the probed kernel has one.
///
/// # Examples
///
/// ```
/// use strument_sandbox::abi::Feature;
/// assert_eq!(Feature::Refer.since_abi(), 2);
/// assert_eq!(Feature::Refer.since_linux(), "5.19");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
#[non_exhaustive]
pub enum Feature {
    /// Filesystem write rights: write, remove, make every file type.
    Filesystem,
    /// `REFER`: moving or hard-linking a file into another directory.
    /// Without it every such move fails with `EXDEV`.
    Refer,
    /// `TRUNCATE`: truncating a file opened without `O_TRUNC`.
    Truncate,
    /// TCP bind and connect rights.
    Network,
    /// `IOCTL_DEV`: ioctl on device files opened after restriction.
    IoctlDev,
    /// Scopes: abstract unix sockets and signals limited to the domain.
    Scopes,
    /// Audit records of refused accesses, and the restrict-self log flags.
    AuditLog,
    /// `LANDLOCK_RESTRICT_SELF_TSYNC`: restrict every thread at once.
    Tsync,
    /// `RESOLVE_UNIX`: connecting to a pathname unix socket.
    ResolveUnix,
}

impl Feature {
    /// Every feature, oldest first.
    pub const ALL: [Feature; 9] = [
        Feature::Filesystem,
        Feature::Refer,
        Feature::Truncate,
        Feature::Network,
        Feature::IoctlDev,
        Feature::Scopes,
        Feature::AuditLog,
        Feature::Tsync,
        Feature::ResolveUnix,
    ];

    /// The Landlock ABI version that introduced the feature.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(strument_sandbox::abi::Feature::Tsync.since_abi(), 8);
    /// ```
    #[must_use]
    pub fn since_abi(self) -> u32 {
        self.row().0
    }

    /// The first Linux release with the feature.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(strument_sandbox::abi::Feature::Scopes.since_linux(), "6.12");
    /// ```
    #[must_use]
    pub fn since_linux(self) -> &'static str {
        self.row().1
    }

    /// A short, stable name for programs.
    ///
    /// # Examples
    ///
    /// ```
    /// assert_eq!(strument_sandbox::abi::Feature::ResolveUnix.name(), "resolve-unix");
    /// ```
    #[must_use]
    pub fn name(self) -> &'static str {
        self.row().2
    }

    /// (ABI, Linux release, name): the one table of ABI numbers.
    fn row(self) -> (u32, &'static str, &'static str) {
        match self {
            Feature::Filesystem => (1, "5.13", "filesystem"),
            Feature::Refer => (2, "5.19", "refer"),
            Feature::Truncate => (3, "6.2", "truncate"),
            Feature::Network => (4, "6.7", "network"),
            Feature::IoctlDev => (5, "6.10", "ioctl-dev"),
            Feature::Scopes => (6, "6.12", "scopes"),
            Feature::AuditLog => (7, "6.15", "audit-log"),
            Feature::Tsync => (8, "7.0", "tsync"),
            Feature::ResolveUnix => (9, "7.1", "resolve-unix"),
        }
    }
}

/// A Landlock ABI version as the kernel reported it (0: none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Abi(pub(crate) u32);

impl Abi {
    /// Whether the kernel has Landlock at all: ABI 1 or later (0 is none).
    pub(crate) fn exists(self) -> bool {
        self.0 >= 1
    }

    /// Whether this ABI has `feature`.
    pub(crate) fn has(self, feature: Feature) -> bool {
        self.0 >= feature.since_abi()
    }

    /// The filesystem write rights this ABI can handle, built version on
    /// version. Reads, execute, `IOCTL_DEV` and `RESOLVE_UNIX` are
    /// deliberately not among them: see `doc/security.md`.
    pub(crate) fn write_access(self) -> BitFlags<AccessFs> {
        let mut access = BitFlags::EMPTY;
        if self.has(Feature::Filesystem) {
            access |= make_bitflags!(AccessFs::{
                WriteFile | RemoveDir | RemoveFile | MakeChar | MakeDir | MakeReg
                | MakeSock | MakeFifo | MakeBlock | MakeSym
            });
        }
        if self.has(Feature::Refer) {
            access |= AccessFs::Refer;
        }
        if self.has(Feature::Truncate) {
            access |= AccessFs::Truncate;
        }
        access
    }

    /// What a directory root granted `rights` gets: [`Abi::write_access`],
    /// less `MAKE_SYM` for [`Rights::NoSymlinks`].
    pub(crate) fn directory_access(self, rights: Rights) -> BitFlags<AccessFs> {
        match rights {
            Rights::All => self.write_access(),
            Rights::NoSymlinks => self.write_access() & !AccessFs::MakeSym,
        }
    }

    /// The subset of [`Abi::write_access`] that means something on a
    /// non-directory (a lock file, a device node).
    pub(crate) fn file_access(self) -> BitFlags<AccessFs> {
        self.write_access() & make_bitflags!(AccessFs::{WriteFile | Truncate})
    }

    /// The socket right this ABI can handle: `RESOLVE_UNIX` from ABI 9
    /// (connecting to a pathname unix socket), nothing before. Granted on
    /// the project, the state directory and named sockets only, never on
    /// temporary space or caches, where tmux, X11 and editors keep theirs.
    pub(crate) fn socket_access(self) -> BitFlags<AccessFs> {
        if self.has(Feature::ResolveUnix) {
            AccessFs::ResolveUnix.into()
        } else {
            BitFlags::EMPTY
        }
    }

    /// The scopes this ABI can enforce that the sandbox asks for: abstract
    /// unix sockets from ABI 6. The signal scope is left out on purpose
    /// (`doc/security.md`: a later command could not stop a server an
    /// earlier one started, and a signal writes nothing).
    pub(crate) fn scopes(self) -> BitFlags<Scope> {
        if self.has(Feature::Scopes) {
            Scope::AbstractUnixSocket.into()
        } else {
            BitFlags::EMPTY
        }
    }
}

/// The variable that caps the probed ABI in test builds.
pub(crate) const TEST_ABI_CAP_VAR: &str = "STRUMENT_SANDBOX_TEST_ABI_CAP";

/// In builds with debug assertions only (tests, never `--release`): the
/// ABI cap named by `STRUMENT_SANDBOX_TEST_ABI_CAP`, so that behaviour
/// below the host kernel's own ABI (ABI 1's `EXDEV` renames, ABI 2's
/// unrestricted truncate) is exercised on every CI run, as the landlock
/// crate's own CI does. Lowering the ABI only ever narrows what is
/// handled, which is why it must not exist in a release build; the report
/// carries a loud warning whenever it is in effect.
pub(crate) fn test_cap() -> Option<u32> {
    if cfg!(debug_assertions) {
        std::env::var(TEST_ABI_CAP_VAR)
            .ok()?
            .parse()
            .ok()
            .filter(|cap| *cap >= 1)
    } else {
        None
    }
}

/// A restriction of the running kernel's Landlock that changes what a
/// confined command can do, reported rather than hidden.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "kebab-case"))]
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
}

impl Limitation {
    /// A short, stable name for programs.
    ///
    /// # Examples
    ///
    /// ```
    /// use strument_sandbox::abi::Limitation;
    /// assert_eq!(Limitation::CrossDirectoryRenameDenied.name(), "cross-directory-rename-denied");
    /// ```
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Limitation::CrossDirectoryRenameDenied => "cross-directory-rename-denied",
            Limitation::TruncateUnrestricted => "truncate-unrestricted",
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
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_access_grows_with_the_abi() {
        assert!(Abi(0).write_access().is_empty());
        assert!(!Abi(1).write_access().contains(AccessFs::Refer));
        assert!(Abi(2).write_access().contains(AccessFs::Refer));
        assert!(!Abi(2).write_access().contains(AccessFs::Truncate));
        assert!(Abi(3).write_access().contains(AccessFs::Truncate));
        assert_eq!(Abi(3).write_access(), Abi(10).write_access());
        for abi in 0..=10 {
            let handled = Abi(abi).write_access();
            assert!(
                !handled.intersects(AccessFs::ReadFile | AccessFs::ReadDir | AccessFs::Execute)
            );
            assert!(!handled.contains(AccessFs::IoctlDev));
            assert!(Abi(abi).file_access().iter().all(|a| handled.contains(a)));
            assert!(!handled.contains(AccessFs::ResolveUnix));
        }
    }

    #[test]
    fn sockets_and_scopes_arrive_with_their_abi() {
        assert!(Abi(8).socket_access().is_empty());
        assert_eq!(Abi(9).socket_access(), AccessFs::ResolveUnix);
        assert!(Abi(5).scopes().is_empty());
        assert_eq!(Abi(6).scopes(), Scope::AbstractUnixSocket);
        assert!(!Abi(10).scopes().contains(Scope::Signal));
    }

    #[test]
    fn features_are_listed_oldest_first_one_per_abi() {
        for (i, f) in Feature::ALL.iter().enumerate() {
            assert_eq!(f.since_abi() as usize, i + 1, "{f:?}");
            assert!(Abi(f.since_abi()).has(*f));
            assert!(!Abi(f.since_abi() - 1).has(*f));
        }
    }
}
