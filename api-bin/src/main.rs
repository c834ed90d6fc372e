//! The `api` command (docs/operations/processes-and-configuration.md): `serve`, `migrate` and
//! `admin` are the api crate's; `dev`, the whole service in one process, is composed here, beside
//! the workers and the sandbox it starts.

mod dev;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    api::cli::main(|config| Box::pin(dev::run(config))).await
}
