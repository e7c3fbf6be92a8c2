//! `explain`: whether a write to each path would land, by which root, or
//! what to `--allow`.

use std::path::PathBuf;

use serde_json::json;
use strument_sandbox::{explain::Explanation, explain::Verdict};

use crate::output::json_with;
use crate::{Failure, Roots, build_policy, status};

pub(crate) fn cmd_explain(roots: &Roots, json: bool, paths: &[PathBuf]) -> Result<u8, Failure> {
    let policy = build_policy(roots)?;
    let report = policy
        .check()
        .map_err(|e| Failure::new(status::POLICY, e))?;
    let mut explained = Vec::with_capacity(paths.len());
    for path in paths {
        let absolute = std::path::absolute(path)
            .map_err(|e| Failure::new(status::POLICY, format!("{}: {e}", path.display())))?;
        let e = report
            .explain(&absolute)
            .map_err(|e| Failure::new(status::POLICY, e))?;
        explained.push(e);
    }
    if json {
        let paths: Vec<_> = explained
            .iter()
            .map(|e| json_with(e, "writable", json!(e.is_granted())))
            .collect();
        let warnings: Vec<String> = report.warnings.iter().map(ToString::to_string).collect();
        let v = json!({
            "abi": report.landlock.abi,
            "paths": paths,
            "warnings": warnings,
        });
        say!("{v}");
    } else {
        for e in &explained {
            say!("{}", explanation_text(e));
        }
        // A writable home or a skipped widening root changes every answer.
        for w in &report.warnings {
            say!("warning: {w}");
        }
        if !report.landlock.supported() {
            say!("note: this kernel has no Landlock: `run` would refuse to run anything");
        }
    }
    Ok(if explained.iter().all(Explanation::is_granted) {
        0
    } else {
        status::NOT_WRITABLE
    })
}

fn explanation_text(e: &Explanation) -> String {
    let path = e.path.display();
    match &e.verdict {
        Verdict::Granted(root) => format!(
            "{path}: writable, granted by {} ({})",
            root.path.display(),
            root.kind.name()
        ),
        Verdict::Denied { allow, skipped } => {
            let checked = e.checked.display();
            let mut line = if e.exists {
                format!("{path}: not writable: no root grants {checked}")
            } else {
                format!(
                    "{path}: not writable: it would be created in {checked}, which no root grants"
                )
            };
            line.push_str(&format!("; to allow it: --allow {}", allow.display()));
            for s in skipped {
                line.push_str(&format!(
                    " (the policy lists {}, but it grants nothing: {})",
                    s.path.display(),
                    s.reason
                ));
            }
            line
        }
    }
}
