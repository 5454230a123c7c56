//! Admission: how many instances of each HTTP component may be alive at
//! once, sized from the manifest (D-F17).
//!
//! The pooling allocator has fixed totals of linear memories and tables
//! (Spin's defaults: 1,000 and 2,000). Each component needs a known number of
//! both per instance (`Component::resources_required`: the composed `api`
//! entry needs 12 memories and 24 tables). Left alone, a burst on one
//! component takes every slot and the others can make no instance at all:
//! under 1,000 simultaneous `/events` streams the cron ticks failed.
//!
//! So each component is given a reserve of [`RESERVE`] instances that no
//! other component can take, and the rest of the pool is shared first come,
//! first served. An instance holds a [`Lease`] for its life; when a
//! component's reserve is in use and the shared rest cannot fit one more,
//! making an instance fails at once with [`AtCapacity`], and the caller
//! retries a little later or answers 503.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use anyhow::{Result, bail};

/// Instances every HTTP component can always make.
pub const RESERVE: usize = 2;

/// Memories and tables one instance of a component takes from the pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Need {
    pub memories: i64,
    pub tables: i64,
}

/// The pool's totals: what the engine was configured with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    pub memories: i64,
    pub tables: i64,
}

/// What is left of the pool once every component's reserve is set aside.
pub struct Shared {
    memories: AtomicI64,
    tables: AtomicI64,
}

impl Shared {
    /// Sets aside [`RESERVE`] instances of each need; refuses a pool too
    /// small to hold them, naming the setting to raise.
    pub fn new(totals: Totals, needs: &[(&str, Need)]) -> Result<Arc<Self>> {
        let (mut memories, mut tables) = (totals.memories, totals.tables);
        for (_, need) in needs {
            memories -= RESERVE as i64 * need.memories;
            tables -= RESERVE as i64 * need.tables;
        }
        if memories < 0 || tables < 0 {
            let list: Vec<String> =
                needs.iter().map(|(id, n)| format!("{id}: {} memories, {} tables", n.memories, n.tables)).collect();
            bail!(
                "the instance pool ({} memories, {} tables) cannot hold {RESERVE} instances of every HTTP component \
                 ({}); raise SPIN_MAX_INSTANCE_COUNT (or SPIN_WASMTIME_TOTAL_MEMORIES and SPIN_WASMTIME_TOTAL_TABLES)",
                totals.memories,
                totals.tables,
                list.join("; ")
            );
        }
        Ok(Arc::new(Self { memories: AtomicI64::new(memories), tables: AtomicI64::new(tables) }))
    }

    fn take(&self, need: Need) -> bool {
        let took_memories = take(&self.memories, need.memories);
        if !took_memories {
            return false;
        }
        if !take(&self.tables, need.tables) {
            self.memories.fetch_add(need.memories, Ordering::SeqCst);
            return false;
        }
        true
    }

    fn give(&self, need: Need) {
        self.memories.fetch_add(need.memories, Ordering::SeqCst);
        self.tables.fetch_add(need.tables, Ordering::SeqCst);
    }

    /// What is free now.
    #[cfg(test)]
    pub fn free(&self) -> Totals {
        Totals { memories: self.memories.load(Ordering::SeqCst), tables: self.tables.load(Ordering::SeqCst) }
    }
}

/// Subtracts `n` from `cell` if that leaves it non-negative.
fn take(cell: &AtomicI64, n: i64) -> bool {
    cell.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |v| (v >= n).then_some(v - n)).is_ok()
}

/// One component's share: its need per instance and how many are alive.
pub struct Budget {
    need: Need,
    live: AtomicUsize,
    shared: Arc<Shared>,
}

impl Budget {
    pub fn new(need: Need, shared: Arc<Shared>) -> Arc<Self> {
        Arc::new(Self { need, live: AtomicUsize::new(0), shared })
    }

    /// Room for one more instance, or [`AtCapacity`].
    pub fn lease(self: &Arc<Self>) -> Result<Lease, AtCapacity> {
        let alive = self.live.fetch_add(1, Ordering::SeqCst);
        if alive < RESERVE {
            return Ok(Lease { budget: self.clone(), shared: false });
        }
        if self.shared.take(self.need) {
            return Ok(Lease { budget: self.clone(), shared: true });
        }
        self.live.fetch_sub(1, Ordering::SeqCst);
        Err(AtCapacity)
    }

    #[cfg(test)]
    pub fn live(&self) -> usize {
        self.live.load(Ordering::SeqCst)
    }
}

/// An instance's place in the pool, given back when dropped.
pub struct Lease {
    budget: Arc<Budget>,
    shared: bool,
}

impl Drop for Lease {
    fn drop(&mut self) {
        if self.shared {
            self.budget.shared.give(self.budget.need);
        }
        self.budget.live.fetch_sub(1, Ordering::SeqCst);
    }
}

/// No instance can be made now: the pool is in use.
#[derive(Debug)]
pub struct AtCapacity;

impl std::fmt::Display for AtCapacity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the instance pool is in use")
    }
}

impl std::error::Error for AtCapacity {}

#[cfg(test)]
mod tests {
    use super::*;

    const API: Need = Need { memories: 12, tables: 24 };
    const TICK: Need = Need { memories: 11, tables: 22 };

    #[test]
    fn a_burst_on_one_component_leaves_the_others_their_reserve() {
        let shared = Shared::new(Totals { memories: 1000, tables: 2000 }, &[("api", API), ("tick", TICK)]).unwrap();
        assert_eq!(shared.free(), Totals { memories: 1000 - 24 - 22, tables: 2000 - 48 - 44 });
        let api = Budget::new(API, shared.clone());
        let tick = Budget::new(TICK, shared.clone());
        let mut held = Vec::new();
        while let Ok(l) = api.lease() {
            held.push(l);
        }
        // 2 reserved plus floor(954 / 12) = 79 shared.
        assert_eq!(held.len(), 2 + 79);
        assert!(api.lease().is_err());
        let t1 = tick.lease().expect("tick's reserve");
        let t2 = tick.lease().expect("tick's reserve");
        assert!(tick.lease().is_err(), "the shared rest is taken");
        drop((t1, t2));
        held.truncate(10);
        assert_eq!(api.live(), 10);
        assert!(tick.lease().is_ok());
        drop(held);
        assert_eq!(shared.free(), Totals { memories: 954, tables: 1908 });
    }

    #[test]
    fn tables_bind_as_well_as_memories() {
        let shared = Shared::new(Totals { memories: 1000, tables: 100 }, &[("api", API)]).unwrap();
        let api = Budget::new(API, shared.clone());
        let held: Vec<_> = std::iter::from_fn(|| api.lease().ok()).collect();
        // 100 - 48 = 52 tables shared: two more instances.
        assert_eq!(held.len(), 4);
        assert_eq!(shared.free().memories, 1000 - 48, "a refused lease gives its memories back");
    }

    #[test]
    fn a_pool_too_small_for_the_reserves_is_refused_at_load() {
        let e = Shared::new(Totals { memories: 40, tables: 2000 }, &[("api", API), ("tick", TICK)]).err().unwrap();
        assert!(e.to_string().contains("SPIN_MAX_INSTANCE_COUNT"), "{e}");
        assert!(e.to_string().contains("api: 12 memories, 24 tables"), "{e}");
    }
}
