//! Writes a bbolt file from sorted buckets of sorted keys, in one pass: each page is
//! written once, as soon as it is full, so memory holds one page per tree level whatever
//! the file's size (a bulk load, as bbolt's `WriteTo` output would look after a
//! defragmentation: full pages, no free ones).
//!
//! Layout: pages 0 and 1 are reserved and written last (the metas, which name the root
//! page and the page count); every bucket's tree follows, leaves and branches
//! interleaved; the root bucket's tree comes last. Every bucket is a real tree (never
//! inline); bbolt reads both forms. No freelist page (`meta.freelist` = none), as etcd
//! writes its files: bbolt finds the free pages, of which there are none, by walking.
//!
//! Invariants checked on every call: bucket names strictly increase, keys strictly
//! increase inside a bucket, no key is empty or longer than bbolt's limit, no value is
//! longer than bbolt's limit. A refused call leaves the writer unusable (the file is
//! half-written and must be discarded).

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Write};

use crate::page::{
    BRANCH, BUCKET_ELEMENT, ELEMENT_SIZE, HEADER_SIZE, Header, LEAF, MAX_KEY_SIZE, MAX_VALUE_SIZE,
    Meta, NO_FREELIST, PAGE_SIZE,
};

/// Why a write was refused.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// An I/O error on the file.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Keys or bucket names out of order, or a key or value bbolt cannot hold.
    #[error("bbolt writer: {0}")]
    Invalid(String),
}

/// The transaction id written in meta 0 (meta 1 holds one less), as `tx.WriteTo` does:
/// even, so that each meta sits on page `txid % 2`.
const TXID: u64 = 2;

/// Writes a bbolt file. Call [`BoltWriter::bucket`], then [`BoltWriter::put`] for each of
/// its keys, for each bucket in name order; then [`BoltWriter::finish`].
pub struct BoltWriter {
    out: BufWriter<File>,
    next_pgid: u64,
    /// Each finished bucket: name and root page.
    buckets: Vec<(Vec<u8>, u64)>,
    /// The bucket being written.
    open: Option<(Vec<u8>, Tree)>,
}

impl BoltWriter {
    /// Starts a bbolt file in `file` (empty, or truncated here).
    pub fn new(file: File) -> Result<BoltWriter, WriteError> {
        file.set_len(0)?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        out.write_all(&[0u8; 2 * PAGE_SIZE])?;
        Ok(BoltWriter {
            out,
            next_pgid: 2,
            buckets: Vec::new(),
            open: None,
        })
    }

    /// Starts the bucket `name` (after every bucket so far, in byte order).
    pub fn bucket(&mut self, name: &[u8]) -> Result<(), WriteError> {
        self.close_bucket()?;
        if let Some((last, _)) = self.buckets.last()
            && name <= last.as_slice()
        {
            return Err(invalid(format!(
                "bucket {:?} after {:?}: names must increase",
                String::from_utf8_lossy(name),
                String::from_utf8_lossy(last)
            )));
        }
        check_key(name)?;
        self.open = Some((name.to_vec(), Tree::default()));
        Ok(())
    }

    /// Adds `key` = `value` to the open bucket (after every key so far).
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<(), WriteError> {
        check_key(key)?;
        if value.len() > MAX_VALUE_SIZE {
            return Err(invalid(format!(
                "value of {} bytes: too large",
                value.len()
            )));
        }
        let Some((_, tree)) = self.open.as_mut() else {
            return Err(invalid("put before any bucket".into()));
        };
        tree.add(
            &mut PageSink::new(&mut self.out, &mut self.next_pgid),
            0,
            key,
            value,
        )
    }

    /// Writes the root bucket and the metas, flushes, and returns the file and the
    /// database's size (`pgid * PAGE_SIZE`, bbolt's `tx.Size()`). Not synced.
    pub fn finish(mut self) -> Result<(File, u64), WriteError> {
        self.close_bucket()?;
        let mut root = Tree::default();
        let mut sink = PageSink::new(&mut self.out, &mut self.next_pgid);
        for (name, page) in &self.buckets {
            let mut header = [0u8; 16];
            header[..8].copy_from_slice(&page.to_le_bytes());
            root.add(&mut sink, BUCKET_ELEMENT, name, &header)?;
        }
        let root_page = root.finish(&mut sink)?;
        let pgid = self.next_pgid;
        let mut file = self
            .out
            .into_inner()
            .map_err(|e| WriteError::Io(e.into_error()))?;
        let meta = Meta {
            page_size: PAGE_SIZE as u32,
            root: root_page,
            freelist: NO_FREELIST,
            pgid,
            txid: TXID,
        };
        file.seek(SeekFrom::Start(0))?;
        file.write_all(&meta.page(0))?;
        file.write_all(
            &Meta {
                txid: TXID - 1,
                ..meta
            }
            .page(1),
        )?;
        file.seek(SeekFrom::End(0))?;
        Ok((file, pgid * PAGE_SIZE as u64))
    }

    fn close_bucket(&mut self) -> Result<(), WriteError> {
        if let Some((name, tree)) = self.open.take() {
            let root = tree.finish(&mut PageSink::new(&mut self.out, &mut self.next_pgid))?;
            self.buckets.push((name, root));
        }
        Ok(())
    }
}

fn invalid(why: String) -> WriteError {
    WriteError::Invalid(why)
}

fn check_key(key: &[u8]) -> Result<(), WriteError> {
    if key.is_empty() {
        return Err(invalid("empty key".into()));
    }
    if key.len() > MAX_KEY_SIZE {
        return Err(invalid(format!("key of {} bytes: too large", key.len())));
    }
    Ok(())
}

/// Where finished pages go: the next page numbers of the file, in order.
struct PageSink<'a> {
    out: &'a mut BufWriter<File>,
    next_pgid: &'a mut u64,
}

impl<'a> PageSink<'a> {
    fn new(out: &'a mut BufWriter<File>, next_pgid: &'a mut u64) -> PageSink<'a> {
        PageSink { out, next_pgid }
    }

    /// Writes `node` as the next page(s); returns its page number.
    fn write(&mut self, node: &Node) -> Result<u64, WriteError> {
        let id = *self.next_pgid;
        let image = node.image(id);
        self.out.write_all(&image)?;
        *self.next_pgid += (image.len() / PAGE_SIZE) as u64;
        Ok(id)
    }
}

/// One bucket's B+tree being built bottom-up: the page filling at each level (0 = the
/// leaves), and how many pages each level has written.
#[derive(Default)]
struct Tree {
    levels: Vec<(Node, u64)>,
    /// The last key added (pages already written no longer hold it).
    last: Option<Vec<u8>>,
}

impl Tree {
    /// Adds a leaf element.
    fn add(
        &mut self,
        sink: &mut PageSink<'_>,
        flags: u32,
        key: &[u8],
        value: &[u8],
    ) -> Result<(), WriteError> {
        if self.levels.is_empty() {
            self.levels.push((Node::new(LEAF), 0));
        }
        if let Some(last) = &self.last
            && key <= last.as_slice()
        {
            return Err(invalid(format!(
                "key {:?} after {:?}: keys must increase",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(last)
            )));
        }
        self.last = Some(key.to_vec());
        self.push(sink, 0, Element::leaf(flags, key, value))
    }

    /// Adds `e` at `level`, writing that level's page first when `e` would not fit.
    fn push(
        &mut self,
        sink: &mut PageSink<'_>,
        level: usize,
        e: Element,
    ) -> Result<(), WriteError> {
        if self.levels[level].0.is_full_for(&e) {
            self.write_level(sink, level)?;
        }
        self.levels[level].0.push(e);
        Ok(())
    }

    /// Writes the page of `level` and adds a pointer to it one level up.
    fn write_level(&mut self, sink: &mut PageSink<'_>, level: usize) -> Result<(), WriteError> {
        let kind = self.levels[level].0.kind;
        let node = std::mem::replace(&mut self.levels[level].0, Node::new(kind));
        let first = node.first_key().to_vec();
        let id = sink.write(&node)?;
        self.levels[level].1 += 1;
        if self.levels.len() == level + 1 {
            self.levels.push((Node::new(BRANCH), 0));
        }
        self.push(sink, level + 1, Element::branch(first, id))
    }

    /// Writes what is left, bottom-up; returns the root page.
    fn finish(mut self, sink: &mut PageSink<'_>) -> Result<u64, WriteError> {
        if self.levels.is_empty() {
            return sink.write(&Node::new(LEAF));
        }
        let mut level = 0;
        loop {
            let top = level + 1 == self.levels.len();
            if top && self.levels[level].1 == 0 {
                // Nothing written at this level: its one page is the root.
                return sink.write(&self.levels[level].0);
            }
            // A level that has written pages always holds at least one element more
            // (it writes only to make room for the next).
            self.write_level(sink, level)?;
            level += 1;
        }
    }
}

/// A leaf element (`flags`, key, value) or a branch element (key, child page).
struct Element {
    flags: u32,
    key: Vec<u8>,
    value: Vec<u8>,
    child: u64,
}

impl Element {
    fn leaf(flags: u32, key: &[u8], value: &[u8]) -> Element {
        Element {
            flags,
            key: key.to_vec(),
            value: value.to_vec(),
            child: 0,
        }
    }

    fn branch(key: Vec<u8>, child: u64) -> Element {
        Element {
            flags: 0,
            key,
            value: Vec::new(),
            child,
        }
    }

    fn size(&self) -> usize {
        ELEMENT_SIZE + self.key.len() + self.value.len()
    }
}

/// One page being filled.
struct Node {
    kind: u16,
    elements: Vec<Element>,
    size: usize,
}

impl Node {
    fn new(kind: u16) -> Node {
        Node {
            kind,
            elements: Vec::new(),
            size: HEADER_SIZE,
        }
    }

    /// Whether `e` would push a non-empty page past one page (a lone element larger
    /// than a page gets a page with overflow).
    fn is_full_for(&self, e: &Element) -> bool {
        !self.elements.is_empty()
            && (self.size + e.size() > PAGE_SIZE || self.elements.len() >= u16::MAX as usize - 1)
    }

    fn push(&mut self, e: Element) {
        self.size += e.size();
        self.elements.push(e);
    }

    fn first_key(&self) -> &[u8] {
        self.elements
            .first()
            .map(|e| e.key.as_slice())
            .unwrap_or(&[])
    }

    /// The page image at page number `id`: header, elements, then keys and values packed
    /// in element order; whole pages.
    fn image(&self, id: u64) -> Vec<u8> {
        let pages = self.size.div_ceil(PAGE_SIZE).max(1);
        let mut buf = vec![0u8; pages * PAGE_SIZE];
        Header {
            id,
            flags: self.kind,
            count: self.elements.len() as u16,
            overflow: (pages - 1) as u32,
        }
        .put(&mut buf);
        let mut data = HEADER_SIZE + ELEMENT_SIZE * self.elements.len();
        for (i, e) in self.elements.iter().enumerate() {
            let at = HEADER_SIZE + ELEMENT_SIZE * i;
            let pos = (data - at) as u32;
            let el = &mut buf[at..at + ELEMENT_SIZE];
            if self.kind == LEAF {
                el[0..4].copy_from_slice(&e.flags.to_le_bytes());
                el[4..8].copy_from_slice(&pos.to_le_bytes());
                el[8..12].copy_from_slice(&(e.key.len() as u32).to_le_bytes());
                el[12..16].copy_from_slice(&(e.value.len() as u32).to_le_bytes());
            } else {
                el[0..4].copy_from_slice(&pos.to_le_bytes());
                el[4..8].copy_from_slice(&(e.key.len() as u32).to_le_bytes());
                el[8..16].copy_from_slice(&e.child.to_le_bytes());
            }
            buf[data..data + e.key.len()].copy_from_slice(&e.key);
            data += e.key.len();
            buf[data..data + e.value.len()].copy_from_slice(&e.value);
            data += e.value.len();
        }
        buf
    }
}
