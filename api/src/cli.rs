//! The `api` command: `serve`, `migrate`, `dev`, `admin …`.

use domain::ids::BusinessId;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use bootstrap;
use clap::{Parser, Subcommand, ValueEnum};
use domain::business::validate_business_name;
use domain::keys::KeyGrace;
use domain::{KybStatus, Mode};
use ops::config::Config;
use store::audit::Actor;
use store::businesses::{self, Rotation};
use store::keys::{Expect, KeyAction, KeyChange};

use crate::{actions, runtime};

#[derive(Debug, Parser)]
#[command(
    name = "api",
    version,
    about = "Virtual Account Service: the HTTP API and operator commands"
)]
pub struct Cli {
    /// A TOML configuration file (else VAS_CONFIG; VAS_… variables override it).
    #[arg(long, global = true)]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve the API (needs VAS_DATABASE__URL, VAS_AMQP__URL and VAS_CRYPTO__KEY).
    Serve,
    /// Apply database migrations and exit.
    Migrate,
    /// Everything in one process on SQLite under the dev data folder: no outside service needed.
    Dev,
    /// Operator commands against the configured database (else the dev data folder).
    Admin {
        #[command(subcommand)]
        command: AdminCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum AdminCommand {
    /// Businesses and their KYB status.
    Business {
        #[command(subcommand)]
        command: BusinessCommand,
    },
    /// Webhook endpoints and secrets.
    Webhook {
        #[command(subcommand)]
        command: WebhookCommand,
    },
    /// Secret keys: roll (issue a new one) and revoke.
    Key {
        #[command(subcommand)]
        command: KeyCommand,
    },
    /// Dashboard users.
    User {
        #[command(subcommand)]
        command: UserCommand,
    },
    /// The encryption key of stored secrets.
    Crypto {
        #[command(subcommand)]
        command: CryptoCommand,
    },
    /// The balance ledger.
    Ledger {
        #[command(subcommand)]
        command: LedgerCommand,
    },
    /// The outbox's jobs.
    Outbox {
        #[command(subcommand)]
        command: OutboxCommand,
    },
}

#[derive(Debug, Subcommand)]
pub enum OutboxCommand {
    /// After a database restore (or a broker that lost its queues): publish every unfinished
    /// job again now, not when its lease runs out, since the broker's messages no longer match
    /// the database. Consumers tolerate the duplicates (a payout's worker asks the bank before
    /// sending); prints how many jobs, as JSON.
    Republish,
}

#[derive(Debug, Subcommand)]
pub enum LedgerCommand {
    /// Check the ledger against itself (every balance equals the sum of its entries, every
    /// entry's balanceAfter is the running sum) and against its sources (each credited deposit,
    /// payout, and failed or reversed payout has exactly one entry of its type and amount, and
    /// no entry moves money without one); prints JSON naming every difference and exits 1 on any.
    Verify,
}

#[derive(Debug, Subcommand)]
pub enum CryptoCommand {
    /// After a key rotation: seal every stored BVN/NIN and webhook secret with VAS_CRYPTO__KEY,
    /// so the keys in VAS_CRYPTO__PREVIOUS_KEYS can be retired. Safe while the service runs and
    /// safe to run again; exits 1 while anything is left under an old key.
    Reencrypt {
        /// Count what would be sealed again, and change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add a dashboard user to a business; prints its generated password (shown this once).
    Create {
        #[arg(long, value_parser = business_id)]
        business: BusinessId,
        #[arg(long)]
        email: String,
        #[arg(long, value_enum, default_value = "viewer")]
        role: RoleArg,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum RoleArg {
    Owner,
    Developer,
    Viewer,
}

impl From<RoleArg> for domain::Role {
    fn from(r: RoleArg) -> Self {
        match r {
            RoleArg::Owner => domain::Role::Owner,
            RoleArg::Developer => domain::Role::Developer,
            RoleArg::Viewer => domain::Role::Viewer,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum BusinessCommand {
    /// Create a business; prints its keys and webhook secrets (shown this once).
    Create {
        #[arg(long)]
        name: String,
        #[arg(long, value_enum, default_value = "pending")]
        kyb: KybArg,
    },
    /// Approve a business's KYB, so its live key works.
    ApproveKyb {
        #[arg(value_parser = business_id)]
        id: BusinessId,
    },
}

#[derive(Debug, Subcommand)]
pub enum WebhookCommand {
    /// Set the URL that receives a mode's events.
    Set {
        #[arg(value_parser = business_id)]
        id: BusinessId,
        #[arg(long, value_enum)]
        mode: ModeArg,
        #[arg(long)]
        url: String,
    },
    /// Issue a new webhook secret; the old one keeps signing beside it for 24 hours.
    RotateSecret {
        #[arg(value_parser = business_id)]
        id: BusinessId,
        #[arg(long, value_enum)]
        mode: ModeArg,
    },
}

#[derive(Debug, Subcommand)]
pub enum KeyCommand {
    /// Issue a new secret key (printed this once, as JSON); the current one stops at once, or
    /// after the grace. A key still expiring from an earlier roll stops at once.
    Roll {
        #[arg(value_parser = business_id)]
        id: BusinessId,
        #[arg(long, value_enum)]
        mode: ModeArg,
        /// Seconds the current key keeps working beside the new one (at most 604800, 7 days).
        #[arg(long, default_value_t = 0)]
        grace: u64,
    },
    /// Stop every working key of the mode at once; `key roll` then issues a fresh one.
    Revoke {
        #[arg(value_parser = business_id)]
        id: BusinessId,
        #[arg(long, value_enum)]
        mode: ModeArg,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum KybArg {
    Pending,
    Approved,
    Rejected,
}

impl From<KybArg> for KybStatus {
    fn from(k: KybArg) -> Self {
        match k {
            KybArg::Pending => KybStatus::Pending,
            KybArg::Approved => KybStatus::Approved,
            KybArg::Rejected => KybStatus::Rejected,
        }
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ModeArg {
    Test,
    Live,
}

impl From<ModeArg> for Mode {
    fn from(m: ModeArg) -> Self {
        match m {
            ModeArg::Test => Mode::Test,
            ModeArg::Live => Mode::Live,
        }
    }
}

/// How `api dev` runs. The one-process composition starts the workers and the sandbox, so it
/// lives with them (the `api-bin` crate, whose binary is `api`), not in this crate.
pub type Dev = fn(Config) -> futures::future::BoxFuture<'static, anyhow::Result<()>>;

/// Parses the command line and runs it (`dev` with `dev`); errors are printed without secrets
/// and exit 1.
pub async fn main(dev: Dev) -> ExitCode {
    let cli = Cli::parse();
    ops::main_with(cli.config.as_deref(), |config| {
        run(cli.command, config, dev)
    })
    .await
}

pub async fn run(command: Command, config: Config, dev: Dev) -> anyhow::Result<()> {
    match command {
        Command::Serve => runtime::serve_production(config).await,
        Command::Migrate => {
            let url = config
                .database
                .url
                .clone()
                .context("VAS_DATABASE__URL is not set")?;
            let db = bootstrap::connect_database(&url, &config).await?;
            bootstrap::migrate(&db).await?;
            bootstrap::migrate_broker(&config).await;
            println!("migrations applied to {}", ops::redact_url(&url));
            Ok(())
        }
        Command::Dev => dev(config).await,
        Command::Admin { command } => admin(command, config).await,
    }
}

/// Every command that changes something records it in the audit log as the operator's
/// (`Actor::operator`: this host account, via `api admin`), like the dashboard's changes.
async fn admin(command: AdminCommand, mut config: Config) -> anyhow::Result<()> {
    // On `api dev`'s own data (no database configured), `api dev`'s rule for webhook targets:
    // what its dashboard accepts, the command beside it accepts (docs/api/events-and-webhooks.md).
    if config.database.url.is_none() {
        config.webhooks.allow_private_addresses = true;
    }
    let db = bootstrap::open_database_or_dev(&config).await?;
    match command {
        AdminCommand::Business { command } => match command {
            BusinessCommand::Create { name, kyb } => {
                let name = validate_business_name(&name).map_err(anyhow::Error::msg)?;
                let cipher = bootstrap::cipher_or_dev(&config)?;
                let issued =
                    businesses::create_by(&db, &cipher, &Actor::operator(), &name, kyb.into())
                        .await?;
                println!("{}", serde_json::to_string_pretty(&issued)?);
            }
            BusinessCommand::ApproveKyb { id } => {
                anyhow::ensure!(
                    businesses::approve_kyb_by(&db, &Actor::operator(), &id).await?,
                    "no business {id}"
                );
                println!("KYB approved for {id}");
            }
        },
        AdminCommand::Webhook { command } => match command {
            WebhookCommand::Set { id, mode, url } => {
                let mode = Mode::from(mode);
                // The same rules as the dashboard's Developers page.
                let policy = outbound::ssrf::TargetPolicy::from_config(&config.webhooks);
                policy.warn_at_start("api admin webhook set");
                let parsed =
                    actions::webhooks::set_url(&db, policy, &Actor::operator(), &id, mode, &url)
                        .await?;
                println!("{mode} webhook URL of {id} set to {parsed}");
            }
            WebhookCommand::RotateSecret { id, mode } => {
                let cipher = bootstrap::cipher_or_dev(&config)?;
                let rotation = actions::webhooks::rotate_secret(
                    &db,
                    &cipher,
                    &Actor::operator(),
                    &id,
                    mode.into(),
                    None,
                )
                .await?;
                match rotation {
                    Rotation::Rotated(secret) => println!("{secret}"),
                    Rotation::Stale => anyhow::bail!("the secret changed meanwhile: try again"),
                }
            }
        },
        AdminCommand::Key { command } => {
            let (id, mode, action) = match command {
                KeyCommand::Roll { id, mode, grace } => {
                    // Checked before anything is written: a too-long grace is an operator error.
                    (id, mode, KeyAction::Roll(KeyGrace::from_secs(grace)?))
                }
                KeyCommand::Revoke { id, mode } => (id, mode, KeyAction::Revoke),
            };
            let mode = Mode::from(mode);
            let change = actions::keys::change(
                &db,
                None,
                &Actor::operator(),
                &id,
                mode,
                action,
                Expect::Anything,
            )
            .await?;
            match change {
                KeyChange::Rolled(rolled) => {
                    println!("{}", serde_json::to_string_pretty(&rolled)?);
                }
                KeyChange::Stale => anyhow::bail!("the keys changed meanwhile: try again"),
                KeyChange::Revoked(count) => {
                    println!(
                        "{}",
                        serde_json::to_string_pretty(&serde_json::json!({
                            "id": id,
                            "mode": mode,
                            "revokedKeys": count,
                        }))?
                    );
                }
            }
        }
        AdminCommand::User {
            command:
                UserCommand::Create {
                    business,
                    email,
                    role,
                },
        } => {
            let issued =
                crate::actions::users::create_user(&db, &business, &email, role.into()).await?;
            println!("{}", serde_json::to_string_pretty(&issued)?);
        }
        AdminCommand::Crypto {
            command: CryptoCommand::Reencrypt { dry_run },
        } => {
            let cipher = bootstrap::cipher_or_dev(&config)?;
            let report = store::reencrypt::run(&db, &cipher, dry_run).await?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            anyhow::ensure!(
                report.complete(),
                "{} values were left as they are: run again (skipped ones changed meanwhile), and \
                 for unreadable ones put the key that sealed them back in VAS_CRYPTO__PREVIOUS_KEYS",
                report.skipped + report.unreadable.len() as u64
            );
        }
        AdminCommand::Ledger {
            command: LedgerCommand::Verify,
        } => {
            let report = store::ledger::verify(&db).await?;
            println!("{}", serde_json::to_string_pretty(&report)?);
            anyhow::ensure!(report.ok, "{} ledger mismatches", report.mismatches.len());
        }
        AdminCommand::Outbox {
            command: OutboxCommand::Republish,
        } => {
            let jobs = store::outbox::forget_publications(&db).await?;
            println!("{}", serde_json::json!({ "republished": jobs }));
        }
    }
    Ok(())
}

/// A business id as an operator typed it: looked up as it is, so a mistyped one is reported as
/// no such business.
fn business_id(text: &str) -> Result<BusinessId, std::convert::Infallible> {
    Ok(BusinessId::unchecked(text))
}
