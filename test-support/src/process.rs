//! The workspace's binaries as an operator runs them: a clean environment, signals, exit codes.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

/// `binary` with an empty environment but `PATH`, so only what the test sets configures it.
pub fn clean_command(binary: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new(binary);
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default());
    cmd
}

/// [`clean_command`] run in `dir` (where `api dev` and the operator commands keep `.vas-dev`).
pub fn command_in(binary: impl AsRef<OsStr>, dir: &Path) -> Command {
    let mut cmd = clean_command(binary);
    cmd.current_dir(dir);
    cmd
}

/// Runs a worker binary with `ops.bind` on a free port and `env`, expecting it to refuse to
/// start; what it printed on stderr (what an operator reads).
pub fn refused_start(binary: &str, env: &[(&str, String)]) -> String {
    let mut cmd = clean_command(binary);
    cmd.env("VAS_OPS__BIND", "127.0.0.1:0");
    for (key, value) in env {
        cmd.env(key, value);
    }
    let out = cmd.output().expect("the worker runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "started: {stderr}");
    stderr
}

/// The last `lines` lines of the log file at `path`, under a heading naming `what`: for a failed
/// test's report (a missing file reads as empty).
pub fn log_tail(what: &str, path: &Path, lines: usize) -> String {
    let log = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = log.lines().collect();
    let tail = &all[all.len().saturating_sub(lines)..];
    format!(
        "--- {what}: last {} of {} log lines\n{}\n",
        tail.len(),
        all.len(),
        tail.join("\n")
    )
}

/// Runs `cmd` to completion, asserting that it succeeded (saying what it printed if not).
pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("running {:?}: {e}", cmd.get_program()));
    assert!(
        out.status.success(),
        "{:?} failed: {}\n{}",
        cmd.get_program(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The `api` binary (the `api-bin` crate's, docs/architecture.md), beside this test's own binary
/// in the target folder. A workspace run builds it fresh (`api-bin` has tests of its own); a
/// narrower run (`cargo test -p api`) builds it only when it is missing and otherwise takes it as
/// last built, so run `cargo build --bin api` first after changing the api.
pub fn api_binary() -> &'static str {
    static PATH: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    PATH.get_or_init(|| {
        let exe = std::env::current_exe().expect("the test's own path");
        // target/<profile>/deps/<test> → target/<profile>/api
        let profile = exe
            .parent()
            .and_then(Path::parent)
            .expect("a test runs from target/<profile>/deps");
        let path = profile.join("api");
        if !path.exists() {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let mut build = Command::new(cargo);
            build.args(["build", "-p", "api-bin", "--bin", "api"]);
            if profile.file_name() == Some(OsStr::new("release")) {
                build.arg("--release");
            }
            assert!(
                build.status().expect("cargo runs").success(),
                "building api"
            );
        }
        path.to_string_lossy().into_owned()
    })
}

/// Another binary of the workspace, beside `built` (a test's `CARGO_BIN_EXE_…`); built on
/// demand when a narrower `cargo test -p` did not build it.
pub fn sibling_binary(built: &str, name: &str) -> PathBuf {
    let path = Path::new(built).with_file_name(name);
    if !path.exists() {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", name])
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building {name}");
    }
    path
}

/// A running binary, killed when the test ends however it ends.
pub struct Process(pub Child);

impl Process {
    /// Starts `cmd` with its output discarded.
    pub fn quiet(cmd: &mut Command) -> Process {
        // With `VAS_TEST_PROCESS_LOGS=DIR`, each process's output is kept in DIR instead, one file
        // a process: what a failed run with real binaries (the cluster tests) needs to be read.
        match std::env::var_os("VAS_TEST_PROCESS_LOGS") {
            Some(dir) => {
                let name = Path::new(cmd.get_program())
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let path = Path::new(&dir).join(format!(
                    "{name}-{}.log",
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap()
                        .as_nanos()
                ));
                Self::logged(cmd, &path)
            }
            None => Self::spawn(cmd, Stdio::null(), Stdio::null()),
        }
    }

    /// Starts `cmd` with its output (both streams) written to the file `log`.
    pub fn logged(cmd: &mut Command, log: &Path) -> Process {
        let file = std::fs::File::create(log)
            .unwrap_or_else(|e| panic!("creating {}: {e}", log.display()));
        Self::spawn(
            cmd,
            Stdio::from(file.try_clone().unwrap()),
            Stdio::from(file),
        )
    }

    fn spawn(cmd: &mut Command, out: Stdio, err: Stdio) -> Process {
        let child = cmd
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {:?}: {e}", cmd.get_program()));
        Process(child)
    }

    /// Sends a signal as an operator would (`-TERM`, `-KILL`).
    pub fn signal(&self, signal: &str) {
        Command::new("kill")
            .args([signal, &self.0.id().to_string()])
            .status()
            .expect("kill runs");
    }

    /// SIGKILL: no drain, no goodbye; returns once the process is gone.
    pub fn kill_9(&mut self) {
        self.signal("-KILL");
        let _ = self.0.wait();
    }

    /// Its exit status; panics if it has not exited within `within`.
    pub fn wait(&mut self, within: Duration) -> ExitStatus {
        let started = Instant::now();
        loop {
            if let Some(status) = self.0.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                started.elapsed() < within,
                "process did not exit within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Waits up to a minute for `url` to answer 2xx.
pub async fn wait_healthy(client: &reqwest::Client, url: &str) {
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        if let Ok(resp) = client.get(url).send().await
            && resp.status().is_success()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("{url} never became healthy");
}
