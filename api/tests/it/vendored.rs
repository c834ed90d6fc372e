//! The patched `sqlx-postgres` in `vendor/` (vendor/README.md) is the one built: Cargo builds a
//! `[patch]` only while its version is the one resolved, and otherwise builds the registry's
//! unpatched driver with no more than a warning. So the lock file must resolve `sqlx-postgres` to
//! the path (no registry source) at the vendored version, the workspace must pin `sqlx` and
//! `sqlx-postgres` to that version with `=`, and the copy must hold the change as
//! `vendor/sqlx-postgres.patch` reads it.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> String {
    std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The `version = "…"` of a manifest's `[package]`.
fn package_version(manifest: &str) -> String {
    let table: toml::Table = manifest.parse().unwrap();
    table["package"]["version"].as_str().unwrap().to_owned()
}

#[test]
fn sqlx_postgres_resolves_to_the_vendored_copy_and_is_pinned_to_it() {
    let vendored = package_version(&read("vendor/sqlx-postgres/Cargo.toml"));
    let lock: toml::Table = read("Cargo.lock").parse().unwrap();
    let packages = lock["package"].as_array().unwrap();
    let named = |name: &str| -> Vec<&toml::Table> {
        packages
            .iter()
            .filter_map(|p| p.as_table())
            .filter(|p| p["name"].as_str() == Some(name))
            .collect()
    };
    let postgres = named("sqlx-postgres");
    assert_eq!(postgres.len(), 1, "one sqlx-postgres in Cargo.lock");
    assert!(
        !postgres[0].contains_key("source"),
        "sqlx-postgres resolves to the registry, not to vendor/: {:?}",
        postgres[0].get("source")
    );
    assert_eq!(postgres[0]["version"].as_str(), Some(vendored.as_str()));
    assert!(
        !lock.contains_key("patch"),
        "Cargo.lock lists an unused patch: {:?}",
        lock.get("patch")
    );
    for sqlx in named("sqlx") {
        assert_eq!(sqlx["version"].as_str(), Some(vendored.as_str()));
    }

    let workspace: toml::Table = read("Cargo.toml").parse().unwrap();
    let dependencies = &workspace["workspace"]["dependencies"];
    for name in ["sqlx", "sqlx-postgres"] {
        assert_eq!(
            dependencies[name]["version"].as_str(),
            Some(format!("={vendored}").as_str()),
            "the workspace pins {name} to the vendored version"
        );
    }
}

#[test]
fn the_vendored_copy_holds_the_readable_patch() {
    let patch = read("vendor/sqlx-postgres.patch");
    // Reversing the patch must apply cleanly to the copy: the copy is the pristine release plus
    // exactly these hunks in the files they name.
    let reversed = Command::new("git")
        .args([
            "apply",
            "--reverse",
            "--check",
            "--directory=vendor/sqlx-postgres",
            "vendor/sqlx-postgres.patch",
        ])
        .current_dir(root())
        .output()
        .expect("git runs");
    assert!(
        reversed.status.success(),
        "vendor/sqlx-postgres.patch does not reverse onto the copy: {}",
        String::from_utf8_lossy(&reversed.stderr)
    );
    // Every place the copy marks as changed is in the patch.
    let mut marked = 0;
    for file in patch.lines().filter_map(|l| l.strip_prefix("+++ b/")) {
        marked += read(&format!("vendor/sqlx-postgres/{file}"))
            .matches("Vendored patch")
            .count();
    }
    assert!(marked > 0, "the copy marks its changes");
    assert_eq!(
        patch
            .lines()
            .filter(|l| l.starts_with('+') && l.contains("Vendored patch"))
            .count(),
        marked,
        "every marked place is an added line of the patch"
    );
}
