//! The deterministic simulation of the raft core (`sim/`): many seeds of a few members
//! under message loss, delay, duplication, partitions, crashes and restarts, and
//! membership changes, and log format switches, every step checked. `cargo test` runs a few hundred seeds;
//! `OXCD_SIM_SEEDS=N` runs N per test (a soak: `OXCD_SIM_SEEDS=3000 cargo test --release
//! -p oxcd-raft --test simulation -- --nocapture`), `OXCD_SIM_SEED=S` replays one seed
//! exactly (a failure prints its seed).

mod sim;

use sim::{Plan, Sim, Tally};

fn seeds(default: u64) -> u64 {
    std::env::var("OXCD_SIM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run_seeds(plan: impl Fn() -> Plan, first: u64, count: u64) -> Tally {
    let mut total = Tally::default();
    for seed in first..first + count {
        total.add(&Sim::new(seed, plan()).run());
    }
    println!("{:?}, seeds {first}..{}: {total:?}", plan(), first + count);
    total
}

#[test]
fn three_members_survive_every_fault() {
    let t = run_seeds(|| Plan::rough(3), 1, seeds(120));
    assert!(t.committed > 0 && t.crashes > 0 && t.snapshots > 0 && t.reads > 0);
    assert!(t.switches > 0, "{t:?}");
}

#[test]
fn five_members_survive_every_fault() {
    let t = run_seeds(|| Plan::rough(5), 1_000_000, seeds(60));
    assert!(t.committed > 0 && t.crashes > 0 && t.snapshots > 0 && t.reads > 0);
}

#[test]
fn members_come_and_go_under_every_fault() {
    let t = run_seeds(|| Plan::reconfiguring(3), 2_000_000, seeds(150));
    assert!(t.added > 0 && t.promoted > 0 && t.removed > 0, "{t:?}");
}

#[test]
fn a_seed_replays_exactly() {
    let seed = std::env::var("OXCD_SIM_SEED")
        .ok()
        .and_then(|v| v.parse().ok());
    let plans = [Plan::rough(3), Plan::rough(5), Plan::reconfiguring(3)];
    for plan in plans {
        let seed = seed.unwrap_or(7);
        let a = Sim::new(seed, plan.clone()).run();
        let b = Sim::new(seed, plan).run();
        assert_eq!(a, b);
    }
}
