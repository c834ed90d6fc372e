#[tokio::main]
async fn main() -> std::process::ExitCode {
    api::cli::main().await
}
