//! Confining a process that already runs threads.
//!
//! An agent usually has threads before it decides to confine itself (an
//! async runtime, a logger). `landlock_restrict_self` confines only the
//! calling thread unless the kernel has ABI 8's `LANDLOCK_RESTRICT_SELF_TSYNC`,
//! so [`Policy::apply`] confines every thread at once there, and refuses
//! anywhere else, naming the thread count, rather than confine one thread of
//! many. On such a kernel, [`Policy::prepare`] and [`Prepared::confine`]
//! confine just the commands the agent spawns.
//!
//! This program starts `THREADS` threads, applies a policy granting `ROOT`
//! only, then has every thread (the main one too) write one file in `ROOT`
//! and one in `OUTSIDE`, and prints what happened to each:
//!
//! ```text
//! cargo run --example confine_threads -- ROOT OUTSIDE [THREADS]
//! ```
//!
//! Exit status: 0 when apply succeeded (whatever the writes did: the caller
//! checks the files), 3 when apply refused, 2 on bad arguments. The portable
//! VM tier runs it in its newest kernel's guest (`tests/vm/checks/sid/`).
//!
//! [`Prepared::confine`]: strument_sandbox::Prepared::confine

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::thread;

use strument_sandbox::{Policy, probe};

/// What one thread's two writes did, as a line of output.
fn write_both(who: &str, root: &Path, outside: &Path) -> String {
    let verdict = |path: PathBuf| match std::fs::write(&path, format!("written by {who}\n")) {
        Ok(()) => format!("{} written", path.display()),
        Err(e) => format!("{} refused: {e}", path.display()),
    };
    format!(
        "{who}: {}; {}",
        verdict(root.join(who)),
        verdict(outside.join(who))
    )
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (root, outside, threads) = match args.as_slice() {
        [root, outside] => (PathBuf::from(root), PathBuf::from(outside), 3),
        [root, outside, n] => match n.parse::<usize>() {
            Ok(n) => (PathBuf::from(root), PathBuf::from(outside), n),
            Err(e) => {
                eprintln!("THREADS={n:?} is not a count: {e}");
                return ExitCode::from(2);
            }
        },
        _ => {
            eprintln!("usage: confine_threads ROOT OUTSIDE [THREADS]");
            return ExitCode::from(2);
        }
    };

    // The threads exist before apply and wait until it is done: apply has
    // to reach threads that are already running.
    let applied = Arc::new(Barrier::new(threads + 1));
    let confined = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (1..=threads)
        .map(|i| {
            let (applied, confined) = (Arc::clone(&applied), Arc::clone(&confined));
            let (root, outside) = (root.clone(), outside.clone());
            thread::spawn(move || {
                applied.wait();
                // Refused means nothing was confined: then write nothing.
                confined
                    .load(Ordering::SeqCst)
                    .then(|| write_both(&format!("thread-{i}"), &root, &outside))
            })
        })
        .collect();

    let availability = probe();
    println!("abi: {}", availability.abi);
    let result = Policy {
        writable: vec![root.clone().into()],
        ..Policy::default()
    }
    .apply();
    let status = match &result {
        Ok(report) => {
            println!(
                "apply: confined, all threads: {}",
                report.landlock.all_threads()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("apply: refused: {e}");
            ExitCode::from(3)
        }
    };
    confined.store(result.is_ok(), Ordering::SeqCst);
    applied.wait();
    for worker in workers {
        match worker.join() {
            Ok(Some(line)) => println!("{line}"),
            Ok(None) => {}
            Err(_) => println!("a thread panicked"),
        }
    }
    if result.is_ok() {
        println!("{}", write_both("main", &root, &outside));
    }
    status
}
