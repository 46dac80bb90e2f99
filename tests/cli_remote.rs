//! End-to-end tests of the remote runner: `vta serve` on a free loopback port, and `vta sim`
//! and `vta demo` with `--backend remote://...` giving what they give locally; tokens, refused
//! options and unreachable servers fail with one clear message. Every server started is
//! killed when its test ends.

#[path = "support/cli.rs"]
mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};

use support::{fails, ok, scratch, vta, vta_in};

/// A running `vta serve`: its address and its log so far; killed on drop.
struct Server {
    child: Child,
    addr: String,
    log: Arc<Mutex<Vec<String>>>,
}

impl Server {
    /// Starts `vta serve --listen 127.0.0.1:0 --device fsim ARGS` and reads the bound
    /// address from its first line on stderr.
    fn start(args: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_vta"))
            .args(["serve", "--listen", "127.0.0.1:0", "--device", "fsim"])
            .args(args)
            .env_remove("VTA_REMOTE_TOKEN")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("vta serve starts");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let first = lines.next().and_then(|l| l.ok()).unwrap_or_default();
        let Some(addr) = first
            .strip_prefix("vta serve: listening on ")
            .and_then(|rest| rest.split(' ').next())
        else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("vta serve did not say where it listens: {first:?}");
        };
        let addr = addr.to_string();
        // Keep reading the log, so the server never blocks on a full pipe.
        let log = Arc::new(Mutex::new(vec![first]));
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for l in lines.map_while(Result::ok) {
                sink.lock().unwrap().push(l);
            }
        });
        Server { child, addr, log }
    }

    fn backend(&self) -> String {
        format!("remote://{}", self.addr)
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().join("\n")
    }

    /// The log once it contains `what` (the server logs a client's goodbye after the client
    /// has already exited), or as it is after 10 s.
    fn log_with(&self, what: &str) -> String {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let log = self.log();
            if log.contains(what) || std::time::Instant::now() > deadline {
                return log;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/dense_relu.vasm")
}

/// `vta ARGS` in `dir` with `VTA_REMOTE_TOKEN` set to `token` (or unset).
fn vta_with_token(dir: &Path, token: Option<&str>, args: &[&str]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vta"));
    c.args(args).current_dir(dir);
    match token {
        Some(t) => c.env("VTA_REMOTE_TOKEN", t),
        None => c.env_remove("VTA_REMOTE_TOKEN"),
    };
    c.output().expect("the vta binary runs")
}

/// Everything `vta sim` prints but its first line (which names the backend and the time).
fn without_first_line(text: &str) -> String {
    text.lines().skip(1).collect::<Vec<_>>().join("\n")
}

#[test]
fn sim_on_a_served_fsim_equals_local_fsim() {
    let server = Server::start(&[]);
    let dir = scratch("remote_sim");
    let prog = example();
    let prog = prog.to_str().unwrap();
    let local = ok(vta_in(&dir, &["sim", prog, "--out", "local"]));
    let out = vta_with_token(
        &dir,
        None,
        &[
            "sim",
            prog,
            "--out",
            "remote",
            "--backend",
            &server.backend(),
        ],
    );
    let remote = ok(out);
    assert!(
        remote
            .lines()
            .next()
            .unwrap()
            .contains(&format!("on fsim@{}", server.addr)),
        "{remote}"
    );
    assert_eq!(
        without_first_line(&remote).replace("remote/", "local/"),
        without_first_line(&local)
    );
    let y = |d: &str| std::fs::read(dir.join(d).join("y.npy")).unwrap();
    assert_eq!(y("remote"), y("local"));
    let log = server.log_with("said bye");
    assert!(
        log.contains("connected") && log.contains("run of") && log.contains("said bye"),
        "{log}"
    );
}

#[test]
fn demo_on_a_served_fsim_equals_local_fsim() {
    let server = Server::start(&[]);
    let local = ok(vta(&["demo"]));
    let remote = ok(vta_with_token(
        Path::new(env!("CARGO_TARGET_TMPDIR")),
        None,
        &["demo", "--backend", &server.backend()],
    ));
    // The figures that must agree: the bit-exact check and the accuracy (the local run also
    // checks its tokens for races, after a ';').
    let tail = |t: &str| {
        t.lines()
            .filter(|l| l.starts_with("bit-exact") || l.starts_with("accuracy"))
            .map(|l| {
                if l.starts_with("bit-exact") {
                    l.split(';').next().unwrap_or(l)
                } else {
                    l
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert!(local.contains("no token races"), "{local}");
    assert!(tail(&local).contains("bit-exact"), "{local}");
    assert_eq!(tail(&remote), tail(&local));
    assert!(
        remote.contains(&format!("test digits on fsim@{}", server.addr)),
        "{remote}"
    );
}

#[test]
fn the_token_is_required_when_the_server_has_one() {
    let server = Server::start(&["--token", "s3cret"]);
    let dir = scratch("remote_token");
    let prog = example();
    let args = [
        "sim",
        prog.to_str().unwrap(),
        "--backend",
        &server.backend(),
    ];
    let e = fails(vta_with_token(&dir, None, &args));
    assert!(
        e.contains("token mismatch") && e.contains(&server.addr),
        "{e}"
    );
    let e = fails(vta_with_token(&dir, Some("guess"), &args));
    assert!(e.contains("token mismatch"), "{e}");
    ok(vta_with_token(&dir, Some("s3cret"), &args));
}

#[test]
fn remote_backend_errors_are_one_clear_message() {
    let prog = example();
    let prog = prog.to_str().unwrap();
    // Nothing listens on a port just freed.
    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let e = fails(vta(&[
        "sim",
        prog,
        "--backend",
        &format!("remote://{free}"),
    ]));
    assert!(
        e.contains(&free.to_string()) && e.contains("cannot connect"),
        "{e}"
    );
    // The cycle-accurate simulator's options are refused, as for fsim.
    let e = fails(vta(&[
        "sim",
        prog,
        "--backend",
        &format!("remote://{free}"),
        "--mem-latency",
        "5",
    ]));
    assert!(
        e.contains("--mem-latency") && e.contains("--backend rtl"),
        "{e}"
    );
    let e = fails(vta(&[
        "demo",
        "--backend",
        "remote://localhost",
        "--hang-cycles",
        "9",
    ]));
    assert!(e.contains("--hang-cycles"), "{e}");
    // A malformed backend is a usage error.
    let out = vta(&["sim", prog, "--backend", "remote://host:99999"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("port '99999'"), "{err}");
    let out = vta(&["sim", prog, "--backend", "board"]);
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(
            "expected fsim, rtl, remote://HOST[:PORT], serial://PORT[?baud=N] or soc-sim"
        ),
        "{out:?}"
    );
    // A server reachable from other hosts needs a token.
    let out = Command::new(env!("CARGO_BIN_EXE_vta"))
        .args(["serve", "--listen", "0.0.0.0:0"])
        .env_remove("VTA_REMOTE_TOKEN")
        .output()
        .unwrap();
    let e = fails(out);
    assert!(
        e.contains("--token") && e.contains("VTA_REMOTE_TOKEN"),
        "{e}"
    );
    let e = fails(vta(&["serve", "--device", "fsim", "--mem-latency", "3"]));
    assert!(e.contains("--mem-latency"), "{e}");
}

#[test]
fn serve_help_is_true() {
    insta::assert_snapshot!("help_serve", ok(vta(&["serve", "--help"])));
}

/// More clients than the server serves at once: the others wait their turn, and every run
/// equals a local one (the benchmark fails otherwise).
#[test]
fn bench_serve_runs_every_client_through_the_queue_bit_exactly() {
    let out = ok(vta(&[
        "bench",
        "serve",
        "--clients",
        "6",
        "--runs",
        "3",
        "--max-clients",
        "2",
    ]));
    assert!(out.contains("runs: 18 of 18 done"), "{out}");
    assert!(
        out.contains("byte-identical to a local run: 18 of 18"),
        "{out}"
    );
    assert!(out.contains("wait for a session"), "{out}");
}
