//! `policy`: the writable roots for a project, granted or skipped and why.

use crate::output::{environment_lines, report_json, report_lines};
use crate::{Failure, Roots, session_builder, status};

pub(crate) fn cmd_policy(roots: &Roots, json: bool) -> Result<u8, Failure> {
    let report = session_builder(roots)?
        .check()
        .map_err(|e| Failure::new(status::POLICY, e))?;
    let a = &report.landlock;
    if json {
        let mut v = report_json(&report);
        v["environment"] = serde_json::json!(strument_sandbox::environment::settings(&report));
        say!("{v}");
    } else {
        match &a.error {
            None => say!("landlock: ABI {}", a.abi),
            Some(why) => say!("landlock: unavailable ({why}): `run` would refuse"),
        }
        for line in report_lines(&report)
            .into_iter()
            .chain(environment_lines(&report))
        {
            say!("{line}");
        }
    }
    Ok(0)
}
