//! The table `doc/security.md` publishes between [`BEGIN`] and [`END`]:
//! written from every run, compared with the published one, rewritten
//! with `STRUMENT_BLESS=1`.

use std::fmt::Write as _;
use std::fs;
use std::path::Path;

use super::THIS_TEST;
use super::route::Route;
use super::runner::{Seen, errno_name};

const BEGIN: &str = "<!-- routes:begin -->";
const END: &str = "<!-- routes:end -->";

/// The table, a row per route.
pub(super) struct DocTable {
    rows: String,
    routes: usize,
}

impl DocTable {
    pub(super) fn new() -> DocTable {
        DocTable {
            rows: "| # | route | granted: must land | refused: must not | kernel's errno | explain |\n\
                   |---|---|---|---|---|---|\n"
                .to_string(),
            routes: 0,
        }
    }

    /// The next row: `route` and what its two sides did.
    pub(super) fn add(&mut self, route: &Route, granted: &Seen, refused: &Seen) {
        self.routes += 1;
        let errno = if route.not_confined {
            "lands: **not confined**".to_string()
        } else {
            refused
                .result
                .err()
                .map_or_else(|| "SUCCEEDED".into(), errno_name)
        };
        let explain = match (granted.predicted, refused.predicted) {
            (Some(_), Some(_)) => "agrees",
            _ => "not a path",
        };
        writeln!(
            self.rows,
            "| {} | {} | {} | {} | {} | {} |",
            self.routes,
            cell(route.name),
            cell(route.granted),
            cell(route.refused),
            errno,
            explain
        )
        .expect("fmt");
    }

    /// The section as `doc/security.md` holds it, markers included.
    pub(super) fn section(&self, abi: u32, root: bool) -> String {
        format!(
            "{BEGIN}\n{} write routes, {} attempts, run by `{THIS_TEST}` on Landlock ABI {abi}{}.\n\n{}{END}\n",
            self.routes,
            self.routes * 2,
            if root { " as root" } else { "" },
            self.rows,
        )
    }
}

/// A table cell: a `|` in a route's name would end the cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// Checks that `doc/security.md` publishes exactly the table this run
/// produced; `STRUMENT_BLESS=1` rewrites it instead.
pub(super) fn compare_with_doc(generated: &str, abi: u32, root: bool) {
    let doc = Path::new(env!("CARGO_MANIFEST_DIR")).join("doc/security.md");
    let text = fs::read_to_string(&doc).unwrap_or_else(|e| panic!("{}: {e}", doc.display()));
    let (start, end) = match (text.find(BEGIN), text.find(END)) {
        (Some(s), Some(e)) if s < e => (s, e + END.len() + 1),
        _ => panic!("{} lacks the {BEGIN} … {END} section", doc.display()),
    };
    let published = &text[start..end.min(text.len())];
    if std::env::var_os("STRUMENT_BLESS").is_some() {
        let updated = format!(
            "{}{generated}{}",
            &text[..start],
            &text[end.min(text.len())..]
        );
        fs::write(&doc, updated).expect("rewrite doc/security.md");
        return;
    }
    if published == generated {
        return;
    }
    assert!(
        published.contains("on Landlock ABI "),
        "doc/security.md's route section holds no generated table; run this test with \
         STRUMENT_BLESS=1 to write it"
    );
    let recorded_here = published.contains(&format!(
        "Landlock ABI {abi}{}.",
        if root { " as root" } else { "" }
    ));
    assert!(
        !recorded_here,
        "doc/security.md's route table differs from this run's (written to {}/route-table.md); \
         rerun with STRUMENT_BLESS=1 to regenerate it",
        env!("CARGO_TARGET_TMPDIR")
    );
    eprintln!(
        "note: doc/security.md was generated on another ABI or user; the routes were checked, the \
         published table was not compared"
    );
}
