//! The docs are the contract, so each fact they share with the code is checked against it: the
//! configuration reference against `config.default.toml`, the problem codes against the
//! service's catalogue, the metrics catalogue against the metrics the code records, and every
//! relative link (and its `#anchor`) in `docs/` and the README against the files it names.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use api::error::ProblemCode;
use regex::Regex;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_owned()
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(root().join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

/// The cells of each table row of `markdown` whose first cell starts with a backtick.
fn rows(markdown: &str) -> Vec<Vec<String>> {
    markdown
        .lines()
        .filter(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().to_owned())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// A key of `config.default.toml` as the file states it.
#[derive(Debug)]
struct Setting {
    /// `section.key`
    name: String,
    /// The value as written, or None for a key shown commented out (no default).
    default: Option<String>,
    /// What its comment's `Read by:` says (`the same`: the previous key's).
    read_by: String,
}

/// Every key of the file, commented-out ones (no default) included, in order.
fn settings(file: &str) -> Vec<Setting> {
    let section_re = Regex::new(r"^\[([a-z_.]+)\]\s*$").unwrap();
    let key_re = Regex::new(r"^(#\s*)?([a-z_]+) = (.+)$").unwrap();
    let mut section = None;
    let mut comment = String::new();
    let mut previous_read_by = String::new();
    let mut found = Vec::new();
    for line in file.lines() {
        if let Some(c) = section_re.captures(line) {
            section = Some(c[1].to_owned());
            comment.clear();
        } else if let (Some(section), Some(c)) = (&section, key_re.captures(line)) {
            let read_by = comment
                .split_once("Read by:")
                .map(|(_, rest)| {
                    let rest = rest.trim();
                    rest.split_once(". ")
                        .map_or(rest, |(sentence, _)| sentence)
                        .trim_end_matches('.')
                        .trim()
                        .to_owned()
                })
                .unwrap_or_else(|| panic!("{section}.{}: no `Read by:` comment", &c[2]));
            let read_by = if read_by == "the same" {
                previous_read_by.clone()
            } else {
                read_by
            };
            previous_read_by = read_by.clone();
            found.push(Setting {
                name: format!("{section}.{}", &c[2]),
                default: c.get(1).is_none().then(|| c[3].trim().to_owned()),
                read_by,
            });
            comment.clear();
        } else if let Some(text) = line.strip_prefix('#') {
            comment.push(' ');
            comment.push_str(text.trim());
        }
    }
    found
}

#[test]
fn the_configuration_reference_states_every_key_once_with_its_default_and_readers() {
    let settings = settings(&read("config.default.toml"));
    assert!(settings.len() > 50, "{} keys found", settings.len());
    let page = read("docs/operations/configuration.md");
    let documented: Vec<Vec<String>> = rows(&page)
        .into_iter()
        .filter(|cells| cells[0].starts_with('`') && cells.len() == 5)
        .collect();

    let mut problems = Vec::new();
    for setting in &settings {
        let cell = format!("`{}`", setting.name);
        let matching: Vec<_> = documented.iter().filter(|r| r[0] == cell).collect();
        let [row] = matching.as_slice() else {
            problems.push(format!(
                "{}: documented {} times in docs/operations/configuration.md (once expected)",
                setting.name,
                matching.len()
            ));
            continue;
        };
        let variable = format!("`VAS_{}`", setting.name.to_uppercase().replace('.', "__"));
        if row[1] != variable {
            problems.push(format!(
                "{}: variable {} (expected {variable})",
                setting.name, row[1]
            ));
        }
        let default_ok = match &setting.default {
            Some(value) => row[2] == format!("`{value}`"),
            None => row[2].starts_with("unset"),
        };
        if !default_ok {
            problems.push(format!(
                "{}: default {} in the docs, {} in config.default.toml",
                setting.name,
                row[2],
                setting.default.as_deref().unwrap_or("unset")
            ));
        }
        if row[3] != setting.read_by {
            problems.push(format!(
                "{}: read by {:?} in the docs, {:?} in config.default.toml",
                setting.name, row[3], setting.read_by
            ));
        }
    }
    let known: BTreeSet<String> = settings.iter().map(|s| format!("`{}`", s.name)).collect();
    for row in &documented {
        if !known.contains(&row[0]) {
            problems.push(format!(
                "{}: documented, but not a key of config.default.toml",
                row[0]
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn the_problem_codes_page_lists_the_catalogue_with_its_statuses() {
    let page = read("docs/api/errors.md");
    let documented: BTreeMap<String, u16> = rows(&page)
        .into_iter()
        .filter(|cells| cells.len() == 3 && cells[1].starts_with('`'))
        .map(|cells| {
            (
                cells[1].trim_matches('`').to_owned(),
                cells[0].parse().expect("a status"),
            )
        })
        .collect();
    let catalogue: BTreeMap<String, u16> = ProblemCode::ALL
        .iter()
        .map(|c| (c.as_str().to_owned(), c.status()))
        .collect();
    assert_eq!(
        documented, catalogue,
        "docs/api/errors.md against api/src/error.rs (code → status)"
    );
}

/// Every metric name the code records: the names given to `counter!`, `gauge!` and
/// `histogram!` (directly or through a `const`), and the HTTP servers' metric names, in the
/// crates that run in the processes (their unit tests left out).
fn recorded_metrics() -> BTreeSet<String> {
    let macro_re =
        Regex::new(r#"(?:counter|gauge|histogram)!\(\s*(?:"([a-z0-9_]+)"|([A-Z][A-Z0-9_]*))"#)
            .unwrap();
    let const_re = Regex::new(r#"const ([A-Z][A-Z0-9_]*): &str = "([a-z0-9_]+)""#).unwrap();
    let http_names_re = Regex::new(r#"(?:requests|duration): "([a-z0-9_]+)""#).unwrap();
    let mut sources = Vec::new();
    for krate in crate::sources::SERVICE_CRATES {
        collect_files(&root().join(krate).join("src"), "rs", &mut sources);
    }
    let texts: Vec<String> = sources
        .iter()
        .map(|p| {
            let text = std::fs::read_to_string(p).unwrap();
            // A file's unit tests come last, after `#[cfg(test)]`.
            match text.find("#[cfg(test)]\nmod tests") {
                Some(at) => text[..at].to_owned(),
                None => text,
            }
        })
        .collect();
    let constants: BTreeMap<String, String> = texts
        .iter()
        .flat_map(|t| const_re.captures_iter(t))
        .map(|c| (c[1].to_owned(), c[2].to_owned()))
        .collect();
    let mut names = BTreeSet::new();
    for text in &texts {
        for c in macro_re.captures_iter(text) {
            match (c.get(1), c.get(2)) {
                (Some(name), _) => names.insert(name.as_str().to_owned()),
                (None, Some(constant)) => names.insert(
                    constants
                        .get(constant.as_str())
                        .unwrap_or_else(|| panic!("metric name {} not found", constant.as_str()))
                        .clone(),
                ),
                _ => unreachable!(),
            };
        }
        if text.contains("HttpMetricNames {") {
            names.extend(http_names_re.captures_iter(text).map(|c| c[1].to_owned()));
        }
    }
    names
}

fn collect_files(dir: &Path, extension: &str, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        if path.is_dir() {
            collect_files(&path, extension, into);
        } else if path.extension().is_some_and(|e| e == extension) {
            into.push(path);
        }
    }
}

#[test]
fn the_metrics_catalogue_names_every_metric_the_code_records_and_no_other() {
    let recorded = recorded_metrics();
    assert!(recorded.len() > 25, "{recorded:?}");
    let page = read("docs/operations/health-and-metrics.md");
    let name_re = Regex::new(r"^`([a-z0-9_]+)").unwrap();
    let documented: BTreeSet<String> = rows(&page)
        .into_iter()
        .filter(|cells| cells.len() == 3)
        .filter_map(|cells| name_re.captures(&cells[0]).map(|c| c[1].to_owned()))
        .collect();
    let undocumented: Vec<_> = recorded.difference(&documented).collect();
    let stale: Vec<_> = documented.difference(&recorded).collect();
    assert!(
        undocumented.is_empty() && stale.is_empty(),
        "recorded but not in docs/operations/health-and-metrics.md: {undocumented:?}; \
         documented but recorded nowhere: {stale:?}"
    );
}

/// GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens.
fn anchor_of(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// A markdown file without its fenced code blocks.
fn prose(markdown: &str) -> String {
    let mut inside = false;
    let mut kept = String::new();
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            inside = !inside;
        } else if !inside {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    kept
}

fn anchors(markdown: &str) -> BTreeSet<String> {
    prose(markdown)
        .lines()
        .filter_map(|l| l.strip_prefix('#'))
        .map(|l| anchor_of(l.trim_start_matches('#')))
        .collect()
}

#[test]
fn every_relative_link_in_the_docs_and_the_readme_resolves() {
    let mut files = vec![root().join("README.md")];
    collect_files(&root().join("docs"), "md", &mut files);
    assert!(files.len() > 25, "{} pages", files.len());
    let link_re = Regex::new(r"\]\(([^)\s]+)\)").unwrap();
    let mut checked = 0;
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        let shown = file.strip_prefix(root()).unwrap().display().to_string();
        for c in link_re.captures_iter(&prose(&text)) {
            let target = &c[1];
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
            let resolved = if path.is_empty() {
                file.clone()
            } else {
                file.parent().unwrap().join(path)
            };
            if !resolved.exists() {
                broken.push(format!("{shown}: {target} (no such file)"));
                continue;
            }
            if !anchor.is_empty() && resolved.extension().is_some_and(|e| e == "md") {
                let headings = anchors(&std::fs::read_to_string(&resolved).unwrap());
                if !headings.contains(anchor) {
                    broken.push(format!("{shown}: {target} (no such heading)"));
                }
            }
        }
    }
    assert!(checked > 50, "{checked} links checked");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// The comments of `text` with their line numbers: after a line marker, or inside a block.
fn comments<'a>(text: &'a str, line: &[&str], blocks: &[(&str, &str)]) -> Vec<(usize, &'a str)> {
    let mut found = Vec::new();
    let mut closing: Option<&str> = None;
    for (n, mut rest) in text.lines().enumerate() {
        loop {
            if let Some(close) = closing {
                let end = rest.find(close).unwrap_or(rest.len());
                found.push((n + 1, &rest[..end]));
                if end == rest.len() {
                    break;
                }
                rest = &rest[end + close.len()..];
                closing = None;
            }
            let first_line = line.iter().filter_map(|m| rest.find(m)).min();
            let first_block = blocks
                .iter()
                .filter_map(|(open, close)| rest.find(open).map(|i| (i, open.len(), *close)))
                .min();
            match (first_line, first_block) {
                (Some(l), b) if b.is_none_or(|(i, ..)| l < i) => {
                    found.push((n + 1, &rest[l..]));
                    break;
                }
                (_, Some((i, open, close))) => {
                    rest = &rest[i + open..];
                    closing = Some(close);
                }
                _ => break,
            }
        }
    }
    found
}

/// A language's line comment markers, and its block comments' opening and closing marks.
type CommentSyntax = (
    &'static [&'static str],
    &'static [(&'static str, &'static str)],
);

/// The comment syntax of a source file of the repository, by its name; None for other files.
fn comment_syntax(path: &Path) -> Option<CommentSyntax> {
    let name = path.file_name()?.to_str()?;
    let hash: &[&str] = &["#"];
    match name.rsplit_once('.').map(|(_, e)| e) {
        Some("rs") => Some((&["//"], &[])),
        Some("toml" | "sh" | "yml" | "yaml") => Some((hash, &[])),
        Some("sql") => Some((&["--"], &[])),
        Some("css") => Some((&[], &[("/*", "*/")])),
        Some("html") => Some((&[], &[("<!--", "-->"), ("{#", "#}")])),
        _ if name.starts_with("Dockerfile") => Some((hash, &[])),
        None if std::fs::read_to_string(path).is_ok_and(|t| t.starts_with("#!")) => {
            Some((hash, &[]))
        }
        _ => None,
    }
}

fn source_files(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy();
        if path.is_dir() {
            // vendor/ is others' code; docs/ is the contract itself; the rest is not ours.
            let skipped = [
                "vendor",
                "docs",
                "target",
                "node_modules",
                ".git",
                ".vas-dev",
            ];
            if !skipped.contains(&name.as_ref()) && !name.starts_with(".schemathesis") {
                source_files(&path, into);
            }
        } else if comment_syntax(&path).is_some() {
            into.push(path);
        }
    }
}

#[test]
fn code_comments_name_docs_pages_not_spec_sections_or_issue_numbers() {
    let mut files = Vec::new();
    source_files(&root(), &mut files);
    assert!(files.len() > 250, "{} source files", files.len());
    // An issue number, or the contract that came before docs/: its sections, its file, its name.
    let outside = Regex::new(r"(?i:\bissues? #?\d+)|\bSPEC\b").unwrap();
    let page_re = Regex::new(r"docs/[a-z0-9_/-]+\.md(?:#([a-z0-9_-]+))?").unwrap();
    let mut pages_named = 0;
    let mut wrong = Vec::new();
    for file in &files {
        let (line, blocks) = comment_syntax(file).unwrap();
        let text = std::fs::read_to_string(file).unwrap();
        let shown = file.strip_prefix(root()).unwrap().display().to_string();
        for (n, comment) in comments(&text, line, blocks) {
            if let Some(m) = outside.find(comment) {
                wrong.push(format!("{shown}:{n}: cites \"{}\"", m.as_str()));
            }
            for c in page_re.captures_iter(comment) {
                pages_named += 1;
                let page = c[0].split('#').next().unwrap();
                let Ok(markdown) = std::fs::read_to_string(root().join(page)) else {
                    wrong.push(format!("{shown}:{n}: names {page}, which does not exist"));
                    continue;
                };
                if let Some(anchor) = c.get(1)
                    && !anchors(&markdown).contains(anchor.as_str())
                {
                    wrong.push(format!("{shown}:{n}: names {}, no such heading", &c[0]));
                }
            }
        }
    }
    assert!(
        pages_named > 100,
        "{pages_named} docs pages named in comments"
    );
    assert!(wrong.is_empty(), "comments to fix:\n{}", wrong.join("\n"));
}
