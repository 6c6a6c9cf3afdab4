//! etcdutl's command tree as oxcdutl has it (`snapshot status`, `snapshot restore`,
//! `version`, `help`), each command's flags and help texts, and how a command line finds
//! its command (cobra's rules: flags skipped, unique prefixes accepted).

use crate::args::{Kind, Spec};

/// The program's name in help texts.
pub const PROG: &str = "oxcdutl";

/// A command, or a group of commands (`run` None).
pub struct Command {
    /// The words that name it (empty: the root).
    pub path: &'static [&'static str],
    /// cobra's `Use`.
    pub use_: &'static str,
    /// One-line description.
    pub short: &'static str,
    /// Its own flags (besides `-h` and the global `-w`).
    pub flags: &'static [Spec],
    /// Flags that must be given.
    pub required: &'static [&'static str],
    /// Whether it runs (a group prints its help).
    pub runs: bool,
}

/// The global `-w/--write-out`.
pub const WRITE_OUT: Spec = Spec {
    name: "write-out",
    short: Some('w'),
    kind: Kind::Str,
    default: "simple",
    usage: "set the output format (fields, json, protobuf, simple, table)",
};

const fn string(name: &'static str, default: &'static str, usage: &'static str) -> Spec {
    Spec {
        name,
        short: None,
        kind: Kind::Str,
        default,
        usage,
    }
}

/// The root.
pub const ROOT: Command = Command {
    path: &[],
    use_: PROG,
    short: "An administrative command line tool for oxcd (etcdutl compatible).",
    flags: &[],
    required: &[],
    runs: false,
};

/// `snapshot`.
pub const SNAPSHOT: Command = Command {
    path: &["snapshot"],
    use_: "snapshot <subcommand>",
    short: "Manages etcd node snapshots",
    flags: &[],
    required: &[],
    runs: false,
};

/// `snapshot status`.
pub const STATUS: Command = Command {
    path: &["snapshot", "status"],
    use_: "status <filename>",
    short: "Gets backend snapshot status of a given file",
    flags: &[],
    required: &[],
    runs: true,
};

/// `snapshot restore`'s flags, etcdutl 3.5.16's.
pub const RESTORE_FLAGS: &[Spec] = &[
    string("data-dir", "", "Path to the output data directory"),
    string(
        "wal-dir",
        "",
        "Path to the WAL directory (use --data-dir if none given)",
    ),
    string(
        "initial-cluster",
        "default=http://localhost:2380",
        "Initial cluster configuration for restore bootstrap",
    ),
    string(
        "initial-cluster-token",
        "etcd-cluster",
        "Initial cluster token for the etcd cluster during restore bootstrap",
    ),
    string(
        "initial-advertise-peer-urls",
        "http://localhost:2380",
        "List of this member's peer URLs to advertise to the rest of the cluster",
    ),
    string("name", "default", "Human-readable name for this member"),
    Spec {
        name: "skip-hash-check",
        short: None,
        kind: Kind::Bool,
        default: "false",
        usage: "Ignore snapshot integrity hash value (required if copied from data directory)",
    },
    Spec {
        name: "initial-memory-map-size",
        short: None,
        kind: Kind::Uint,
        default: "10737418240",
        usage: "Accepted for etcdutl compatibility; no effect (oxcd's backend maps no memory)",
    },
    Spec {
        name: "bump-revision",
        short: None,
        kind: Kind::Uint,
        default: "0",
        usage: "How much to increase the latest revision after restore",
    },
    Spec {
        name: "mark-compacted",
        short: None,
        kind: Kind::Bool,
        default: "false",
        usage: "Mark the latest revision after restore as the point of scheduled compaction (required if --bump-revision > 0, disallowed otherwise)",
    },
];

/// `snapshot restore`.
pub const RESTORE: Command = Command {
    path: &["snapshot", "restore"],
    use_: "restore <filename> --data-dir {output dir} [options]",
    short: "Restores an etcd member snapshot to an etcd directory",
    flags: RESTORE_FLAGS,
    required: &["data-dir"],
    runs: true,
};

/// `defrag`, etcdutl 3.5.16's.
pub const DEFRAG: Command = Command {
    path: &["defrag"],
    use_: "defrag",
    short: "Defragments the storage of the etcd",
    flags: &[string(
        "data-dir",
        "",
        "Required. Defragments a data directory not in use by etcd.",
    )],
    required: &["data-dir"],
    runs: true,
};

/// `migrate`, etcdutl 3.6.14's.
pub const MIGRATE: Command = Command {
    path: &["migrate"],
    use_: "migrate",
    short: "Migrates schema of etcd data dir files to make them compatible with different etcd version",
    flags: &[
        string("data-dir", "", "Path to the etcd data dir"),
        string(
            "target-version",
            "",
            "Target etcd version to migrate contents of data dir. Minimal value 3.5. Format \"X.Y\" for example 3.6.",
        ),
        Spec {
            name: "force",
            short: None,
            kind: Kind::Bool,
            default: "false",
            usage: "Ignore migration failure and forcefully override storage version. Not recommended.",
        },
    ],
    required: &["data-dir", "target-version"],
    runs: true,
};

/// `swap-to-etcd`, oxcd's own: the reverse binary swap.
pub const SWAP_TO_ETCD: Command = Command {
    path: &["swap-to-etcd"],
    use_: "swap-to-etcd",
    short: "Writes a stopped oxcd member's data dir as etcd's, for etcd to continue as the same member",
    flags: &[
        string(
            "data-dir",
            "",
            "Required. The data directory of a stopped oxcd member whose cluster began as etcd's.",
        ),
        string(
            "wal-dir",
            "",
            "The member's WAL directory, when it is not <data-dir>/member/wal.",
        ),
    ],
    required: &["data-dir"],
    runs: true,
};

/// `hashkv`, etcdutl 3.6.14's.
pub const HASHKV: Command = Command {
    path: &["hashkv"],
    use_: "hashkv <filename>",
    short: "Prints the KV history hash of a given file",
    flags: &[Spec {
        name: "rev",
        short: None,
        kind: Kind::Int,
        default: "0",
        usage: "maximum revision to hash (default: latest revision)",
    }],
    required: &[],
    runs: true,
};

/// `version`.
pub const VERSION: Command = Command {
    path: &["version"],
    use_: "version",
    short: "Prints the version of oxcdutl",
    flags: &[],
    required: &[],
    runs: true,
};

/// `help`.
pub const HELP: Command = Command {
    path: &["help"],
    use_: "help [command]",
    short: "Help about any command",
    flags: &[],
    required: &[],
    runs: true,
};

const ALL: &[&Command] = &[
    &ROOT,
    &DEFRAG,
    &HASHKV,
    &MIGRATE,
    &SNAPSHOT,
    &STATUS,
    &RESTORE,
    &SWAP_TO_ETCD,
    &VERSION,
    &HELP,
];

impl Command {
    /// Its name: the last word of its path.
    pub fn name(&self) -> &'static str {
        self.path.last().copied().unwrap_or(PROG)
    }

    /// Its words after the program's name, as help prints them.
    pub fn command_path(&self) -> String {
        std::iter::once(PROG)
            .chain(self.path.iter().copied())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The commands directly under it, by name.
    pub fn children(&self) -> Vec<&'static Command> {
        let mut v: Vec<&'static Command> = ALL
            .iter()
            .copied()
            .filter(|c| c.path.len() == self.path.len() + 1 && c.path.starts_with(self.path))
            .collect();
        v.sort_by_key(|c| c.name());
        v
    }

    /// Every flag it parses: its own, `-h`, and the global `-w`.
    pub fn all_flags(&self) -> Vec<Spec> {
        let mut v = self.flags.to_vec();
        v.push(help_flag(self));
        v.push(WRITE_OUT);
        v
    }
}

/// `-h/--help` of `cmd`.
pub fn help_flag(cmd: &Command) -> Spec {
    Spec {
        name: "help",
        short: Some('h'),
        kind: Kind::Bool,
        default: "false",
        usage: match cmd.path.last() {
            None => "help for oxcdutl",
            Some(&"defrag") => "help for defrag",
            Some(&"migrate") => "help for migrate",
            Some(&"swap-to-etcd") => "help for swap-to-etcd",
            Some(&"hashkv") => "help for hashkv",
            Some(&"snapshot") => "help for snapshot",
            Some(&"status") => "help for status",
            Some(&"restore") => "help for restore",
            Some(&"version") => "help for version",
            Some(_) => "help for help",
        },
    }
}

/// The command `argv` names and the arguments left once its words are taken out
/// (cobra's `Find`: flags are skipped, a flag without `=` taking the next word with it;
/// a unique prefix names a command). Err: the word no command of the root has.
pub fn find(argv: &[String]) -> Result<(&'static Command, Vec<String>), String> {
    let mut cmd: &'static Command = &ROOT;
    let mut rest = argv.to_vec();
    loop {
        let Some(word) = first_word(&rest) else {
            return Ok((cmd, rest));
        };
        let children = cmd.children();
        let exact = children.iter().find(|c| c.name() == word);
        let prefixed: Vec<_> = children
            .iter()
            .filter(|c| c.name().starts_with(word.as_str()))
            .collect();
        let next = match (exact, prefixed.as_slice()) {
            (Some(c), _) => Some(*c),
            (None, [only]) => Some(**only),
            _ => None,
        };
        match next {
            Some(c) => {
                if let Some(at) = rest.iter().position(|a| *a == word) {
                    rest.remove(at);
                }
                cmd = c;
            }
            None if cmd.path.is_empty() && !children.is_empty() => {
                return Err(word);
            }
            None => return Ok((cmd, rest)),
        }
    }
}

/// The first word of `args` that is not a flag or a flag's value.
fn first_word(args: &[String]) -> Option<String> {
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a == "--" {
            return None;
        }
        if let Some(name) = a.strip_prefix("--") {
            let takes_value = !name.contains('=') && !is_bool(name);
            i += if takes_value { 2 } else { 1 };
        } else if a.starts_with('-') && a.len() > 1 {
            let takes_value = a.len() == 2 && !is_bool_short(&a[1..]);
            i += if takes_value { 2 } else { 1 };
        } else {
            return Some(a.clone());
        }
    }
    None
}

fn is_bool(name: &str) -> bool {
    matches!(name, "help" | "skip-hash-check" | "mark-compacted")
}

fn is_bool_short(name: &str) -> bool {
    name == "h"
}
