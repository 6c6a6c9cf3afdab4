//! Prints the entries of a stopped member's WAL (a copy: opening may cut a torn tail),
//! one line per entry: index, term, type, data length and the data in hex (up to 96
//! bytes). `cargo run --example wal_entries -- <wal dir> [from] [to]`.

use std::process::ExitCode;

use oxcd_storage::wal::Wal;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    let Some(dir) = args.get(1) else {
        eprintln!("usage: wal_entries <wal dir> [from] [to]");
        return ExitCode::from(2);
    };
    let bound = |i: usize, d: u64| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (from, to) = (bound(2, 0), bound(3, u64::MAX));
    let replay = match Wal::open(std::path::Path::new(dir), 64 << 20) {
        Ok((_, r)) => r,
        Err(e) => {
            eprintln!("{dir}: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some((index, _)) = &replay.snapshot {
        println!("snapshot mark at {index}");
    }
    for (index, data) in replay
        .entries
        .iter()
        .filter(|(i, _)| (from..=to).contains(i))
    {
        match oxcd_raft::persist::decode_entry(*index, data) {
            Ok(e) => println!(
                "{index} term {} {:?} {} {}",
                e.term,
                e.get_entry_type(),
                e.data.len(),
                hex(&e.data[..e.data.len().min(96)])
            ),
            Err(e) => println!("{index} undecodable: {e}"),
        }
    }
    ExitCode::SUCCESS
}
