//! IPv4 ranges and an address allocator (IPAM) for Pod, node and Service addresses.

use std::collections::BTreeSet;
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

/// An IPv4 range such as `10.244.0.0/16`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Ipv4Cidr {
    network: Ipv4Addr,
    prefix_len: u8,
}

/// A range that does not parse, or is too small to hold any host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid IPv4 range {input:?}: {reason} (expected the form 10.244.0.0/16, prefix 8..=30)")]
pub struct CidrParseError {
    input: String,
    reason: &'static str,
}

impl Ipv4Cidr {
    /// A range from its first address and prefix length; host bits of `address` are cleared.
    pub fn new(address: Ipv4Addr, prefix_len: u8) -> Option<Self> {
        if !(8..=30).contains(&prefix_len) {
            return None;
        }
        let mask = u32::MAX << (32 - prefix_len);
        Some(Self {
            network: Ipv4Addr::from(u32::from(address) & mask),
            prefix_len,
        })
    }

    pub fn network(&self) -> Ipv4Addr {
        self.network
    }

    pub fn prefix_len(&self) -> u8 {
        self.prefix_len
    }

    /// Number of addresses in the range, network and broadcast included.
    pub fn size(&self) -> u32 {
        1u32 << (32 - self.prefix_len)
    }

    pub fn contains(&self, address: Ipv4Addr) -> bool {
        let mask = u32::MAX << (32 - self.prefix_len);
        u32::from(address) & mask == u32::from(self.network)
    }

    /// The address at `offset` from the network address, if inside the range.
    pub fn nth(&self, offset: u32) -> Option<Ipv4Addr> {
        (offset < self.size()).then(|| Ipv4Addr::from(u32::from(self.network) + offset))
    }

    /// The first host address, which the cluster network gives its bridge (the Pods' gateway).
    pub fn gateway(&self) -> Ipv4Addr {
        Ipv4Addr::from(u32::from(self.network) + 1)
    }

    fn offset_of(&self, address: Ipv4Addr) -> Option<u32> {
        self.contains(address)
            .then(|| u32::from(address) - u32::from(self.network))
    }
}

impl fmt::Display for Ipv4Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix_len)
    }
}

impl FromStr for Ipv4Cidr {
    type Err = CidrParseError;

    fn from_str(input: &str) -> Result<Self, Self::Err> {
        let error = |reason| CidrParseError {
            input: input.to_string(),
            reason,
        };
        let (address, prefix) = input.split_once('/').ok_or_else(|| error("no '/'"))?;
        let address: Ipv4Addr = address.parse().map_err(|_| error("not an IPv4 address"))?;
        let prefix_len: u8 = prefix
            .parse()
            .map_err(|_| error("prefix is not a number"))?;
        let cidr = Self::new(address, prefix_len).ok_or_else(|| error("prefix out of range"))?;
        if cidr.network != address {
            return Err(error("host bits are set"));
        }
        Ok(cidr)
    }
}

impl serde::Serialize for Ipv4Cidr {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for Ipv4Cidr {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Why an address could not be allocated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IpamError {
    #[error("no free address left in {0}")]
    Exhausted(Ipv4Cidr),
    #[error("{address} is not in {range}")]
    OutOfRange { address: Ipv4Addr, range: Ipv4Cidr },
    #[error("{0} is already allocated")]
    InUse(Ipv4Addr),
}

/// The MAC address an interface with `address` gets: `0a:58` and the four bytes of the address,
/// as the CNI bridge plugin does. Locally administered and unicast; stable for an address, so a
/// neighbour's ARP entry for an address stays right whoever holds it next.
pub fn mac_for(address: Ipv4Addr) -> String {
    let [a, b, c, d] = address.octets();
    format!("0a:58:{a:02x}:{b:02x}:{c:02x}:{d:02x}")
}

/// Hands out the host addresses of a range, never the network or broadcast address.
///
/// Allocation moves forward through the range (next fit) so a released address is reused as
/// late as possible: a Pod that comes back should not meet stale ARP entries or connections
/// aimed at its predecessor.
#[derive(Debug, Clone)]
pub struct Ipam {
    range: Ipv4Cidr,
    allocated: BTreeSet<u32>,
    next: u32,
}

impl Ipam {
    pub fn new(range: Ipv4Cidr) -> Self {
        Self {
            range,
            allocated: BTreeSet::new(),
            next: 1,
        }
    }

    pub fn range(&self) -> Ipv4Cidr {
        self.range
    }

    /// The next free host address.
    pub fn allocate(&mut self) -> Result<Ipv4Addr, IpamError> {
        let hosts = self.range.size() - 2;
        for step in 0..hosts {
            let offset = 1 + (self.next - 1 + step) % hosts;
            if self.allocated.insert(offset) {
                self.next = 1 + offset % hosts;
                return Ok(self.range.nth(offset).expect("offset inside the range"));
            }
        }
        Err(IpamError::Exhausted(self.range))
    }

    /// A chosen address, such as a Service's `spec.clusterIP` or the DNS server's.
    pub fn allocate_specific(&mut self, address: Ipv4Addr) -> Result<(), IpamError> {
        let offset = self.host_offset(address)?;
        if !self.allocated.insert(offset) {
            return Err(IpamError::InUse(address));
        }
        Ok(())
    }

    /// Gives an address back; releasing a free address is a no-op.
    pub fn release(&mut self, address: Ipv4Addr) {
        if let Some(offset) = self.range.offset_of(address) {
            self.allocated.remove(&offset);
        }
    }

    pub fn is_allocated(&self, address: Ipv4Addr) -> bool {
        self.range
            .offset_of(address)
            .is_some_and(|offset| self.allocated.contains(&offset))
    }

    pub fn allocated_count(&self) -> usize {
        self.allocated.len()
    }

    fn host_offset(&self, address: Ipv4Addr) -> Result<u32, IpamError> {
        match self.range.offset_of(address) {
            Some(offset) if offset != 0 && offset != self.range.size() - 1 => Ok(offset),
            _ => Err(IpamError::OutOfRange {
                address,
                range: self.range,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(text: &str) -> Ipv4Cidr {
        text.parse().unwrap()
    }

    #[test]
    fn macs_follow_the_address_and_are_local_unicast() {
        assert_eq!(mac_for(Ipv4Addr::new(10, 244, 0, 1)), "0a:58:0a:f4:00:01");
        assert_eq!(
            mac_for(Ipv4Addr::new(10, 244, 255, 254)),
            "0a:58:0a:f4:ff:fe"
        );
        let first = u8::from_str_radix(&mac_for(Ipv4Addr::new(1, 2, 3, 4))[..2], 16).unwrap();
        assert_eq!(first & 0b11, 0b10, "locally administered, unicast");
    }

    #[test]
    fn parses_and_prints_ranges() {
        let range = cidr("10.244.0.0/16");
        assert_eq!(range.to_string(), "10.244.0.0/16");
        assert_eq!(range.size(), 65536);
        assert_eq!(range.gateway(), Ipv4Addr::new(10, 244, 0, 1));
        assert!(range.contains(Ipv4Addr::new(10, 244, 255, 3)));
        assert!(!range.contains(Ipv4Addr::new(10, 245, 0, 3)));
    }

    #[test]
    fn rejects_bad_ranges_with_the_reason() {
        assert!(
            "10.244.0.1/16"
                .parse::<Ipv4Cidr>()
                .unwrap_err()
                .to_string()
                .contains("host bits")
        );
        assert!("10.244.0.0".parse::<Ipv4Cidr>().is_err());
        assert!("10.244.0.0/31".parse::<Ipv4Cidr>().is_err());
        assert!("10.244.0.0/x".parse::<Ipv4Cidr>().is_err());
    }

    #[test]
    fn allocates_hosts_only_and_moves_forward_after_release() {
        let mut ipam = Ipam::new(cidr("192.168.7.0/30"));
        let first = ipam.allocate().unwrap();
        let second = ipam.allocate().unwrap();
        assert_eq!(first, Ipv4Addr::new(192, 168, 7, 1));
        assert_eq!(second, Ipv4Addr::new(192, 168, 7, 2));
        assert_eq!(
            ipam.allocate(),
            Err(IpamError::Exhausted(cidr("192.168.7.0/30")))
        );
        ipam.release(first);
        assert_eq!(ipam.allocate().unwrap(), first);
    }

    #[test]
    fn next_fit_does_not_reuse_a_released_address_at_once() {
        let mut ipam = Ipam::new(cidr("10.0.0.0/24"));
        let a = ipam.allocate().unwrap();
        let b = ipam.allocate().unwrap();
        ipam.release(a);
        let c = ipam.allocate().unwrap();
        assert_ne!(c, a);
        assert_ne!(c, b);
    }

    #[test]
    fn specific_addresses_are_checked() {
        let mut ipam = Ipam::new(cidr("10.96.0.0/12"));
        let dns = Ipv4Addr::new(10, 96, 0, 10);
        ipam.allocate_specific(dns).unwrap();
        assert_eq!(ipam.allocate_specific(dns), Err(IpamError::InUse(dns)));
        assert!(ipam.is_allocated(dns));
        assert!(matches!(
            ipam.allocate_specific(Ipv4Addr::new(10, 96, 0, 0)),
            Err(IpamError::OutOfRange { .. })
        ));
        assert!(matches!(
            ipam.allocate_specific(Ipv4Addr::new(10, 200, 0, 1)),
            Err(IpamError::OutOfRange { .. })
        ));
        ipam.release(dns);
        assert!(!ipam.is_allocated(dns));
    }
}
