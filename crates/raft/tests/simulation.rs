//! The deterministic simulation of the raft core (`sim/`): many seeds of a few members
//! under message loss, delay, duplication, partitions, crashes and restarts, every step
//! checked. `cargo test` runs a few hundred seeds; `OXCD_SIM_SEEDS=N` runs N (a soak),
//! `OXCD_SIM_SEED=S` replays one seed exactly (the failure message prints it).

mod sim;

use sim::{Plan, Sim, Tally};

fn seeds(default: u64) -> u64 {
    std::env::var("OXCD_SIM_SEEDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn run_seeds(members: u64, first: u64, count: u64) -> Tally {
    let mut total = Tally::default();
    for seed in first..first + count {
        let t = Sim::new(seed, Plan::rough(members)).run();
        total.committed += t.committed;
        total.leaders += t.leaders;
        total.crashes += t.crashes;
        total.snapshots += t.snapshots;
        total.reads += t.reads;
        total.delivered += t.delivered;
    }
    println!(
        "{members} members, seeds {first}..{}: {total:?}",
        first + count
    );
    total
}

#[test]
fn three_members_survive_every_fault() {
    let t = run_seeds(3, 1, seeds(150));
    assert!(t.committed > 0 && t.crashes > 0 && t.snapshots > 0 && t.reads > 0);
}

#[test]
fn five_members_survive_every_fault() {
    let t = run_seeds(5, 1_000_000, seeds(100));
    assert!(t.committed > 0 && t.crashes > 0 && t.snapshots > 0 && t.reads > 0);
}

#[test]
fn a_seed_replays_exactly() {
    let seed = std::env::var("OXCD_SIM_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let a = Sim::new(seed, Plan::rough(3)).run();
    let b = Sim::new(seed, Plan::rough(3)).run();
    assert_eq!(format!("{a:?}"), format!("{b:?}"));
}
