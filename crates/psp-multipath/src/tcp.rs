//! The TCP side of set-up: opening the connections ([`connect`]), accepting and pairing them
//! ([`Listener`]), and driving a sans-I/O [`Setup`] over them until the stream is established.

use core::net::SocketAddr;
use std::collections::HashMap;
use std::io;

use psp_core::handshake::Tai64n;
use psp_core::time::Instant;
use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};

use crate::clock::Clock;
use crate::proto::{Established, Setup, SetupEvent, roles};
use crate::rng::SetupRng;
use crate::wire::{HELLO_LEN, Hello, PathRole, caps};
use crate::{Error, Mode, MultipathStream, Options, Path, SetupProfile, TRUSTED, UNTRUSTED};

/// `[untrusted, trusted]` out of two paths, or an error.
fn split_paths(paths: &[Path]) -> Result<[&Path; 2], Error> {
    let [a, b] = paths else {
        return Err(Error::Config("give exactly two paths"));
    };
    match (a.role, b.role) {
        (PathRole::Untrusted, PathRole::Trusted) => Ok([a, b]),
        (PathRole::Trusted, PathRole::Untrusted) => Ok([b, a]),
        _ => Err(Error::Config(
            "one path must be trusted and the other untrusted",
        )),
    }
}

async fn connect_one(p: &Path) -> Result<TcpStream, Error> {
    let remote = p
        .remote
        .ok_or(Error::Config("a path has no remote address"))?;
    let e = |err| Error::io(Some(p.role), err);
    let sock = if remote.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(e)?;
    if let Some(dev) = &p.device {
        sock.bind_device(Some(dev.as_bytes())).map_err(e)?;
    }
    if let Some(local) = p.local {
        if local.port() == 0 {
            crate::sys::bind_address_no_port(&sock);
        }
        sock.bind(local).map_err(e)?;
    }
    let s = sock.connect(remote).await.map_err(e)?;
    s.set_nodelay(true).map_err(e)?;
    Ok(s)
}

/// The OS random number generator for one [`Setup`], read once ([`SetupRng`]). Fails early,
/// with a clear error, if it does not work (the handshake would otherwise panic in it).
fn os_rng() -> Result<Box<SetupRng>, Error> {
    SetupRng::new()
        .map(Box::new)
        .map_err(|_| Error::Config("the OS random number generator failed"))
}

/// The driver's clock readings during a set-up, for [`crate::SetupProfile`]. Each is taken
/// after the work it ends (a write returned, a read's bytes processed), so CPU time falls in
/// the phase that spent it.
#[derive(Clone, Copy, Debug, Default)]
struct Marks {
    /// The first write (hellos and the first flight) handed to the socket(s).
    first_write: Option<Instant>,
    /// The first bytes of the peer's answer read (before processing them).
    first_read: Option<Instant>,
    /// The read that gave the handshake's keys processed (parsing, DH, ML-KEM, key schedule,
    /// our binding tag; and the peer's tag if it came in the same read).
    keys: Option<Instant>,
    /// The set-up over: the peer's binding tag verified, the stream keys derived, our last
    /// bytes written.
    done: Option<Instant>,
}

impl Marks {
    /// The profile of a set-up that started at `start` (the clock's origin just before the
    /// connects, so `start` is the connect time).
    fn profile(&self, start: Instant) -> SetupProfile {
        let since = |a: Instant, b: Option<Instant>| {
            core::time::Duration::from(b.unwrap_or(a).saturating_since(a))
        };
        let wrote = self.first_write.unwrap_or(start);
        let read = self.first_read.unwrap_or(wrote);
        let keys = self.keys.unwrap_or(read);
        SetupProfile {
            connect: core::time::Duration::from_micros(start.total_micros()),
            handshake: since(start, Some(keys)),
            binding: since(keys, self.done),
            first_flight: since(start, Some(wrote)),
            reply: since(wrote, Some(read)),
            keys: since(read, Some(keys)),
        }
    }
}

/// Drives `setup` over `sockets` (by slot) until it reports.
///
/// # Errors
/// The set-up's failure, or a socket error or end during set-up.
async fn drive(
    setup: &mut Setup,
    sockets: &mut [TcpStream],
    clock: &Clock,
    marks: &mut Marks,
) -> Result<Established, Error> {
    let roles = roles(if sockets.len() == 1 {
        Mode::KernelMptcp
    } else {
        Mode::Dispersal
    });
    // A whole flight fits (the largest message, a KemShare, is 1,238 bytes); a read takes at
    // most the room there is, so a smaller buffer would split a flight over reads. (Not
    // `vec![Vec::with_capacity(4096); n]`: its clones have no capacity, and a `Vec` with none
    // grows by 64 bytes per read, which read the untrusted connection 64 bytes at a time.)
    let mut bufs: Vec<Vec<u8>> = (0..sockets.len())
        .map(|_| Vec::with_capacity(4096))
        .collect();
    loop {
        let event = setup.poll_event();
        let mut wrote = false;
        for (i, s) in sockets.iter_mut().enumerate() {
            let out = setup.poll_transmit(i);
            if out.is_empty() {
                continue;
            }
            let n = out.len();
            match (s.write_all(out).await, &event) {
                (Ok(()), _) => {
                    setup.transmitted(i, n);
                    wrote = true;
                }
                // A failed set-up's last bytes (a refusal, a Reject) are best effort.
                (Err(_), Some(SetupEvent::Failed(_))) => {}
                (Err(e), _) => return Err(Error::io(Some(roles[i]), e)),
            }
        }
        if wrote && marks.first_write.is_none() {
            marks.first_write = Some(clock.now());
        }
        match event {
            Some(SetupEvent::Established(e)) => {
                marks.done = Some(clock.now());
                return Ok(*e);
            }
            Some(SetupEvent::Failed(e)) => return Err(e),
            None => {}
        }
        let deadline = setup.poll_timeout().map(|t| clock.deadline(t));
        let sleep = async {
            match deadline {
                Some(t) => tokio::time::sleep_until(t).await,
                None => core::future::pending().await,
            }
        };
        let (i, r) = match sockets {
            [a, b] => {
                let [ba, bb] = &mut bufs[..] else {
                    return Err(Error::Config("one or two connections"));
                };
                let (wa, wb) = (setup.wants_input(0), setup.wants_input(1));
                tokio::select! {
                    r = a.read_buf(ba), if wa => (0, r),
                    r = b.read_buf(bb), if wb => (1, r),
                    () = sleep => {
                        setup.handle_timeout(clock.now());
                        continue;
                    }
                }
            }
            [a] => tokio::select! {
                r = a.read_buf(&mut bufs[0]), if setup.wants_input(0) => (0, r),
                () = sleep => {
                    setup.handle_timeout(clock.now());
                    continue;
                }
            },
            _ => return Err(Error::Config("one or two connections")),
        };
        match r {
            // The set-up says what a close at this point means.
            Ok(0) => setup.handle_eof(clock.now(), i),
            Ok(_) => {
                let now = clock.now();
                if marks.first_write.is_some() && marks.first_read.is_none() {
                    marks.first_read = Some(now);
                }
                setup.handle_recv(now, i, &bufs[i]);
                bufs[i].clear();
                if marks.keys.is_none() && setup.has_keys() {
                    marks.keys = Some(clock.now());
                }
            }
            Err(e) => return Err(Error::io(Some(roles[i]), e)),
        }
    }
}

/// The time of day for a handshake Request (its freshness stamp).
fn timestamp() -> Tai64n {
    Tai64n::from_system_time(std::time::SystemTime::now())
}

/// Connects both paths, runs set-up (hellos, SMKEX, binding) and returns the stream.
///
/// # Errors
/// [`Error::Config`] unless `paths` is one trusted and one untrusted path with remote
/// addresses; any set-up failure ([`Error::Handshake`] for an attacker replacing a share,
/// [`Error::Refused`], [`Error::Timeout`], [`Error::Io`]).
pub async fn connect(paths: &[Path], options: &Options) -> Result<MultipathStream, Error> {
    if options.mode == Mode::KernelMptcp {
        return connect_mptcp(paths, options).await;
    }
    let [u, t] = split_paths(paths)?;
    let clock = Clock::new();
    let go = async {
        let (cu, ct) = tokio::try_join!(connect_one(u), connect_one(t))?;
        initiate(vec![cu, ct], options, &clock).await
    };
    tokio::time::timeout(options.handshake_timeout, go)
        .await
        .map_err(|_| Error::Timeout)?
}

/// The initiator's set-up on connected `sockets` (by slot), `clock` started just before the
/// connects.
async fn initiate(
    mut sockets: Vec<TcpStream>,
    options: &Options,
    clock: &Clock,
) -> Result<MultipathStream, Error> {
    let start = clock.now();
    let mut setup = Setup::initiate(start, options, timestamp(), os_rng()?);
    let mut marks = Marks::default();
    let est = drive(&mut setup, &mut sockets, clock, &mut marks).await?;
    let mut s = MultipathStream::new(sockets, est, options, *clock);
    s.set_profile(marks.profile(start));
    Ok(s)
}

/// A new `IPPROTO_MPTCP` stream socket for `addr`'s family, or a clear error when the kernel
/// has no MPTCP.
fn mptcp_socket(addr: SocketAddr) -> io::Result<Socket> {
    Socket::new(
        Domain::for_address(addr),
        Type::STREAM,
        Some(Protocol::MPTCP),
    )
    .map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "no MPTCP socket ({e}): is net.mptcp.enabled = 1 and the kernel built with MPTCP?"
            ),
        )
    })
}

/// Kernel MPTCP mode: one MPTCP connection from the trusted path's local address.
async fn connect_mptcp(paths: &[Path], options: &Options) -> Result<MultipathStream, Error> {
    let t = paths
        .iter()
        .find(|p| p.role == PathRole::Trusted)
        .ok_or(Error::Config("kernel MPTCP mode needs a trusted path"))?;
    let remote = t
        .remote
        .ok_or(Error::Config("the trusted path has no remote address"))?;
    let e = |err| Error::io(Some(PathRole::Trusted), err);
    let clock = Clock::new();
    let go = async {
        let sock = mptcp_socket(remote).map_err(e)?;
        if let Some(dev) = &t.device {
            sock.bind_device(Some(dev.as_bytes())).map_err(e)?;
        }
        if let Some(local) = t.local {
            if local.port() == 0 {
                crate::sys::bind_address_no_port(&sock);
            }
            sock.bind(&local.into()).map_err(e)?;
        }
        sock.set_nonblocking(true).map_err(e)?;
        let sock = TcpSocket::from_std_stream(sock.into());
        let s = sock.connect(remote).await.map_err(e)?;
        s.set_nodelay(true).map_err(e)?;
        initiate(vec![s], options, &clock).await
    };
    tokio::time::timeout(options.handshake_timeout, go)
        .await
        .map_err(|_| Error::Timeout)?
}

/// Binds listeners for the two paths; see [`Listener::bind`].
///
/// # Errors
/// As [`Listener::bind`].
pub async fn listen(paths: &[Path]) -> Result<Listener, Error> {
    Listener::bind(paths).await
}

/// A connection whose hello was read: the socket, the hello, and the bytes read past it.
struct Arrived {
    socket: TcpStream,
    hello: [u8; HELLO_LEN],
    rest: Vec<u8>,
}

/// Two TCP listeners, one per path, that pair a client's two connections by the group id in
/// their hellos.
pub struct Listener {
    /// `[untrusted, trusted]`, or `[trusted]` (an MPTCP socket) in kernel MPTCP mode.
    listeners: Vec<TcpListener>,
    /// Half-arrived clients: group id → connection per slot.
    pending: HashMap<[u8; 8], [Option<Arrived>; 2]>,
}

impl core::fmt::Debug for Listener {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Listener")
            .field("listeners", &self.listeners)
            .field("pending", &self.pending.len())
            .finish()
    }
}

/// The most half-arrived clients kept; beyond, an arbitrary one is dropped (a flood of
/// half-connections can delay a real client, not corrupt it).
const MAX_PENDING: usize = 64;

fn listen_socket(p: &Path, mptcp: bool) -> Result<TcpListener, Error> {
    let local = p
        .local
        .ok_or(Error::Config("a path has no local address"))?;
    let e = |err| Error::io(Some(p.role), err);
    let sock = if mptcp {
        mptcp_socket(local).map_err(e)?
    } else {
        Socket::new(
            Domain::for_address(local),
            Type::STREAM,
            Some(Protocol::TCP),
        )
        .map_err(e)?
    };
    sock.set_reuse_address(true).map_err(e)?;
    if let Some(dev) = &p.device {
        sock.bind_device(Some(dev.as_bytes())).map_err(e)?;
    }
    sock.bind(&local.into()).map_err(e)?;
    sock.listen(128).map_err(e)?;
    sock.set_nonblocking(true).map_err(e)?;
    TcpListener::from_std(sock.into()).map_err(e)
}

/// Reads a connection's hello (and whatever came with it), within `options`' set-up timeout.
async fn read_hello(mut socket: TcpStream, options: &Options) -> Option<(Arrived, Hello)> {
    let _ = socket.set_nodelay(true);
    // Room for the hello and the whole first flight behind it (a hybrid handshake's KemShare
    // alone is 1,238 bytes): read in one go, it is answered in one write. With 1 KiB the
    // KemShare was cut, and the responder answered hello and Accept first, the rest after.
    let mut buf = Vec::with_capacity(4096);
    let read = async {
        while buf.len() < HELLO_LEN {
            if socket.read_buf(&mut buf).await.ok()? == 0 {
                return None;
            }
        }
        Some(())
    };
    tokio::time::timeout(options.handshake_timeout, read)
        .await
        .ok()??;
    let mut hello = [0u8; HELLO_LEN];
    hello.copy_from_slice(&buf[..HELLO_LEN]);
    let parsed = Hello::parse(&hello).ok()?;
    let rest = buf.split_off(HELLO_LEN);
    Some((
        Arrived {
            socket,
            hello,
            rest,
        },
        parsed,
    ))
}

impl Listener {
    /// Listens on each path's local address.
    ///
    /// # Errors
    /// [`Error::Config`] unless one trusted and one untrusted path with local addresses;
    /// [`Error::Io`] if binding fails.
    pub async fn bind(paths: &[Path]) -> Result<Self, Error> {
        let [u, t] = split_paths(paths)?;
        Ok(Self {
            listeners: vec![listen_socket(u, false)?, listen_socket(t, false)?],
            pending: HashMap::new(),
        })
    }

    /// Kernel MPTCP mode: one MPTCP listener on the trusted path's local address (announce
    /// further addresses with `ip mptcp endpoint ... signal`, and listen on the wildcard
    /// address so that the peer's joins to them find this listener).
    ///
    /// # Errors
    /// [`Error::Config`] without a trusted path with a local address; [`Error::Io`] if the
    /// kernel has no MPTCP or binding fails.
    pub async fn bind_kernel_mptcp(paths: &[Path]) -> Result<Self, Error> {
        let t = paths
            .iter()
            .find(|p| p.role == PathRole::Trusted)
            .ok_or(Error::Config("kernel MPTCP mode needs a trusted path"))?;
        Ok(Self {
            listeners: vec![listen_socket(t, true)?],
            pending: HashMap::new(),
        })
    }

    /// The bound addresses, `[untrusted, trusted]`.
    ///
    /// # Errors
    /// The socket's error.
    pub fn local_addrs(&self) -> io::Result<Vec<SocketAddr>> {
        self.listeners.iter().map(TcpListener::local_addr).collect()
    }

    /// Paths a client on this host would connect with (tests, examples).
    ///
    /// # Panics
    /// If the listening sockets have no address (they always do once bound).
    pub fn connect_paths(&self) -> [Path; 2] {
        let addrs = self.local_addrs().expect("bound listeners have addresses");
        let any = |a: SocketAddr| SocketAddr::new(a.ip(), 0);
        let (u, t) = (addrs[0], addrs[addrs.len() - 1]);
        [Path::trusted(any(t), t), Path::untrusted(any(u), u)]
    }

    /// Waits for a client's two connections, then runs set-up as responder.
    ///
    /// A connection whose hello does not parse or does not arrive within the set-up timeout,
    /// or arrives on the listener of the other role, is dropped and waiting goes on; a set-up
    /// failure after pairing is returned.
    ///
    /// # Errors
    /// Set-up failures of a paired client (as [`connect`]); [`Error::Io`] if accepting fails.
    pub async fn accept(&mut self, options: &Options) -> Result<MultipathStream, Error> {
        if self.listeners.len() == 1 {
            return self.accept_mptcp(options).await;
        }
        loop {
            let (i, sock) = tokio::select! {
                r = self.listeners[UNTRUSTED].accept() => (UNTRUSTED, r),
                r = self.listeners[TRUSTED].accept() => (TRUSTED, r),
            };
            let role = roles(Mode::Dispersal)[i];
            let (socket, _) = sock.map_err(|e| Error::io(Some(role), e))?;
            let Some((arrived, hello)) = read_hello(socket, options).await else {
                continue;
            };
            if hello.role != role {
                continue;
            }
            if self.pending.len() >= MAX_PENDING
                && !self.pending.contains_key(&hello.group)
                && let Some(k) = self.pending.keys().next().copied()
            {
                self.pending.remove(&k);
            }
            let slot = self.pending.entry(hello.group).or_insert([None, None]);
            slot[i] = Some(arrived);
            if slot.iter().all(Option::is_some) {
                let Some([Some(u), Some(t)]) = self.pending.remove(&hello.group) else {
                    continue;
                };
                return respond(vec![u, t], options).await;
            }
        }
    }

    async fn accept_mptcp(&mut self, options: &Options) -> Result<MultipathStream, Error> {
        loop {
            let (socket, _) = self.listeners[0]
                .accept()
                .await
                .map_err(|e| Error::io(Some(PathRole::Trusted), e))?;
            let Some((arrived, hello)) = read_hello(socket, options).await else {
                continue;
            };
            if hello.caps & caps::KERNEL_MPTCP == 0 {
                continue;
            }
            return respond(vec![arrived], options).await;
        }
    }
}

/// Runs set-up as responder on the paired connections (by slot).
async fn respond(arrived: Vec<Arrived>, options: &Options) -> Result<MultipathStream, Error> {
    let clock = Clock::new();
    let hellos: Vec<[u8; HELLO_LEN]> = arrived.iter().map(|a| a.hello).collect();
    let mut setup = Setup::respond(clock.now(), options, &hellos, os_rng()?);
    let mut sockets = Vec::with_capacity(arrived.len());
    for (i, a) in arrived.into_iter().enumerate() {
        if !a.rest.is_empty() {
            setup.handle_recv(clock.now(), i, &a.rest);
        }
        sockets.push(a.socket);
    }
    let start = clock.now();
    let mut marks = Marks::default();
    let est = tokio::time::timeout(
        options.handshake_timeout,
        drive(&mut setup, &mut sockets, &clock, &mut marks),
    )
    .await
    .map_err(|_| Error::Timeout)??;
    let mut s = MultipathStream::new(sockets, est, options, clock);
    s.set_profile(marks.profile(start));
    Ok(s)
}
