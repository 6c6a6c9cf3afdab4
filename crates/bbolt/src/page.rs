//! bbolt's page layout: the 16-byte page header, the element arrays of branch and leaf
//! pages, and the meta page with its FNV-1a checksum. Little-endian throughout.
//!
//! Invariant: a page image built here is a whole number of [`PAGE_SIZE`] pages whose
//! header `overflow` counts the pages after the first.

/// The page size oxcd writes (bbolt's default on 4 KiB-page machines, etcd's on Linux).
pub const PAGE_SIZE: usize = 4096;
/// Bytes of the header at the start of every page.
pub const HEADER_SIZE: usize = 16;
/// Bytes of one branch or leaf element.
pub const ELEMENT_SIZE: usize = 16;
/// bbolt's magic number.
pub const MAGIC: u32 = 0xED0C_DAED;
/// bbolt's file format version.
pub const VERSION: u32 = 2;
/// `meta.freelist` when no freelist page is written (etcd opens bbolt with
/// `NoFreelistSync`: free pages are found by walking the tree).
pub const NO_FREELIST: u64 = u64::MAX;
/// The longest key bbolt accepts.
pub const MAX_KEY_SIZE: usize = 32768;
/// The longest value bbolt accepts.
pub const MAX_VALUE_SIZE: usize = (1 << 31) - 2;

/// Page type flags (exactly one per page).
pub const BRANCH: u16 = 0x01;
/// A leaf page.
pub const LEAF: u16 = 0x02;
/// A meta page.
pub const META: u16 = 0x04;
/// A freelist page.
pub const FREELIST: u16 = 0x10;
/// A leaf element whose value is a nested bucket.
pub const BUCKET_ELEMENT: u32 = 0x01;

/// Offset of the meta struct inside a meta page, and its checksummed length.
const META_AT: usize = HEADER_SIZE;
const META_SUMMED: usize = 56;

/// A page header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The page's own number.
    pub id: u64,
    /// Its type.
    pub flags: u16,
    /// Elements on it.
    pub count: u16,
    /// Pages after the first that it spans.
    pub overflow: u32,
}

impl Header {
    /// Writes the header at the start of `page`.
    pub fn put(&self, page: &mut [u8]) {
        page[0..8].copy_from_slice(&self.id.to_le_bytes());
        page[8..10].copy_from_slice(&self.flags.to_le_bytes());
        page[10..12].copy_from_slice(&self.count.to_le_bytes());
        page[12..16].copy_from_slice(&self.overflow.to_le_bytes());
    }

    /// Reads the header at the start of `page` (at least [`HEADER_SIZE`] bytes).
    pub fn get(page: &[u8]) -> Header {
        Header {
            id: u64_at(page, 0),
            flags: u16::from_le_bytes([page[8], page[9]]),
            count: u16::from_le_bytes([page[10], page[11]]),
            overflow: u32_at(page, 12),
        }
    }
}

/// The meta struct of pages 0 and 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Meta {
    /// The page size of the file.
    pub page_size: u32,
    /// The root bucket's root page.
    pub root: u64,
    /// The freelist page, or [`NO_FREELIST`].
    pub freelist: u64,
    /// Pages in use: the first page number not allocated.
    pub pgid: u64,
    /// The transaction that wrote it.
    pub txid: u64,
}

/// Why a meta page is refused, with bbolt's messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum MetaError {
    /// Wrong magic number.
    #[error("invalid database")]
    Invalid,
    /// Wrong format version.
    #[error("version mismatch")]
    Version,
    /// Wrong checksum.
    #[error("checksum error")]
    Checksum,
}

impl Meta {
    /// The meta page `id` (0 or 1) holding this meta, one page long.
    pub fn page(&self, id: u64) -> Vec<u8> {
        let mut page = vec![0u8; PAGE_SIZE];
        Header {
            id,
            flags: META,
            count: 0,
            overflow: 0,
        }
        .put(&mut page);
        let m = &mut page[META_AT..];
        m[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        m[4..8].copy_from_slice(&VERSION.to_le_bytes());
        m[8..12].copy_from_slice(&self.page_size.to_le_bytes());
        // 12..16: flags, unused.
        m[16..24].copy_from_slice(&self.root.to_le_bytes());
        // 24..32: the root bucket's sequence, unused by etcd.
        m[32..40].copy_from_slice(&self.freelist.to_le_bytes());
        m[40..48].copy_from_slice(&self.pgid.to_le_bytes());
        m[48..56].copy_from_slice(&self.txid.to_le_bytes());
        let sum = fnv1a64(&m[..META_SUMMED]);
        m[56..64].copy_from_slice(&sum.to_le_bytes());
        page
    }

    /// Reads and checks the meta of a meta page (at least 80 bytes), in bbolt's order:
    /// magic, version, checksum.
    pub fn parse(page: &[u8]) -> Result<Meta, MetaError> {
        if page.len() < META_AT + 64 {
            return Err(MetaError::Invalid);
        }
        let m = &page[META_AT..META_AT + 64];
        if u32_at(m, 0) != MAGIC {
            return Err(MetaError::Invalid);
        }
        if u32_at(m, 4) != VERSION {
            return Err(MetaError::Version);
        }
        if u64_at(m, 56) != fnv1a64(&m[..META_SUMMED]) {
            return Err(MetaError::Checksum);
        }
        Ok(Meta {
            page_size: u32_at(m, 8),
            root: u64_at(m, 16),
            freelist: u64_at(m, 32),
            pgid: u64_at(m, 40),
            txid: u64_at(m, 48),
        })
    }
}

/// FNV-1a, 64 bits (Go's `hash/fnv.New64a`).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The little-endian u32 at `at` (the caller checked the length).
pub fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The little-endian u64 at `at` (the caller checked the length).
pub fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_go() {
        // Go: fnv.New64a() of "" and of "a".
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn meta_matches_an_etcd_snapshot() {
        // Meta 0 of an etcd 3.5.16 snapshot (root 3, no freelist, 5 pages, txid 12).
        let meta = Meta {
            page_size: 4096,
            root: 3,
            freelist: NO_FREELIST,
            pgid: 5,
            txid: 12,
        };
        let page = meta.page(0);
        assert_eq!(
            &page[0x40..0x50],
            &[
                0x0c, 0, 0, 0, 0, 0, 0, 0, 0x69, 0x2a, 0x7b, 0x48, 0xf7, 0x23, 0x4d, 0x54
            ]
        );
        assert_eq!(Meta::parse(&page), Ok(meta));
        let mut bad = page.clone();
        bad[0x30] ^= 1;
        assert_eq!(Meta::parse(&bad), Err(MetaError::Checksum));
        bad[0x14] = 3;
        assert_eq!(Meta::parse(&bad), Err(MetaError::Version));
        bad[0x10] = 0;
        assert_eq!(Meta::parse(&bad), Err(MetaError::Invalid));
    }
}
