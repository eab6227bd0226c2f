//! What a cached Pod and a cached PVC cost in the operator's heap, whole and as the operator
//! caches them (`observe::Cached`: their facts; issue 29, item 6). Parses
//! `CACHED_OBJECTS_BENCH_N` copies of a member's Pod and PVC at rest as a real control plane
//! served them (`tests/fixtures/{pod,pvc}-at-rest.json`, kube-apiserver v1.37.2) under a
//! counting allocator, which rounds each allocation to glibc's chunk sizes, and prints the
//! bytes per object: the whole object (the floor: what a cache of objects holds) beside the
//! cached one.
//!
//! ```sh
//! cargo bench -p etcd-operator --bench cached_objects
//! ```

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicI64, Ordering};

use etcd_operator::observe::{CachedPod, CachedPvc};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};

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

/// Bytes per object held by `n` objects that `make` parses, as a cache keeps them.
fn per_object<T>(n: usize, make: impl Fn() -> T) -> i64 {
    let before = LIVE.load(Ordering::Relaxed);
    let objects: Vec<T> = (0..n).map(|_| make()).collect();
    let held = LIVE.load(Ordering::Relaxed) - before;
    drop(objects);
    held / n as i64
}

/// One row per kind: the whole object without managed fields (the floor: what a cache of
/// objects holds) beside the object as the operator caches it.
fn row<K, C>(kind: &str, text: &str, n: usize)
where
    K: serde::de::DeserializeOwned + kube::Resource,
    C: serde::de::DeserializeOwned,
{
    let whole = per_object(n, || {
        let mut object: K = serde_json::from_str(text).expect("the fixture parses");
        etcd_operator::observe::forget_managed_fields(&mut object);
        object
    });
    let cached = per_object(n, || -> C {
        serde_json::from_str(text).expect("the fixture parses")
    });
    println!(
        "| {kind} ({} bytes of JSON) | {:.1} KiB | {:.1} KiB ({:.0} % of the whole) |",
        text.len(),
        whole as f64 / 1024.0,
        cached as f64 / 1024.0,
        100.0 * cached as f64 / whole as f64
    );
}

fn main() {
    let n: usize = std::env::var("CACHED_OBJECTS_BENCH_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    println!("heap per object, the mean of {n} copies");
    println!("| object | whole, without managed fields (floor) | cached (`observe::Cached`) |");
    println!("|---|---:|---:|");
    row::<Pod, CachedPod>("Pod", include_str!("../tests/fixtures/pod-at-rest.json"), n);
    row::<PersistentVolumeClaim, CachedPvc>(
        "PVC",
        include_str!("../tests/fixtures/pvc-at-rest.json"),
        n,
    );
}
