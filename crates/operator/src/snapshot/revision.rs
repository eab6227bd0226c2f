//! The revision and key count of a snapshot, read from the snapshot's own bytes while they
//! stream, exactly as `etcdutl snapshot status` (etcdctl for 3.4) reads them from the file.
//!
//! Asking etcd for its revision before (or after) the snapshot call races with writes: a write
//! between the two lands in the snapshot but not in the answer. The snapshot is a bbolt file,
//! written page by page in page order, so its content can be read on the way. `snapshot
//! status` opens the file and walks its tree: for every bucket of the root bucket it counts the
//! keys (its TOTAL KEYS), and the revision is the main revision (the first 8 bytes, big-endian)
//! of the last key of the `key` bucket.
//!
//! A stream cannot walk a tree (a child may come before or after its parent), so the scan
//! remembers, for every page that may be a tree page, what the walk needs of it: a leaf's key
//! count and the main revision of its last key, the bucket headers of a leaf holding buckets,
//! a branch's children. At the end it walks the tree from the root the newest meta page names.
//!
//! Why a walk and not "the highest revision on any leaf page": the file also holds pages that
//! are free in the snapshot's transaction. etcd runs bbolt without a persisted freelist, and
//! `WriteTo` copies the pages from the file while etcd keeps writing: a free page can be
//! reused by a later transaction *during* the copy and hold a revision newer than the
//! snapshot's (seen: 3643 where `snapshot status` said 3642). Only pages reachable from the
//! snapshot transaction's root count; a page reused meanwhile is never reachable from it.
//!
//! Every page boundary is looked at on its own (a page's header names its own id, which is
//! how a page start is recognised): a freed span of several pages may be partly reused, and
//! its stale header must not hide the live pages inside it. A page start found inside a live
//! page's overflow (data that happens to look like a header) is recorded and never reached.
//!
//! Memory: 16 bytes per leaf page and 4 per branch child, a few MiB per GiB of database, plus
//! the pages being read (one page, or a large value's overflow pages up to [`MAX_SPAN`]). A
//! page the scan could not read (larger than that) makes the result unknown only if the walk
//! needs it.

/// bbolt's page header: id u64, flags u16, count u16, overflow u32.
const PAGE_HEADER: usize = 16;
/// A leaf element: flags u32, pos u32, ksize u32, vsize u32.
const LEAF_ELEMENT: usize = 16;
/// A branch element: pos u32, ksize u32, pgid u64.
const BRANCH_ELEMENT: usize = 16;
const BRANCH_PAGE: u16 = 0x01;
const LEAF_PAGE: u16 = 0x02;
const META_PAGE: u16 = 0x04;
const BUCKET_LEAF_FLAG: u32 = 0x01;
const MAGIC: u32 = 0xED0C_DAED;
/// The page header and the meta fields read (magic .. checksum).
const META_BYTES: usize = PAGE_HEADER + 64;
/// A bucket header in a leaf value: root pgid u64, sequence u64; an inline page follows when
/// the root is 0.
const BUCKET_HEADER: usize = 16;
/// A page (with its overflow pages) larger than this is not read.
pub const MAX_SPAN: usize = 16 << 20;
/// Pages read at once (a page inside another's overflow span); more are not read.
const MAX_OPEN: usize = 8;
/// The bucket whose keys are revisions.
const KEY_BUCKET: &[u8] = b"key";

/// What a snapshot's database holds, as `snapshot status` reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scanned {
    /// The main revision of the last key of the `key` bucket (0 when it is empty).
    pub revision: i64,
    /// The keys of every bucket (TOTAL KEYS).
    pub total_keys: u64,
}

/// A leaf page: its id, its key count, the main revision of its last key.
#[derive(Clone, Copy, Debug)]
struct Leaf {
    id: u32,
    count: u32,
    last_main: Option<i64>,
}

/// A bucket named in a leaf: its root page, or its inline content.
#[derive(Clone, Debug)]
struct Bucket {
    name: Vec<u8>,
    root: u64,
    /// (keys, main revision of the last key) of an inline bucket.
    inline: Option<(u32, Option<i64>)>,
}

/// A page being read: its id, its full length, the bytes so far.
#[derive(Debug)]
struct Open {
    id: u64,
    need: usize,
    bytes: Vec<u8>,
}

/// Fed every chunk of a snapshot in order; [`SnapshotScan::finish`] says what it holds.
#[derive(Debug, Default)]
pub struct SnapshotScan {
    /// Bytes seen.
    pos: u64,
    /// From the first meta page; 0 until known.
    page_size: u64,
    /// Not a bbolt file (or one this scan does not understand).
    broken: bool,
    /// The start of page 0 while the page size is unknown.
    first: Vec<u8>,
    /// The header at the current page boundary, while it arrives.
    header: Vec<u8>,
    open: Vec<Open>,
    /// (txid, root bucket's root page) of each valid meta page.
    metas: Vec<(u64, u64)>,
    leaves: Vec<Leaf>,
    /// Leaves holding buckets (the root bucket's), with their buckets.
    bucket_leaves: Vec<(u32, Vec<Bucket>)>,
    /// (id, first child, number of children) of each branch page.
    branches: Vec<(u32, u32, u32)>,
    children: Vec<u32>,
    /// Pages that were not read (too large, too many at once).
    unread: Vec<u64>,
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

/// The main revision of a `key`-bucket key: its first 8 bytes, big-endian (etcd's
/// `bytesToRev`).
fn main_revision(key: &[u8]) -> Option<i64> {
    key.get(..8)
        .map(|b| i64::from_be_bytes(b.try_into().unwrap_or([0; 8])))
}

/// One leaf element: (flags, key, value).
type Element<'a> = (u32, &'a [u8], &'a [u8]);

/// A leaf page image's elements as (flags, key, value); `None` when they do not fit the page.
fn leaf_elements(page: &[u8]) -> Option<Vec<Element<'_>>> {
    if page.len() < PAGE_HEADER {
        return None;
    }
    let count = u16_at(page, 10) as usize;
    let mut out = Vec::with_capacity(count);
    for i in 0..count {
        let at = PAGE_HEADER + i * LEAF_ELEMENT;
        let element = page.get(at..at + LEAF_ELEMENT)?;
        let flags = u32_at(element, 0);
        let key_at = at + u32_at(element, 4) as usize;
        let ksize = u32_at(element, 8) as usize;
        let vsize = u32_at(element, 12) as usize;
        let key = page.get(key_at..key_at.checked_add(ksize)?)?;
        let value = page.get(key_at + ksize..(key_at + ksize).checked_add(vsize)?)?;
        out.push((flags, key, value));
    }
    Some(out)
}

impl SnapshotScan {
    pub fn update(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() && !self.broken {
            if self.page_size == 0 {
                let take = (META_BYTES - self.first.len()).min(chunk.len());
                self.first.extend_from_slice(&chunk[..take]);
                self.pos += take as u64;
                chunk = &chunk[take..];
                if self.first.len() == META_BYTES {
                    self.first_meta();
                }
                continue;
            }
            let offset = (self.pos % self.page_size) as usize;
            let take = if offset < PAGE_HEADER {
                (PAGE_HEADER - offset).min(chunk.len())
            } else {
                (self.page_size as usize - offset).min(chunk.len())
            };
            let (now, rest) = chunk.split_at(take);
            self.feed(now);
            if offset < PAGE_HEADER {
                self.header.extend_from_slice(now);
            }
            self.pos += take as u64;
            chunk = rest;
            if self.header.len() == PAGE_HEADER {
                let header = std::mem::take(&mut self.header);
                self.page_start(&header);
            }
        }
    }

    /// Page 0's meta: the page size, and the first root.
    fn first_meta(&mut self) {
        let first = std::mem::take(&mut self.first);
        let size = u32_at(&first, 24) as u64;
        if u16_at(&first, 8) & META_PAGE == 0
            || u32_at(&first, 16) != MAGIC
            || !(512..=(1 << 20)).contains(&size)
            || !size.is_power_of_two()
        {
            self.broken = true;
            return;
        }
        self.page_size = size;
        self.meta(&first);
    }

    fn meta(&mut self, page: &[u8]) {
        if page.len() >= META_BYTES && u32_at(page, 16) == MAGIC {
            self.metas.push((u64_at(page, 64), u64_at(page, 32)));
        }
    }

    /// The bytes to every page being read; a page read whole is recorded.
    fn feed(&mut self, bytes: &[u8]) {
        let mut i = 0;
        while i < self.open.len() {
            let open = &mut self.open[i];
            let take = (open.need - open.bytes.len()).min(bytes.len());
            open.bytes.extend_from_slice(&bytes[..take]);
            if open.bytes.len() == open.need {
                let done = self.open.swap_remove(i);
                self.record(done);
            } else {
                i += 1;
            }
        }
    }

    /// A header at a page boundary: a page start when it names this very page.
    fn page_start(&mut self, header: &[u8]) {
        let id = (self.pos - PAGE_HEADER as u64) / self.page_size;
        if u64_at(header, 0) != id {
            return;
        }
        let flags = u16_at(header, 8);
        let span = (u32_at(header, 12) as u64 + 1) * self.page_size;
        let need = match flags {
            META_PAGE => META_BYTES,
            BRANCH_PAGE | LEAF_PAGE if span <= MAX_SPAN as u64 => span as usize,
            BRANCH_PAGE | LEAF_PAGE => {
                self.unread.push(id);
                return;
            }
            _ => return,
        };
        if self.open.len() >= MAX_OPEN {
            self.unread.push(id);
            return;
        }
        let mut bytes = Vec::with_capacity(need.min(1 << 16));
        bytes.extend_from_slice(header);
        self.open.push(Open { id, need, bytes });
    }

    /// A page read whole: what the walk needs of it.
    fn record(&mut self, page: Open) {
        let Ok(id) = u32::try_from(page.id) else {
            self.broken = true;
            return;
        };
        let bytes = &page.bytes;
        match u16_at(bytes, 8) {
            META_PAGE => self.meta(bytes),
            BRANCH_PAGE => {
                let count = u16_at(bytes, 10) as usize;
                let first = self.children.len() as u32;
                for i in 0..count {
                    let at = PAGE_HEADER + i * BRANCH_ELEMENT;
                    let Some(element) = bytes.get(at..at + BRANCH_ELEMENT) else {
                        break;
                    };
                    self.children
                        .push(u32::try_from(u64_at(element, 8)).unwrap_or(u32::MAX));
                }
                let n = self.children.len() as u32 - first;
                self.branches.push((id, first, n));
            }
            LEAF_PAGE => {
                let Some(elements) = leaf_elements(bytes) else {
                    // Not a page after all (a false start in someone's data): unusable.
                    return;
                };
                let last_main = elements.last().and_then(|(_, k, _)| main_revision(k));
                let mut buckets = Vec::new();
                for (flags, key, value) in &elements {
                    if flags & BUCKET_LEAF_FLAG == 0 || value.len() < BUCKET_HEADER {
                        continue;
                    }
                    let root = u64_at(value, 0);
                    let inline = (root == 0)
                        .then(|| leaf_elements(&value[BUCKET_HEADER..]))
                        .flatten()
                        .map(|inner| {
                            (
                                inner.len() as u32,
                                inner.last().and_then(|(_, k, _)| main_revision(k)),
                            )
                        });
                    buckets.push(Bucket {
                        name: key.to_vec(),
                        root,
                        inline,
                    });
                }
                if !buckets.is_empty() {
                    self.bucket_leaves.push((id, buckets));
                }
                self.leaves.push(Leaf {
                    id,
                    count: elements.len() as u32,
                    last_main,
                });
            }
            _ => {}
        }
    }

    /// The revision and key count, or `None` when the bytes were not a bbolt database this
    /// scan can read whole.
    pub fn finish(mut self) -> Option<Scanned> {
        if self.broken {
            return None;
        }
        self.leaves.sort_by_key(|l| l.id);
        self.branches.sort_by_key(|b| b.0);
        self.bucket_leaves.sort_by_key(|b| b.0);
        // The newest meta page (WriteTo writes the transaction's meta as page 0 and the same
        // with txid - 1 as page 1).
        let (_, root) = self.metas.iter().max_by_key(|(txid, _)| *txid).copied()?;
        let mut revision: Option<i64> = None;
        let mut total: u64 = 0;
        for leaf in self.leaves_under(root)? {
            let buckets = match self.bucket_leaves.binary_search_by_key(&leaf.id, |b| b.0) {
                Ok(at) => self.bucket_leaves[at].1.clone(),
                // A root leaf without buckets holds nothing `snapshot status` counts, unless
                // it has plain keys, which etcd never puts there.
                Err(_) if leaf.count == 0 => Vec::new(),
                Err(_) => return None,
            };
            for bucket in buckets {
                let is_key = bucket.name == KEY_BUCKET;
                if bucket.root == 0 {
                    let (count, last) = bucket.inline?;
                    total += count as u64;
                    if is_key {
                        revision = revision.max(last);
                    }
                    continue;
                }
                for leaf in self.leaves_under(bucket.root)? {
                    total += leaf.count as u64;
                    if is_key {
                        revision = revision.max(leaf.last_main);
                    }
                }
            }
        }
        Some(Scanned {
            revision: revision.unwrap_or(0),
            total_keys: total,
        })
    }

    /// The leaves of the tree rooted at `root`; `None` when a page of it was not read.
    fn leaves_under(&self, root: u64) -> Option<Vec<Leaf>> {
        let mut out = Vec::new();
        let mut stack = vec![u32::try_from(root).ok()?];
        let mut visited = 0usize;
        while let Some(id) = stack.pop() {
            visited += 1;
            // A tree never has more pages than were recorded: a cycle is not a tree.
            if visited > self.leaves.len() + self.branches.len() {
                return None;
            }
            if let Ok(at) = self.leaves.binary_search_by_key(&id, |l| l.id) {
                out.push(self.leaves[at]);
            } else if let Ok(at) = self.branches.binary_search_by_key(&id, |b| b.0) {
                let (_, first, n) = self.branches[at];
                stack.extend(
                    self.children[first as usize..(first + n) as usize]
                        .iter()
                        .rev(),
                );
            } else {
                // Unread, or not a page at all: the walk cannot be completed.
                return None;
            }
        }
        Some(out)
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

    fn meta(id: u64, txid: u64, root: u64) -> Vec<u8> {
        let mut page = header(id, META_PAGE, 0, 0);
        page.extend_from_slice(&MAGIC.to_le_bytes());
        page.extend_from_slice(&2u32.to_le_bytes());
        page.extend_from_slice(&(PAGE as u32).to_le_bytes());
        page.extend_from_slice(&0u32.to_le_bytes());
        page.extend_from_slice(&root.to_le_bytes()); // root bucket's root page
        page.extend_from_slice(&0u64.to_le_bytes()); // sequence
        page.extend_from_slice(&u64::MAX.to_le_bytes()); // no freelist (etcd's setting)
        page.extend_from_slice(&100u64.to_le_bytes()); // high water mark
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

    fn branch(id: u64, children: &[u64]) -> Vec<u8> {
        let mut page = header(id, BRANCH_PAGE, children.len() as u16, 0);
        let elements_end = PAGE_HEADER + children.len() * BRANCH_ELEMENT;
        let mut data = Vec::new();
        for (i, child) in children.iter().enumerate() {
            let at = PAGE_HEADER + i * BRANCH_ELEMENT;
            let key = format!("k{child}").into_bytes();
            page.extend_from_slice(&((elements_end + data.len() - at) as u32).to_le_bytes());
            page.extend_from_slice(&(key.len() as u32).to_le_bytes());
            page.extend_from_slice(&child.to_le_bytes());
            data.extend_from_slice(&key);
        }
        page.extend_from_slice(&data);
        padded(page)
    }

    fn padded(mut page: Vec<u8>) -> Vec<u8> {
        page.resize(PAGE.max(page.len().div_ceil(PAGE) * PAGE), 0);
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

    fn bucket(root: u64) -> Vec<u8> {
        let mut value = root.to_le_bytes().to_vec();
        value.extend_from_slice(&0u64.to_le_bytes());
        value
    }

    fn keys(id: u64, revisions: std::ops::RangeInclusive<u64>) -> Vec<u8> {
        padded(leaf_image(
            id,
            &revisions
                .map(|r| (0, rev(r, false), b"value".to_vec()))
                .collect::<Vec<_>>(),
        ))
    }

    fn scan(bytes: &[u8], chunk: usize) -> Option<Scanned> {
        let mut s = SnapshotScan::default();
        for piece in bytes.chunks(chunk.max(1)) {
            s.update(piece);
        }
        s.finish()
    }

    /// Pages in order from page 0 (the two metas first, the newest root in page 0 as
    /// WriteTo writes it), then etcd's 32-byte trailer.
    fn database(root: u64, pages: Vec<Vec<u8>>) -> Vec<u8> {
        let mut out = meta(0, 9, root);
        out.extend(meta(1, 8, root));
        for page in pages {
            out.extend(page);
        }
        out.extend_from_slice(&[0xAB; 32]);
        out
    }

    /// Root leaf (page 2): `key` under a branch (page 3) of two leaves (4, 5), `meta` as one
    /// leaf (6) with 2 keys.
    fn tree() -> Vec<u8> {
        let root = padded(leaf_image(
            2,
            &[
                (BUCKET_LEAF_FLAG, b"key".to_vec(), bucket(3)),
                (BUCKET_LEAF_FLAG, b"meta".to_vec(), bucket(6)),
            ],
        ));
        let meta_leaf = padded(leaf_image(
            6,
            &[
                (
                    0,
                    b"consistent_index".to_vec(),
                    99u64.to_be_bytes().to_vec(),
                ),
                (
                    0,
                    b"finishedCompactRev".to_vec(),
                    5u64.to_be_bytes().to_vec(),
                ),
            ],
        ));
        database(
            2,
            vec![
                root,
                branch(3, &[4, 5]),
                keys(4, 1..=20),
                keys(5, 21..=32),
                meta_leaf,
            ],
        )
    }

    #[test]
    fn the_last_revision_and_every_key_whatever_the_chunking() {
        let db = tree();
        for chunk in [1, 7, 16, 100, 4095, 4096, 4097, 5000, 32 * 1024, db.len()] {
            assert_eq!(
                scan(&db, chunk),
                Some(Scanned {
                    revision: 32,
                    total_keys: 32 + 2
                }),
                "chunk {chunk}"
            );
        }
    }

    /// The bug of the first version: a free page reused during the copy holds a newer
    /// revision; it is not reachable from the snapshot's root, so it does not count.
    #[test]
    fn pages_not_reachable_from_the_root_do_not_count() {
        let mut db = tree();
        let trailer = db.split_off(db.len() - 32);
        // Page 7: a leaf reused by a later transaction, with revisions 33..40, and page 8:
        // a stale branch of an older tree pointing at it and at a live leaf.
        db.extend(keys(7, 33..=40));
        db.extend(branch(8, &[4, 7]));
        db.extend(trailer);
        assert_eq!(
            scan(&db, 1000),
            Some(Scanned {
                revision: 32,
                total_keys: 34
            })
        );
    }

    #[test]
    fn a_stale_overflow_header_does_not_hide_the_live_pages_inside_its_span() {
        let root = padded(leaf_image(
            2,
            &[(BUCKET_LEAF_FLAG, b"key".to_vec(), bucket(4))],
        ));
        // Page 3 once began a 3-page leaf (overflow 2); pages 4 and 5 were reused since.
        let mut stale = header(3, LEAF_PAGE, 1, 2);
        stale.resize(PAGE, 0);
        let db = database(2, vec![root, stale, keys(4, 1..=9), keys(5, 50..=60)]);
        assert_eq!(
            scan(&db, 333),
            Some(Scanned {
                revision: 9,
                total_keys: 9
            })
        );
    }

    #[test]
    fn inline_buckets_and_overflowing_leaves_are_read() {
        let inline = leaf_image(
            0,
            &[
                (0, rev(7, false), b"x".to_vec()),
                (0, rev(9, true), b"".to_vec()),
            ],
        );
        let mut key_bucket = bucket(0);
        key_bucket.extend(inline);
        // A `lease` bucket whose one leaf (page 3) overflows into page 4: a large value.
        let mut big = leaf_image(3, &[(0, 1u64.to_be_bytes().to_vec(), vec![7u8; 6000])]);
        big[12..16].copy_from_slice(&1u32.to_le_bytes());
        let big = padded(big);
        assert_eq!(big.len(), 2 * PAGE);
        let root = padded(leaf_image(
            2,
            &[
                (BUCKET_LEAF_FLAG, b"key".to_vec(), key_bucket),
                (BUCKET_LEAF_FLAG, b"lease".to_vec(), bucket(3)),
            ],
        ));
        let db = database(2, vec![root, big, keys(5, 100..=110)]);
        for chunk in [64, 4096, 10_000] {
            assert_eq!(
                scan(&db, chunk),
                Some(Scanned {
                    revision: 9,
                    total_keys: 3
                }),
                "chunk {chunk}"
            );
        }
    }

    #[test]
    fn an_empty_key_bucket_is_revision_zero() {
        let root = padded(leaf_image(
            2,
            &[(BUCKET_LEAF_FLAG, b"key".to_vec(), bucket(3))],
        ));
        let db = database(2, vec![root, padded(leaf_image(3, &[]))]);
        assert_eq!(
            scan(&db, 100),
            Some(Scanned {
                revision: 0,
                total_keys: 0
            })
        );
    }

    #[test]
    fn a_missing_or_unreadable_page_makes_the_result_unknown() {
        // The branch names a page that is not in the file.
        let root = padded(leaf_image(
            2,
            &[(BUCKET_LEAF_FLAG, b"key".to_vec(), bucket(3))],
        ));
        let db = database(2, vec![root.clone(), branch(3, &[4, 9]), keys(4, 1..=3)]);
        assert_eq!(scan(&db, 512), None);
        // A leaf larger than MAX_SPAN is not read.
        let mut huge = header(3, LEAF_PAGE, 1, (MAX_SPAN / PAGE) as u32);
        huge.resize(MAX_SPAN + PAGE, 0);
        let db = database(2, vec![root, huge]);
        assert_eq!(scan(&db, 1 << 20), None);
        // A cycle is not a tree.
        let root = padded(leaf_image(
            2,
            &[(BUCKET_LEAF_FLAG, b"key".to_vec(), bucket(3))],
        ));
        let db = database(2, vec![root, branch(3, &[4]), branch(4, &[3])]);
        assert_eq!(scan(&db, 512), None);
    }

    #[test]
    fn not_a_bbolt_file_has_nothing() {
        assert_eq!(scan(&vec![0x55u8; 20_000], 512), None);
        assert_eq!(scan(b"", 1), None);
        assert_eq!(scan(&[0u8; 10], 1), None);
        // A meta page with a page size that is not a power of two.
        let mut odd = meta(0, 1, 2);
        odd[24..28].copy_from_slice(&3000u32.to_le_bytes());
        assert_eq!(scan(&odd, 100), None);
    }

    #[test]
    fn the_newest_meta_page_names_the_root() {
        // Page 0 says root 3 at txid 5, page 1 says root 2 at txid 9: the newer wins.
        let mut db = meta(0, 5, 3);
        db.extend(meta(1, 9, 2));
        db.extend(padded(leaf_image(
            2,
            &[(BUCKET_LEAF_FLAG, b"key".to_vec(), bucket(4))],
        )));
        db.extend(padded(leaf_image(
            3,
            &[(BUCKET_LEAF_FLAG, b"key".to_vec(), bucket(5))],
        )));
        db.extend(keys(4, 1..=4));
        db.extend(keys(5, 1..=8));
        assert_eq!(scan(&db, 4096).map(|s| s.revision), Some(4));
    }
}
