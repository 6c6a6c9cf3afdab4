//! Reads a bbolt file (etcd's backend or snapshot): picks the meta page as bbolt does and
//! walks buckets in key order, reading pages with positional reads (no mmap, so a page
//! past the end of a truncated file is an error, not a SIGBUS).
//!
//! Invariant: nothing in the file is trusted. Every page number is checked against the
//! meta's page count and the file's length, every header against the page asked for,
//! every element offset against its page; damage is an error naming the page, never a
//! panic.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use crate::page::{
    BRANCH, BUCKET_ELEMENT, ELEMENT_SIZE, HEADER_SIZE, Header, LEAF, Meta, MetaError, u32_at,
    u64_at,
};

/// Why a file cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// An I/O error.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Neither meta page is valid (bbolt's message for the first one).
    #[error("{0}")]
    Meta(MetaError),
    /// The file is shorter than two pages.
    #[error("file size too small")]
    TooSmall,
    /// A page or element that cannot be right.
    #[error("page {page}: {why}")]
    Damaged {
        /// The page.
        page: u64,
        /// What is wrong with it.
        why: String,
    },
    /// No such bucket.
    #[error("bucket not found")]
    NoBucket,
}

/// An open bbolt file.
pub struct BoltReader {
    file: File,
    meta: Meta,
    page_size: u64,
    file_len: u64,
}

/// Called with each plain key and value of a bucket, in key order.
pub type KeyVisitor<'a> = dyn FnMut(&[u8], &[u8]) -> Result<(), ReadError> + 'a;

/// Called with each element of a leaf: its flags, key and value.
type ElementVisitor<'a> = dyn FnMut(u32, &[u8], &[u8]) -> Result<(), ReadError> + 'a;

/// Where a bucket's tree is: a root page, or an inline leaf page image.
#[derive(Debug, Clone)]
pub enum BucketRoot {
    /// A tree of real pages.
    Page(u64),
    /// A small bucket stored in its parent's value.
    Inline(Vec<u8>),
}

impl BoltReader {
    /// Opens `path` and picks its meta page: the valid one with the higher txid.
    pub fn open(path: &Path) -> Result<BoltReader, ReadError> {
        BoltReader::open_first(path, u64::MAX)
    }

    /// As [`BoltReader::open`], reading no byte at or past `len` (a snapshot file less
    /// its sha256 trailer): pages past it are damage.
    pub fn open_first(path: &Path, len: u64) -> Result<BoltReader, ReadError> {
        let file = File::open(path)?;
        let file_len = file.metadata()?.len().min(len);
        let mut first = vec![0u8; 4096.min(file_len as usize)];
        file.read_exact_at(&mut first, 0)?;
        let meta0 = Meta::parse(&first);
        // Meta 1 sits one page further; with meta 0 unreadable, bbolt probes the usual
        // page sizes.
        let page_sizes: Vec<u64> = match &meta0 {
            Ok(m) => vec![u64::from(m.page_size)],
            Err(_) => (0..15).map(|i| 1024u64 << i).collect(),
        };
        let mut meta1 = Err(MetaError::Invalid);
        for ps in page_sizes {
            if ps + 80 > file_len {
                break;
            }
            let mut buf = vec![0u8; 80];
            file.read_exact_at(&mut buf, ps)?;
            meta1 = Meta::parse(&buf);
            if meta1.is_ok() {
                break;
            }
        }
        let meta = match (meta0, meta1) {
            (Ok(a), Ok(b)) => {
                if b.txid > a.txid {
                    b
                } else {
                    a
                }
            }
            (Ok(a), Err(_)) | (Err(_), Ok(a)) => a,
            (Err(e), Err(_)) => return Err(ReadError::Meta(e)),
        };
        let page_size = u64::from(meta.page_size);
        if page_size < 1024 || file_len < 2 * page_size {
            return Err(ReadError::TooSmall);
        }
        Ok(BoltReader {
            file,
            meta,
            page_size,
            file_len,
        })
    }

    /// The meta page in use.
    pub fn meta(&self) -> Meta {
        self.meta
    }

    /// bbolt's `tx.Size()`: pages in use times the page size.
    pub fn size(&self) -> u64 {
        self.meta.pgid * self.page_size
    }

    /// The top-level buckets, in name order.
    pub fn buckets(&self) -> Result<Vec<(Vec<u8>, BucketRoot)>, ReadError> {
        let mut out = Vec::new();
        self.walk(&BucketRoot::Page(self.meta.root), &mut |flags, k, v| {
            if flags & BUCKET_ELEMENT != 0 {
                out.push((k.to_vec(), bucket_root(v)?));
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// The top-level bucket `name`.
    pub fn bucket(&self, name: &[u8]) -> Result<BucketRoot, ReadError> {
        self.buckets()?
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, r)| r)
            .ok_or(ReadError::NoBucket)
    }

    /// Calls `f(key, value)` for every plain key of the bucket at `root`, in key order
    /// (nested buckets are skipped).
    pub fn for_each(&self, root: &BucketRoot, f: &mut KeyVisitor<'_>) -> Result<(), ReadError> {
        self.walk(root, &mut |flags, k, v| {
            if flags & BUCKET_ELEMENT == 0 {
                f(k, v)
            } else {
                Ok(())
            }
        })
    }

    fn walk(&self, root: &BucketRoot, f: &mut ElementVisitor<'_>) -> Result<(), ReadError> {
        match root {
            BucketRoot::Inline(image) => leaf_elements(0, image, f),
            BucketRoot::Page(id) => self.walk_page(*id, 0, f),
        }
    }

    fn walk_page(
        &self,
        id: u64,
        depth: usize,
        f: &mut ElementVisitor<'_>,
    ) -> Result<(), ReadError> {
        if depth > 64 {
            return Err(damaged(id, "tree deeper than 64 levels (a cycle?)"));
        }
        let page = self.page(id)?;
        let h = Header::get(&page);
        match h.flags {
            LEAF => leaf_elements(id, &page, f),
            BRANCH => {
                for i in 0..usize::from(h.count) {
                    let at = HEADER_SIZE + ELEMENT_SIZE * i;
                    let el = element(id, &page, at)?;
                    let child = u64_at(el, 8);
                    self.walk_page(child, depth + 1, f)?;
                }
                Ok(())
            }
            other => Err(damaged(id, &format!("invalid type: {other:#x}"))),
        }
    }

    /// Reads page `id` with its overflow pages, checking its header.
    fn page(&self, id: u64) -> Result<Vec<u8>, ReadError> {
        if id < 2 || id >= self.meta.pgid {
            return Err(damaged(id, &format!("out of bounds: {}", self.meta.pgid)));
        }
        let at = id * self.page_size;
        if at + self.page_size > self.file_len {
            return Err(damaged(id, "past the end of the file"));
        }
        let mut first = vec![0u8; self.page_size as usize];
        self.file.read_exact_at(&mut first, at)?;
        let h = Header::get(&first);
        if h.id != id {
            return Err(damaged(id, &format!("header says page {}", h.id)));
        }
        if h.overflow == 0 {
            return Ok(first);
        }
        let pages = u64::from(h.overflow) + 1;
        if id + pages > self.meta.pgid || at + pages * self.page_size > self.file_len {
            return Err(damaged(id, "overflow past the end"));
        }
        // The header came with the first page: read only the pages after it.
        let mut all = first;
        all.resize((pages * self.page_size) as usize, 0);
        let ps = self.page_size as usize;
        self.file
            .read_exact_at(&mut all[ps..], at + self.page_size)?;
        Ok(all)
    }
}

fn damaged(page: u64, why: &str) -> ReadError {
    ReadError::Damaged {
        page,
        why: why.to_string(),
    }
}

/// The element at byte `at` of `page`.
fn element(id: u64, page: &[u8], at: usize) -> Result<&[u8], ReadError> {
    page.get(at..at + ELEMENT_SIZE)
        .ok_or_else(|| damaged(id, "elements past the end of the page"))
}

/// Calls `f(flags, key, value)` for every element of the leaf page image `page`.
fn leaf_elements(id: u64, page: &[u8], f: &mut ElementVisitor<'_>) -> Result<(), ReadError> {
    if page.len() < HEADER_SIZE {
        return Err(damaged(id, "page shorter than its header"));
    }
    let h = Header::get(page);
    if h.flags != LEAF {
        return Err(damaged(
            id,
            &format!("expected a leaf, found type {:#x}", h.flags),
        ));
    }
    let mut previous: Option<&[u8]> = None;
    for i in 0..usize::from(h.count) {
        let at = HEADER_SIZE + ELEMENT_SIZE * i;
        let el = element(id, page, at)?;
        let (flags, pos, ksize, vsize) = (
            u32_at(el, 0),
            u32_at(el, 4) as usize,
            u32_at(el, 8) as usize,
            u32_at(el, 12) as usize,
        );
        let start = at.checked_add(pos);
        let kv = start
            .and_then(|s| Some((s, s.checked_add(ksize)?)))
            .and_then(|(s, k)| Some((s, k, k.checked_add(vsize)?)))
            .filter(|(_, _, end)| *end <= page.len());
        let Some((s, k, end)) = kv else {
            return Err(damaged(id, &format!("element {i} points past the page")));
        };
        let key = &page[s..k];
        if previous.is_some_and(|p| p >= key) {
            return Err(damaged(id, &format!("key[{i}] not above the one before")));
        }
        previous = Some(key);
        f(flags, key, &page[k..end])?;
    }
    Ok(())
}

/// A bucket's value: its root page, or its inline page.
fn bucket_root(v: &[u8]) -> Result<BucketRoot, ReadError> {
    if v.len() < 16 {
        return Err(damaged(0, "bucket header shorter than 16 bytes"));
    }
    match u64_at(v, 0) {
        0 => Ok(BucketRoot::Inline(v[16..].to_vec())),
        root => Ok(BucketRoot::Page(root)),
    }
}
