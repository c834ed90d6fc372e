//! The optional state file: the whole ledger as JSON, replaced atomically after every change so a
//! restart (or a kill at any moment) finds either the previous or the new state, never half of one.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use tokio::sync::Mutex;

use crate::state::Ledger;

/// Reads the ledger from `path`; a missing file is an empty ledger (first start).
pub fn load(path: &Path) -> anyhow::Result<Ledger> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Ledger::default()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let mut ledger: Ledger = serde_json::from_slice(&bytes)
        .with_context(|| format!("{} is not a sandbox state file", path.display()))?;
    ledger.reindex();
    Ok(ledger)
}

/// Writes numbered snapshots of the ledger. Snapshots are taken under the ledger's lock but
/// written outside it, so two writers may arrive out of order: the sequence number lets the
/// later snapshot win and the stale one be skipped (it is contained in the later one).
pub struct Store {
    path: PathBuf,
    last_written: Mutex<u64>,
    /// The last write failed: answers that depend on it were errors, and `/readyz` says so.
    failing: AtomicBool,
}

impl Store {
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            last_written: Mutex::new(0),
            failing: AtomicBool::new(false),
        }
    }

    pub async fn write(&self, seq: u64, snapshot: Vec<u8>) -> anyhow::Result<()> {
        let mut last_written = self.last_written.lock().await;
        if seq <= *last_written {
            return Ok(());
        }
        let written = self.replace(&snapshot).await;
        self.failing.store(written.is_err(), Ordering::Relaxed);
        written?;
        *last_written = seq;
        Ok(())
    }

    async fn replace(&self, snapshot: &[u8]) -> anyhow::Result<()> {
        let tmp = temp_path(&self.path);
        tokio::fs::write(&tmp, snapshot)
            .await
            .with_context(|| format!("writing {}", tmp.display()))?;
        tokio::fs::rename(&tmp, &self.path)
            .await
            .with_context(|| format!("replacing {}", self.path.display()))
    }

    /// Whether the last write of the state file failed.
    pub fn is_failing(&self) -> bool {
        self.failing.load(Ordering::Relaxed)
    }
}

/// Beside the target (same filesystem, so the rename is atomic) and per process, so two sandboxes
/// pointed at one file by mistake cannot write into each other's temp file.
fn temp_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(".{}.tmp", std::process::id()));
    path.with_file_name(name)
}
