//! Loopback addresses for etcd processes the tests start on this machine.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::net::{Ipv4Addr, SocketAddrV4, TcpListener};

/// A random loopback address whose client, peer and metrics ports are free. Random over
/// 127.16.0.0 - 127.250.255.254 so concurrent test processes do not collide.
pub fn free_address() -> Ipv4Addr {
    for attempt in 0..1000u64 {
        // RandomState is keyed from the OS's randomness: a different address in every process.
        let mut hasher = RandomState::new().build_hasher();
        hasher.write_u32(std::process::id());
        hasher.write_u64(attempt);
        let bits = hasher.finish();
        let ip = Ipv4Addr::new(
            127,
            16 + (bits % 235) as u8,
            ((bits >> 8) & 0xff) as u8,
            1 + ((bits >> 16) % 254) as u8,
        );
        let free = [2379, 2380, 2381]
            .iter()
            .all(|port| TcpListener::bind(SocketAddrV4::new(ip, *port)).is_ok());
        if free {
            return ip;
        }
    }
    panic!("no free loopback address found for an etcd test process");
}
