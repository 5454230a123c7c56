//! What a store's health check means for `/health` (D-F19, D-F32): the
//! rule the `api` entry applies to the store stage's report.

/// Whether a failed check means the store is down, given its kind
/// (`sqlite`, `postgres`, `key-value`, `redis`) and the failure
/// (`timeout` or an error code).
///
/// A server that does not answer in time is down. The embedded default
/// (SQLite and Spin's key-value store, both files in the app's own
/// process) cannot go silent as a server can: a check there that ran out of
/// time only waited its turn for a CPU that a flood had taken, so the app
/// is `degraded`, not down. Spin's key-value store next to PostgreSQL may
/// be whatever the platform's runtime config put behind it, so there a
/// timeout counts.
pub fn is_down(kind: &str, failure: Option<&str>, embedded: bool) -> bool {
    let Some(failure) = failure else { return false };
    let in_process = kind == "sqlite" || (embedded && kind == "key-value");
    !(in_process && failure == "timeout")
}

/// Whether the app runs on the embedded default: both stores in files of
/// its own process.
pub fn embedded(sql_kind: &str, kv_kind: &str) -> bool {
    sql_kind == "sqlite" && kv_kind == "key-value"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_server_that_times_out_or_any_store_that_errs_is_down() {
        let timeout = Some("timeout");
        let error = Some("store-unavailable");
        // (kind, failure, embedded) → down
        let cases = [
            ("sqlite", None, true, false),
            ("sqlite", timeout, true, false),
            ("sqlite", timeout, false, false),
            ("sqlite", error, true, true),
            ("key-value", timeout, true, false),
            ("key-value", error, true, true),
            ("key-value", timeout, false, true),
            ("postgres", timeout, false, true),
            ("postgres", None, false, false),
            ("redis", timeout, false, true),
            ("redis", error, false, true),
        ];
        for (kind, failure, embedded, down) in cases {
            assert_eq!(is_down(kind, failure, embedded), down, "{kind} {failure:?} embedded={embedded}");
        }
        assert!(embedded("sqlite", "key-value"));
        assert!(!embedded("postgres", "key-value") && !embedded("sqlite", "redis"));
    }
}
