//! pg_auto_failover on this machine (Debian's `postgresql-15-auto-failover`): a monitor and two
//! PostgreSQL nodes of their own (`pg_autoctl create … --run`), on free ports, run as the
//! `postgres` user, without TLS (the service's PostgreSQL driver is built without it); the
//! HA manager itself chooses the primary and performs the failover. Stopped on drop.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{chown, folder_for, kill_group, run_as, run_as_ok};
use crate::http::free_port;

const USER: &str = "postgres";
const PATH: &str = "/usr/lib/postgresql/15/bin:/usr/bin:/bin";

pub struct AutoFailover {
    monitor: PathBuf,
    /// The formation's own `XDG_*` homes: nothing shared with other runs or the user's home.
    xdg: PathBuf,
    nodes: Vec<PathBuf>,
    children: Vec<Child>,
    _dir: tempfile::TempDir,
}

impl AutoFailover {
    /// True when `pg_autoctl` is installed.
    pub fn available() -> bool {
        std::path::Path::new("/usr/bin/pg_autoctl").exists()
    }

    /// A monitor and two nodes; returns once one is primary and the other secondary.
    pub fn start() -> AutoFailover {
        let dir = folder_for(USER);
        let base = dir.path().to_path_buf();
        let monitor = base.join("monitor");
        let monitor_port = free_port();
        let xdg = base.join("xdg");
        let mut this = AutoFailover {
            monitor: monitor.clone(),
            xdg,
            nodes: Vec::new(),
            children: Vec::new(),
            _dir: dir,
        };
        // Every pg_autoctl call creates its state folders with a check-then-mkdir, and two calls at
        // once (the monitor starting, the first `show state` polling it) failed one of them with
        // "File exists" in CI: the folders exist before any call.
        for pgdata in ["monitor", "node1", "node2"].map(|n| base.join(n)) {
            this.prepare_state_folders(&pgdata);
        }
        chown(USER, &base);
        this.spawn(
            &base,
            "monitor",
            &[
                "create",
                "monitor",
                "--pgdata",
                &monitor.display().to_string(),
                "--pgport",
                &monitor_port.to_string(),
                "--hostname",
                "127.0.0.1",
                "--auth",
                "trust",
                "--no-ssl",
                "--run",
            ],
        );
        this.await_monitor();
        let monitor_uri =
            format!("postgres://autoctl_node@127.0.0.1:{monitor_port}/pg_auto_failover");
        for name in ["node1", "node2"] {
            let data = base.join(name);
            this.spawn(
                &base,
                name,
                &[
                    "create",
                    "postgres",
                    "--pgdata",
                    &data.display().to_string(),
                    "--pgport",
                    &free_port().to_string(),
                    "--hostname",
                    "127.0.0.1",
                    "--auth",
                    "trust",
                    "--no-ssl",
                    "--monitor",
                    &monitor_uri,
                    "--run",
                ],
            );
            this.nodes.push(data);
            // The first becomes primary before the second is created.
            this.await_states(this.nodes.len());
        }
        this
    }

    /// `pg_autoctl show uri --formation default` with the `postgres` user: the multi-host URL.
    pub fn uri(&self) -> String {
        let uri = self.autoctl(&[
            "show",
            "uri",
            "--pgdata",
            &self.monitor.display().to_string(),
            "--formation",
            "default",
        ]);
        uri.trim()
            .replacen("postgres://", "postgres://postgres@", 1)
    }

    /// `pg_autoctl perform failover`: the monitor promotes the secondary; returns when done.
    pub fn perform_failover(&self) {
        self.autoctl(&[
            "perform",
            "failover",
            "--pgdata",
            &self.monitor.display().to_string(),
        ]);
    }

    /// `pg_autoctl show state`.
    pub fn state(&self) -> String {
        self.autoctl(&[
            "show",
            "state",
            "--pgdata",
            &self.monitor.display().to_string(),
        ])
    }

    fn autoctl(&self, args: &[&str]) -> String {
        run_as_ok(USER, &self.env(), "pg_autoctl", args)
    }

    /// PATH for PostgreSQL's binaries and the formation's own `XDG_*` homes.
    fn env(&self) -> Vec<(&'static str, String)> {
        let home = |n: &str| self.xdg.join(n).display().to_string();
        vec![
            ("PATH", PATH.into()),
            ("XDG_CONFIG_HOME", home("config")),
            ("XDG_DATA_HOME", home("data")),
            ("XDG_RUNTIME_DIR", home("run")),
        ]
    }

    /// pg_autoctl keeps a node's files at `$XDG_*_HOME/pg_autoctl/<its PGDATA>`.
    fn prepare_state_folders(&self, pgdata: &std::path::Path) {
        let relative = pgdata.strip_prefix("/").expect("an absolute PGDATA");
        for kind in ["config", "data", "run"] {
            std::fs::create_dir_all(self.xdg.join(kind).join("pg_autoctl").join(relative))
                .expect("pg_autoctl's state folder");
        }
    }

    fn spawn(&mut self, base: &std::path::Path, name: &str, args: &[&str]) {
        let log = std::fs::File::create(base.join(format!("{name}.log"))).unwrap();
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", USER, "--", "env"])
            .args(self.env().into_iter().map(|(k, v)| format!("{k}={v}")))
            .arg("pg_autoctl")
            .args(args)
            .current_dir(base)
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .process_group(0);
        self.children.push(cmd.spawn().expect("pg_autoctl starts"));
    }

    fn await_monitor(&self) {
        let started = Instant::now();
        while !run_as(
            USER,
            &self.env(),
            "pg_autoctl",
            &[
                "show",
                "state",
                "--pgdata",
                &self.monitor.display().to_string(),
            ],
        )
        .status
        .success()
        {
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "the pg_auto_failover monitor did not start:\n{}",
                std::fs::read_to_string(self.monitor.with_file_name("monitor.log"))
                    .unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Until `count` nodes report primary (one) and secondary (the rest).
    fn await_states(&self, count: usize) {
        let started = Instant::now();
        loop {
            let state = self.state();
            let settled = state
                .lines()
                .filter(|l| l.contains("127.0.0.1:"))
                .filter(|l| {
                    let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                    let n = cells.len();
                    n >= 2
                        && cells[n - 1] == cells[n - 2]
                        && (cells[n - 1] == "primary"
                            || cells[n - 1] == "secondary"
                            || (count == 1 && cells[n - 1] == "single"))
                })
                .count();
            if settled == count {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(180),
                "pg_auto_failover did not settle:\n{state}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }
}

impl Drop for AutoFailover {
    fn drop(&mut self) {
        for child in &mut self.children {
            kill_group(child.id());
            let _ = child.wait();
        }
        // The PostgreSQL servers pg_autoctl started outlive it in their own sessions.
        for data in self.nodes.iter().chain([&self.monitor]) {
            let _ = run_as(
                USER,
                &[("PATH", PATH.into())],
                "pg_ctl",
                &["-D", &data.display().to_string(), "-m", "immediate", "stop"],
            );
        }
    }
}
