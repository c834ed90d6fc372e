use super::*;

#[test]
fn the_marker_is_found_in_any_body() {
    assert_eq!(
        find_seq(br#"{"data":{"narration":"bench-seq-42"}}"#),
        Some(42)
    );
    assert_eq!(find_seq(b"bench-seq-0"), Some(0));
    assert_eq!(find_seq(br#"{"message":"hello"}"#), None);
    assert_eq!(find_seq(b"bench-seq-"), None);
}

#[test]
fn arrivals_are_counted_once() {
    let tracker = Tracker::new(3);
    tracker.mark_sent(1);
    assert!(tracker.arrive(b"bench-seq-1"));
    assert!(!tracker.arrive(b"bench-seq-1"), "a repeat");
    assert!(!tracker.arrive(b"bench-seq-7"), "not of this run");
    assert!(!tracker.arrive(b"nothing"));
    assert_eq!(tracker.missing(&(0..3)), 2);
    assert_eq!(tracker.duplicates.load(Ordering::Relaxed), 1);
    assert_eq!(tracker.strangers.load(Ordering::Relaxed), 2);
    assert_eq!(tracker.latencies(&(0..3)).len(), 1);
}

#[test]
fn cpu_ticks_are_read_past_a_name_with_spaces() {
    let stat = "1234 (tokio runtime) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 8 0";
    assert_eq!(parse_stat_ticks(stat), Some(325));
    assert!(cpu_ticks(std::process::id()).is_some());
}

#[test]
fn postgres_server_processes_are_told_from_other_backends() {
    assert!(is_pg_server_process("postgres: walwriter "));
    assert!(is_pg_server_process(
        "/usr/lib/postgresql/15/bin/postgres -D /x"
    ));
    assert!(!is_pg_server_process(
        "postgres: postgres other 127.0.0.1(5000) idle"
    ));
}
