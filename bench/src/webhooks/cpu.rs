//! CPU time of processes from /proc: the service's, PostgreSQL's, the broker's.

/// Clock ticks a second of /proc's utime and stime (USER_HZ, 100 on Linux).
pub(super) const TICKS_PER_SEC: u64 = 100;

/// utime + stime of a process, in ticks.
pub fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_ticks(&stat)
}

/// utime + stime from the text of `/proc/<pid>/stat` (fields 14 and 15; the name, in
/// parentheses, may hold spaces).
pub fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// The PostgreSQL server's own processes (not a backend of another database).
pub(super) fn is_pg_server_process(cmdline: &str) -> bool {
    const OWN: [&str; 6] = [
        "checkpointer",
        "background writer",
        "walwriter",
        "autovacuum launcher",
        "logical replication launcher",
        "stats collector",
    ];
    match cmdline.strip_prefix("postgres: ") {
        Some(rest) => OWN.iter().any(|own| rest.trim_end().ends_with(own)), // after "15/main: "
        // The postmaster keeps its command line.
        None => true,
    }
}

/// Which processes are counted, and under what label.
#[derive(Debug, Clone)]
pub struct CpuProbe {
    pub(super) pids: Vec<(String, u32)>,
    pub(super) pg_database: Option<String>,
    pub(super) names: Vec<String>,
}

/// Ticks by (label, pid).
pub(super) type Snapshot = Vec<(String, u32, u64)>;

impl CpuProbe {
    pub(super) fn snapshot(&self, extra: &[(String, u32)]) -> Snapshot {
        let mut out: Snapshot = Vec::new();
        for (label, pid) in self.pids.iter().chain(extra) {
            if let Some(t) = cpu_ticks(*pid) {
                out.push((label.clone(), *pid, t));
            }
        }
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return out;
        };
        for entry in dir.flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
            let comm = comm.trim();
            let label = if comm == "postgres" {
                let Some(db) = &self.pg_database else {
                    continue;
                };
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                // "postgres: [cluster: ]user database host(port) state"
                let ours = cmdline.starts_with("postgres: ")
                    && cmdline.split_whitespace().any(|w| w == db.as_str());
                if !(ours || is_pg_server_process(&cmdline)) {
                    continue;
                }
                "postgres".to_owned()
            } else if self.names.iter().any(|n| n == comm) {
                comm.to_owned()
            } else {
                continue;
            };
            if let Some(t) = cpu_ticks(pid) {
                out.push((label, pid, t));
            }
        }
        out
    }

    /// CPU milliseconds by label between two snapshots (a process that appeared counts from 0).
    pub(super) fn spent(before: &Snapshot, after: &Snapshot) -> Vec<(String, f64)> {
        let mut by_label: Vec<(String, f64)> = Vec::new();
        for (label, pid, t) in after {
            let was = before
                .iter()
                .find(|(_, p, _)| p == pid)
                .map_or(0, |(_, _, t)| *t);
            let ms = t.saturating_sub(was) as f64 * 1000.0 / TICKS_PER_SEC as f64;
            match by_label.iter_mut().find(|(l, _)| l == label) {
                Some((_, sum)) => *sum += ms,
                None => by_label.push((label.clone(), ms)),
            }
        }
        by_label
    }
}
