//! A PostgreSQL primary with a standby of their own: `initdb`, `pg_basebackup -R`, for a
//! failover `synchronous_standby_names = '*'` on the primary, `pg_ctl` for start, stop and
//! promotion, all run as the `postgres` user, on free ports and in a temporary folder; stopped on
//! drop. Or one server alone with settings and files of the test's ([`PgServer`]: TLS, say),
//! quick enough (an `initdb`, a few seconds) to run in every test run.

use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::{append, folder_for, run_as, run_as_ok};

const USER: &str = "postgres";
const BIN: &str = "/usr/lib/postgresql/15/bin";

/// One server of the pair.
pub struct PgNode {
    pub port: u16,
    data: PathBuf,
    log: PathBuf,
}

/// How the primary waits for its standby.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Replication {
    /// Every commit waits until the standby has it: a promotion loses nothing acknowledged,
    /// and with the standby stopped no commit returns.
    Synchronous,
    /// A read replica: commits never wait for it, so stopping it stops no write.
    Asynchronous,
}

pub struct PgPair {
    /// The primary at start (index 0), then the standby (index 1).
    pub nodes: [PgNode; 2],
    dir: tempfile::TempDir,
}

impl PgNode {
    /// `postgres://postgres@127.0.0.1:PORT/DB`.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// `initdb` (user `postgres`, trust authentication), listening on 127.0.0.1 only, its
    /// socket in `socket_dir`, then `settings` added to its configuration; the port is picked
    /// when it starts ([`PgNode::start_on_a_free_port`]).
    fn init(&self, socket_dir: &std::path::Path, settings: &str) {
        let data = self.data.display().to_string();
        run_as_ok(
            USER,
            &[],
            &format!("{BIN}/initdb"),
            &[
                "-D",
                &data,
                "-U",
                "postgres",
                "--auth=trust",
                "-N",
                "-E",
                "UTF8",
            ],
        );
        append(
            &self.data.join("postgresql.conf"),
            &format!(
                "listen_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n{settings}",
                socket_dir.display()
            ),
        );
    }

    /// `psql -c sql` on this node's database `db`; its output (unaligned, tuples only).
    pub fn psql(&self, db: &str, sql: &str) -> String {
        run_as_ok(
            USER,
            &[],
            &format!("{BIN}/psql"),
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-d",
                db,
                "-v",
                "ON_ERROR_STOP=1",
                "-Atc",
                sql,
            ],
        )
        .trim()
        .to_owned()
    }

    /// `pg_ctl stop -m immediate` if it runs.
    fn stop_if_running(&self) {
        if self.running() {
            let data = self.data.display().to_string();
            let _ = run_as(
                USER,
                &[],
                &format!("{BIN}/pg_ctl"),
                &["-D", &data, "-m", "immediate", "stop"],
            );
        }
    }

    /// The first start: on a port free at that moment, which this node keeps from then on.
    fn start_on_a_free_port(&mut self) {
        self.port = super::pg_start_on_a_free_port(
            &self.data.display().to_string(),
            &self.log.display().to_string(),
            &[],
        );
    }

    fn pg_ctl(&self, args: &[&str]) -> String {
        let data = self.data.display().to_string();
        let log = self.log.display().to_string();
        let mut all = vec!["-D", &data, "-l", &log];
        all.extend_from_slice(args);
        run_as_ok(USER, &[], &format!("{BIN}/pg_ctl"), &all)
    }

    fn running(&self) -> bool {
        let data = self.data.display().to_string();
        run_as(
            USER,
            &[],
            &format!("{BIN}/pg_ctl"),
            &["-D", &data, "status"],
        )
        .status
        .success()
    }
}

impl PgPair {
    /// A primary and its standby, streaming as `replication` says; `db` created on the
    /// primary.
    pub fn start(db: &str, replication: Replication) -> PgPair {
        let dir = folder_for(USER);
        let base = dir.path().to_path_buf();
        let node = |name: &str| PgNode {
            port: 0,
            data: base.join(name),
            log: base.join(format!("{name}.log")),
        };
        let (mut primary, mut standby) = (node("primary"), node("standby"));
        let standbys = match replication {
            Replication::Synchronous => "*",
            Replication::Asynchronous => "",
        };
        primary.init(
            &base,
            &format!(
                "wal_level = replica\nmax_wal_senders = 5\nhot_standby = on\n\
                 synchronous_standby_names = '{standbys}'\nsynchronous_commit = on\n\
                 fsync = off\nfull_page_writes = on\nshared_buffers = 32MB\nmax_connections = 100\n"
            ),
        );
        primary.start_on_a_free_port();
        let standby_data = standby.data.display().to_string();
        run_as_ok(
            USER,
            &[],
            &format!("{BIN}/pg_basebackup"),
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &primary.port.to_string(),
                "-U",
                "postgres",
                "-D",
                &standby_data,
                "-R",
                "-X",
                "stream",
            ],
        );
        // Once promoted it must not wait for a standby it lacks; its own port comes last.
        append(
            &standby.data.join("postgresql.conf"),
            "synchronous_standby_names = ''\n",
        );
        standby.start_on_a_free_port();
        let pair = PgPair {
            nodes: [primary, standby],
            dir,
        };
        pair.await_standby(match replication {
            Replication::Synchronous => "sync",
            Replication::Asynchronous => "async",
        });
        pair.psql(0, "postgres", &format!("CREATE DATABASE {db}"));
        pair
    }

    /// The libpq multi-host URL of both servers, writes to whichever is primary.
    pub fn multi_host_url(&self, db: &str) -> String {
        format!(
            "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/{db}?target_session_attrs=read-write",
            self.nodes[0].port, self.nodes[1].port
        )
    }

    /// `psql -c sql` on node `i`'s database `db`; its output (unaligned, tuples only).
    pub fn psql(&self, i: usize, db: &str, sql: &str) -> String {
        self.nodes[i].psql(db, sql)
    }

    /// `pg_ctl stop -m immediate` on node `i`: a crash, as far as clients can tell.
    pub fn stop_immediate(&self, i: usize) {
        self.nodes[i].pg_ctl(&["-m", "immediate", "stop"]);
    }

    /// `pg_ctl stop` (fast) on node `i`.
    pub fn stop(&self, i: usize) {
        self.nodes[i].pg_ctl(&["-m", "fast", "stop"]);
    }

    /// Starts node `i` again.
    pub fn restart(&self, i: usize) {
        self.nodes[i].pg_ctl(&["-w", "start"]);
    }

    /// Promotes node `i` (the standby) and returns once it accepts writes.
    pub fn promote(&self, i: usize) {
        self.nodes[i].pg_ctl(&["-w", "promote"]);
    }

    /// Waits until the primary reports its standby streaming in `state` (`sync` or `async`).
    fn await_standby(&self, wanted: &str) {
        let started = Instant::now();
        loop {
            let state = self.psql(
                0,
                "postgres",
                "SELECT coalesce(string_agg(sync_state, ','), '') FROM pg_stat_replication",
            );
            if state == wanted {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the standby is not {wanted}: {state:?}\n{}",
                fs::read_to_string(&self.nodes[1].log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for PgPair {
    fn drop(&mut self) {
        for node in &self.nodes {
            node.stop_if_running();
        }
        let _ = &self.dir;
    }
}

/// One server of its own, no standby.
pub struct PgServer {
    pub node: PgNode,
    dir: tempfile::TempDir,
}

impl PgServer {
    /// A server with `settings` added to its configuration and `files` (name, contents) written
    /// into its data folder, owned by the server and readable by it alone (as PostgreSQL wants a
    /// TLS key), before it starts.
    pub fn start(settings: &str, files: &[(&str, &[u8])]) -> PgServer {
        use std::os::unix::fs::PermissionsExt;
        let dir = folder_for(USER);
        let mut node = PgNode {
            port: 0,
            data: dir.path().join("data"),
            log: dir.path().join("server.log"),
        };
        node.init(
            dir.path(),
            &format!("fsync = off\nshared_buffers = 16MB\nmax_connections = 50\n{settings}"),
        );
        for (name, contents) in files {
            let path = node.data.join(name);
            fs::write(&path, contents).unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        }
        super::chown(USER, &node.data);
        node.start_on_a_free_port();
        PgServer { node, dir }
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.node.stop_if_running();
        let _ = &self.dir;
    }
}
