//! Delay without netem: packets leaving a Pod are queued to userspace (`NFQUEUE`, see
//! [`super::filter`]) and given back to the kernel (`NF_ACCEPT`) once their delay has passed.
//!
//! A thread of this process enters the Pod's network namespace, binds queue
//! [`super::filter::DELAY_QUEUE`] there over a `NETLINK_NETFILTER` socket (queues are per
//! namespace) and releases packets in arrival order: each packet waits `delay ± jitter`, but
//! never leaves before the one queued ahead of it, so a TCP stream is delayed, not reordered.
//! The netlink messages are built and parsed here (a few fixed structures of
//! `linux/netfilter/nfnetlink_queue.h`), so nothing beyond libc is needed.
//!
//! With the queue full the kernel lets packets through (`NFQA_CFG_F_FAIL_OPEN`); when the
//! thread stops, it accepts every packet it still holds.

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::netns::NetNamespace;

const NETLINK_NETFILTER: libc::c_int = 12;
const NFNL_SUBSYS_QUEUE: u16 = 3;
const NFQNL_MSG_PACKET: u16 = 0;
const NFQNL_MSG_VERDICT: u16 = 1;
const NFQNL_MSG_CONFIG: u16 = 2;
const NFQA_PACKET_HDR: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NFQA_CFG_CMD: u16 = 1;
const NFQA_CFG_PARAMS: u16 = 2;
const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;
const NFQA_CFG_MASK: u16 = 4;
const NFQA_CFG_FLAGS: u16 = 5;
const NFQA_CFG_F_FAIL_OPEN: u32 = 1;
const NFQNL_CFG_CMD_BIND: u8 = 1;
const NFQNL_COPY_META: u8 = 1;
const NF_ACCEPT: u32 = 1;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLA_TYPE_MASK: u16 = 0x3fff;
const HEADER: usize = 16;
const NFGEN: usize = 4;

/// How long each packet waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DelaySpec {
    pub delay: Duration,
    pub jitter: Duration,
}

impl DelaySpec {
    /// One packet's wait: uniform in `delay ± jitter` (never below zero).
    fn sample(&self, random: f64) -> Duration {
        let base = self.delay.as_secs_f64();
        let spread = self.jitter.as_secs_f64();
        Duration::from_secs_f64((base + spread * (2.0 * random - 1.0)).max(0.0))
    }
}

/// When a packet arriving at `now` leaves: after its own wait, and not before `previous`.
pub fn release_at(previous: Option<Instant>, now: Instant, wait: Duration) -> Instant {
    let own = now + wait;
    previous.map_or(own, |p| p.max(own))
}

/// A running delay queue in one Pod's namespace; dropping it stops the thread (and releases
/// every packet it holds).
pub struct DelayQueue {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl DelayQueue {
    /// Binds the queue inside `namespace` and starts releasing packets after `spec`. Fails
    /// when the kernel has no `nfnetlink_queue`, or the queue is taken.
    pub fn start(namespace: Arc<NetNamespace>, spec: DelaySpec) -> io::Result<DelayQueue> {
        let (ready, started) = std::sync::mpsc::channel::<io::Result<()>>();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("pod-delay".into())
            .spawn(move || {
                let socket = namespace
                    .enter_current_thread()
                    .and_then(|()| QueueSocket::bind(super::filter::DELAY_QUEUE));
                match socket {
                    Ok(socket) => {
                        let _ = ready.send(Ok(()));
                        socket.run(spec, &stopping);
                    }
                    Err(error) => {
                        let _ = ready.send(Err(error));
                    }
                }
            })?;
        started
            .recv()
            .map_err(|_| io::Error::other("the delay thread ended at start"))??;
        Ok(DelayQueue {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for DelayQueue {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// A netlink socket bound to one queue.
struct QueueSocket {
    fd: OwnedFd,
    queue: u16,
    sequence: u32,
}

impl QueueSocket {
    fn bind(queue: u16) -> io::Result<QueueSocket> {
        // SAFETY: plain socket(2); the descriptor is owned right after.
        let raw = unsafe {
            libc::socket(
                libc::AF_NETLINK,
                libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                NETLINK_NETFILTER,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: a zeroed sockaddr_nl with the family set is a valid "any port" address.
        let mut address: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        address.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        // SAFETY: the address is a sockaddr_nl of the length given.
        let bound = unsafe {
            libc::bind(
                fd.as_raw_fd(),
                (&address as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if bound != 0 {
            return Err(io::Error::last_os_error());
        }
        set_option(&fd, libc::SOL_SOCKET, libc::SO_RCVBUF, 4 << 20);
        // Missed packets (a full socket buffer) are the kernel's to accept or drop; the
        // queue goes on with the next ones.
        set_option(&fd, libc::SOL_NETLINK, libc::NETLINK_NO_ENOBUFS, 1);
        let mut socket = QueueSocket {
            fd,
            queue,
            sequence: 0,
        };
        socket.configure(&[attribute(
            NFQA_CFG_CMD,
            &[NFQNL_CFG_CMD_BIND, 0, 0, libc::AF_INET as u8],
        )])?;
        let mut params = 0xffffu32.to_be_bytes().to_vec();
        params.push(NFQNL_COPY_META);
        socket.configure(&[
            attribute(NFQA_CFG_PARAMS, &params),
            attribute(NFQA_CFG_QUEUE_MAXLEN, &8192u32.to_be_bytes()),
            attribute(NFQA_CFG_MASK, &NFQA_CFG_F_FAIL_OPEN.to_be_bytes()),
            attribute(NFQA_CFG_FLAGS, &NFQA_CFG_F_FAIL_OPEN.to_be_bytes()),
        ])?;
        Ok(socket)
    }

    /// Sends a config message and waits for its acknowledgement.
    fn configure(&mut self, attributes: &[Vec<u8>]) -> io::Result<()> {
        self.sequence += 1;
        let message = message(
            NFQNL_MSG_CONFIG,
            NLM_F_REQUEST | NLM_F_ACK,
            self.sequence,
            self.queue,
            attributes,
        );
        self.send(&message)?;
        let mut buffer = vec![0u8; 8192];
        loop {
            let n = self.receive(&mut buffer, Some(Duration::from_secs(2)))?;
            if n == 0 {
                return Err(io::Error::other(
                    "the kernel did not acknowledge the queue configuration",
                ));
            }
            for parsed in parse(&buffer[..n]) {
                if let Parsed::Ack { sequence, error } = parsed
                    && sequence == self.sequence
                {
                    return if error == 0 {
                        Ok(())
                    } else {
                        Err(io::Error::from_raw_os_error(-error))
                    };
                }
            }
        }
    }

    fn send(&self, message: &[u8]) -> io::Result<()> {
        // SAFETY: a buffer of the length given; the kernel is the destination (port 0).
        let mut address: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
        address.nl_family = libc::AF_NETLINK as libc::sa_family_t;
        let sent = unsafe {
            libc::sendto(
                self.fd.as_raw_fd(),
                message.as_ptr().cast(),
                message.len(),
                0,
                (&address as *const libc::sockaddr_nl).cast(),
                std::mem::size_of::<libc::sockaddr_nl>() as libc::socklen_t,
            )
        };
        if sent < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Reads one datagram, waiting at most `wait` (0 bytes when nothing came).
    fn receive(&self, buffer: &mut [u8], wait: Option<Duration>) -> io::Result<usize> {
        let timeout = wait.map_or(-1, |w| w.as_millis().clamp(1, 1000) as libc::c_int);
        let mut poll = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd.
        let ready = unsafe { libc::poll(&mut poll, 1, timeout) };
        if ready < 0 {
            let error = io::Error::last_os_error();
            return if error.kind() == io::ErrorKind::Interrupted {
                Ok(0)
            } else {
                Err(error)
            };
        }
        if ready == 0 {
            return Ok(0);
        }
        // SAFETY: the buffer's own pointer and length.
        let n = unsafe {
            libc::recv(
                self.fd.as_raw_fd(),
                buffer.as_mut_ptr().cast(),
                buffer.len(),
                libc::MSG_DONTWAIT,
            )
        };
        if n < 0 {
            let error = io::Error::last_os_error();
            return match error.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) | Some(libc::ENOBUFS) => Ok(0),
                _ => Err(error),
            };
        }
        Ok(n as usize)
    }

    fn accept(&mut self, packet: u32) {
        let mut verdict = NF_ACCEPT.to_be_bytes().to_vec();
        verdict.extend_from_slice(&packet.to_be_bytes());
        let message = message(
            NFQNL_MSG_VERDICT,
            NLM_F_REQUEST,
            0,
            self.queue,
            &[attribute(NFQA_VERDICT_HDR, &verdict)],
        );
        if let Err(error) = self.send(&message) {
            tracing::debug!(%error, packet, "a delayed packet's verdict was refused");
        }
    }

    fn run(mut self, spec: DelaySpec, stop: &AtomicBool) {
        let mut held: VecDeque<(Instant, u32)> = VecDeque::new();
        let mut buffer = vec![0u8; 1 << 16];
        while !stop.load(Ordering::SeqCst) {
            let now = Instant::now();
            while let Some(&(at, packet)) = held.front() {
                if at > now {
                    break;
                }
                held.pop_front();
                self.accept(packet);
            }
            let wait = held
                .front()
                .map_or(Duration::from_millis(100), |(at, _)| {
                    at.saturating_duration_since(now)
                })
                .min(Duration::from_millis(100));
            let n = match self.receive(&mut buffer, Some(wait)) {
                Ok(n) => n,
                Err(error) => {
                    tracing::warn!(%error, "the Pod's delay queue stopped reading");
                    break;
                }
            };
            let arrived = Instant::now();
            for parsed in parse(&buffer[..n]) {
                if let Parsed::Packet(id) = parsed {
                    let previous = held.back().map(|(at, _)| *at);
                    let at = release_at(previous, arrived, spec.sample(rand::random::<f64>()));
                    held.push_back((at, id));
                }
            }
        }
        for (_, packet) in held.drain(..) {
            self.accept(packet);
        }
    }
}

fn set_option(fd: &OwnedFd, level: libc::c_int, name: libc::c_int, value: libc::c_int) {
    // SAFETY: an int option of the right size.
    unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

/// One netlink attribute, padded to 4 bytes.
fn attribute(kind: u16, payload: &[u8]) -> Vec<u8> {
    let length = 4 + payload.len();
    let mut out = Vec::with_capacity(length.next_multiple_of(4));
    out.extend_from_slice(&(length as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(payload);
    out.resize(length.next_multiple_of(4), 0);
    out
}

/// A queue message: netlink header, nfgenmsg (AF_UNSPEC, version 0, the queue number in
/// network order), the attributes.
fn message(kind: u16, flags: u16, sequence: u32, queue: u16, attributes: &[Vec<u8>]) -> Vec<u8> {
    let body: usize = attributes.iter().map(Vec::len).sum();
    let length = HEADER + NFGEN + body;
    let mut out = Vec::with_capacity(length);
    out.extend_from_slice(&(length as u32).to_ne_bytes());
    out.extend_from_slice(&((NFNL_SUBSYS_QUEUE << 8) | kind).to_ne_bytes());
    out.extend_from_slice(&flags.to_ne_bytes());
    out.extend_from_slice(&sequence.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes());
    out.extend_from_slice(&[libc::AF_UNSPEC as u8, 0]);
    out.extend_from_slice(&queue.to_be_bytes());
    for a in attributes {
        out.extend_from_slice(a);
    }
    out
}

#[derive(Debug, PartialEq, Eq)]
enum Parsed {
    /// A queued packet's ID.
    Packet(u32),
    /// An acknowledgement (error 0) or error of the request `sequence`.
    Ack { sequence: u32, error: i32 },
}

/// The messages of one datagram that matter here.
fn parse(datagram: &[u8]) -> Vec<Parsed> {
    let read_u16 = |b: &[u8], at: usize| u16::from_ne_bytes([b[at], b[at + 1]]);
    let read_u32 = |b: &[u8], at: usize| u32::from_ne_bytes(b[at..at + 4].try_into().unwrap());
    let mut found = Vec::new();
    let mut offset = 0;
    while offset + HEADER <= datagram.len() {
        let length = read_u32(datagram, offset) as usize;
        if length < HEADER || offset + length > datagram.len() {
            break;
        }
        let message = &datagram[offset..offset + length];
        let kind = read_u16(message, 4);
        let sequence = read_u32(message, 8);
        if kind == NLMSG_ERROR && length >= HEADER + 4 {
            let error = i32::from_ne_bytes(message[HEADER..HEADER + 4].try_into().unwrap());
            found.push(Parsed::Ack { sequence, error });
        } else if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET {
            let mut at = HEADER + NFGEN;
            while at + 4 <= message.len() {
                let attribute_length = read_u16(message, at) as usize;
                let attribute_kind = read_u16(message, at + 2) & NLA_TYPE_MASK;
                if attribute_length < 4 || at + attribute_length > message.len() {
                    break;
                }
                if attribute_kind == NFQA_PACKET_HDR && attribute_length >= 8 {
                    let id = u32::from_be_bytes(message[at + 4..at + 8].try_into().unwrap());
                    found.push(Parsed::Packet(id));
                }
                at += attribute_length.next_multiple_of(4);
            }
        }
        offset += length.next_multiple_of(4);
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packets_leave_in_order_each_after_its_wait() {
        let t0 = Instant::now();
        let first = release_at(None, t0, Duration::from_millis(300));
        assert_eq!(first, t0 + Duration::from_millis(300));
        // A later packet with a shorter wait does not overtake the first.
        let second = release_at(
            Some(first),
            t0 + Duration::from_millis(10),
            Duration::from_millis(100),
        );
        assert_eq!(second, first);
        let third = release_at(
            Some(second),
            t0 + Duration::from_millis(400),
            Duration::from_millis(100),
        );
        assert_eq!(third, t0 + Duration::from_millis(500));
    }

    #[test]
    fn jitter_spreads_the_wait_around_the_delay() {
        let spec = DelaySpec {
            delay: Duration::from_millis(100),
            jitter: Duration::from_millis(20),
        };
        assert_eq!(spec.sample(0.0), Duration::from_millis(80));
        assert_eq!(spec.sample(0.5), Duration::from_millis(100));
        assert_eq!(spec.sample(1.0), Duration::from_millis(120));
        let wide = DelaySpec {
            delay: Duration::from_millis(10),
            jitter: Duration::from_millis(50),
        };
        assert_eq!(wide.sample(0.0), Duration::ZERO, "never negative");
    }

    #[test]
    fn a_verdict_message_has_the_kernels_layout() {
        let mut verdict = NF_ACCEPT.to_be_bytes().to_vec();
        verdict.extend_from_slice(&7u32.to_be_bytes());
        let m = message(
            NFQNL_MSG_VERDICT,
            NLM_F_REQUEST,
            0,
            0,
            &[attribute(NFQA_VERDICT_HDR, &verdict)],
        );
        assert_eq!(m.len(), 16 + 4 + 12);
        assert_eq!(u32::from_ne_bytes(m[0..4].try_into().unwrap()), 32);
        assert_eq!(u16::from_ne_bytes([m[4], m[5]]), 0x0301);
        assert_eq!(&m[16..20], &[0, 0, 0, 0], "AF_UNSPEC, version 0, queue 0");
        assert_eq!(u16::from_ne_bytes([m[20], m[21]]), 12, "attribute length");
        assert_eq!(u16::from_ne_bytes([m[22], m[23]]), NFQA_VERDICT_HDR);
        assert_eq!(&m[24..32], &[0, 0, 0, 1, 0, 0, 0, 7]);
        // Payloads are padded to four bytes.
        assert_eq!(attribute(NFQA_CFG_PARAMS, &[0; 5]).len(), 12);
    }

    #[test]
    fn packets_and_acknowledgements_are_read_from_a_datagram() {
        let mut packet_header = 42u32.to_be_bytes().to_vec();
        packet_header.extend_from_slice(&[0x08, 0x00, 3]);
        let packet = message(
            NFQNL_MSG_PACKET,
            0,
            0,
            0,
            &[
                attribute(9, &[1, 2, 3, 4]),
                attribute(NFQA_PACKET_HDR, &packet_header),
            ],
        );
        let mut ack = Vec::new();
        ack.extend_from_slice(&36u32.to_ne_bytes());
        ack.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        ack.extend_from_slice(&0u16.to_ne_bytes());
        ack.extend_from_slice(&5u32.to_ne_bytes());
        ack.extend_from_slice(&0u32.to_ne_bytes());
        ack.extend_from_slice(&(-16i32).to_ne_bytes());
        ack.extend_from_slice(&[0; 16]);
        let mut datagram = packet.clone();
        datagram.resize(datagram.len().next_multiple_of(4), 0);
        datagram.extend_from_slice(&ack);
        assert_eq!(
            parse(&datagram),
            vec![
                Parsed::Packet(42),
                Parsed::Ack {
                    sequence: 5,
                    error: -16
                }
            ]
        );
        assert_eq!(
            parse(&datagram[..10]),
            vec![],
            "a truncated datagram is ignored"
        );
    }
}
