//! Writes a bbolt file from sorted buckets of sorted keys, in one pass: each page is
//! written once, as soon as it is full, so memory holds one page per tree level whatever
//! the file's size (a bulk load, as bbolt's `WriteTo` output would look after a
//! defragmentation: full pages, no free ones).
//!
//! Layout: pages 0 and 1 are the metas, which name the root page and the page count;
//! every bucket's tree follows, leaves and branches interleaved; the root bucket's tree
//! comes last. Into a file ([`BoltWriter::new`]) the metas are written last, over the
//! two pages reserved for them. Into a stream, which cannot go back, the same calls are
//! made twice: first to a [`BoltWriter::plan`], which writes nothing and learns the
//! [`Layout`], then to [`BoltWriter::with_layout`], which starts with the metas; the
//! layout depends only on the calls, so the same calls give the same file. Every bucket
//! is a real tree (never inline); bbolt reads both forms. No freelist page (`meta.freelist` = none), as etcd
//! writes its files: bbolt finds the free pages, of which there are none, by walking.
//!
//! Invariants checked on every call: bucket names strictly increase, keys strictly
//! increase inside a bucket, no key is empty or longer than bbolt's limit, no value is
//! longer than bbolt's limit. A refused call leaves the writer unusable (the file is
//! half-written and must be discarded).

use std::fs::File;
use std::io::{BufWriter, Seek, SeekFrom, Sink, Write};

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

/// Where the root bucket's tree and the end of the file fell: what the metas say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The root bucket's root page.
    pub root: u64,
    /// Pages in the file (bbolt's high-water mark).
    pub pgid: u64,
}

impl Layout {
    /// The database's size in bytes (`pgid * PAGE_SIZE`, bbolt's `tx.Size()`).
    pub fn size(&self) -> u64 {
        self.pgid * PAGE_SIZE as u64
    }

    /// Both meta pages, 0 then 1.
    fn metas(&self) -> Vec<u8> {
        let meta = Meta {
            page_size: PAGE_SIZE as u32,
            root: self.root,
            freelist: NO_FREELIST,
            pgid: self.pgid,
            txid: TXID,
        };
        let mut both = meta.page(0).to_vec();
        both.extend_from_slice(
            &Meta {
                txid: TXID - 1,
                ..meta
            }
            .page(1),
        );
        both
    }
}

/// Writes a bbolt file. Call [`BoltWriter::bucket`], then [`BoltWriter::put`] for each of
/// its keys, for each bucket in name order; then the `finish` of the writer's kind.
pub struct BoltWriter<W: Write = BufWriter<File>> {
    /// None: a plan, which only counts pages.
    out: Option<W>,
    next_pgid: u64,
    /// Each finished bucket: name and root page.
    buckets: Vec<(Vec<u8>, u64)>,
    /// The bucket being written.
    open: Option<(Vec<u8>, Tree)>,
    /// The layout announced by the metas already written (streams only).
    promised: Option<Layout>,
}

impl BoltWriter<BufWriter<File>> {
    /// Starts a bbolt file in `file` (empty, or truncated here).
    pub fn new(file: File) -> Result<Self, WriteError> {
        file.set_len(0)?;
        let mut out = BufWriter::with_capacity(1 << 20, file);
        out.write_all(&[0u8; 2 * PAGE_SIZE])?;
        Ok(Self::starting(Some(out), None))
    }

    /// Writes the root bucket and the metas, flushes, and returns the file and the
    /// database's size (`pgid * PAGE_SIZE`, bbolt's `tx.Size()`). Not synced.
    pub fn finish(mut self) -> Result<(File, u64), WriteError> {
        let layout = self.finish_trees()?;
        let Some(out) = self.out.take() else {
            return Err(invalid("a file writer without its file".into()));
        };
        let mut file = out
            .into_inner()
            .map_err(|e| WriteError::Io(e.into_error()))?;
        file.seek(SeekFrom::Start(0))?;
        file.write_all(&layout.metas())?;
        file.seek(SeekFrom::End(0))?;
        Ok((file, layout.size()))
    }
}

impl BoltWriter<Sink> {
    /// A writer that writes nothing and learns where the pages would fall.
    pub fn plan() -> Self {
        Self::starting(None, None)
    }

    /// The layout the calls made so far give.
    pub fn layout(mut self) -> Result<Layout, WriteError> {
        self.finish_trees()
    }
}

impl<W: Write> BoltWriter<W> {
    /// Starts a file of `layout` (from a [`BoltWriter::plan`] given the same calls) in
    /// `out`, metas first, every byte in order.
    pub fn with_layout(mut out: W, layout: Layout) -> Result<Self, WriteError> {
        out.write_all(&layout.metas())?;
        Ok(Self::starting(Some(out), Some(layout)))
    }

    /// Writes the root bucket; returns `out`. Fails if the calls did not give the
    /// layout the metas announced (the file would be unreadable).
    pub fn finish_stream(mut self) -> Result<W, WriteError> {
        let layout = self.finish_trees()?;
        if self.promised != Some(layout) {
            return Err(invalid(format!(
                "wrote {layout:?} after announcing {:?}: the calls differed from the plan's",
                self.promised
            )));
        }
        self.out
            .take()
            .ok_or_else(|| invalid("a stream writer without its stream".into()))
    }

    fn starting(out: Option<W>, promised: Option<Layout>) -> Self {
        BoltWriter {
            out,
            next_pgid: 2,
            buckets: Vec::new(),
            open: None,
            promised,
        }
    }

    /// Closes the open bucket and writes the root bucket's tree.
    fn finish_trees(&mut self) -> Result<Layout, WriteError> {
        self.close_bucket()?;
        let mut root = Tree::default();
        let mut sink = PageSink::new(self.out.as_mut(), &mut self.next_pgid);
        for (name, page) in &self.buckets {
            let mut header = [0u8; 16];
            header[..8].copy_from_slice(&page.to_le_bytes());
            root.add(&mut sink, BUCKET_ELEMENT, name, &header)?;
        }
        let root = root.finish(&mut sink)?;
        if let Some(out) = self.out.as_mut() {
            out.flush()?;
        }
        Ok(Layout {
            root,
            pgid: self.next_pgid,
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
            &mut PageSink::new(self.out.as_mut(), &mut self.next_pgid),
            0,
            key,
            value,
        )
    }

    fn close_bucket(&mut self) -> Result<(), WriteError> {
        if let Some((name, tree)) = self.open.take() {
            let root = tree.finish(&mut PageSink::new(self.out.as_mut(), &mut self.next_pgid))?;
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

/// Where finished pages go: the next page numbers of the file, in order (nowhere for a
/// plan, which only counts them).
struct PageSink<'a> {
    out: Option<&'a mut dyn Write>,
    next_pgid: &'a mut u64,
}

impl<'a> PageSink<'a> {
    fn new<W: Write>(out: Option<&'a mut W>, next_pgid: &'a mut u64) -> PageSink<'a> {
        PageSink {
            out: out.map(|w| w as &mut dyn Write),
            next_pgid,
        }
    }

    /// Writes `node` as the next page(s); returns its page number.
    fn write(&mut self, node: &Node) -> Result<u64, WriteError> {
        let id = *self.next_pgid;
        if let Some(out) = self.out.as_mut() {
            out.write_all(&node.image(id))?;
        }
        *self.next_pgid += node.pages() as u64;
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
        let written = sink.out.is_some();
        self.push(sink, 0, Element::leaf(flags, key, value, written))
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
    /// Empty in a plan, which needs only its length.
    value: Vec<u8>,
    value_len: usize,
    child: u64,
}

impl Element {
    /// A leaf element; its value copied only when `written` (not in a plan).
    fn leaf(flags: u32, key: &[u8], value: &[u8], written: bool) -> Element {
        Element {
            flags,
            key: key.to_vec(),
            value: if written { value.to_vec() } else { Vec::new() },
            value_len: value.len(),
            child: 0,
        }
    }

    fn branch(key: Vec<u8>, child: u64) -> Element {
        Element {
            flags: 0,
            key,
            value: Vec::new(),
            value_len: 0,
            child,
        }
    }

    fn size(&self) -> usize {
        ELEMENT_SIZE + self.key.len() + self.value_len
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

    /// Pages the node takes (more than one: an overflow).
    fn pages(&self) -> usize {
        self.size.div_ceil(PAGE_SIZE).max(1)
    }

    /// The page image at page number `id`: header, elements, then keys and values packed
    /// in element order; whole pages.
    fn image(&self, id: u64) -> Vec<u8> {
        let pages = self.pages();
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
