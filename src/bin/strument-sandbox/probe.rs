//! `probe`: which Landlock ABI the running kernel offers.

use serde_json::json;
use strument_sandbox::{Feature, probe};

use crate::Failure;
use crate::output::mediation_line;
use crate::status;

pub(crate) fn cmd_probe(json: bool) -> Result<u8, Failure> {
    let a = probe();
    if json {
        say!("{}", json!(a));
    } else {
        match &a.error {
            None => {
                let tsync_missing = format!(
                    "calling thread only (TSYNC needs ABI {}, Linux {}): apply before starting threads",
                    Feature::Tsync.since_abi(),
                    Feature::Tsync.since_linux()
                );
                say!("landlock: supported");
                say!("abi: {}", a.abi);
                say!(
                    "threads: {}",
                    if a.all_threads() {
                        "all threads confined at once (TSYNC)"
                    } else {
                        tsync_missing.as_str()
                    }
                );
                for l in a.limitations() {
                    say!("limitation: {l}");
                }
                say!("{}", mediation_line(a.abi));
            }
            Some(why) => {
                say!("landlock: unavailable");
                say!("reason: {why}");
                if let Some(errno) = why.errno() {
                    say!("errno: {errno}");
                }
                say!("hint: {}", why.hint());
            }
        }
    }
    Ok(if a.supported() {
        0
    } else {
        status::UNAVAILABLE
    })
}
