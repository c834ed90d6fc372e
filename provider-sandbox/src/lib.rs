//! The provider sandbox: the four test-mode banks (wema-bank, access-bank, titan-trust-bank,
//! test-bank) speaking the provider protocol of docs/operations/provider-banks.md, each under
//! `/{bank-slug}`, plus a control call that sends money to an account with or without notifying the
//! service. For payouts: name enquiry and transfers with deterministic outcomes (see `transfers`).
//!
//! Runs as its own binary (`provider-sandbox`) or in-process (`api dev`, tests) through [`spawn`].

mod error;
mod handover;
mod notify;
mod routes;
mod state;
mod store;
mod transfers;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use anyhow::Context;
use ops::config::SandboxConfig;
use tokio_util::sync::CancellationToken;

pub use notify::{FIRST_ATTEMPT_WAIT, Signed, sign, signed_deposit};
pub use routes::router;
pub use state::Transaction;

use crate::state::Ledger;
use crate::store::Store;

/// The sandbox's configuration and state; clones share both.
#[derive(Clone)]
pub struct Sandbox {
    inner: Arc<Inner>,
}

struct Inner {
    config: SandboxConfig,
    ledger: Mutex<Books>,
    store: Option<Store>,
    http: reqwest::Client,
    handovers: handover::Handovers,
}

impl Inner {
    fn notify(&self, bank: domain::Bank, transaction: &Transaction) -> notify::FirstAttempt {
        notify::spawn_delivery(
            self.http.clone(),
            self.config.notify_url.as_deref(),
            &self.config.secret,
            bank,
            transaction,
        )
    }
}

/// The ledger plus the number of its last change, which orders snapshots for the store.
struct Books {
    ledger: Ledger,
    seq: u64,
}

impl Sandbox {
    /// A sandbox with the state found in `config.state_file`, if set and present.
    pub fn new(config: SandboxConfig) -> anyhow::Result<Sandbox> {
        let ledger = match &config.state_file {
            Some(path) => {
                if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
                    std::fs::create_dir_all(dir)
                        .with_context(|| format!("creating {}", dir.display()))?;
                }
                store::load(path)?
            }
            None => Ledger::default(),
        };
        let store = config.state_file.clone().map(Store::new);
        Ok(Sandbox {
            inner: Arc::new(Inner {
                ledger: Mutex::new(Books { ledger, seq: 0 }),
                store,
                http: notify::client()?,
                handovers: handover::Handovers::default(),
                config,
            }),
        })
    }

    pub fn config(&self) -> &SandboxConfig {
        &self.inner.config
    }

    /// `none` (no state file), `ok`, or `failing` (its last write failed).
    fn state_file_health(&self) -> &'static str {
        match &self.inner.store {
            None => "none",
            Some(store) if store.is_failing() => "failing",
            Some(_) => "ok",
        }
    }

    /// Starts what runs beside the requests: the timers of transfers whose outcome is not
    /// announced yet (after a restart, a transfer that was processing still settles and
    /// notifies), and the watch on handed-over notifications.
    pub fn start(&self) {
        self.resume_transfers();
        handover::watch(Arc::downgrade(&self.inner));
    }

    fn resume_transfers(&self) {
        let pending = {
            let books = self
                .inner
                .ledger
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            books.ledger.unannounced_transfers()
        };
        for (bank, reference) in pending {
            routes::watch_transfer(self.clone(), bank, reference);
        }
    }

    fn http(&self) -> &reqwest::Client {
        &self.inner.http
    }

    fn handovers(&self) -> &handover::Handovers {
        &self.inner.handovers
    }

    /// Sends `transaction`'s notification to the service in the background, as a bank does.
    fn notify(&self, bank: domain::Bank, transaction: &Transaction) -> notify::FirstAttempt {
        self.inner.notify(bank, transaction)
    }

    /// Runs `f` on the ledger, then, if it changed anything and there is a state file, writes the
    /// file before returning: a caller that saw an answer can rely on it surviving a restart.
    async fn update<T>(&self, f: impl FnOnce(&mut Ledger) -> T) -> anyhow::Result<T> {
        let (value, snapshot) = {
            // A panic while holding the lock cannot leave the ledger half-changed in a way that
            // matters more than refusing every later request would.
            let mut books = self
                .inner
                .ledger
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let value = f(&mut books.ledger);
            let snapshot = if books.ledger.take_dirty() && self.inner.store.is_some() {
                books.seq += 1;
                Some((books.seq, serde_json::to_vec(&books.ledger)?))
            } else {
                None
            };
            (value, snapshot)
        };
        if let (Some(store), Some((seq, bytes))) = (&self.inner.store, snapshot) {
            store.write(seq, bytes).await?;
        }
        Ok(value)
    }
}

/// Serves a new sandbox on `listener` (with the listeners' time limits) until `shutdown`, letting
/// requests in flight finish.
pub async fn serve(
    config: SandboxConfig,
    listener: tokio::net::TcpListener,
    timeouts: ops::http::Timeouts,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let sandbox = Sandbox::new(config)?;
    sandbox.start();
    ops::http::serve(listener, router(sandbox), timeouts, shutdown).await;
    Ok(())
}

/// Serves a new sandbox on `listener` in a background task for as long as the process runs
/// (`api dev`, tests); returns the address it listens on.
pub async fn spawn(
    config: SandboxConfig,
    listener: tokio::net::TcpListener,
    timeouts: ops::http::Timeouts,
) -> anyhow::Result<SocketAddr> {
    let sandbox = Sandbox::new(config)?;
    sandbox.start();
    let app = router(sandbox);
    let address = listener.local_addr()?;
    tokio::spawn(ops::http::serve(
        listener,
        app,
        timeouts,
        CancellationToken::new(),
    ));
    Ok(address)
}
