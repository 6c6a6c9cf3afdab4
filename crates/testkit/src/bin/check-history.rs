//! `check-history <history.json> [base-revision]`: runs the checker on a recorded
//! history (begun on a store at `base-revision`, 1 by default: the `overload`
//! scenario's history begins after the revision its storm's values took).

use std::process::ExitCode;

use oxcd_testkit::checker;
use oxcd_testkit::history::Operation;

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: check-history <history.json> [base-revision]");
        return ExitCode::from(2);
    };
    let history: Vec<Operation> = match std::fs::read(&path)
        .map_err(|e| e.to_string())
        .and_then(|b| serde_json::from_slice(&b).map_err(|e| e.to_string()))
    {
        Ok(h) => h,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::from(2);
        }
    };
    let base_rev = match std::env::args().nth(2).map(|b| b.parse::<i64>()) {
        None => 1,
        Some(Ok(b)) => b,
        Some(Err(e)) => {
            eprintln!("base-revision: {e}");
            return ExitCode::from(2);
        }
    };
    let started = std::time::Instant::now();
    match checker::check_from(&history, base_rev) {
        Ok(s) => {
            println!(
                "{} operations: {} linearized, {} serializable reads, final revision {}, in {:?}",
                history.len(),
                s.linearized,
                s.serializable,
                s.final_rev,
                started.elapsed()
            );
            println!("linearizable: ok");
            ExitCode::SUCCESS
        }
        Err(v) => {
            println!("{}", v.reason);
            for o in &v.window {
                println!("  {o:?}");
            }
            println!("linearizable: VIOLATION");
            ExitCode::from(1)
        }
    }
}
