//! A minimal stub resolver for code outside the Pods (tests, the sandbox itself), which asks the
//! cluster DNS the way a Pod's libc would: each search domain in turn, then the name as given.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use hickory_server::proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_server::proto::rr::{Name, RData, RecordType};

const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(2);

/// Resolves `name` to IPv4 addresses through the DNS server at `server`, using `socket`
/// (unbound or bound, created in the namespace the query must come from).
///
/// A name ending in `.` is absolute; any other is tried under each of `search` first.
pub async fn lookup_ipv4(
    socket: &tokio::net::UdpSocket,
    server: SocketAddr,
    name: &str,
    search: &[String],
) -> io::Result<Vec<Ipv4Addr>> {
    let candidates: Vec<String> = match name.strip_suffix('.') {
        Some(absolute) => vec![absolute.to_string()],
        None => search
            .iter()
            .map(|domain| format!("{name}.{domain}"))
            .chain([name.to_string()])
            .collect(),
    };
    for candidate in &candidates {
        if let Some(addresses) = query_a(socket, server, candidate).await? {
            return Ok(addresses);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::NotFound,
        format!(
            "{name}: no such host in the cluster DNS (tried {})",
            candidates.join(", ")
        ),
    ))
}

/// `Some(addresses)` when the name has A records, `None` for NXDOMAIN or no data.
async fn query_a(
    socket: &tokio::net::UdpSocket,
    server: SocketAddr,
    name: &str,
) -> io::Result<Option<Vec<Ipv4Addr>>> {
    let fqdn = Name::from_ascii(format!("{name}."))
        .map_err(|error| io::Error::new(io::ErrorKind::InvalidInput, error.to_string()))?;
    let id: u16 = rand::random();
    let mut message = Message::new(id, MessageType::Query, OpCode::Query);
    message.metadata.recursion_desired = true;
    message.add_query(Query::query(fqdn, RecordType::A));
    let bytes = message.to_vec().map_err(io::Error::other)?;
    for _attempt in 0..3 {
        socket.send_to(&bytes, server).await?;
        let mut buffer = vec![0u8; 4096];
        let received = tokio::time::timeout(ATTEMPT_TIMEOUT, async {
            loop {
                let (length, from) = socket.recv_from(&mut buffer).await?;
                if from != server {
                    continue;
                }
                match Message::from_vec(&buffer[..length]) {
                    Ok(reply) if reply.metadata.id == id => return io::Result::Ok(reply),
                    _ => continue,
                }
            }
        })
        .await;
        let reply = match received {
            Ok(reply) => reply?,
            Err(_timeout) => continue,
        };
        return match reply.metadata.response_code {
            ResponseCode::NoError => {
                let addresses: Vec<Ipv4Addr> = reply
                    .answers
                    .iter()
                    .filter_map(|record| match &record.data {
                        RData::A(a) => Some(a.0),
                        _ => None,
                    })
                    .collect();
                Ok((!addresses.is_empty()).then_some(addresses))
            }
            ResponseCode::NXDomain => Ok(None),
            code => Err(io::Error::other(format!(
                "cluster DNS answered {code} for {name}"
            ))),
        };
    }
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        format!("cluster DNS at {server} did not answer for {name}"),
    ))
}
