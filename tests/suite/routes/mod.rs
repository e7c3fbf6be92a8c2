//! Every write route, tried on the kernel: one attempt that a granted root
//! must let land and one that must be refused, each checked on the
//! filesystem afterwards and compared with what `Report::explain`
//! predicted. Needs a kernel with Landlock (ABI 3 or later for the
//! truncation routes), and root for the device and mount routes.
//!
//! The confined side is this test binary re-executed in the role
//! [`Role::RouteAttempt`], confined by `Prepared::confine` before `exec`:
//! the harness itself is never confined. It performs one attempt and
//! prints its result; the unconfined parent prepares the files, checks
//! them afterwards, and writes the table `doc/security.md` publishes
//! (`STRUMENT_BLESS=1` regenerates it).
//!
//! - [`table`]: the routes, each declared once;
//! - [`route`]: what a route is, and the places its attempts work in;
//! - [`syscalls`]: the raw system calls the attempts make;
//! - [`runner`]: one attempt from the parent's side, and the judgement;
//! - [`roles`]: the confined attempt and the unconfined target process;
//! - [`doc_table`]: the published table.

mod doc_table;
mod roles;
mod route;
mod runner;
mod syscalls;
mod table;

use std::fs;
use std::path::Path;

use strument_sandbox::Policy;

use self::doc_table::{DocTable, compare_with_doc};
use self::route::{Places, Side};
use self::runner::{judge, try_side};
use super::roles::Role;
use super::support::FakeHome;

use self::needs_landlock::THIS_TEST;

/// Real rulesets on this kernel.
mod needs_landlock {
    use super::*;
    use crate::suite::support::{require_landlock, test_name};

    /// This test's full name, which the re-executed roles are filtered to.
    pub(super) const THIS_TEST: &str =
        test_name!(every_write_route_lands_inside_and_is_refused_outside);

    #[test]
    fn every_write_route_lands_inside_and_is_refused_outside() {
        match Role::current() {
            Some((Role::RouteAttempt, argument)) => return roles::perform(&argument),
            Some((Role::RouteTarget, _)) => return roles::be_target(),
            Some((other, _)) => panic!("{THIS_TEST} does not play {other:?}"),
            None => {}
        }
        let abi = require_landlock().abi;
        assert!(
            abi >= 3,
            "the route suite needs Landlock ABI 3 or later; this kernel has {abi}"
        );
        // SAFETY: geteuid has no preconditions.
        let root = unsafe { libc::geteuid() } == 0;

        let h = FakeHome::new();
        let state = h.home.join("state");
        let target_cwd = h.home.join("target-cwd");
        for dir in [&state, &target_cwd] {
            fs::create_dir_all(dir).expect("mkdir");
        }
        let prepared = Policy {
            writable: vec![h.project.clone().into(), state.clone().into()],
            ..Policy::default()
        }
        .prepare()
        .expect("prepare the route policy");
        let target = roles::start_target(&target_cwd);

        let routes = table::routes();
        let mut failures = Vec::new();
        let mut doc = DocTable::new();
        for (row, route) in routes.iter().enumerate() {
            let [granted, refused] = Side::BOTH.map(|side| {
                let label = format!("r{row:02}-{side}");
                let places = Places {
                    project: h.project.join(&label),
                    second_root: state.join(&label),
                    outside: h.home.join("outside").join(&label),
                    outside_too: h.home.join("outside2").join(&label),
                    target: target.process.clone(),
                    label,
                };
                try_side(&prepared, row, route, side, &places)
            });
            failures.extend(judge(route, &granted, &refused, root));
            doc.add(route, &granted, &refused);
        }
        drop(target);
        h.assert_sentinels_intact();

        let generated = doc.section(abi, root);
        let out_path = Path::new(env!("CARGO_TARGET_TMPDIR")).join("route-table.md");
        fs::write(&out_path, &generated).expect("write the generated table");
        assert!(
            failures.is_empty(),
            "{} route failures:\n{}",
            failures.len(),
            failures.join("\n")
        );
        compare_with_doc(&generated, abi, root);
    }
}
