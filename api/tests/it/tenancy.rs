//! Tenancy by construction (docs/architecture.md): a query of a table that holds a business's
//! data is scoped by `store::tenant` (`Tenant::filter` for a business and mode,
//! `Business::filter` for a business), the one place that names the business column in a
//! filter. This fails when the service's code filters on that column itself, and when a raw SQL
//! statement scoping by business appears outside the few one-statement paths that write theirs
//! by hand (each bound to the same business and mode its caller was given).

use std::path::{Path, PathBuf};

use regex::Regex;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

fn rust_files(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

/// The service's own code: every crate a process runs (not the tests, the load generator or
/// the migrations, which write whole tables).
fn service_sources() -> Vec<(String, String)> {
    let mut files = Vec::new();
    for krate in crate::sources::SERVICE_CRATES {
        rust_files(&root().join(krate).join("src"), &mut files);
    }
    assert!(files.len() > 100, "{} files", files.len());
    files
        .into_iter()
        .map(|f| {
            let shown = f.strip_prefix(root()).unwrap().display().to_string();
            (shown, std::fs::read_to_string(&f).unwrap())
        })
        .collect()
}

#[test]
fn only_the_tenant_module_filters_on_the_business_column() {
    let filter =
        Regex::new(r"BusinessId\s*\.\s*(eq|ne|is_in|is_not_in|like|into_expr)\s*\(").unwrap();
    let mut found = Vec::new();
    for (file, text) in service_sources() {
        if file == "store/src/tenant.rs" {
            assert!(
                text.contains("C::BUSINESS_ID.eq("),
                "the tenant module builds the filter"
            );
            continue;
        }
        for (n, line) in text.lines().enumerate() {
            if filter.is_match(line) {
                found.push(format!("{file}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "scope these through store::tenant (Tenant::filter / Business::filter):\n{}",
        found.join("\n")
    );
}

#[test]
fn raw_sql_scoped_by_business_stays_in_the_one_statement_paths() {
    // SQL text that compares a business column with a bound value or another table's.
    let raw = Regex::new(r"business_id\s*=\s*(\$\d+|\?|[a-z_]+\.business_id\b)").unwrap();
    // The statements written by hand for one round trip (docs/decisions/one-statement-paths.md)
    // and the ledger's, each bound to the business and mode it was given.
    let allowed = [
        "store/src/accounts/one_statement.rs",
        "store/src/accounts/side_rows.rs",
        "store/src/deliveries.rs",
        "store/src/ledger.rs",
    ];
    let mut found = Vec::new();
    let mut seen_allowed = 0;
    for (file, text) in service_sources() {
        for (n, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") || code.starts_with("let ") || !raw.is_match(line) {
                continue;
            }
            if allowed.contains(&file.as_str()) {
                seen_allowed += 1;
            } else {
                found.push(format!("{file}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "raw SQL scoped by business outside the one-statement paths (use store::tenant):\n{}",
        found.join("\n")
    );
    assert!(
        seen_allowed > 0,
        "the allowed paths are still where the raw SQL is"
    );
}
