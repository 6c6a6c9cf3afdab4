//! What the side-by-side benchmarks that start their own clusters share
//! (`learner-catchup`, `backup`, `gateway`; `compare` takes its systems, round loop,
//! date and report writing from here too): the [`Bench`] trait each implements and the
//! one runner, [`run`]; their common flags; the two systems and their binaries; rounds
//! that run them one after the other on the same disk with the order alternating; and
//! the written report (markdown, raw figures as JSON beside it). [`table`] renders the
//! tables of such a report.
//!
//! Invariants ([`Systems::rounds`], which [`run`] uses): a round's directory is emptied before a system runs in it, and its data
//! dirs are removed after (the logs stay); every binary named is checked to exist before
//! anything starts.

pub mod table;

use std::path::{Path, PathBuf};

use clap::Args;
use serde::Serialize;

/// The flags every side-by-side benchmark takes.
#[derive(Debug, Clone, Args)]
pub struct Flags {
    /// The etcd binary (its offline tool, etcdutl, is taken from beside it).
    #[arg(long, default_value = "/tmp/etcd-3.5/bin/etcd")]
    pub etcd: PathBuf,
    /// The oxcd binary (default: `oxcd` beside this program; oxcdutl is taken from
    /// beside it).
    #[arg(long)]
    pub oxcd: Option<PathBuf>,
    /// Parent of the members' data dirs and logs, the same disk for both systems
    /// (default: /tmp/oxcd-<benchmark>): one directory per round and system, whose
    /// data dirs are removed after it (the logs are kept).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Where the markdown report goes (a .json with the raw figures goes beside it);
    /// default bench/results/<date>-<benchmark>.md.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Measures each system this many times, the order alternating (etcd first in odd
    /// rounds).
    #[arg(long, default_value_t = 1)]
    pub rounds: usize,
    /// Run only one system: etcd or oxcd.
    #[arg(long)]
    pub only: Option<String>,
}

impl Flags {
    /// The parent of benchmark `bench`'s data.
    pub fn dir(&self, bench: &str) -> PathBuf {
        self.dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(format!("/tmp/oxcd-{bench}")))
    }
}

/// A side-by-side benchmark, implemented by its flags: its name, what it measures on
/// one system in one round and how it reports the rounds. [`run`] does the rest, the
/// same for every benchmark.
pub trait Bench {
    /// Its subcommand, and the name of its default data dir and report.
    const NAME: &'static str;
    /// What one system's round measures.
    type Outcome: Measured + Serialize;

    /// The flags every side-by-side benchmark takes.
    fn flags(&self) -> &Flags;

    /// One system's round: `binary` (of `system`) on a fresh cluster under `dir`.
    fn measure(
        &self,
        system: &str,
        binary: &Path,
        dir: &Path,
    ) -> impl Future<Output = Result<Self::Outcome, String>>;

    /// The markdown report of every round; `versions` names each system's binary.
    fn markdown(
        &self,
        date: &str,
        versions: &[(String, String, String)],
        rounds: &[Round<Self::Outcome>],
    ) -> String;

    /// The parent of the benchmark's data.
    fn dir(&self) -> PathBuf {
        self.flags().dir(Self::NAME)
    }
}

/// Runs benchmark `b`: every round of [`Bench::measure`], then its report written
/// with the raw figures.
pub async fn run<B: Bench>(b: &B) -> Result<(), String> {
    let flags = b.flags();
    let oxcd = flags.oxcd.clone().unwrap_or_else(oxcd_beside_this_program);
    let systems = Systems::new(&flags.etcd, oxcd, flags.only.as_deref())?;
    let rounds = systems
        .rounds(flags.rounds, &b.dir(), async |system, binary, dir| {
            b.measure(system, binary, dir).await
        })
        .await?;
    let date = today();
    let out = flags
        .out
        .clone()
        .unwrap_or_else(|| PathBuf::from(format!("bench/results/{date}-{}.md", B::NAME)));
    let md = b.markdown(&date, &systems.versions(), &rounds);
    write_report(&out, &md, &rounds)
}

/// Today's date (UTC) as YYYY-MM-DD, which names a report by default.
pub fn today() -> String {
    chrono::Utc::now().format("%Y-%m-%d").to_string()
}

/// `oxcd` in this program's directory (`target/release/oxcd` when unknown).
pub fn oxcd_beside_this_program() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("oxcd")))
        .unwrap_or_else(|| PathBuf::from("target/release/oxcd"))
}

/// What one system's measurement in a round is: it names its system.
pub trait Measured {
    fn system(&self) -> &str;
}

/// One round: each system's outcome, in the order they ran.
#[derive(Debug, Clone, Serialize)]
pub struct Round<O>(pub Vec<O>);

impl<O: Measured> Round<O> {
    pub fn of(&self, system: &str) -> Option<&O> {
        self.0.iter().find(|o| o.system() == system)
    }

    /// The systems, in the order they ran.
    pub fn order(&self) -> Vec<&str> {
        self.0.iter().map(|o| o.system()).collect()
    }
}

/// The systems a run measures, each with its binary: etcd, then oxcd, or only one.
pub struct Systems(Vec<(&'static str, PathBuf)>);

impl Systems {
    /// etcd's and oxcd's binaries, or the one `only` names; an error when a binary
    /// is missing or `only` names neither.
    pub fn new(etcd: &Path, oxcd: PathBuf, only: Option<&str>) -> Result<Systems, String> {
        if let Some(o) = only
            && o != "etcd"
            && o != "oxcd"
        {
            return Err(format!("--only takes etcd or oxcd, not {o:?}"));
        }
        let all = [("etcd", etcd.to_path_buf()), ("oxcd", oxcd)];
        let chosen: Vec<_> = all
            .into_iter()
            .filter(|(name, _)| only.is_none_or(|o| o == *name))
            .collect();
        for (name, binary) in &chosen {
            if !binary.exists() {
                return Err(format!("{name} binary {} not found", binary.display()));
            }
        }
        Ok(Systems(chosen))
    }

    /// The systems in the order round `round` (from 0) runs them: etcd first in odd
    /// rounds counted from 1.
    pub fn in_order(&self, round: usize) -> Vec<(&'static str, &Path)> {
        let mut order: Vec<_> = self.0.iter().map(|(n, b)| (*n, b.as_path())).collect();
        if round % 2 == 1 {
            order.reverse();
        }
        order
    }

    /// (system, binary, its `--version`) of each system, for the report's header.
    pub fn versions(&self) -> Vec<(String, String, String)> {
        self.0
            .iter()
            .map(|(n, b)| (n.to_string(), b.display().to_string(), version(b)))
            .collect()
    }

    /// Runs `rounds` rounds (at least one) of `measure(round, system, binary)`, `round`
    /// counted from 0, each system in the order [`Systems::in_order`] gives; stops at
    /// the first error.
    pub async fn each_round<O>(
        &self,
        rounds: usize,
        mut measure: impl AsyncFnMut(usize, &str, &Path) -> Result<O, String>,
    ) -> Result<Vec<Round<O>>, String> {
        let mut all = Vec::new();
        for round in 0..rounds.max(1) {
            let mut this = Vec::new();
            for (name, binary) in self.in_order(round) {
                if round > 0 || !this.is_empty() {
                    settle().await;
                }
                this.push(measure(round, name, binary).await?);
            }
            all.push(Round(this));
        }
        Ok(all)
    }

    /// [`Systems::each_round`] of `measure(system, binary, dir)`, `dir` being
    /// `<parent>/round<N>-<system>`, emptied before and its data dirs removed after
    /// (the members' logs are kept).
    pub async fn rounds<O>(
        &self,
        rounds: usize,
        parent: &Path,
        mut measure: impl AsyncFnMut(&str, &Path, &Path) -> Result<O, String>,
    ) -> Result<Vec<Round<O>>, String> {
        self.each_round(rounds, async |round, name, binary| {
            eprintln!("== round {}: {name} ({})", round + 1, binary.display());
            let dir = parent.join(format!("round{}-{name}", round + 1));
            let _ = std::fs::remove_dir_all(&dir);
            let outcome = measure(name, binary, &dir).await;
            remove_data_dirs(&dir);
            eprintln!("   members' logs kept: {}/*.log", dir.display());
            outcome
        })
        .await
    }
}

/// Lets the disk finish what the system before left (its files deleted, its dirty
/// pages) before the next one starts: `sync`, then a pause. Without it, oxcd's put p99
/// at 1000 clients was 182-222 ms whenever it ran right after etcd and 71-125 ms when
/// it ran first, round after round, while etcd's did not depend on its place.
async fn settle() {
    let _ = tokio::process::Command::new("sync").status().await;
    tokio::time::sleep(std::time::Duration::from_secs(SETTLE_SECS)).await;
}

/// The pause between two systems, after `sync`.
const SETTLE_SECS: u64 = 5;

/// The first lines of `binary --version` that give a version, joined.
fn version(binary: &Path) -> String {
    let out = std::process::Command::new(binary)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    out.lines()
        .filter(|l| l.contains("Version:") && !l.starts_with("Go "))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Removes the directories under `dir` (the members' data dirs), keeping its files
/// (their logs): the next system needs the disk space, the logs tell what happened.
fn remove_data_dirs(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

/// Writes the markdown report `md` to `out` and `raw` as JSON beside it (`.json`), and
/// prints the report.
pub fn write_report(out: &Path, md: &str, raw: &impl Serialize) -> Result<(), String> {
    if let Some(parent) = out.parent()
        && !parent.as_os_str().is_empty()
    {
        std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
    }
    std::fs::write(out, md).map_err(|e| format!("{}: {e}", out.display()))?;
    let json = serde_json::to_string_pretty(raw).map_err(|e| e.to_string())?;
    let json_path = out.with_extension("json");
    std::fs::write(&json_path, json).map_err(|e| format!("{}: {e}", json_path.display()))?;
    println!("{md}");
    eprintln!(
        "report: {} (raw figures: {})",
        out.display(),
        json_path.display()
    );
    Ok(())
}

/// The device and file system that hold `dir` (its nearest existing ancestor), as `df`
/// names them: `/dev/vda (ext4)`; "unknown" when `df` does not answer.
pub fn disk_of(dir: &Path) -> String {
    let existing = dir.ancestors().find(|d| d.exists()).unwrap_or(dir);
    let out = std::process::Command::new("df")
        .args(["--output=source,fstype"])
        .arg(existing)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    let mut fields = out.lines().nth(1).unwrap_or_default().split_whitespace();
    match (fields.next(), fields.next()) {
        (Some(source), Some(fstype)) => format!("{source} ({fstype})"),
        _ => "unknown".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn systems_alternate_and_only_is_checked() {
        let here = std::env::current_exe().expect("this test's binary");
        let s = Systems::new(&here, here.clone(), None).expect("both exist");
        let names = |r| s.in_order(r).iter().map(|(n, _)| *n).collect::<Vec<_>>();
        assert_eq!(names(0), ["etcd", "oxcd"]);
        assert_eq!(names(1), ["oxcd", "etcd"]);
        let one = Systems::new(&here, here.clone(), Some("oxcd")).expect("oxcd exists");
        assert_eq!(one.in_order(1).len(), 1);
        assert!(Systems::new(&here, here.clone(), Some("zetcd")).is_err());
        let missing = Systems::new(Path::new("/no/such/etcd"), here, None);
        assert!(missing.is_err_and(|e| e.contains("/no/such/etcd not found")));
    }

    #[test]
    fn today_is_a_date() {
        let d = today();
        assert_eq!(d.len(), 10);
        assert!(d.starts_with("20"), "{d}");
    }

    #[test]
    fn the_disk_of_a_directory_not_made_yet_is_its_parents() {
        let d = disk_of(Path::new("/tmp/no/such/dir/yet"));
        assert_ne!(d, "unknown");
    }
}
