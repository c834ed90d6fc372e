use super::*;
use serde_json::json;

#[test]
fn patterns_take_wildcards_literally() {
    assert_eq!(like_pattern("Ada.O"), "%ada.o%");
    assert_eq!(like_pattern("50%_a\\b"), "%50\\%\\_a\\\\b%");
}

#[test]
fn the_load_statement_spans_the_batch() {
    let sql = load_sql(101, 200, 1000);
    assert!(
        sql.contains("generate_series(101::bigint, 200::bigint)"),
        "{sql}"
    );
    assert!(sql.contains("/ 1000)"), "{sql}");
    assert!(sql.contains(DUMMY_SEAL_PREFIX));
}

#[test]
fn a_plan_is_summarised_down_its_first_children() {
    let explained = json!({
        "Plan": {"Node Type": "Limit", "Actual Rows": 21.0, "Shared Hit Blocks": 7,
                 "Shared Read Blocks": 2,
                 "Plans": [{"Node Type": "Index Scan", "Scan Direction": "Backward",
                            "Index Name": "virtual_accounts_business_mode_created_id",
                            "Actual Rows": 21.0, "Rows Removed by Filter": 3.0}]},
        "Execution Time": 0.123
    });
    let plan = summarise("page 1", &explained);
    assert_eq!(
        plan.path,
        "Limit (rows 21) > Index Scan Backward on virtual_accounts_business_mode_created_id \
         (rows 21) [filtered out 3]"
    );
    assert_eq!(plan.execution_ms, 0.123);
    assert_eq!((plan.shared_hit, plan.shared_read), (7, 2));

    let counted = json!({
        "Plan": {"Node Type": "Aggregate", "Partial Mode": "Finalize",
                 "Plans": [{"Node Type": "Gather",
                            "Plans": [{"Node Type": "Aggregate", "Partial Mode": "Partial",
                                       "Plans": [{"Node Type": "Seq Scan",
                                                  "Parallel Aware": true,
                                                  "Relation Name": "virtual_accounts"}]}]}]},
        "Execution Time": 132.0
    });
    assert_eq!(
        summarise("count", &counted).path,
        "Finalize Aggregate > Gather > Partial Aggregate > Parallel Seq Scan on virtual_accounts"
    );
}

#[test]
fn rss_is_read_for_this_process() {
    assert!(rss_kb(std::process::id()).is_some_and(|kb| kb > 0));
    assert_eq!(rss_kb(u32::MAX), None);
}
