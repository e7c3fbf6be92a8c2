//! A project's git directories: finding them through `.git` and
//! `commondir` pointer files, and telling a git directory from anything else.

use std::ffi::OsStr;
use std::fs;
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::PolicyError;
use crate::root::{GitdirAsked, Origin, Root};

/// The parts of a linked worktree's common git directory that git writes
/// from the worktree (measured with strace on `commit`, `fetch`, `stash`,
/// `rebase`, `branch`): objects, refs and their logs. The rest (`hooks/`,
/// `config`, `info/`) belongs to the main repository and runs there, so
/// it stays read-only. The worktree's own directory (`worktrees/<name>`)
/// is its gitdir, granted whole.
pub(crate) const COMMON_DIR_PARTS: [&str; 3] = ["objects", "refs", "logs"];

/// Granted as well when the common directory has it: the reftable ref
/// store (`git init --ref-format=reftable`, git 2.45), which keeps its lock
/// files inside it, so a worktree can delete refs there too.
pub(crate) const COMMON_DIR_REFTABLE: &str = "reftable";

/// A project's git layout, read once and shared: the roots the policy
/// lists for it and the git directories the tripwire watches, so that the
/// two never read the `.git` pointers at different moments.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct GitLayout {
    /// The git directories the project needs when they live outside it.
    pub(crate) roots: Vec<Root>,
    /// Where its `.git` leads, then a worktree's common directory.
    pub(crate) watched: Vec<PathBuf>,
    /// A linked worktree's gitdir, and whether it names the project back:
    /// asked here once, for the policy's check to reuse.
    pub(crate) gitdir_asked: Option<GitdirAsked>,
}

/// Reads the project's git layout: its `.git` (a directory, a `gitdir:`
/// file or a symlink) and a worktree's `commondir`.
pub(crate) fn read_layout(project_root: &Path) -> Result<GitLayout, PolicyError> {
    let dotgit = project_root.join(".git");
    let meta = match std::fs::symlink_metadata(&dotgit) {
        Ok(meta) => meta,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOENT | libc::ENOTDIR)) => {
            return Ok(enclosing_layout(project_root));
        }
        Err(source) => {
            return Err(PolicyError::Io {
                path: dotgit,
                source,
            });
        }
    };
    let origin = Origin::Git {
        pointer: dotgit.clone(),
    };
    if meta.file_type().is_symlink() {
        // Listed as is: the kernel follows it when the rule is anchored, and
        // Policy checks that it leads to a git directory.
        return Ok(GitLayout {
            watched: watched(dotgit.clone(), common_of(&dotgit)),
            roots: vec![Root::new(dotgit, origin)],
            gitdir_asked: None,
        });
    }
    if meta.is_dir() {
        // Inside the project already: nothing to list, only to watch.
        return Ok(GitLayout {
            watched: watched(dotgit.clone(), common_of(&dotgit)),
            roots: Vec::new(),
            gitdir_asked: None,
        });
    }
    if !meta.is_file() {
        // A fifo, socket or device: opening or reading it could block.
        return Err(PolicyError::GitFile {
            path: dotgit,
            reason: "not a regular file".into(),
        });
    }
    let bytes = read_pointer_file(&dotgit)
        .map_err(|source| PolicyError::Io {
            path: dotgit.clone(),
            source,
        })?
        .map_err(|reason| PolicyError::GitFile {
            path: dotgit.clone(),
            reason,
        })?;
    let gitdir = project_root.join(parse_git_pointer(&bytes, "gitdir: ").map_err(|reason| {
        PolicyError::GitFile {
            path: dotgit.clone(),
            reason,
        }
    })?);
    let mut out = vec![Root::new(gitdir.clone(), origin)];
    let mut common_dir = None;
    let mut gitdir_asked = None;
    let commondir_file = gitdir.join("commondir");
    match read_pointer_file(&commondir_file) {
        Ok(Err(reason)) => {
            return Err(PolicyError::GitFile {
                path: commondir_file,
                reason,
            });
        }
        Ok(Ok(bytes)) => {
            let common = parse_git_pointer(&bytes, "").map_err(|reason| PolicyError::GitFile {
                path: commondir_file.clone(),
                reason,
            })?;
            let common = gitdir.join(common);
            common_dir = Some(common.clone());
            let origin = Origin::Git {
                pointer: commondir_file,
            };
            // Its identity first, then the question: the answer is kept
            // for this directory only.
            let id = fs::metadata(&gitdir).ok().map(|m| (m.dev(), m.ino()));
            let answer = points_back(&gitdir, &dotgit);
            gitdir_asked = id.map(|id| GitdirAsked {
                dotgit: dotgit.clone(),
                id,
                points_back: answer,
            });
            if !answer {
                // Another working tree's gitdir: Policy skips it and says
                // why, and nothing of its common directory is listed.
            } else if is_git_dir(&common) {
                out.extend(
                    COMMON_DIR_PARTS
                        .iter()
                        .map(|part| Root::new(common.join(part), origin.clone())),
                );
                let reftable = common.join(COMMON_DIR_REFTABLE);
                if reftable.is_dir() {
                    out.push(Root::new(reftable, origin));
                }
            } else {
                // Listed whole so that Policy skips it and says why.
                out.push(Root::new(common, origin));
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        // ENOTDIR: the gitdir is missing or a file; Policy reports it.
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => {}
        Err(source) => {
            return Err(PolicyError::Io {
                path: commondir_file,
                source,
            });
        }
    }
    Ok(GitLayout {
        watched: watched(canonical(gitdir), common_dir),
        roots: out,
        gitdir_asked,
    })
}

/// The working tree a project without a `.git` of its own sits in (a
/// package of a monorepo): the nearest directory above the project holding
/// a `.git`, as git's own discovery finds it, on the project's filesystem
/// (git stops at a mount point too) and below the home directory (a
/// repository of the whole home, dotfiles, is not a project's).
pub(crate) fn enclosing_work_tree(project: &Path, home: Option<&Path>) -> Option<PathBuf> {
    if fs::symlink_metadata(project.join(".git")).is_ok() {
        return None;
    }
    let dev = fs::metadata(project).ok()?.dev();
    for dir in project.ancestors().skip(1) {
        if home.is_some_and(|h| h.starts_with(dir)) {
            return None;
        }
        if fs::metadata(dir).map_or(true, |m| m.dev() != dev) {
            return None;
        }
        if fs::symlink_metadata(dir.join(".git")).is_ok() {
            return Some(dir.to_path_buf());
        }
    }
    None
}

/// The git layout of the repository whose working tree holds the project,
/// when the project has no `.git` of its own: a `git commit` in a
/// monorepo's package writes the enclosing `.git` (`index.lock` directly in
/// it, so it is granted whole, and the tripwire watches its hooks and
/// config as it does a project's own). Listed with the same judgement as a
/// project's `.git` pointer ([`Origin::Git`], the enclosing `.git` as the
/// pointer): [`Policy`](crate::Policy) grants it only if it is a git
/// directory whose working tree is the directory holding it (no
/// `core.worktree` elsewhere), and skips it, saying why, otherwise. An
/// enclosing `.git` file (the monorepo is itself a linked worktree) is
/// followed as the project's own would be. One that cannot be read grants
/// nothing.
fn enclosing_layout(project: &Path) -> GitLayout {
    let home = dirs::home_dir().filter(|h| h.is_absolute());
    let Some(tree) = enclosing_work_tree(project, home.as_deref()) else {
        return GitLayout::default();
    };
    let dotgit = tree.join(".git");
    if fs::symlink_metadata(&dotgit).is_ok_and(|m| m.is_dir()) {
        return GitLayout {
            watched: watched(dotgit.clone(), common_of(&dotgit)),
            roots: vec![Root::new(dotgit.clone(), Origin::Git { pointer: dotgit })],
            gitdir_asked: None,
        };
    }
    read_layout(&tree).unwrap_or_default()
}

/// Whether `dir` has the layout of a git directory: `HEAD` and either
/// `objects/` (a repository) or `commondir` (a linked worktree's gitdir).
/// A pointer the project holds is followed only to one of these.
pub(crate) fn is_git_dir(dir: &Path) -> bool {
    dir.join("HEAD").is_file() && (dir.join("objects").is_dir() || dir.join("commondir").is_file())
}

/// Whether the git directory `dir`, reached through the project's `.git`
/// pointer `dotgit` (a file or a symlink), names this project back, as git
/// itself records: a linked worktree's gitdir (it has `commondir`) by its
/// `gitdir` file, which must lead to `dotgit` itself; a repository (a
/// submodule's `.git/modules/<name>`) by its `core.worktree`, which must
/// lead to the project directory. Compared by device and inode; relative
/// paths are relative to `dir`, as git reads them. Anything unreadable,
/// unset or different is `false`: `.git` rewritten to name another
/// repository's git directory must not grant its `hooks/` and `config`.
pub(crate) fn points_back(dir: &Path, dotgit: &Path) -> bool {
    let Some(project) = dotgit.parent() else {
        return false;
    };
    let (named, expected) = if fs::symlink_metadata(dir.join("commondir")).is_ok() {
        let Ok(Ok(bytes)) = read_pointer_file(&dir.join("gitdir")) else {
            return false;
        };
        let Ok(named) = parse_git_pointer(&bytes, "") else {
            return false;
        };
        (named, dotgit)
    } else {
        let Ok(Ok(bytes)) = read_pointer_file(&dir.join("config")) else {
            return false;
        };
        match core_worktree(&bytes) {
            Some(named) if !named.as_os_str().is_empty() => (named, project),
            // A `.git` directory with no core.worktree: its working tree is
            // the directory holding it (an enclosing repository's, found
            // by enclosing_git_dirs; a project's own is inside it).
            None => {
                let id = |m: fs::Metadata| (m.dev(), m.ino());
                return fs::symlink_metadata(dotgit).is_ok_and(|m| m.is_dir())
                    && fs::metadata(dotgit).ok().map(id) == fs::metadata(dir).ok().map(id);
            }
            _ => return false,
        }
    };
    let id = |path: &Path| fs::metadata(path).ok().map(|m| (m.dev(), m.ino()));
    id(&dir.join(named)).is_some_and(|named| Some(named) == id(expected))
}

/// The last `core.worktree` a git config file sets, read as git reads it
/// (`git_parse_source`): section and key names case-insensitive, values
/// with quotes, escapes and comments, `[core]` without a subsection only.
/// `None` when it is unset, a boolean, or the file is not one git would
/// parse. Includes are not followed: a worktree set only there is unset.
pub(crate) fn core_worktree(config: &[u8]) -> Option<PathBuf> {
    let mut c = Cursor {
        bytes: config.strip_prefix(b"\xef\xbb\xbf").unwrap_or(config),
        at: 0,
    };
    let mut in_core = false;
    let mut found = None;
    loop {
        if c.at >= c.bytes.len() {
            return found;
        }
        match c.next()? {
            b'#' | b';' => while c.next()? != b'\n' {},
            b if b.is_ascii_whitespace() => {}
            b'[' => in_core = c.section()?,
            b if b.is_ascii_alphabetic() => {
                let mut key = vec![b];
                let mut b = c.next()?;
                while b.is_ascii_alphanumeric() || b == b'-' {
                    key.push(b);
                    b = c.next()?;
                }
                while b == b' ' || b == b'\t' {
                    b = c.next()?;
                }
                let value = match b {
                    b'\n' => None, // a boolean
                    b'=' => Some(c.value()?),
                    _ => return None,
                };
                if in_core && key.eq_ignore_ascii_case(b"worktree") {
                    found = value.map(|v| PathBuf::from(OsStr::from_bytes(&v)));
                }
            }
            _ => return None,
        }
    }
}

/// A position in a config file; past the end it reads `\n` once more,
/// as git's `get_next_char` does, and then `None`.
struct Cursor<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn next(&mut self) -> Option<u8> {
        let b = match self.bytes.get(self.at..) {
            Some([b'\r', b'\n', ..]) => {
                self.at += 1;
                b'\n'
            }
            Some([0, ..]) => return None,
            Some([b, ..]) => *b,
            Some([]) => b'\n',
            None => return None,
        };
        self.at += 1;
        Some(b)
    }

    /// After `[`: whether the section is `core`, with no subsection.
    fn section(&mut self) -> Option<bool> {
        let mut name = Vec::new();
        loop {
            match self.next()? {
                b']' => return Some(name.eq_ignore_ascii_case(b"core")),
                b'\n' => return None,
                b if b.is_ascii_whitespace() => break,
                b if b.is_ascii_alphanumeric() || b == b'-' || b == b'.' => name.push(b),
                _ => return None,
            }
        }
        // `[section "subsection"]`: never plain `core`.
        let mut b = self.next()?;
        while b.is_ascii_whitespace() && b != b'\n' {
            b = self.next()?;
        }
        if b != b'"' {
            return None;
        }
        loop {
            match self.next()? {
                b'\n' => return None,
                b'"' => break,
                b'\\' if self.next()? == b'\n' => return None,
                _ => {}
            }
        }
        (self.next()? == b']').then_some(false)
    }

    /// After `=`: the value up to the end of its line (`parse_value`).
    fn value(&mut self) -> Option<Vec<u8>> {
        let (mut quote, mut comment) = (false, false);
        let mut value = Vec::new();
        let mut trim: Option<usize> = None;
        loop {
            let b = self.next()?;
            if b == b'\n' {
                if quote {
                    return None;
                }
                value.truncate(trim.unwrap_or(value.len()));
                return Some(value);
            }
            if comment {
                continue;
            }
            if b.is_ascii_whitespace() && !quote {
                if !value.is_empty() {
                    trim.get_or_insert(value.len());
                    value.push(b);
                }
                continue;
            }
            if !quote && (b == b'#' || b == b';') {
                comment = true;
                continue;
            }
            trim = None;
            match b {
                b'\\' => match self.next()? {
                    b'\n' => {}
                    b't' => value.push(b'\t'),
                    b'b' => value.push(8),
                    b'n' => value.push(b'\n'),
                    e @ (b'\\' | b'"') => value.push(e),
                    _ => return None,
                },
                b'"' => quote = !quote,
                _ => value.push(b),
            }
        }
    }
}

/// The most a pointer file may hold: git writes one short line.
const MAX_POINTER_FILE: u64 = 64 * 1024;

/// Reads a pointer file git wrote (`.git`, `commondir`), refusing, with
/// the reason, anything that is not a small regular file: reading a fifo
/// would wait forever for a writer, and `/dev/zero` would never end.
pub(crate) fn read_pointer_file(path: &Path) -> io::Result<Result<Vec<u8>, String>> {
    // O_NONBLOCK: opening a fifo must not wait for a writer either.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    if !file.metadata()?.is_file() {
        return Ok(Err("not a regular file".into()));
    }
    let mut bytes = Vec::new();
    file.take(MAX_POINTER_FILE + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_POINTER_FILE {
        return Ok(Err(format!(
            "over {MAX_POINTER_FILE} bytes: not a pointer file git wrote"
        )));
    }
    Ok(Ok(bytes))
}

/// Parses the one-line pointer files git writes: `.git` files
/// (`gitdir: <path>`) and `commondir` (`<path>`). The path may be relative,
/// to the directory holding the file; joining keeps an absolute one as is.
pub(crate) fn parse_git_pointer(bytes: &[u8], prefix: &str) -> Result<PathBuf, String> {
    // git strips trailing whitespace, including a CRLF written on Windows.
    let end = bytes
        .iter()
        .rposition(|b| !b.is_ascii_whitespace())
        .map_or(0, |i| i + 1);
    let line = &bytes[..end];
    let Some(path) = line.strip_prefix(prefix.as_bytes()) else {
        return Err(format!("expected a line `{prefix}<path>`"));
    };
    if path.is_empty() {
        return Err("the path is empty".into());
    }
    if path.iter().any(|b| *b == b'\n' || *b == b'\r' || *b == 0) {
        return Err("expected a single line holding a path".into());
    }
    Ok(PathBuf::from(OsStr::from_bytes(path)))
}

/// The git directories of `project` the tripwire watches: where its `.git` leads, then a
/// worktree's common directory. A `.git` that cannot be read or parsed
/// leads nowhere; the `.git` entry itself is watched regardless.
pub(crate) fn watched_git_dirs(project: &Path) -> Vec<PathBuf> {
    read_layout(project).map(|l| l.watched).unwrap_or_default()
}

/// The git directories watched for `gitdir` and its common directory.
fn watched(gitdir: PathBuf, common: Option<PathBuf>) -> Vec<PathBuf> {
    let mut dirs = vec![gitdir];
    dirs.extend(common.map(canonical));
    dirs
}

/// The common directory `dir`'s `commondir` names, if it names one.
fn common_of(dir: &Path) -> Option<PathBuf> {
    let Ok(Ok(bytes)) = read_pointer_file(&dir.join("commondir")) else {
        return None;
    };
    parse_git_pointer(&bytes, "")
        .ok()
        .map(|common| dir.join(common))
}

/// `path` with symlinks and `..` resolved, as git resolves a pointer, so a
/// report names `/src/app/.git/hooks`, not `…/worktrees/x/../../hooks`.
fn canonical(path: PathBuf) -> PathBuf {
    fs::canonicalize(&path).unwrap_or(path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

    #[test]
    fn core_worktree_parsing() {
        let wt = |s: &[u8]| core_worktree(s).map(|p| p.into_os_string().into_vec());
        assert_eq!(
            wt(b"[core]\n\trepositoryformatversion = 0\n\tworktree = ../../../sub\n"),
            Some(b"../../../sub".to_vec())
        );
        // Case-insensitive names, quotes, escapes, comments, CRLF, a key on
        // the section's line, no final newline, the last one winning.
        assert_eq!(
            wt(b"\xef\xbb\xbf# c\n[CORE] WorkTree = \"/a b\" ; c\r\n[core]\nworktree=\"/x\\\"y\"  # z"),
            Some(b"/x\"y".to_vec())
        );
        assert_eq!(
            wt(b"[core]\nworktree = /a/b  \n[remote \"o\"]\nworktree = /c\n"),
            Some(b"/a/b".to_vec())
        );
        let none: [&[u8]; 12] = [
            // Not core.worktree: another section, a subsection, a boolean, unset.
            b"[core \"x\"]\nworktree = /a\n",
            b"[core.x]\nworktree = /a\n",
            b"[submodule]\nworktree = /a\n",
            b"[core]\nworktree\n",
            b"[core]\nbare = false\n",
            b"",
            // Files git would not parse.
            b"[core]\nworktree = \"/a\n",
            b"[core]\nworktree = /a\\q\n",
            b"[core\nworktree = /a\n",
            b"[core]\n= /a\n",
            b"[core]\nworktree = /a\0\n",
            b"\x7fELF\x02\x01",
        ];
        for config in none {
            assert_eq!(wt(config), None, "{}", config.escape_ascii());
        }
    }

    #[test]
    fn git_pointer_parsing() {
        assert_eq!(
            parse_git_pointer(b"gitdir: /a/b\n", "gitdir: "),
            Ok("/a/b".into())
        );
        assert_eq!(
            parse_git_pointer(b"gitdir: ../x\r\n", "gitdir: "),
            Ok("../x".into())
        );
        assert_eq!(parse_git_pointer(b"../..\n", ""), Ok("../..".into()));
        assert!(parse_git_pointer(b"", "gitdir: ").is_err());
        assert!(parse_git_pointer(b"gitdir: \n", "gitdir: ").is_err());
        assert!(parse_git_pointer(b"\x7fELF\x00\x01", "gitdir: ").is_err());
        assert!(parse_git_pointer(b"gitdir: /a\n/b", "gitdir: ").is_err());
        assert!(parse_git_pointer(b"", "").is_err());
        // Non-UTF-8 paths are paths.
        assert_eq!(
            parse_git_pointer(b"gitdir: /a/\xff", "gitdir: "),
            Ok(PathBuf::from(OsStr::from_bytes(b"/a/\xff")))
        );
    }

    /// A linked worktree's gitdir is asked once whether it names the
    /// project back; the judge gives that answer again only for the same
    /// directory, so one swapped in since is asked anew.
    #[test]
    fn the_gitdir_asked_once_is_answered_again_for_that_directory_only() {
        let (_tmp, base) =
            crate::testing::tree(&["main/.git/objects", "main/.git/worktrees/wt", "wt"]);
        let common = base.join("main/.git");
        let gitdir = common.join("worktrees/wt");
        let project = base.join("wt");
        fs::write(common.join("HEAD"), "ref: refs/heads/main\n").expect("HEAD");
        fs::write(gitdir.join("HEAD"), "ref: refs/heads/wt\n").expect("HEAD");
        fs::write(gitdir.join("commondir"), "../..\n").expect("commondir");
        let dotgit = project.join(".git");
        fs::write(gitdir.join("gitdir"), format!("{}\n", dotgit.display())).expect("gitdir");
        fs::write(&dotgit, format!("gitdir: {}\n", gitdir.display())).expect(".git");

        let layout = read_layout(&project).expect("a readable layout");
        let asked = layout.gitdir_asked.expect("the gitdir was asked");
        let meta = fs::metadata(&gitdir).expect("gitdir");
        assert_eq!(asked.id, (meta.dev(), meta.ino()));
        assert!(asked.points_back, "{asked:?}");
        assert!(layout.roots.iter().any(|r| r.path.ends_with("objects")));

        let judge = crate::root::Judge::new(None, Some(&project));
        judge.remember_gitdir(asked.clone());
        assert_eq!(judge.gitdir_points_back(&dotgit, asked.id), Some(true));
        // Another gitdir in its place: no kept answer, asked again.
        fs::rename(&gitdir, common.join("worktrees/old")).expect("move the gitdir away");
        fs::create_dir(&gitdir).expect("a new gitdir");
        let meta = fs::metadata(&gitdir).expect("gitdir");
        assert_eq!(
            judge.gitdir_points_back(&dotgit, (meta.dev(), meta.ino())),
            None
        );
        assert!(
            !points_back(&gitdir, &dotgit),
            "the new one names nothing back"
        );
        // Nor for another project's pointer.
        assert_eq!(
            judge.gitdir_points_back(&base.join("x/.git"), asked.id),
            None
        );
    }
}
