use domain::ids::BusinessId;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use worker_webhooks::operator::{self, ReplayTarget};

/// Delivers events to businesses' webhook endpoints; lists and replays dead deliveries.
///
/// Without a command, runs the worker (needs VAS_DATABASE__URL, VAS_AMQP__URL and
/// VAS_CRYPTO__KEY). The operator commands use the configured database, else the dev data
/// folder (.vas-dev/ by default), like `api admin`.
#[derive(Parser)]
#[command(name = "worker-webhooks", version)]
struct Cli {
    /// A TOML configuration file (else VAS_CONFIG; VAS_… variables override it).
    #[arg(long, global = true)]
    config: Option<PathBuf>,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Dead-lettered deliveries.
    Dead {
        #[command(subcommand)]
        command: DeadCommand,
    },
    /// Start a fresh schedule for deliveries (same event, same webhook-id). A running worker
    /// (or `api dev`) sends them.
    Replay {
        /// Deliveries to replay (`whd_…`).
        #[arg(required_unless_present = "all_dead", conflicts_with = "all_dead")]
        ids: Vec<String>,
        /// Every dead delivery (narrowed by --business and --since).
        #[arg(long)]
        all_dead: bool,
        /// Only this business's.
        #[arg(long, requires = "all_dead")]
        business: Option<BusinessId>,
        /// Only those dead at or after T: RFC 3339, YYYY-MM-DD, or a span back such as 12h or 7d.
        #[arg(long, value_name = "T", requires = "all_dead")]
        since: Option<String>,
    },
}

#[derive(Subcommand)]
enum DeadCommand {
    /// Print dead deliveries, one JSON object per line.
    List {
        /// Only this business's.
        #[arg(long)]
        business: Option<BusinessId>,
    },
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    ops::main_with(cli.config.as_deref(), |config| async move {
        match cli.command {
            None => worker_webhooks::run(config).await,
            Some(command) => operate(command, &config).await,
        }
    })
    .await
}

/// The operator commands print their results on stdout and nothing else there.
async fn operate(command: Command, config: &ops::config::Config) -> anyhow::Result<()> {
    let db = bootstrap::open_database_or_dev(config).await?;
    let mut out = std::io::stdout().lock();
    match command {
        Command::Dead {
            command: DeadCommand::List { business },
        } => {
            let n = operator::dead_list(&db, business.as_ref(), &mut out).await?;
            eprintln!("{n} dead deliveries");
        }
        Command::Replay {
            ids,
            all_dead,
            business,
            since,
        } => {
            let target = if all_dead {
                let since = since
                    .map(|s| operator::parse_since(&s, domain::time::now()))
                    .transpose()
                    .map_err(anyhow::Error::msg)?;
                ReplayTarget::AllDead {
                    business_id: business,
                    since,
                }
            } else {
                ReplayTarget::Ids(ids)
            };
            let n = operator::replay(&db, &target, &mut out).await?;
            eprintln!("{n} deliveries replayed; a running worker-webhooks (or api dev) sends them");
        }
    }
    Ok(())
}
