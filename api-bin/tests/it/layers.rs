//! The workspace's crates depend one way only (docs/architecture.md#crates): each crate's
//! dependencies sit in a lower layer than itself, so storage never reaches the broker, the
//! outbound HTTP or start-up, the jobs' payloads and the rows stand on the domain alone, and the
//! api depends on no worker. Cargo already refuses a cycle; this refuses a dependency that would
//! turn the layers upside down without making one.

use std::path::Path;

/// Lowest first. A crate may depend on the crates of the layers below its own, never on one of
/// its own layer or above. Tests (`[dev-dependencies]`) may use anything.
const LAYERS: &[&[&str]] = &[
    &["domain", "ops", "migrations", "crypto"],
    &["jobs"],
    &["entities"],
    &["views"],
    &["store", "outbound"],
    &["queue"],
    &["bootstrap", "provider-sandbox"],
    &[
        "api",
        "worker-provisioning",
        "worker-webhooks",
        "worker-recheck",
        "worker-payouts",
    ],
    &["api-bin", "bench", "test-support"],
];

fn layer_of(name: &str) -> Option<usize> {
    LAYERS.iter().position(|layer| layer.contains(&name))
}

/// The names in a manifest's `[dependencies]` table (one per line, as this workspace writes
/// them).
fn dependencies(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut inside = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            inside = line == "[dependencies]";
            continue;
        }
        if inside && !line.is_empty() && !line.starts_with('#') {
            let name = line.split(['.', '=', ' ']).next().unwrap_or_default();
            names.push(name.to_owned());
        }
    }
    names
}

fn members(root: &Path) -> Vec<String> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let list = manifest.split("members = [").nth(1).unwrap();
    let list = &list[..list.find(']').unwrap()];
    list.split(',')
        .map(|m| m.trim().trim_matches('"').to_owned())
        .filter(|m| !m.is_empty())
        .collect()
}

#[test]
fn every_crate_depends_only_on_the_layers_below_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let members = members(root);
    assert!(members.len() >= 20, "{members:?}");
    let mut wrong = Vec::new();
    for member in &members {
        let Some(own) = layer_of(member) else {
            wrong.push(format!("{member} has no layer here: give it one"));
            continue;
        };
        let manifest = std::fs::read_to_string(root.join(member).join("Cargo.toml")).unwrap();
        for dependency in dependencies(&manifest) {
            if let Some(theirs) = layer_of(&dependency)
                && theirs >= own
            {
                wrong.push(format!("{member} depends on {dependency}"));
            }
        }
    }
    assert!(wrong.is_empty(), "upside down:\n{}", wrong.join("\n"));
}

#[test]
fn the_check_sees_a_dependency_that_reaches_up() {
    let manifest = "[package]\nname = \"store\"\n\n[dependencies]\nqueue.workspace = true\n\
                    # a comment\nsea-orm = { workspace = true }\n\n[dev-dependencies]\napi.workspace = true\n";
    assert_eq!(dependencies(manifest), ["queue", "sea-orm"]);
    assert!(layer_of("queue") > layer_of("store"));
}
