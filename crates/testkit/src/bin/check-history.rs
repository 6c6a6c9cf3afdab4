//! `check-history <history.json>`: runs the checker on a recorded history.

use std::process::ExitCode;

use oxcd_testkit::checker;
use oxcd_testkit::history::Operation;

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: check-history <history.json>");
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
    let started = std::time::Instant::now();
    match checker::check(&history) {
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
