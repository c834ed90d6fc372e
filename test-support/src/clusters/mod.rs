//! Real clusters of their own, for the failover tests: three RabbitMQ nodes clustered together
//! ([`RabbitCluster`]) and a PostgreSQL primary with a standby ([`PgPair`]), each on
//! free ports and in temporary folders, started from the packages the machine has, as the system
//! user each server runs as, and torn down (process groups killed, folders removed) on drop.
//!
//! They take minutes, so they run under `CI=true` only ([`enabled`]); one at a time in a process
//! ([`serial`]), since two cores cannot fail clusters over side by side and still time them.

mod auto_failover;
mod pitr;
mod postgres;
mod rabbit;

use std::process::{Command, Output};
use std::sync::OnceLock;

use crate::http::free_port;

pub use auto_failover::AutoFailover;
pub use pitr::Archived;
pub use postgres::{PgPair, PgServer, Replication};
pub use rabbit::RabbitCluster;

/// True under `CI=true`; otherwise prints that `what` was skipped and why.
pub fn enabled(what: &str) -> bool {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        return true;
    }
    eprintln!(
        "skipped: {what} starts clusters of its own and takes minutes; it runs under CI=true"
    );
    false
}

/// Held while a cluster test runs: the next one waits.
pub async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: OnceLock<tokio::sync::Mutex<()>> = OnceLock::new();
    LOCK.get_or_init(|| tokio::sync::Mutex::new(()))
        .lock()
        .await
}

/// A cluster test's turn: under `CI=true`, waits for the one before it and holds the turn until
/// dropped; otherwise None, saying `what` was skipped ([`enabled`], [`serial`]).
pub async fn turn(what: &str) -> Option<tokio::sync::MutexGuard<'static, ()>> {
    if enabled(what) {
        Some(serial().await)
    } else {
        None
    }
}

/// How long a cluster test may take in all; they take minutes when they pass.
const TEST_LIMIT: std::time::Duration = std::time::Duration::from_secs(15 * 60);

/// A cluster test's body, bounded: a request or wait that never returns fails the test named
/// `what` (dropping its clusters and processes, and passing the turn on) instead of holding the
/// whole suite until CI gives up on it.
pub async fn bounded<T>(what: &str, test: impl Future<Output = T>) -> T {
    tokio::time::timeout(TEST_LIMIT, test)
        .await
        .unwrap_or_else(|_| panic!("{what} did not finish within {TEST_LIMIT:?}"))
}

/// Runs `program` as the system user `user` (`runuser`), with `env`; the output, whatever the
/// exit status.
fn run_as(user: &str, env: &[(&str, String)], program: &str, args: &[&str]) -> Output {
    let mut cmd = Command::new("runuser");
    cmd.args(["-u", user, "--", "env"]);
    for (k, v) in env {
        cmd.arg(format!("{k}={v}"));
    }
    cmd.arg(program).args(args);
    cmd.output()
        .unwrap_or_else(|e| panic!("running {program} as {user}: {e}"))
}

/// As [`run_as`], failing the test with the command's output when it fails.
fn run_as_ok(user: &str, env: &[(&str, String)], program: &str, args: &[&str]) -> String {
    let out = run_as(user, env, program, args);
    assert!(
        out.status.success(),
        "{program} {args:?} as {user} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Starts the PostgreSQL server of `data` (`pg_ctl -w start`, `args` added, its log appended to
/// `log`) on a free port, written last into its `postgresql.conf`, and returns that port.
/// [`free_port`] only tells which port was free a moment ago: another test's server or client can
/// take it before this server binds it, so on "Address already in use" it picks again.
fn pg_start_on_a_free_port(data: &str, log: &str, args: &[&str]) -> u16 {
    const TRIES: u32 = 5;
    for attempt in 1..=TRIES {
        let port = free_port();
        append(
            &std::path::Path::new(data).join("postgresql.conf"),
            &format!("\nport = {port}\n"),
        );
        let logged_before = std::fs::metadata(log).map_or(0, |m| m.len() as usize);
        let mut all = vec!["-D", data, "-l", log, "-w"];
        all.extend_from_slice(args);
        all.push("start");
        let out = run_as("postgres", &[], "/usr/lib/postgresql/15/bin/pg_ctl", &all);
        if out.status.success() {
            return port;
        }
        let logged = std::fs::read(log).unwrap_or_default();
        let logged = String::from_utf8_lossy(logged.get(logged_before..).unwrap_or_default());
        assert!(
            attempt < TRIES && logged.contains("Address already in use"),
            "pg_ctl start on port {port} failed: {}\n{logged}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    unreachable!("the last try returns or fails the test")
}

/// Appends `text` to the file at `path`.
fn append(path: &std::path::Path, text: &str) {
    use std::io::Write;
    let mut file = std::fs::OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(text.as_bytes()).unwrap();
}

/// SIGKILL to a whole process group (a server and every child it started).
fn kill_group(pgid: u32) {
    let _ = Command::new("kill")
        .args(["-KILL", "--", &format!("-{pgid}")])
        .status();
}

/// A temporary folder owned by `user` (the servers refuse folders they do not own).
fn folder_for(user: &str) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("vas-cluster-")
        .tempdir()
        .expect("a temporary folder");
    chown(user, dir.path());
    dir
}

fn chown(user: &str, path: &std::path::Path) {
    let status = Command::new("chown")
        .args(["-R", user])
        .arg(path)
        .status()
        .expect("chown runs");
    assert!(status.success(), "chown {user} {}", path.display());
}
