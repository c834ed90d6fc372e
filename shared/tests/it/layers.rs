//! The layers of `shared` (docs/architecture.md#crates) import one way only: the jobs' payloads
//! import nothing of the crate, and storage (`db`) imports neither the broker side
//! (`messaging`), the outbound HTTP (`outbound`) nor the start-up (`bootstrap`), all of which
//! sit above it.

use std::path::{Path, PathBuf};

fn sources(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

/// Lines of the files under `dir` (or the file `dir`) that name any of `above`.
fn reaching_up(dir: &Path, above: &[&str]) -> Vec<String> {
    let mut files = Vec::new();
    if dir.is_dir() {
        sources(dir, &mut files);
    } else {
        files.push(dir.to_owned());
    }
    assert!(!files.is_empty(), "{}", dir.display());
    let mut found = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (n, line) in text.lines().enumerate() {
            if line.trim_start().starts_with("//") {
                continue;
            }
            if above.iter().any(|a| line.contains(a)) {
                found.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    found
}

#[test]
fn storage_and_the_jobs_payloads_import_nothing_above_them() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let jobs = reaching_up(&src.join("jobs.rs"), &["crate::"]);
    assert!(
        jobs.is_empty(),
        "the jobs' payloads stand alone:\n{}",
        jobs.join("\n")
    );
    let db = reaching_up(
        &src.join("db"),
        &["crate::messaging", "crate::outbound", "crate::bootstrap"],
    );
    assert!(db.is_empty(), "storage reaches up:\n{}", db.join("\n"));
}
