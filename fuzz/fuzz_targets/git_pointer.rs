//! The parser of `.git` files (`gitdir: <path>`) and `commondir` files
//! (`<path>`): whatever the bytes, it returns a one-line, non-empty path
//! taken verbatim from the input, or an error, and never panics.
//!
//! `cargo +nightly fuzz run git_pointer -- -runs=200000`

#![no_main]

use std::os::unix::ffi::OsStrExt;

use libfuzzer_sys::fuzz_target;
use strument_sandbox::fuzzing::parse_git_pointer;

fuzz_target!(|data: &[u8]| {
    for prefix in ["gitdir: ", ""] {
        let Ok(path) = parse_git_pointer(data, prefix) else {
            continue;
        };
        let parsed = path.as_os_str().as_bytes();
        assert!(!parsed.is_empty(), "an empty path");
        assert!(
            !parsed.iter().any(|b| matches!(b, b'\n' | b'\r' | 0)),
            "more than one line, or a NUL: {parsed:?}"
        );
        // Verbatim: the input is the prefix, the path, then only whitespace.
        let rest = data
            .strip_prefix(prefix.as_bytes())
            .and_then(|r| r.strip_prefix(parsed))
            .expect("the path is the input after the prefix");
        assert!(
            rest.iter().all(u8::is_ascii_whitespace),
            "trailing {rest:?}"
        );
    }
});
