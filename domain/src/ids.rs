//! Prefixed, time-ordered ids: `va_01J…` (prefix + ULID), so ids sort by creation and say their kind.

/// A fresh id with the given prefix, e.g. `new_id("va")` → `va_01JD…`.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", ulid::Ulid::new())
}

/// True when `id` is `prefix_` followed by a well-formed ULID.
pub fn has_prefix(id: &str, prefix: &str) -> bool {
    id.strip_prefix(prefix)
        .and_then(|rest| rest.strip_prefix('_'))
        .is_some_and(|ulid| ulid::Ulid::from_string(ulid).is_ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_carry_their_prefix_and_sort_by_time() {
        let a = new_id("va");
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = new_id("va");
        assert!(has_prefix(&a, "va"));
        assert!(!has_prefix(&a, "evt"));
        assert!(a < b, "{a} should sort before {b}");
        assert!(!has_prefix("va_not-a-ulid", "va"));
    }
}
