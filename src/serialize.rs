//! `Serialize` for the report types, with the `serde` feature: the shape
//! `strument-sandbox … --json` prints, so a program (an agent's `/sandbox`
//! view) reads the same fields from the library as from the tool.
//!
//! Paths are strings (lossy UTF-8); enums with a stable name are that name;
//! a type with a sentence for people carries it as `detail` (or is that
//! sentence, for [`Warning`]).

use std::path::Path;

use serde::ser::{Serialize, SerializeStruct, Serializer};

use crate::abi::Feature;
use crate::denials::{Advice, Denial};
use crate::error::ProbeError;
use crate::explain::{Explanation, Verdict};
use crate::probe::{Availability, Limitation};
use crate::report::{Granted, Report, RootKind, SkipReason, Skipped, Warning};
use crate::root::{Covers, Origin, Root};
use crate::services::{Service, ServiceKind};
use crate::sockets::{GrantedSocket, SkippedSocket, Socket, SocketReason};
use crate::tripwire::{Change, ChangeKind};

/// A path as a string, lossy where it is not UTF-8.
struct Lossy<'a>(&'a Path);

impl Serialize for Lossy<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0.to_string_lossy())
    }
}

fn lossy(path: &Path) -> Lossy<'_> {
    Lossy(path)
}

fn lossy_opt(path: Option<&Path>) -> Option<Lossy<'_>> {
    path.map(Lossy)
}

/// Types that serialize as their stable `name()`.
macro_rules! by_name {
    ($($ty:ty),* $(,)?) => {$(
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }
    )*};
}

by_name!(
    RootKind,
    SkipReason,
    Limitation,
    Covers,
    ServiceKind,
    SocketReason,
    ChangeKind,
    Feature,
);

/// Types that serialize as the sentence a person reads.
macro_rules! by_display {
    ($($ty:ty),* $(,)?) => {$(
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
    )*};
}

by_display!(Warning, Advice);

impl Serialize for Origin {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let pointer = match self {
            Origin::Git { pointer } => Some(lossy(pointer)),
            _ => None,
        };
        let mut o = s.serialize_struct("Origin", 5)?;
        o.serialize_field("kind", self.name())?;
        o.serialize_field("variable", &self.variable().map(|v| v.name))?;
        o.serialize_field(
            "value",
            &lossy_opt(self.variable().map(|v| v.value.as_path())),
        )?;
        o.serialize_field("pointer", &pointer)?;
        o.serialize_field("explicit", &self.is_explicit())?;
        o.end()
    }
}

impl Serialize for Root {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("Root", 2)?;
        o.serialize_field("path", &lossy(&self.path))?;
        o.serialize_field("origin", &self.origin)?;
        o.end()
    }
}

impl Serialize for Granted {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("Granted", 4)?;
        o.serialize_field("path", &lossy(&self.path))?;
        o.serialize_field("kind", &self.kind)?;
        o.serialize_field("origin", &self.origin)?;
        o.serialize_field("resolved", &lossy_opt(self.resolved.as_deref()))?;
        o.end()
    }
}

impl Serialize for Skipped {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("Skipped", 4)?;
        o.serialize_field("path", &lossy(&self.path))?;
        o.serialize_field("reason", &self.reason)?;
        o.serialize_field("detail", &self.reason.to_string())?;
        o.serialize_field("origin", &self.origin)?;
        o.end()
    }
}

impl Serialize for Socket {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("Socket", 2)?;
        o.serialize_field("path", &lossy(&self.path))?;
        o.serialize_field("reason", &self.reason)?;
        o.end()
    }
}

impl Serialize for GrantedSocket {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("GrantedSocket", 4)?;
        o.serialize_field("path", &lossy(&self.path))?;
        o.serialize_field("kind", &self.kind)?;
        o.serialize_field("reason", &self.reason)?;
        o.serialize_field("detail", &self.reason.to_string())?;
        o.end()
    }
}

impl Serialize for SkippedSocket {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("SkippedSocket", 4)?;
        o.serialize_field("path", &lossy(&self.path))?;
        o.serialize_field("reason", &self.reason)?;
        o.serialize_field("skip", &self.skip)?;
        o.serialize_field("detail", &self.skip.to_string())?;
        o.end()
    }
}

impl Serialize for Service {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("Service", 5)?;
        o.serialize_field("kind", &self.kind)?;
        o.serialize_field("path", &lossy(&self.path))?;
        o.serialize_field("allows", self.kind.allows())?;
        o.serialize_field("closed_by_linux", Feature::ResolveUnix.since_linux())?;
        o.serialize_field("closed_by_abi", &Feature::ResolveUnix.since_abi())?;
        o.end()
    }
}

impl Serialize for Report {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("Report", 9)?;
        o.serialize_field("abi", &self.abi)?;
        o.serialize_field("granted", &self.granted)?;
        o.serialize_field("skipped", &self.skipped)?;
        o.serialize_field("warnings", &self.warnings)?;
        o.serialize_field("limitations", &self.limitations)?;
        o.serialize_field("all_threads", &self.all_threads)?;
        o.serialize_field("sockets", &self.sockets)?;
        o.serialize_field("skipped_sockets", &self.skipped_sockets)?;
        o.serialize_field("reachable_services", &self.reachable_services)?;
        o.end()
    }
}

/// The error, flattened beside [`Availability`]'s own fields.
impl Serialize for ProbeError {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("ProbeError", 4)?;
        o.serialize_field("reason", self.name())?;
        o.serialize_field("errno", &self.errno())?;
        o.serialize_field("message", &self.to_string())?;
        o.serialize_field("hint", self.hint())?;
        o.end()
    }
}

impl Serialize for Availability {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let error = self.error.as_ref();
        let mut o = s.serialize_struct("Availability", 8)?;
        o.serialize_field("supported", &self.supported())?;
        o.serialize_field("abi", &self.abi)?;
        o.serialize_field("reason", &error.map(ProbeError::name))?;
        o.serialize_field("errno", &error.and_then(ProbeError::errno))?;
        o.serialize_field("message", &error.map(ToString::to_string))?;
        o.serialize_field("hint", &error.map(ProbeError::hint))?;
        o.serialize_field("all_threads", &self.all_threads())?;
        o.serialize_field("limitations", &self.limitations())?;
        o.end()
    }
}

impl Serialize for Verdict {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (granted_by, allow, skipped) = verdict_fields(self);
        let mut o = s.serialize_struct("Verdict", 4)?;
        o.serialize_field("writable", &granted_by.is_some())?;
        o.serialize_field("granted_by", &granted_by)?;
        o.serialize_field("allow", &allow)?;
        o.serialize_field("skipped", skipped)?;
        o.end()
    }
}

/// The root that grants, or the root to allow and the skipped ones on the way.
fn verdict_fields(v: &Verdict) -> (Option<&Granted>, Option<Lossy<'_>>, &[Skipped]) {
    match v {
        Verdict::Granted(root) => (Some(root), None, &[]),
        Verdict::Denied { allow, skipped } => (None, Some(lossy(allow)), skipped),
    }
}

impl Serialize for Explanation {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (granted_by, allow, skipped) = verdict_fields(&self.verdict);
        let mut o = s.serialize_struct("Explanation", 7)?;
        o.serialize_field("path", &lossy(&self.path))?;
        o.serialize_field("writable", &self.is_granted())?;
        o.serialize_field("checked", &lossy(&self.checked))?;
        o.serialize_field("exists", &self.exists)?;
        o.serialize_field("granted_by", &granted_by)?;
        o.serialize_field("allow", &allow)?;
        o.serialize_field("skipped", skipped)?;
        o.end()
    }
}

impl Serialize for Change {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("Change", 6)?;
        o.serialize_field("path", &lossy(&self.path))?;
        o.serialize_field("name", &lossy(&self.name))?;
        o.serialize_field("kind", &self.kind)?;
        o.serialize_field("target", &lossy_opt(self.target.as_deref()))?;
        o.serialize_field("why", &self.why)?;
        o.serialize_field("line", &self.to_string())?;
        o.end()
    }
}

impl Serialize for Denial {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut o = s.serialize_struct("Denial", 4)?;
        o.serialize_field("blockers", &self.blockers)?;
        o.serialize_field("what", &self.what())?;
        o.serialize_field("path", &lossy_opt(self.path.as_deref()))?;
        o.serialize_field("record", &self.record)?;
        o.end()
    }
}

// serde_json comes with the `cli` feature.
#[cfg(all(test, feature = "cli"))]
mod tests {
    use crate::{Policy, SkipReason};

    #[test]
    fn a_report_serializes_in_the_shape_the_cli_prints() {
        let report = Policy {
            writable: vec!["/tmp".into(), "/no/such/dir".into()],
            ..Policy::default()
        }
        .check()
        .expect("absolute paths");
        let v = serde_json::to_value(&report).expect("string keys");
        assert_eq!(v["granted"][0]["path"], "/tmp");
        assert_eq!(v["granted"][0]["kind"], "directory");
        assert_eq!(v["granted"][0]["origin"]["kind"], "extra");
        assert_eq!(v["granted"][0]["origin"]["explicit"], true);
        assert_eq!(v["skipped"][0]["path"], "/no/such/dir");
        assert_eq!(v["skipped"][0]["reason"], SkipReason::Missing.name());
        assert_eq!(v["skipped"][0]["detail"], "does not exist");
        let explained = report
            .explain("/no/such/dir/file".as_ref())
            .expect("absolute");
        let e = serde_json::to_value(&explained).expect("string keys");
        assert_eq!(e["writable"], false);
        assert_eq!(e["granted_by"], serde_json::Value::Null);
        assert_eq!(e["skipped"][0]["reason"], "missing");
        let inside = report.explain("/tmp/x".as_ref()).expect("absolute");
        let i = serde_json::to_value(&inside).expect("string keys");
        assert_eq!(i["writable"], true);
        assert_eq!(i["granted_by"]["path"], "/tmp");
        assert_eq!(i["allow"], serde_json::Value::Null);
    }
}
