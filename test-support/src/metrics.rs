//! What a process shows of itself: the series of its `/metrics` exposition, and its memory.

use std::collections::BTreeSet;

/// The series of an exposition: each sample line without its value (`name{labels}`).
pub fn series(exposition: &str) -> BTreeSet<String> {
    exposition
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            l.rsplit_once(' ')
                .map_or(l, |(series, _)| series)
                .to_owned()
        })
        .collect()
}

/// Asserts that between two expositions only values changed: the same series, and no more than
/// a few digits more text (a series added per request would add megabytes).
pub fn assert_no_series_added(before: &str, after: &str) {
    assert_eq!(
        series(after),
        series(before),
        "only values changed, no series was added"
    );
    assert!(
        after.len() < before.len() + 1024,
        "{} bytes before, {} after",
        before.len(),
        after.len()
    );
}

/// This process's resident memory, in KiB (`VmRSS`; None where /proc/self/status is not, i.e.
/// off Linux).
pub fn rss_kib() -> Option<u64> {
    status_kib("VmRSS:")
}

/// This process's peak resident memory so far, in KiB (`VmHWM`), like [`rss_kib`].
pub fn peak_rss_kib() -> Option<u64> {
    status_kib("VmHWM:")
}

fn status_kib(field: &str) -> Option<u64> {
    std::fs::read_to_string("/proc/self/status")
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix(field))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}
