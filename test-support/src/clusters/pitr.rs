//! Point-in-time recovery of a PostgreSQL of the test's own, as
//! `docs/operations/backup-and-restore.md` tells an operator to do it: continuous WAL archiving
//! (`archive_command` copying each segment into an archive folder), a base backup
//! (`pg_basebackup`), and a restore of that backup replaying the archive up to a
//! `recovery_target_time`, then promoted. All as the `postgres` user, on free ports, in one
//! temporary folder; every server stopped on drop.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::{folder_for, run_as, run_as_ok};

const USER: &str = "postgres";
const BIN: &str = "/usr/lib/postgresql/15/bin";

/// A PostgreSQL server whose WAL is archived, and the restores made from its backup.
pub struct Archived {
    /// The archived server's port.
    pub port: u16,
    dir: tempfile::TempDir,
    /// Every server started here (the archived one, then each restore), by data folder.
    started: std::sync::Mutex<Vec<PathBuf>>,
}

impl Archived {
    /// `initdb`, archiving on (each segment copied into `archive/`, a segment closed at least
    /// every `archive_timeout` seconds), started; `db` created.
    pub fn start(db: &str, archive_timeout_secs: u32) -> Archived {
        let dir = folder_for(USER);
        let mut archived = Archived {
            port: 0,
            dir,
            started: Default::default(),
        };
        let data = archived.path("data");
        let archive = archived.path("archive");
        run_as_ok(USER, &[], "mkdir", &["-p", &archive]);
        run_as_ok(
            USER,
            &[],
            &format!("{BIN}/initdb"),
            &["-D", &data, "-U", USER, "--auth=trust", "-N", "-E", "UTF8"],
        );
        archived.configure(
            &data,
            &format!(
                "wal_level = replica\narchive_mode = on\n\
                 archive_command = 'test ! -f {archive}/%f && cp %p {archive}/%f'\n\
                 archive_timeout = {archive_timeout_secs}\n"
            ),
        );
        archived.port = archived.start_on_a_free_port(&data, &[]);
        archived.psql(archived.port, "postgres", &format!("CREATE DATABASE {db}"));
        archived
    }

    /// `postgres://postgres@127.0.0.1:PORT/DB` of the archived server.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// `pg_basebackup` of the archived server into `base/` (with the WAL it needs).
    pub fn base_backup(&self) {
        run_as_ok(
            USER,
            &[],
            &format!("{BIN}/pg_basebackup"),
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                USER,
                "-D",
                &self.path("base"),
                "-X",
                "stream",
                "-c",
                "fast",
            ],
        );
    }

    /// The server's clock now, as PostgreSQL writes a `recovery_target_time`.
    pub fn now(&self) -> String {
        self.psql(self.port, "postgres", "SELECT clock_timestamp()::text")
    }

    /// Closes the current WAL segment and waits until the archive holds it: everything
    /// committed so far is archived.
    pub fn archive_now(&self) {
        let segment = self.psql(
            self.port,
            "postgres",
            "SELECT pg_walfile_name(pg_switch_wal())",
        );
        let started = Instant::now();
        while !std::path::Path::new(&self.path("archive"))
            .join(&segment)
            .exists()
        {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "{segment} was not archived within a minute"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The archived server is lost (`pg_ctl stop -m immediate`).
    pub fn lose(&self) {
        self.pg_ctl(&self.path("data"), &["-m", "immediate", "stop"]);
    }

    /// A copy of the base backup replayed from the archive up to `target` (inclusive), then
    /// promoted, on a port of its own; returns that port once it accepts writes.
    pub fn restore(&self, target: &str) -> u16 {
        let restored = self.path(&format!("restored-{}", self.started.lock().unwrap().len()));
        run_as_ok(USER, &[], "cp", &["-a", &self.path("base"), &restored]);
        let archive = self.path("archive");
        self.configure(
            &restored,
            &format!(
                "restore_command = 'cp {archive}/%f %p'\n\
                 recovery_target_time = '{target}'\nrecovery_target_action = 'promote'\n\
                 archive_mode = off\n"
            ),
        );
        run_as_ok(
            USER,
            &[],
            "touch",
            &[&format!("{restored}/recovery.signal")],
        );
        let port = self.start_on_a_free_port(&restored, &["-t", "120"]);
        let started = Instant::now();
        while self.psql(port, "postgres", "SELECT pg_is_in_recovery()") != "f" {
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "the restore did not finish recovery within two minutes"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        port
    }

    fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// On 127.0.0.1 only, its socket in the temporary folder, fast and small (a test's data),
    /// then `settings`; the port comes when it starts ([`Archived::start_on_a_free_port`]).
    fn configure(&self, data: &str, settings: &str) {
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(format!("{data}/postgresql.conf"))
            .unwrap();
        write!(
            file,
            "\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{}'\n\
             fsync = off\nshared_buffers = 16MB\nmax_connections = 60\n{settings}",
            self.dir.path().display()
        )
        .unwrap();
    }

    /// Starts the server of `data` on a free port (`args` added to `pg_ctl -w start`) and
    /// returns the port.
    fn start_on_a_free_port(&self, data: &str, args: &[&str]) -> u16 {
        let port = super::pg_start_on_a_free_port(data, &format!("{data}.log"), args);
        self.started.lock().unwrap().push(PathBuf::from(data));
        port
    }

    fn pg_ctl(&self, data: &str, args: &[&str]) {
        let log = format!("{data}.log");
        let mut all = vec!["-D", data, "-l", &log];
        all.extend_from_slice(args);
        let out = run_as(USER, &[], &format!("{BIN}/pg_ctl"), &all);
        assert!(
            out.status.success(),
            "pg_ctl {args:?} failed: {}\n{}",
            String::from_utf8_lossy(&out.stderr),
            std::fs::read_to_string(&log).unwrap_or_default()
        );
    }

    fn psql(&self, port: u16, db: &str, sql: &str) -> String {
        run_as_ok(
            USER,
            &[],
            &format!("{BIN}/psql"),
            &[
                "-h",
                "127.0.0.1",
                "-p",
                &port.to_string(),
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
}

impl Drop for Archived {
    fn drop(&mut self) {
        for data in self.started.lock().unwrap().iter() {
            let _ = run_as(
                USER,
                &[],
                &format!("{BIN}/pg_ctl"),
                &["-D", &data.display().to_string(), "-m", "immediate", "stop"],
            );
        }
    }
}
