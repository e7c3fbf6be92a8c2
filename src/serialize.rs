//! With the `serde` feature the report types derive `Serialize`; this
//! module holds the three ways a field is written that a derive does not
//! know, and the test that pins the names programs read.
//!
//! The shape is documented once, in `doc/json.md`: paths as lossy strings,
//! enums by their kebab-case name, an enum with data as an object tagged
//! with its variant, a warning as its sentence.

use std::fmt::Display;
use std::path::{Path, PathBuf};

use serde::Serializer;

/// A path as a string, lossy where it is not UTF-8 (serde's own refuses
/// such a path, and the sandbox must work with them).
pub(crate) fn path<S: Serializer>(path: &Path, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&path.to_string_lossy())
}

/// [`path`], or `null`.
// serde's `serialize_with` hands over a reference to the field itself.
#[allow(clippy::ref_option)]
pub(crate) fn path_opt<S: Serializer>(path: &Option<PathBuf>, s: S) -> Result<S::Ok, S::Error> {
    match path {
        Some(p) => s.serialize_some(&p.to_string_lossy()),
        None => s.serialize_none(),
    }
}

/// Each item as the sentence a person reads.
pub(crate) fn sentences<S: Serializer, T: Display>(items: &[T], s: S) -> Result<S::Ok, S::Error> {
    s.collect_seq(items.iter().map(ToString::to_string))
}

// serde_json comes with the `cli` feature.
#[cfg(all(test, feature = "cli"))]
mod tests {
    use std::collections::BTreeSet;

    use serde_json::{Value, json};

    use crate::local_net::{LocalPort, PortReason};
    use crate::root::{Covers, Variable};
    use crate::{Availability, Origin, Policy, ProbeError, Root, SkipReason, Skipped};

    /// The keys of an object, sorted.
    fn keys(v: &Value) -> BTreeSet<&str> {
        v.as_object()
            .map(|o| o.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }

    #[test]
    fn the_names_programs_read_stay_as_documented() {
        let report = Policy {
            writable: vec!["/tmp".into(), "/no/such/dir".into()],
            sockets: vec![Root::new("/no/such/socket", Origin::SshAgent)],
            local_ports: vec![LocalPort::new(
                ([127, 0, 0, 1], 5432).into(),
                PortReason::Caller,
            )],
        }
        .check()
        .expect("absolute paths");
        let v = serde_json::to_value(&report).expect("string keys");
        assert_eq!(
            keys(&v),
            BTreeSet::from([
                "landlock",
                "granted",
                "skipped",
                "warnings",
                "sockets",
                "skipped_sockets",
                "local_ports",
            ])
        );
        assert_eq!(
            v["granted"][0],
            json!({"path": "/tmp", "kind": "directory", "origin": {"kind": "extra"}, "resolved": null, "rights": "all"})
        );
        assert_eq!(
            v["skipped"][0],
            json!({"path": "/no/such/dir", "origin": {"kind": "extra"}, "reason": "missing"})
        );
        assert_eq!(
            v["skipped_sockets"][0],
            json!({"path": "/no/such/socket", "origin": {"kind": "ssh-agent"}, "reason": "missing"})
        );
        assert!(keys(&v["landlock"]).contains("abi"));
        assert_eq!(
            v["local_ports"][0],
            json!({"address": "127.0.0.1", "port": 5432, "reason": "caller", "variable": null,
                   "detail": PortReason::Caller.to_string()})
        );

        let widens = Skipped {
            path: "/h/c".into(),
            origin: Origin::Cache {
                variable: Some(Variable {
                    name: "GOCACHE",
                    value: "/h/c".into(),
                }),
            },
            reason: SkipReason::Widens {
                covers: Covers::Home,
                resolved: "/h".into(),
            },
        };
        assert_eq!(
            serde_json::to_value(&widens).expect("string keys"),
            json!({
                "path": "/h/c",
                "origin": {"kind": "cache", "variable": "GOCACHE", "value": "/h/c"},
                "reason": "widens", "covers": "home", "resolved": "/h",
            })
        );
        let blocked = Availability {
            abi: 0,
            error: Some(ProbeError::Blocked { errno: 1 }),
        };
        assert_eq!(
            serde_json::to_value(&blocked).expect("string keys"),
            json!({"abi": 0, "reason": "blocked", "errno": 1})
        );
        let disabled = Availability {
            abi: 0,
            error: Some(ProbeError::DisabledAtBoot),
        };
        assert_eq!(
            serde_json::to_value(&disabled).expect("string keys")["reason"],
            ProbeError::DisabledAtBoot.name()
        );

        let denied = report
            .explain("/no/such/dir/file".as_ref())
            .expect("absolute");
        let e = serde_json::to_value(&denied).expect("string keys");
        assert_eq!(
            keys(&e),
            BTreeSet::from(["path", "checked", "exists", "denied"])
        );
        assert_eq!(e["denied"]["skipped"][0]["reason"], "missing");
        let granted = report.explain("/tmp/x".as_ref()).expect("absolute");
        let g = serde_json::to_value(&granted).expect("string keys");
        assert_eq!(g["granted_by"]["path"], "/tmp");
    }

    #[test]
    fn a_path_that_is_not_utf8_is_written_lossily() {
        use std::os::unix::ffi::OsStrExt;
        let odd = std::ffi::OsStr::from_bytes(b"/tmp/\xff");
        let root = Root::new(odd, Origin::Extra);
        let v = serde_json::to_value(&root).expect("lossy, not an error");
        assert_eq!(v["path"], "/tmp/\u{fffd}");
    }
}
