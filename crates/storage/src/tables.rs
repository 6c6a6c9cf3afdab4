//! The registry of backend tables: every table of replicated state and how its keys are
//! typed. Table creation, the snapshot codec and the state hash iterate [`TABLES`], so a
//! table listed here (leases, auth, members, ...) is created at open, carried by
//! snapshots and compared by the corruption check without further code.
//!
//! Invariants:
//! - Tags are unique and never reused: they are written in snapshot files.
//! - The order of [`TABLES`] is the order of snapshot records and of the state hash.

use redb::{ReadTransaction, ReadableTable, Table, TableDefinition, WriteTransaction};

use crate::schema;

/// How a table's keys are typed in redb.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyKind {
    /// `&[u8]` keys.
    Bytes,
    /// `&str` keys (UTF-8 checked by redb's type).
    Text,
}

/// One backend table of replicated state. Values are always bytes.
#[derive(Debug, Clone, Copy)]
pub struct TableSpec {
    /// The table's tag in snapshot files.
    pub tag: u8,
    /// The redb table name.
    pub name: &'static str,
    /// How its keys are typed.
    pub keys: KeyKind,
    /// Keys left out of the state hash: they record where in the raft log a member is,
    /// which differs between members holding the same data.
    pub unhashed: &'static [&'static str],
}

/// Every table of replicated state, in snapshot and hash order.
pub const TABLES: &[TableSpec] = &[
    TableSpec {
        tag: 1,
        name: schema::KEY_NAME,
        keys: KeyKind::Bytes,
        unhashed: &[],
    },
    TableSpec {
        tag: 2,
        name: schema::META_NAME,
        keys: KeyKind::Text,
        unhashed: schema::RAFT_POSITION_KEYS,
    },
    TableSpec {
        tag: 3,
        name: schema::LEASE_NAME,
        keys: KeyKind::Bytes,
        unhashed: &[],
    },
    TableSpec {
        tag: 4,
        name: schema::AUTH_NAME,
        keys: KeyKind::Bytes,
        unhashed: &[],
    },
    TableSpec {
        tag: 5,
        name: schema::AUTH_USERS_NAME,
        keys: KeyKind::Bytes,
        unhashed: &[],
    },
    TableSpec {
        tag: 6,
        name: schema::AUTH_ROLES_NAME,
        keys: KeyKind::Bytes,
        unhashed: &[],
    },
    TableSpec {
        tag: 7,
        name: schema::MEMBERS_NAME,
        keys: KeyKind::Bytes,
        unhashed: &[],
    },
    TableSpec {
        tag: 8,
        name: schema::MEMBERS_REMOVED_NAME,
        keys: KeyKind::Bytes,
        unhashed: &[],
    },
];

impl TableSpec {
    pub(crate) fn bytes(&self) -> TableDefinition<'static, &'static [u8], &'static [u8]> {
        TableDefinition::new(self.name)
    }

    pub(crate) fn text(&self) -> TableDefinition<'static, &'static str, &'static [u8]> {
        TableDefinition::new(self.name)
    }

    /// Calls `row(key, value)` for every row in key order, until it returns false.
    /// Returns whether every row was visited.
    pub fn scan(
        &self,
        tx: &ReadTransaction,
        mut row: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<bool, redb::Error> {
        match self.keys {
            KeyKind::Bytes => {
                for r in tx.open_table(self.bytes())?.iter()? {
                    let (k, v) = r?;
                    if !row(k.value(), v.value()) {
                        return Ok(false);
                    }
                }
            }
            KeyKind::Text => {
                for r in tx.open_table(self.text())?.iter()? {
                    let (k, v) = r?;
                    if !row(k.value().as_bytes(), v.value()) {
                        return Ok(false);
                    }
                }
            }
        }
        Ok(true)
    }

    /// Whether the row with this key counts in the state hash.
    pub fn hashed(&self, key: &[u8]) -> bool {
        !self.unhashed.iter().any(|u| u.as_bytes() == key)
    }
}

/// A CRC-32C over every hashed row of every registered table, in registry and key order:
/// the state that members holding the same data agree on (Maintenance.Hash).
pub fn state_hash(tx: &ReadTransaction) -> Result<u32, redb::Error> {
    state_hashes(tx).map(|(h, _)| h)
}

/// [`state_hash`] and, in the same scan, a CRC-32C of each table's hashed rows alone
/// (in [`TABLES`] order), so that two members whose state differs can say where.
pub fn state_hashes(tx: &ReadTransaction) -> Result<(u32, Vec<u32>), redb::Error> {
    let mut h = 0u32;
    let mut tables = Vec::with_capacity(TABLES.len());
    for spec in TABLES {
        let mut t = 0u32;
        spec.scan(tx, |k, v| {
            if spec.hashed(k) {
                h = crc32c::crc32c_append(crc32c::crc32c_append(h, k), v);
                t = crc32c::crc32c_append(crc32c::crc32c_append(t, k), v);
            }
            true
        })?;
        tables.push(t);
    }
    Ok((h, tables))
}

/// The names of the tables whose hashes differ between `a` and `b` (per-table hashes
/// from [`state_hashes`]); every table when their lengths differ.
pub fn differing_tables(a: &[u32], b: &[u32]) -> Vec<&'static str> {
    TABLES
        .iter()
        .enumerate()
        .filter(|(i, _)| a.len() != b.len() || a.get(*i) != b.get(*i))
        .map(|(_, spec)| spec.name)
        .collect()
}

/// Makes sure every registered table exists.
pub fn create_all(tx: &WriteTransaction) -> Result<(), redb::Error> {
    for spec in TABLES {
        match spec.keys {
            KeyKind::Bytes => drop(tx.open_table(spec.bytes())?),
            KeyKind::Text => drop(tx.open_table(spec.text())?),
        }
    }
    Ok(())
}

/// One open table of any kind, for writers that take rows by tag (snapshot install).
enum OpenTable<'t> {
    Bytes(Table<'t, &'static [u8], &'static [u8]>),
    Text(Table<'t, &'static str, &'static [u8]>),
}

/// Why a row could not be written by [`Replacement::insert`].
#[derive(Debug, thiserror::Error)]
pub enum RowError {
    /// No registered table has this tag.
    #[error("unknown table {0}")]
    UnknownTable(u8),
    /// A text-keyed table got a key that is not UTF-8.
    #[error("key in table {0} is not UTF-8")]
    NotText(&'static str),
    /// redb failed.
    #[error(transparent)]
    Backend(#[from] redb::Error),
}

/// Every registered table emptied in one write transaction, to be refilled row by row.
pub struct Replacement<'t> {
    open: Vec<(&'static TableSpec, OpenTable<'t>)>,
}

impl<'t> Replacement<'t> {
    /// Deletes and recreates every registered table in `tx`.
    pub fn begin(tx: &'t WriteTransaction) -> Result<Replacement<'t>, redb::Error> {
        let mut open = Vec::with_capacity(TABLES.len());
        for spec in TABLES {
            let table = match spec.keys {
                KeyKind::Bytes => {
                    tx.delete_table(spec.bytes())?;
                    OpenTable::Bytes(tx.open_table(spec.bytes())?)
                }
                KeyKind::Text => {
                    tx.delete_table(spec.text())?;
                    OpenTable::Text(tx.open_table(spec.text())?)
                }
            };
            open.push((spec, table));
        }
        Ok(Replacement { open })
    }

    /// Inserts one row into the table tagged `tag`.
    pub fn insert(&mut self, tag: u8, key: &[u8], value: &[u8]) -> Result<(), RowError> {
        let (spec, table) = self
            .open
            .iter_mut()
            .find(|(s, _)| s.tag == tag)
            .ok_or(RowError::UnknownTable(tag))?;
        match table {
            OpenTable::Bytes(t) => {
                t.insert(key, value).map_err(redb::Error::from)?;
            }
            OpenTable::Text(t) => {
                let k = std::str::from_utf8(key).map_err(|_| RowError::NotText(spec.name))?;
                t.insert(k, value).map_err(redb::Error::from)?;
            }
        }
        Ok(())
    }
}
