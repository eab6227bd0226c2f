//! ClusterIP allocation from the service range, as the real server's allocator does it.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::sync::Mutex;

pub struct ServiceIpAllocator {
    base: u32,
    size: u32,
    used: Mutex<BTreeSet<u32>>,
}

impl ServiceIpAllocator {
    /// A range `base/prefix`; the network and broadcast addresses are never handed out.
    pub fn new(base: Ipv4Addr, prefix: u8) -> Self {
        let prefix = prefix.clamp(8, 30);
        let mask = u32::MAX << (32 - prefix);
        Self {
            base: u32::from(base) & mask,
            size: 1 << (32 - prefix),
            used: Mutex::new(BTreeSet::new()),
        }
    }

    /// The address the `kubernetes` Service gets.
    pub fn first_address(&self) -> Ipv4Addr {
        Ipv4Addr::from(self.base + 1)
    }

    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        let ip = u32::from(ip);
        ip > self.base && ip < self.base + self.size - 1
    }

    /// The lowest free address.
    pub fn allocate(&self) -> Option<Ipv4Addr> {
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        let offset = (1..self.size - 1).find(|o| !used.contains(o))?;
        used.insert(offset);
        Some(Ipv4Addr::from(self.base + offset))
    }

    /// Claims a specific address; false when it is taken or outside the range.
    pub fn claim(&self, ip: Ipv4Addr) -> bool {
        if !self.contains(ip) {
            return false;
        }
        let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
        used.insert(u32::from(ip) - self.base)
    }

    pub fn release(&self, ip: Ipv4Addr) {
        if self.contains(ip) {
            let mut used = self.used.lock().unwrap_or_else(|p| p.into_inner());
            used.remove(&(u32::from(ip) - self.base));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocates_lowest_free_address_and_reuses_released_ones() {
        let ips = ServiceIpAllocator::new(Ipv4Addr::new(10, 96, 0, 0), 16);
        assert_eq!(ips.first_address(), Ipv4Addr::new(10, 96, 0, 1));
        assert_eq!(ips.allocate(), Some(Ipv4Addr::new(10, 96, 0, 1)));
        assert_eq!(ips.allocate(), Some(Ipv4Addr::new(10, 96, 0, 2)));
        assert!(!ips.claim(Ipv4Addr::new(10, 96, 0, 2)));
        assert!(ips.claim(Ipv4Addr::new(10, 96, 3, 7)));
        assert!(!ips.claim(Ipv4Addr::new(10, 97, 0, 1)));
        ips.release(Ipv4Addr::new(10, 96, 0, 1));
        assert_eq!(ips.allocate(), Some(Ipv4Addr::new(10, 96, 0, 1)));
    }
}
