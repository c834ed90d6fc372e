//! `api dev`: the whole service in one process on SQLite under the dev data folder.

use anyhow::Context;
use sea_orm::{EntityTrait, PaginatorTrait};
use shared::config::Config;
use shared::db::{businesses, entities::business};
use shared::domain::KybStatus;

use crate::AppState;

pub async fn run(config: Config) -> anyhow::Result<()> {
    let url = super::database_url_or_dev(&config)?;
    let db = super::connect(&url, &config).await?;
    super::migrate(&db).await?;
    let cipher = super::cipher_or_dev(&config)?;

    let listener = super::bind(config.http.bind).await?;
    let address = listener.local_addr().context("reading the bound address")?;
    tracing::info!(address = %address, "api listening");

    let existing = business::Entity::find().count(&db).await?;
    println!();
    println!("  Virtual Account Service (dev) at http://{address}");
    println!("  data: {}", super::redact_url(&url));
    if existing == 0 {
        let demo = businesses::create(&db, &cipher, "Demo Business", KybStatus::Pending).await?;
        println!("  demo business {} created; these are shown only now:", demo.id);
        println!("    test secret key:     {}", demo.test.secret_key);
        println!("    test webhook secret: {}", demo.test.webhook_secret);
    } else {
        println!(
            "  {existing} business(es) exist; keys were printed when they were created \
             (`api admin business create --name N` issues new ones)"
        );
    }
    println!();

    super::serve(AppState::new(db, cipher, config), listener).await
}
