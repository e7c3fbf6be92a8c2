//! `Serialize` for the report types, with the `serde` feature: the shape
//! `strument-sandbox … --json` prints, so a program (an agent's `/sandbox`
//! view) reads the same fields from the library as from the tool.
//!
//! Paths are strings (lossy UTF-8); enums with a stable name are that name;
//! a type with a sentence for people carries it as `detail` (or is that
//! sentence, for [`Warning`]).

use std::path::Path;

use serde::ser::{Serialize, SerializeStruct as _, Serializer};

use crate::abi::Feature;
use crate::denials::{Advice, Denial};
use crate::error::ProbeError;
use crate::explain::{Explanation, Verdict};
use crate::local_net::{LocalPort, PortReason};
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
    PortReason,
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

/// Types that serialize as an object: each field a key and an expression
/// of `$this`, the value.
macro_rules! object {
    ($($ty:ty => |$this:ident| { $($key:literal: $value:expr),* $(,)? })*) => {$(
        impl Serialize for $ty {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                let $this = self;
                let mut o = s.serialize_struct(stringify!($ty), [$($key),*].len())?;
                $(o.serialize_field($key, &$value)?;)*
                o.end()
            }
        }
    )*};
}

object! {
    Origin => |o| {
        "kind": o.name(),
        "variable": o.variable().map(|v| v.name),
        "value": lossy_opt(o.variable().map(|v| v.value.as_path())),
        "pointer": match o {
            Origin::Git { pointer } => Some(lossy(pointer)),
            _ => None,
        },
        "explicit": o.is_explicit(),
    }
    Root => |r| {
        "path": lossy(&r.path),
        "origin": r.origin,
    }
    Socket => |k| {
        "path": lossy(&k.path),
        "reason": k.reason,
    }
    Granted => |g| {
        "path": lossy(&g.path),
        "kind": g.kind,
        "origin": g.origin,
        "resolved": lossy_opt(g.resolved.as_deref()),
    }
    Skipped => |k| {
        "path": lossy(&k.path),
        "reason": k.reason,
        "detail": k.reason.to_string(),
        "origin": k.origin,
    }
    GrantedSocket => |g| {
        "path": lossy(&g.path),
        "kind": g.kind,
        "reason": g.reason,
        "detail": g.reason.to_string(),
    }
    SkippedSocket => |k| {
        "path": lossy(&k.path),
        "reason": k.reason,
        "skip": k.skip,
        "detail": k.skip.to_string(),
    }
    LocalPort => |p| {
        "address": p.address.ip().to_string(),
        "port": p.address.port(),
        "reason": p.reason,
        "variable": match &p.reason {
            PortReason::Proxy(variable) => Some(variable.as_str()),
            _ => None,
        },
        "detail": p.reason.to_string(),
    }
    Service => |v| {
        "kind": v.kind,
        "path": lossy(&v.path),
        "allows": v.kind.allows(),
        "closed_by_linux": Feature::ResolveUnix.since_linux(),
        "closed_by_abi": Feature::ResolveUnix.since_abi(),
    }
    Report => |r| {
        "abi": r.abi,
        "granted": r.granted,
        "skipped": r.skipped,
        "warnings": r.warnings,
        "limitations": r.limitations,
        "all_threads": r.all_threads,
        "sockets": r.sockets,
        "skipped_sockets": r.skipped_sockets,
        "reachable_services": r.reachable_services,
        "local_ports": r.local_ports,
    }
    // The same fields as Availability's, which flattens it.
    ProbeError => |e| {
        "reason": e.name(),
        "errno": e.errno(),
        "message": e.to_string(),
        "hint": e.hint(),
    }
    Availability => |a| {
        "supported": a.supported(),
        "abi": a.abi,
        "reason": a.error.as_ref().map(ProbeError::name),
        "errno": a.error.as_ref().and_then(ProbeError::errno),
        "message": a.error.as_ref().map(ToString::to_string),
        "hint": a.error.as_ref().map(ProbeError::hint),
        "all_threads": a.all_threads(),
        "limitations": a.limitations(),
    }
    Verdict => |v| {
        "writable": matches!(v, Verdict::Granted(_)),
        "granted_by": verdict_fields(v).0,
        "allow": verdict_fields(v).1,
        "skipped": verdict_fields(v).2,
    }
    Explanation => |e| {
        "path": lossy(&e.path),
        "writable": e.is_granted(),
        "checked": lossy(&e.checked),
        "exists": e.exists,
        "granted_by": verdict_fields(&e.verdict).0,
        "allow": verdict_fields(&e.verdict).1,
        "skipped": verdict_fields(&e.verdict).2,
    }
    Change => |c| {
        "path": lossy(&c.path),
        "name": lossy(&c.name),
        "kind": c.kind,
        "target": lossy_opt(c.target.as_deref()),
        "why": c.why,
        "line": c.to_string(),
    }
    Denial => |d| {
        "blockers": d.blockers,
        "what": d.what(),
        "path": lossy_opt(d.path.as_deref()),
        "record": d.record,
    }
}

/// The root that grants, or the root to allow and the skipped ones on the way.
fn verdict_fields(v: &Verdict) -> (Option<&Granted>, Option<Lossy<'_>>, &[Skipped]) {
    match v {
        Verdict::Granted(root) => (Some(root), None, &[]),
        Verdict::Denied { allow, skipped } => (None, Some(lossy(allow)), skipped),
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
