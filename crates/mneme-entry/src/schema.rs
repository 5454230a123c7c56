//! The schema, in place before an instance's first request, under any
//! runner (#24): `spin up` runs no startup job, so a fresh database would
//! stay empty until someone called `/tick/migrate`. Each entry instance
//! asks the store once; a current schema costs one read, and after that an
//! atomic load per request. Concurrent first requests are safe: the store
//! serialises migrators (an advisory lock on PostgreSQL, `BEGIN IMMEDIATE`
//! on SQLite) and each re-reads what is applied under the lock.

use std::sync::atomic::{AtomicBool, Ordering};

use crate::mneme::store::store;

static READY: AtomicBool = AtomicBool::new(false);

/// Migrates the schema if it is behind this build; after one success in
/// this instance, does nothing. A failure is logged and the request goes
/// on: the route then meets the store's own error, as it would have.
pub async fn ensure() {
    if READY.load(Ordering::Acquire) {
        return;
    }
    match store::ensure_migrated().await {
        Ok(applied) => {
            for m in &applied {
                eprintln!("schema: applied migration {} ({})", m.version, m.name);
            }
            READY.store(true, Ordering::Release);
        }
        Err(e) => eprintln!("schema: the check failed ({}: {}); the request goes on", e.code, e.message),
    }
}
