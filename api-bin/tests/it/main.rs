//! The `api` command as an operator meets it: every subcommand is there, `serve`, `migrate` and
//! `admin` from the api crate and `dev` from this one, and `dev` runs only with its own queue.
//! (`api dev` at work is the README walkthrough's test, `api/tests/it/walkthrough.rs`.)

mod layers;

use test_support::process::clean_command;

#[test]
fn the_api_command_has_every_subcommand() {
    let out = clean_command(env!("CARGO_BIN_EXE_api"))
        .arg("--help")
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8(out.stdout).unwrap();
    for command in ["serve", "migrate", "dev", "admin"] {
        assert!(
            help.lines()
                .any(|l| l.trim_start().starts_with(&format!("{command} "))),
            "{command} in {help}"
        );
    }
}

#[test]
fn api_dev_refuses_an_outside_queue() {
    let dir = tempfile::tempdir().unwrap();
    let out = test_support::process::command_in(env!("CARGO_BIN_EXE_api"), dir.path())
        .arg("dev")
        .env("VAS_AMQP__URL", "amqp://guest:guest@127.0.0.1:5672/%2f")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("api dev runs its own in-process queue: unset VAS_AMQP__URL"),
        "{stderr}"
    );
    assert!(
        !dir.path().join(".vas-dev").exists(),
        "nothing is written before the refusal"
    );
}
