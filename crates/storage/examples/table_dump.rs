//! Prints every row of every registered table of a stopped member's backend, one line
//! per row (`table key-hex value-crc32c value-hex-prefix hashed`), for diffing two members
//! whose state hashes differ: `cargo run --example table_dump -- <member>/snap/db`.

use std::process::ExitCode;

use oxcd_storage::tables::TABLES;
use redb::{Database, ReadableDatabase};

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn main() -> ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: table_dump <backend file>");
        return ExitCode::from(2);
    };
    let db = match Database::open(&path) {
        Ok(db) => db,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let tx = match db.begin_read() {
        Ok(tx) => tx,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    for spec in TABLES {
        let scanned = spec.scan(&tx, |k, v| {
            let shown = &v[..v.len().min(64)];
            println!(
                "{} {} {:08x} {} {}",
                spec.name,
                hex(k),
                crc32c::crc32c(v),
                hex(shown),
                spec.hashed(k)
            );
            true
        });
        if let Err(e) = scanned {
            eprintln!("{}: {e}", spec.name);
            return ExitCode::FAILURE;
        }
    }
    ExitCode::SUCCESS
}
