//! A package registry on this machine: a static HTTP/1.1 server on a
//! loopback port, serving a directory filled once from the real registry,
//! so that an install measured through it asks a registry (connects that
//! the connect supervisor mediates, downloads, unpacking) without the
//! internet's latency, which swings one run by a factor of ten and hides
//! a difference of a few percent.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::fail;

/// The server: a thread of the benchmark, outside any sandbox, so that a
/// sandboxed install reaches it only through `--allow-connect`.
pub struct Registry {
    pub port: u16,
    /// How many packages (wheels, tarballs: not index pages or metadata)
    /// it has sent whole.
    served: Arc<AtomicUsize>,
}

impl Registry {
    /// Serves `root` on `127.0.0.1` at a port the kernel picks, a thread a
    /// connection, until the benchmark ends.
    pub fn serve(root: PathBuf) -> Registry {
        let listener = TcpListener::bind("127.0.0.1:0")
            .unwrap_or_else(|e| fail(&format!("registry: bind 127.0.0.1: {e}")));
        let port = listener
            .local_addr()
            .unwrap_or_else(|e| fail(&format!("registry: {e}")))
            .port();
        let served = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&served);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (root, counter) = (root.clone(), Arc::clone(&counter));
                std::thread::spawn(move || {
                    let _ = connection(&root, stream, &counter);
                });
            }
        });
        Registry { port, served }
    }

    /// Stops the benchmark unless at least `files` packages were served: an
    /// install that found its packages elsewhere (a cache) measured
    /// something else.
    pub fn served_at_least(&self, files: usize, what: &str) {
        let served = self.served.load(Ordering::Relaxed);
        if served < files {
            fail(&format!(
                "{what}: the registry on port {} served {served} packages, fewer than the {files} \
                 the measured runs had to download",
                self.port
            ));
        }
    }

    /// `http://127.0.0.1:PORT/` and `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}/{path}", self.port)
    }

    /// The `run` flag that lets a sandboxed command reach it.
    pub fn allow_connect(&self) -> Vec<String> {
        vec!["--allow-connect".into(), format!("127.0.0.1:{}", self.port)]
    }
}

/// Answers the requests of one connection (kept alive, as pip and npm
/// ask) until the client closes it.
fn connection(root: &Path, stream: TcpStream, served: &AtomicUsize) -> io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut out = stream;
    loop {
        let mut request = String::new();
        if reader.read_line(&mut request)? == 0 {
            return Ok(());
        }
        // The headers: nothing in them changes the answer.
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
                break;
            }
        }
        let target = request.split_whitespace().nth(1).unwrap_or("/");
        let head = request.starts_with("HEAD ");
        match file_for(root, target) {
            Some((path, body)) => {
                let kind = match path.extension().and_then(|e| e.to_str()) {
                    Some("html") => "text/html",
                    Some("json") => "application/json",
                    _ => "application/octet-stream",
                };
                write!(
                    out,
                    "HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\r\n",
                    body.len()
                )?;
                if !head {
                    out.write_all(&body)?;
                    // A package, not a page that only names packages: an
                    // install whose index came from here but whose
                    // packages came from a cache is not counted.
                    if kind == "application/octet-stream" {
                        served.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            None => out.write_all(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")?,
        }
        out.flush()?;
    }
}

/// The file a request names beneath `root` (a directory: its
/// `index.html`), never one above it, and its bytes.
fn file_for(root: &Path, target: &str) -> Option<(PathBuf, Vec<u8>)> {
    let path = target.split(['?', '#']).next()?.trim_start_matches('/');
    let relative = Path::new(path);
    if relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return None;
    }
    let mut file = root.join(relative);
    if file.is_dir() {
        file.push("index.html");
    }
    let mut body = Vec::new();
    io::Read::read_to_end(&mut File::open(&file).ok()?, &mut body).ok()?;
    Some((file, body))
}
