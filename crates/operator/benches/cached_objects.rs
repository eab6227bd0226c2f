//! What a cached Pod costs in the operator's heap, whole and as the operator caches it
//! (`observe::trim_pod`; issue 29, item 6). Deserializes `CACHED_OBJECTS_BENCH_N` copies of a
//! member's Pod at rest as a real control plane served it (`tests/fixtures/pod-at-rest.json`,
//! kube-apiserver v1.37.2) under a counting allocator, which rounds each allocation to glibc's
//! chunk sizes, and prints the bytes per Pod: the whole Pod (the floor: what a cache without
//! trimming holds) beside the trimmed one.
//!
//! ```sh
//! cargo bench -p etcd-operator --bench cached_objects
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};

use k8s_openapi::api::core::v1::Pod;

/// Counts the bytes glibc gives each allocation: the request plus its 8-byte header, in
/// 16-byte steps, at least 32.
struct Counting;

static LIVE: AtomicI64 = AtomicI64::new(0);

fn chunk(size: usize) -> i64 {
    ((size + 8).div_ceil(16) * 16).max(32) as i64
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(chunk(layout.size()), Ordering::Relaxed);
        // SAFETY: the caller's layout, passed on.
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(chunk(layout.size()), Ordering::Relaxed);
        // SAFETY: allocated by `alloc` above with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(chunk(new_size) - chunk(layout.size()), Ordering::Relaxed);
        // SAFETY: as for `alloc` and `dealloc`.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// Bytes per Pod held by `n` Pods parsed from `text` and changed by `trim`, shrunk to fit as a
/// cache keeps them.
fn per_pod(text: &str, n: usize, trim: fn(&mut Pod)) -> i64 {
    let before = LIVE.load(Ordering::Relaxed);
    let pods: Vec<Pod> = (0..n)
        .map(|_| {
            let mut pod: Pod = serde_json::from_str(text).expect("the fixture is a Pod");
            trim(&mut pod);
            // A Vec field cut down by the trim keeps its capacity; the cache holds the object
            // as the trim left it, so this measures that too.
            pod
        })
        .collect();
    let held = LIVE.load(Ordering::Relaxed) - before;
    drop(pods);
    held / n as i64
}

fn main() {
    let n: usize = std::env::var("CACHED_OBJECTS_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    let text = include_str!("../tests/fixtures/pod-at-rest.json");
    let whole = per_pod(
        text,
        n,
        etcd_operator::observe::forget_managed_fields::<Pod>,
    );
    let trimmed = per_pod(text, n, etcd_operator::observe::trim_pod);
    println!(
        "{n} copies of a member's Pod at rest ({} bytes of JSON)",
        text.len()
    );
    println!("| cached as | heap per Pod |");
    println!("|---|---:|");
    println!(
        "| whole, without managed fields (floor) | {:.1} KiB |",
        whole as f64 / 1024.0
    );
    println!(
        "| trimmed (`observe::trim_pod`) | {:.1} KiB ({:.0} % of the whole) |",
        trimmed as f64 / 1024.0,
        100.0 * trimmed as f64 / whole as f64
    );
}
