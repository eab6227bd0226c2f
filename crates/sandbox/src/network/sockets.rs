//! Sockets of the cluster network for code running anywhere in this process.
//!
//! A socket belongs to the network namespace it was created in, whatever thread uses it later,
//! so the worker thread inside the cluster network creates them and async code uses them.

use std::io;
use std::net::{
    SocketAddr, TcpListener as StdTcpListener, TcpStream as StdTcpStream, UdpSocket as StdUdpSocket,
};
use std::os::fd::{FromRawFd, OwnedFd};
use std::sync::Arc;

use tokio::net::{TcpListener, TcpSocket, TcpStream, UdpSocket};

use super::netns::NetnsWorker;

/// Creates sockets inside one network namespace; cheap to clone.
#[derive(Clone)]
pub struct SocketFactory {
    worker: Arc<NetnsWorker>,
}

impl SocketFactory {
    pub(crate) fn new(worker: Arc<NetnsWorker>) -> Self {
        Self { worker }
    }

    /// A factory for this process's own network namespace (tests of socket users).
    #[cfg(test)]
    pub(crate) fn in_this_namespace() -> io::Result<Self> {
        let namespace = super::NetNamespace::open("/proc/thread-self/ns/net")?;
        let worker = NetnsWorker::start(Arc::new(namespace), "test-sockets")?;
        Ok(Self::new(Arc::new(worker)))
    }

    /// A TCP connection from inside the namespace.
    pub async fn connect(&self, address: SocketAddr) -> io::Result<TcpStream> {
        let domain = if address.is_ipv4() {
            libc::AF_INET
        } else {
            libc::AF_INET6
        };
        let socket = self
            .worker
            .run_async(move || new_socket(domain, libc::SOCK_STREAM))
            .await??;
        TcpSocket::from_std_stream(StdTcpStream::from(socket))
            .connect(address)
            .await
    }

    /// A listening TCP socket inside the namespace (address reuse on, as std does).
    pub async fn bind_tcp(&self, address: SocketAddr) -> io::Result<TcpListener> {
        let listener = self
            .worker
            .run_async(move || -> io::Result<StdTcpListener> {
                let listener = StdTcpListener::bind(address)?;
                listener.set_nonblocking(true)?;
                Ok(listener)
            })
            .await??;
        TcpListener::from_std(listener)
    }

    /// A UDP socket bound inside the namespace (port 0 for an ephemeral one).
    pub async fn bind_udp(&self, address: SocketAddr) -> io::Result<UdpSocket> {
        let socket = self
            .worker
            .run_async(move || -> io::Result<StdUdpSocket> {
                let socket = StdUdpSocket::bind(address)?;
                socket.set_nonblocking(true)?;
                Ok(socket)
            })
            .await??;
        UdpSocket::from_std(socket)
    }

    /// Runs blocking code on the thread inside the namespace (it serves everyone: keep it short).
    pub async fn run<R: Send + 'static>(
        &self,
        job: impl FnOnce() -> R + Send + 'static,
    ) -> io::Result<R> {
        self.worker.run_async(job).await
    }
}

fn new_socket(domain: libc::c_int, kind: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket(2) has no memory-safety preconditions; the result is checked.
    let fd = unsafe { libc::socket(domain, kind | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
