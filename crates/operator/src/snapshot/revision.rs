//! The revision a snapshot holds, read from the snapshot's own bytes while they stream.
//!
//! Asking etcd for its revision before (or after) the snapshot call races with writes: a write
//! between the two lands in the snapshot but not in the answer (seen under load: the status said
//! 31 where `etcdutl snapshot status` said 32). The snapshot is a bbolt file written page by page
//! in page order, so the revision can be read on the way, as `etcdutl snapshot status` reads it:
//! the highest main revision among the keys of the `key` bucket, whose keys are revisions (8 bytes
//! big-endian main revision, `_`, 8 bytes sub revision, and `t` on a tombstone).
//!
//! The scan looks at every leaf page (and at buckets stored inline in a leaf) for keys of exactly
//! that shape, with the two top bytes zero (a revision below 2^48; no other bucket of etcd has
//! such keys), and leaves out the pages the snapshot's freelist names, which hold stale copies.
//! Memory stays bounded: one page (with its overflow, up to [`MAX_SPAN`]) at a time, the free page
//! ids, and the best [`CANDIDATES`] pages by revision.

/// bbolt's page header: id u64, flags u16, count u16, overflow u32.
const PAGE_HEADER: usize = 16;
/// A leaf element: flags u32, pos u32, ksize u32, vsize u32.
const LEAF_ELEMENT: usize = 16;
const LEAF_PAGE: u16 = 0x02;
const META_PAGE: u16 = 0x04;
const FREELIST_PAGE: u16 = 0x10;
const BUCKET_LEAF_FLAG: u32 = 0x01;
const MAGIC: u32 = 0xED0C_DAED;
/// The page header and the meta fields read (magic .. checksum).
const META_BYTES: usize = PAGE_HEADER + 64;
/// A page (with its overflow pages) larger than this is skipped, not held in memory.
pub const MAX_SPAN: usize = 16 << 20;
/// How many of the highest-revision pages are remembered until the freelist is known.
const CANDIDATES: usize = 1024;

#[derive(Debug)]
enum State {
    /// Reading a page's header (the first 16 bytes of the page).
    Header,
    /// Holding a whole page span of `need` bytes.
    Span { need: usize },
    /// Skipping `left` bytes (a page not worth reading, or one too large).
    Skip { left: u64 },
    /// Not a bbolt file (or one we do not understand): nothing more is read.
    Done,
}

#[derive(Debug)]
pub struct RevisionScan {
    state: State,
    buffer: Vec<u8>,
    page_size: usize,
    /// The page id of the page being read (pages come in order).
    next_page: u64,
    /// From the newest meta page: txid and the freelist's page id.
    meta: Option<(u64, u64)>,
    /// The free page ids, once the freelist page went by.
    free: Option<std::collections::HashSet<u64>>,
    /// (highest revision, page id) of pages holding revision keys; at most `CANDIDATES`.
    candidates: Vec<(i64, u64)>,
}

impl Default for RevisionScan {
    fn default() -> Self {
        RevisionScan {
            state: State::Header,
            buffer: Vec::new(),
            page_size: 0,
            next_page: 0,
            meta: None,
            free: None,
            candidates: Vec::new(),
        }
    }
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap_or([0; 4]))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]))
}

/// The main revision of an etcd `key`-bucket key, if `key` has that shape.
pub fn revision_of_key(key: &[u8]) -> Option<i64> {
    let shaped = match key.len() {
        17 => true,
        18 => key[17] == b't',
        _ => false,
    };
    if !shaped || key[8] != b'_' || key[0] != 0 || key[1] != 0 || key[9] != 0 || key[10] != 0 {
        return None;
    }
    let main = i64::from_be_bytes(key[0..8].try_into().ok()?);
    (main > 0).then_some(main)
}

/// The highest revision among the keys of the leaf page image `page` (header included), and of
/// the buckets stored inline in it.
fn leaf_max(page: &[u8], depth: u8) -> Option<i64> {
    if page.len() < PAGE_HEADER {
        return None;
    }
    let count = u16_at(page, 10) as usize;
    let mut best: Option<i64> = None;
    for i in 0..count {
        let at = PAGE_HEADER + i * LEAF_ELEMENT;
        if at + LEAF_ELEMENT > page.len() {
            break;
        }
        let flags = u32_at(page, at);
        let pos = u32_at(page, at + 4) as usize;
        let ksize = u32_at(page, at + 8) as usize;
        let vsize = u32_at(page, at + 12) as usize;
        let key_at = at + pos;
        let Some(key) = page.get(key_at..key_at + ksize) else {
            continue;
        };
        if flags & BUCKET_LEAF_FLAG != 0 {
            // A bucket: inline when its root page id is 0, the page image after its 16-byte header.
            if depth < 2
                && let Some(value) = page.get(key_at + ksize..key_at + ksize + vsize)
                && value.len() > 16 + PAGE_HEADER
                && u64_at(value, 0) == 0
                && u16_at(&value[16..], 8) & LEAF_PAGE != 0
            {
                best = best.max(leaf_max(&value[16..], depth + 1));
            }
            continue;
        }
        best = best.max(revision_of_key(key));
    }
    best
}

impl RevisionScan {
    pub fn update(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() {
            match self.state {
                State::Done => return,
                State::Skip { left } => {
                    let take = (left.min(chunk.len() as u64)) as usize;
                    chunk = &chunk[take..];
                    let left = left - take as u64;
                    self.state = if left == 0 {
                        State::Header
                    } else {
                        State::Skip { left }
                    };
                }
                State::Header | State::Span { .. } => {
                    let need = match self.state {
                        State::Span { need } => need,
                        _ => PAGE_HEADER,
                    };
                    let take = (need - self.buffer.len()).min(chunk.len());
                    self.buffer.extend_from_slice(&chunk[..take]);
                    chunk = &chunk[take..];
                    if self.buffer.len() == need {
                        if matches!(self.state, State::Header) {
                            self.header();
                        } else {
                            self.page();
                        }
                    }
                }
            }
        }
    }

    /// A page header is in the buffer: decide whether to hold the page or skip it.
    fn header(&mut self) {
        let flags = u16_at(&self.buffer, 8);
        let overflow = u32_at(&self.buffer, 12) as u64;
        if self.page_size == 0 {
            // The first page is a meta page; its page size is needed to read any further.
            if flags != META_PAGE {
                self.state = State::Done;
                return;
            }
            self.state = State::Span { need: META_BYTES };
            return;
        }
        let span = (overflow + 1) * self.page_size as u64;
        let wanted = matches!(flags, LEAF_PAGE | META_PAGE | FREELIST_PAGE);
        if wanted && span <= MAX_SPAN as u64 {
            self.state = State::Span {
                need: span as usize,
            };
        } else {
            self.buffer.clear();
            self.next_page += overflow + 1;
            self.state = State::Skip {
                left: span - PAGE_HEADER as u64,
            };
        }
    }

    /// A whole page span is in the buffer.
    fn page(&mut self) {
        let page = std::mem::take(&mut self.buffer);
        if self.page_size == 0 {
            // The start of page 0 (its meta): learn the page size, then skip the page's rest.
            let size = u32_at(&page, 24) as usize;
            if u32_at(&page, 16) != MAGIC || !(META_BYTES..=(1 << 20)).contains(&size) {
                self.state = State::Done;
                return;
            }
            self.page_size = size;
            self.meta(&page);
            self.next_page = 1;
            let rest = size - page.len();
            self.state = if rest == 0 {
                State::Header
            } else {
                State::Skip { left: rest as u64 }
            };
            return;
        }
        let id = self.next_page;
        let flags = u16_at(&page, 8);
        let overflow = u32_at(&page, 12) as u64;
        self.next_page += overflow + 1;
        match flags {
            META_PAGE => self.meta(&page),
            FREELIST_PAGE => {
                if self.meta.map(|(_, freelist)| freelist) == Some(id) {
                    let mut count = u16_at(&page, 10) as usize;
                    let mut at = PAGE_HEADER;
                    if count == 0xFFFF {
                        count = u64_at(&page, PAGE_HEADER) as usize;
                        at += 8;
                    }
                    let mut free = std::collections::HashSet::new();
                    for i in 0..count {
                        let Some(bytes) = page.get(at + i * 8..at + i * 8 + 8) else {
                            break;
                        };
                        free.insert(u64_at(bytes, 0));
                    }
                    self.free = Some(free);
                }
            }
            LEAF_PAGE => {
                if let Some(max) = leaf_max(&page, 0) {
                    self.candidates.push((max, id));
                    if self.candidates.len() > 2 * CANDIDATES {
                        self.candidates.sort_unstable_by(|a, b| b.cmp(a));
                        self.candidates.truncate(CANDIDATES);
                    }
                }
            }
            _ => {}
        }
        self.state = State::Header;
    }

    fn meta(&mut self, page: &[u8]) {
        if page.len() < META_BYTES || u32_at(page, 16) != MAGIC {
            return;
        }
        let freelist = u64_at(page, 48);
        let txid = u64_at(page, 64);
        if self.meta.is_none_or(|(newest, _)| txid > newest) {
            self.meta = Some((txid, freelist));
        }
    }

    /// The snapshot's revision, if the bytes were a bbolt file holding etcd keys.
    pub fn finish(self) -> Option<i64> {
        let free = self.free.unwrap_or_default();
        self.candidates
            .iter()
            .filter(|(_, page)| !free.contains(page))
            .map(|(revision, _)| *revision)
            .max()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: usize = 4096;

    fn header(id: u64, flags: u16, count: u16, overflow: u32) -> Vec<u8> {
        let mut page = Vec::new();
        page.extend_from_slice(&id.to_le_bytes());
        page.extend_from_slice(&flags.to_le_bytes());
        page.extend_from_slice(&count.to_le_bytes());
        page.extend_from_slice(&overflow.to_le_bytes());
        page
    }

    fn meta(id: u64, txid: u64, freelist: u64) -> Vec<u8> {
        let mut page = header(id, META_PAGE, 0, 0);
        page.extend_from_slice(&MAGIC.to_le_bytes());
        page.extend_from_slice(&2u32.to_le_bytes());
        page.extend_from_slice(&(PAGE as u32).to_le_bytes());
        page.extend_from_slice(&0u32.to_le_bytes());
        page.extend_from_slice(&3u64.to_le_bytes()); // root bucket page
        page.extend_from_slice(&0u64.to_le_bytes()); // sequence
        page.extend_from_slice(&freelist.to_le_bytes());
        page.extend_from_slice(&10u64.to_le_bytes()); // high water mark
        page.extend_from_slice(&txid.to_le_bytes());
        page.extend_from_slice(&0u64.to_le_bytes()); // checksum
        page.resize(PAGE, 0);
        page
    }

    /// A leaf page image (unpadded) of (flags, key, value).
    fn leaf_image(id: u64, items: &[(u32, Vec<u8>, Vec<u8>)]) -> Vec<u8> {
        let mut page = header(id, LEAF_PAGE, items.len() as u16, 0);
        let elements_end = PAGE_HEADER + items.len() * LEAF_ELEMENT;
        let mut data = Vec::new();
        for (i, (flags, key, value)) in items.iter().enumerate() {
            let at = PAGE_HEADER + i * LEAF_ELEMENT;
            let pos = elements_end + data.len() - at;
            page.extend_from_slice(&flags.to_le_bytes());
            page.extend_from_slice(&(pos as u32).to_le_bytes());
            page.extend_from_slice(&(key.len() as u32).to_le_bytes());
            page.extend_from_slice(&(value.len() as u32).to_le_bytes());
            data.extend_from_slice(key);
            data.extend_from_slice(value);
        }
        page.extend_from_slice(&data);
        page
    }

    fn padded(mut page: Vec<u8>) -> Vec<u8> {
        page.resize(PAGE, 0);
        page
    }

    fn rev(main: u64, tombstone: bool) -> Vec<u8> {
        let mut key = main.to_be_bytes().to_vec();
        key.push(b'_');
        key.extend_from_slice(&0u64.to_be_bytes());
        if tombstone {
            key.push(b't');
        }
        key
    }

    fn freelist(id: u64, free: &[u64]) -> Vec<u8> {
        let mut page = header(id, FREELIST_PAGE, free.len() as u16, 0);
        for f in free {
            page.extend_from_slice(&f.to_le_bytes());
        }
        padded(page)
    }

    fn scan(bytes: &[u8], chunk: usize) -> Option<i64> {
        let mut s = RevisionScan::default();
        for piece in bytes.chunks(chunk) {
            s.update(piece);
        }
        s.finish()
    }

    /// meta 0, meta 1, root leaf (page 2), key leaves, freelist, then etcd's 32-byte trailer.
    fn database(freelist_page: u64, pages: Vec<Vec<u8>>) -> Vec<u8> {
        let mut out = meta(0, 4, freelist_page);
        out.extend(meta(1, 5, freelist_page));
        for page in pages {
            out.extend(page);
        }
        out.extend_from_slice(&[0xAB; 32]);
        out
    }

    #[test]
    fn the_highest_revision_of_the_key_bucket_whatever_the_chunking() {
        let value = b"\x0a\x03foo".to_vec();
        let root = padded(leaf_image(
            2,
            &[(BUCKET_LEAF_FLAG, b"key".to_vec(), vec![0; 16])],
        ));
        let keys1 = padded(leaf_image(
            3,
            &(1..=20)
                .map(|r| (0, rev(r, false), value.clone()))
                .collect::<Vec<_>>(),
        ));
        let keys2 = padded(leaf_image(
            4,
            &[
                (0, rev(31, false), value.clone()),
                (0, rev(32, true), vec![]),
            ],
        ));
        let db = database(5, vec![root, keys1, keys2, freelist(5, &[])]);
        for chunk in [1, 7, 16, 100, 4096, 5000, 32 * 1024, db.len()] {
            assert_eq!(scan(&db, chunk), Some(32), "chunk {chunk}");
        }
    }

    #[test]
    fn stale_pages_on_the_freelist_are_left_out() {
        let value = b"v".to_vec();
        let live = padded(leaf_image(3, &[(0, rev(40, false), value.clone())]));
        // A stale copy holding a later revision (a tombstone compacted away since).
        let stale = padded(leaf_image(4, &[(0, rev(41, true), value.clone())]));
        let db = database(
            5,
            vec![live.clone(), live.clone(), stale.clone(), freelist(5, &[4])],
        );
        assert_eq!(scan(&db, 333), Some(40));
        // Without the freelist naming it, the stale copy counts.
        let db = database(5, vec![live.clone(), live, stale, freelist(5, &[])]);
        assert_eq!(scan(&db, 333), Some(41));
    }

    #[test]
    fn inline_buckets_are_read() {
        let inline = leaf_image(
            0,
            &[
                (0, rev(7, false), b"x".to_vec()),
                (0, rev(9, false), b"y".to_vec()),
            ],
        );
        let mut bucket = vec![0u8; 16]; // root 0: inline
        bucket.extend(inline);
        let root = padded(leaf_image(
            2,
            &[
                (
                    0,
                    b"consistent_index".to_vec(),
                    99u64.to_be_bytes().to_vec(),
                ),
                (BUCKET_LEAF_FLAG, b"key".to_vec(), bucket),
            ],
        ));
        let db = database(3, vec![root, freelist(3, &[])]);
        assert_eq!(scan(&db, 64), Some(9));
    }

    #[test]
    fn overflowing_pages_and_other_shapes() {
        // A leaf with one overflow page (a large value), then a page after it.
        let big = vec![7u8; 6000];
        let mut leaf = leaf_image(2, &[(0, rev(12, false), big)]);
        leaf[12..16].copy_from_slice(&1u32.to_le_bytes());
        leaf.resize(2 * PAGE, 0);
        let after = padded(leaf_image(4, &[(0, rev(13, false), b"z".to_vec())]));
        // Keys of other buckets: 16 hex digits, names, lease ids: none is a revision.
        let others = padded(leaf_image(
            5,
            &[
                (0, b"8e9e05c52164694d".to_vec(), vec![1]),
                (0, b"abcdefgh_ijklmnop".to_vec(), vec![1]),
                (0, 77u64.to_be_bytes().to_vec(), vec![1]),
            ],
        ));
        let db = database(6, vec![leaf, after, others, freelist(6, &[])]);
        assert_eq!(scan(&db, 1000), Some(13));
    }

    #[test]
    fn not_a_bbolt_file_has_no_revision() {
        assert_eq!(scan(&vec![0x55u8; 20_000], 512), None);
        assert_eq!(scan(b"", 1), None);
        assert_eq!(revision_of_key(&rev(5, false)), Some(5));
        assert_eq!(revision_of_key(&rev(5, true)), Some(5));
        assert_eq!(revision_of_key(&rev(0, false)), None);
        let mut odd = rev(5, true);
        odd[17] = b'x';
        assert_eq!(revision_of_key(&odd), None);
    }
}
