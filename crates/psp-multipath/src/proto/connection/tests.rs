//! The data phase in memory on a virtual clock: two [`Connection`]s joined by in-memory links
//! (one per path and direction, each with a delay, a capacity standing for the socket buffers,
//! and random read sizes), under loss of a whole path, reordering between the paths,
//! duplication and forgery, for both path-failure policies. No socket, no tokio.

use std::collections::VecDeque;

use psp_core::handshake::rand_core::RngCore;

use super::*;
use crate::proto::setup::tests::{T0, TestRng, pair};

const CLOSE: OnPathFailure = OnPathFailure::Close;
const CONTINUE: OnPathFailure = OnPathFailure::Continue {
    allow_untrusted_only: false,
};

fn opts(cipher: Cipher, policy: OnPathFailure) -> Options {
    Options {
        cipher,
        allow_plain: cipher == Cipher::None,
        on_path_failure: policy,
        ..Options::default()
    }
}

/// One direction of one path.
struct Link {
    /// Chunks in flight with the time they arrive.
    queue: VecDeque<(Instant, Vec<u8>)>,
    in_flight: usize,
    delay: Duration,
    /// Bytes in flight at most (the socket buffers).
    cap: usize,
    /// Cut: queued bytes are lost, new ones dropped.
    down: bool,
}

impl Link {
    fn new() -> Self {
        Self {
            queue: VecDeque::new(),
            in_flight: 0,
            delay: Duration::from_millis(1),
            cap: 256 * 1024,
            down: false,
        }
    }
}

/// One end: its connection, what it still has to send, what it got.
struct End {
    conn: Connection,
    data: Vec<u8>,
    sent: usize,
    got: Vec<u8>,
    eof: bool,
    error: Option<io::Error>,
}

impl End {
    fn new(conn: Connection, data: Vec<u8>) -> Self {
        Self {
            conn,
            data,
            sent: 0,
            got: Vec::new(),
            eof: false,
            error: None,
        }
    }

    fn done(&self) -> bool {
        self.error.is_some()
            || (self.eof
                && self.sent == self.data.len()
                && self.conn.is_closed()
                && !self.conn.awaiting_acks()
                && !self.conn.transmit_pending())
    }
}

/// A change to a chunk in transit: `(from, slot, bytes)`.
type Tamper = Box<dyn FnMut(usize, usize, &mut Vec<u8>)>;

/// Two ends and four links: `links[from][slot]`.
struct Net {
    now: Instant,
    ends: [End; 2],
    links: [[Link; 2]; 2],
    rng: TestRng,
    /// A change to each chunk in transit: `(from, slot, bytes)`.
    tamper: Option<Tamper>,
}

impl Net {
    /// An initiator (end 0) with `io` sending `a`, a responder (end 1) with `ro` sending `b`.
    fn new(io: &Options, ro: &Options, a: Vec<u8>, b: Vec<u8>) -> Self {
        let (ei, er) = pair(io, ro);
        Self {
            now: T0,
            ends: [
                End::new(Connection::new(T0, ei, io), a),
                End::new(Connection::new(T0, er, ro), b),
            ],
            links: [[Link::new(), Link::new()], [Link::new(), Link::new()]],
            rng: TestRng(99),
            tamper: None,
        }
    }

    fn record(e: &mut End, r: io::Result<()>) {
        if let Err(err) = r
            && e.error.is_none()
        {
            e.error = Some(err);
        }
    }

    /// Path `slot` fails at both ends (as a reset would tell them).
    fn cut(&mut self, slot: usize) {
        for from in 0..2 {
            let l = &mut self.links[from][slot];
            l.down = true;
            l.queue.clear();
            l.in_flight = 0;
        }
        let now = self.now;
        for e in &mut self.ends {
            let why = Error::PathFailed {
                path: e.conn.paths[slot].role,
                reason: "cut".into(),
            };
            let r = e.conn.handle_path_failed(now, slot, why);
            Self::record(e, r);
        }
    }

    fn step(&mut self) {
        let now = self.now;
        for (s, e) in self.ends.iter_mut().enumerate() {
            if e.error.is_some() {
                continue;
            }
            // Write what the connection takes, then end the sending half.
            while e.sent < e.data.len() {
                match e.conn.write(now, &e.data[e.sent..]) {
                    Ok(0) => break,
                    Ok(n) => e.sent += n,
                    Err(err) => {
                        e.error = Some(err);
                        break;
                    }
                }
            }
            if e.error.is_none() && e.sent == e.data.len() && !e.conn.is_closed() {
                let r = e.conn.close(now);
                Self::record(e, r);
            }
            // Transmit into the links, as far as they have room.
            for slot in 0..2 {
                let l = &mut self.links[s][slot];
                let out = e.conn.poll_transmit(slot);
                let n = out.len().min(l.cap - l.in_flight);
                if n == 0 {
                    continue;
                }
                let mut bytes = out[..n].to_vec();
                e.conn.transmitted(slot, n);
                if l.down {
                    continue;
                }
                if let Some(t) = &mut self.tamper {
                    t(s, slot, &mut bytes);
                }
                l.in_flight += n;
                l.queue.push_back((now + l.delay, bytes));
            }
        }
        // Receive: each end reads what has arrived, in random sizes, while it wants input.
        for r in 0..2 {
            let e = &mut self.ends[r];
            for slot in 0..2 {
                let l = &mut self.links[1 - r][slot];
                loop {
                    if e.error.is_some() {
                        break;
                    }
                    match e.conn.needs_input(slot) {
                        Ok(true) => {}
                        Ok(false) => break,
                        Err(err) => {
                            e.error = Some(err);
                            break;
                        }
                    }
                    let Some((at, chunk)) = l.queue.front_mut() else {
                        break;
                    };
                    if *at > now {
                        break;
                    }
                    let space = e.conn.recv_buf(slot);
                    let want = 1 + (self.rng.next_u32() as usize % (64 * 1024));
                    let n = chunk.len().min(space.len()).min(want);
                    space[..n].copy_from_slice(&chunk[..n]);
                    e.conn.handle_recv(slot, n);
                    chunk.drain(..n);
                    l.in_flight -= n;
                    if chunk.is_empty() {
                        l.queue.pop_front();
                    }
                }
            }
            // Deliver.
            let mut buf = [0u8; 8192];
            while e.error.is_none() && !e.eof {
                match e.conn.read(now, &mut buf) {
                    Ok(Read::Data(n)) => e.got.extend_from_slice(&buf[..n]),
                    Ok(Read::End) => e.eof = true,
                    Ok(Read::Blocked) => break,
                    Err(err) => e.error = Some(err),
                }
            }
            if e.conn.poll_timeout().is_some_and(|t| t <= now) {
                e.conn.handle_timeout(now);
            }
            while e.conn.poll_event().is_some() {}
        }
        self.now += Duration::from_millis(1);
    }

    /// Steps until both ends are done (or `limit` virtual milliseconds pass).
    fn run(&mut self, limit: u64) {
        for _ in 0..limit {
            if self.ends.iter().all(End::done) {
                return;
            }
            self.step();
        }
    }

    /// Steps until end `e` has received at least `n` bytes.
    fn run_until_received(&mut self, e: usize, n: usize) {
        for _ in 0..100_000 {
            if self.ends[e].got.len() >= n || self.ends[e].error.is_some() {
                return;
            }
            self.step();
        }
    }
}

fn data(n: usize, k: u32) -> Vec<u8> {
    (0..n as u32)
        .map(|i| (i.wrapping_mul(k) ^ (i >> 9)) as u8)
        .collect()
}

fn assert_delivered(net: &Net, what: &str) {
    for (i, e) in net.ends.iter().enumerate() {
        assert!(e.error.is_none(), "{what}: end {i}: {:?}", e.error);
        let other = &net.ends[1 - i];
        assert!(e.eof, "{what}: end {i} saw no end of stream");
        assert_eq!(e.got.len(), other.data.len(), "{what}: end {i}");
        assert!(e.got == other.data, "{what}: end {i}: stream corrupted");
    }
}

#[test]
fn each_cipher_round_trips_in_order_both_directions() {
    for &cipher in Cipher::ALL {
        for policy in [CLOSE, CONTINUE] {
            let o = opts(cipher, policy);
            let mut net = Net::new(&o, &o, data(1_000_003, 7), data(300_007, 13));
            net.run(100_000);
            assert_delivered(&net, &format!("{cipher} {policy:?}"));
            for e in &net.ends {
                let (u, t) = (e.conn.path_stats(UNTRUSTED), e.conn.path_stats(TRUSTED));
                assert!(u.bytes_sent > 0 && t.bytes_sent > 0, "both paths used");
                assert!(e.conn.untrusted_share() <= 0.5 + 1e-9, "the default cap");
                assert_eq!(e.conn.unacked_bytes(), 0);
            }
        }
    }
}

/// The first segment goes on the trusted path; a fixed share is exact to a segment.
#[test]
fn the_first_segment_is_trusted_and_a_fixed_share_is_exact() {
    let o = Options {
        share: SharePolicy::Fixed {
            untrusted_permille: 250,
        },
        segment_len: 1000,
        ..opts(Cipher::Aes128Gcm, CLOSE)
    };
    let mut net = Net::new(&o, &o, data(400_000, 3), Vec::new());
    let seen = std::rc::Rc::new(core::cell::RefCell::new(Vec::new()));
    let log = seen.clone();
    net.tamper = Some(Box::new(move |from, slot, bytes: &mut Vec<u8>| {
        if from == 0 {
            log.borrow_mut().push((slot, bytes.clone()));
        }
    }));
    net.run(100_000);
    assert_delivered(&net, "fixed");
    let first_on = |slot| {
        let seen = seen.borrow();
        let (_, bytes) = seen.iter().find(|(s, _)| *s == slot).unwrap();
        let s = Segment::new_checked(&bytes[..]).unwrap();
        (s.kind_code(), s.seg(), s.offset())
    };
    assert_eq!(first_on(TRUSTED), (1, 0, 0));
    assert!(first_on(UNTRUSTED).1 > 0);
    let share = net.ends[0].conn.untrusted_share();
    assert!((share - 0.25).abs() < 0.003, "{share}");
}

/// The untrusted path 200 times slower than the trusted one: segments arrive far out of order
/// between the paths, and the receiver still delivers them in order, holding at most one per
/// path (a `Close` receiver never reads ahead).
#[test]
fn a_slow_path_reorders_the_arrivals_not_the_stream() {
    let o = opts(Cipher::ChaCha20Poly1305, CLOSE);
    let mut net = Net::new(&o, &o, data(2_000_000, 5), data(10_000, 3));
    for from in 0..2 {
        net.links[from][UNTRUSTED].delay = Duration::from_millis(200);
    }
    net.run(200_000);
    assert_delivered(&net, "slow untrusted");
    assert!(net.ends.iter().all(|e| e.conn.reorder.is_empty()));
}

/// Under `Close`, a path that fails ends the stream at both ends with `PathFailed`.
#[test]
fn close_a_failed_path_ends_the_stream_at_both_ends() {
    for slot in [UNTRUSTED, TRUSTED] {
        let o = opts(Cipher::Aes128Gcm, CLOSE);
        let mut net = Net::new(&o, &o, data(3_000_000, 7), Vec::new());
        net.run_until_received(1, 500_000);
        net.cut(slot);
        net.run(1000);
        for e in &net.ends {
            let err = e.error.as_ref().expect("the stream ended");
            assert!(err.to_string().contains("path failed"), "{err}");
            assert_eq!(err.kind(), io::ErrorKind::ConnectionAborted);
            let f = e.conn.path_stats(slot).failure.as_ref().unwrap();
            assert!(!f.continued);
        }
    }
}

/// Under `Continue`, a path cut with segments in flight (lost with it) loses and repeats
/// nothing: the sender re-sends its unacknowledged segments on the other path, in both
/// directions, per cipher and for either path (the trusted one only with AEAD or with
/// permission).
#[test]
fn continue_a_path_lost_in_flight_is_resent_on_the_other() {
    let allowed = OnPathFailure::Continue {
        allow_untrusted_only: true,
    };
    let cases = [
        (Cipher::Aes128Gcm, UNTRUSTED, CONTINUE),
        (Cipher::Aes128Gcm, TRUSTED, CONTINUE),
        (Cipher::ChaCha20Poly1305, TRUSTED, CONTINUE),
        (Cipher::Scramble, UNTRUSTED, CONTINUE),
        (Cipher::None, UNTRUSTED, CONTINUE),
        (Cipher::Scramble, TRUSTED, allowed),
    ];
    for (cipher, slot, policy) in cases {
        let o = opts(cipher, policy);
        let mut net = Net::new(&o, &o, data(3_000_000, 11), data(1_000_000, 5));
        for from in 0..2 {
            // A long path: much in flight when it dies.
            net.links[from][slot].delay = Duration::from_millis(20);
        }
        net.run_until_received(1, 1_000_000);
        net.cut(slot);
        net.run(200_000);
        let what = format!("{cipher} slot {slot}");
        assert_delivered(&net, &what);
        let other = 1 - slot;
        let resent: u64 = net
            .ends
            .iter()
            .map(|e| e.conn.path_stats(other).segments_resent)
            .sum();
        assert!(resent > 0, "{what}: nothing was re-sent");
        for e in &net.ends {
            assert!(e.conn.path_stats(slot).failure.as_ref().unwrap().continued);
        }
    }
}

/// The trusted path delivers its segments, but the acks for them are lost when it fails: the
/// sender re-sends them on the untrusted path and the receiver drops the copies.
#[test]
fn continue_copies_of_delivered_segments_are_dropped() {
    let o = opts(Cipher::Aes128Gcm, CONTINUE);
    let mut net = Net::new(&o, &o, data(4_000_000, 3), Vec::new());
    net.run_until_received(1, 1_500_000);
    // Acks from here on are lost: the receiver's output on the trusted path goes nowhere.
    net.links[1][TRUSTED].down = true;
    net.run_until_received(1, 3_000_000);
    net.cut(TRUSTED);
    net.run(200_000);
    assert_delivered(&net, "lost acks");
    let dups = net.ends[1].conn.path_stats(UNTRUSTED).duplicates_dropped;
    assert!(
        dups > 0,
        "copies of delivered segments arrived and were dropped"
    );
}

/// With `scramble` or `none`, `Continue` refuses to go on over the untrusted path alone: both
/// ends fail with the refusal, and the report names the trusted path.
#[test]
fn continue_refuses_the_untrusted_path_alone_for_scramble_and_none() {
    for cipher in [Cipher::Scramble, Cipher::None] {
        let o = opts(cipher, CONTINUE);
        let mut net = Net::new(&o, &o, data(2_000_000, 3), Vec::new());
        net.run_until_received(1, 200_000);
        net.cut(TRUSTED);
        for e in &net.ends {
            let err = e.error.as_ref().expect("refused");
            assert!(
                err.to_string()
                    .contains("refusing to go on over the untrusted path alone"),
                "{err}"
            );
            assert!(
                !e.conn
                    .path_stats(TRUSTED)
                    .failure
                    .as_ref()
                    .unwrap()
                    .continued
            );
        }
    }
}

/// A path that stops delivering without failing: a `Continue` receiver whose peer re-sends
/// waits [`STALL`], then reads the other path ahead (so its sender is not stuck behind the
/// silent one), and delivers in order once the silent path comes back.
#[test]
fn a_stalled_path_is_read_ahead_after_the_stall_time() {
    let o = opts(Cipher::Aes128Gcm, CONTINUE);
    let mut net = Net::new(&o, &o, data(3_000_000, 3), Vec::new());
    net.run_until_received(1, 100_000);
    net.links[0][UNTRUSTED].delay = Duration::from_secs(2);
    let before = net.now;
    let mut max_reorder = 0;
    let mut stalled_at = None;
    while net.now < before + Duration::from_millis(1500) {
        net.step();
        max_reorder = max_reorder.max(net.ends[1].conn.reorder.len());
        if stalled_at.is_none() && net.ends[1].conn.stalled {
            stalled_at = Some(net.now);
        }
    }
    let t = stalled_at.expect("the receiver declared a stall");
    assert!(t >= before + STALL, "not before the stall time");
    assert!(max_reorder > 0, "segments were read ahead");
    net.links[0][UNTRUSTED].delay = Duration::from_millis(1);
    net.run(100_000);
    assert_delivered(&net, "stall");
}

/// A receiver whose own policy is `Close` never reads ahead, even when the peer asks for acks:
/// a path whose head is not next asks for no input (TCP pushes back).
#[test]
fn a_close_receiver_never_reads_ahead() {
    let (mut r, mut t) = receiver(CLOSE);
    feed(&mut r, UNTRUSTED, &out_of_order(1000, 1));
    let mut buf = [0u8; 64];
    for _ in 0..10 {
        assert_eq!(r.read(t, &mut buf).unwrap(), Read::Blocked);
        t += STALL;
        r.handle_timeout(t);
    }
    assert!(r.reorder.is_empty());
    assert!(
        !r.needs_input(UNTRUSTED).unwrap(),
        "a parked head asks for no input"
    );
}

/// A data segment without payload is a wire error at once.
#[test]
fn an_empty_data_segment_is_refused() {
    for policy in [CLOSE, CONTINUE] {
        let (mut r, t) = receiver(policy);
        feed(&mut r, UNTRUSTED, &out_of_order(1, 0));
        let e = r.read(t, &mut [0u8; 64]).unwrap_err();
        assert!(e.to_string().contains("empty data segment"), "{e}");
    }
}

/// A `Continue` receiver reads ahead, but each entry is charged its overhead: a flood of
/// one-byte segments ends the stream after about `REORDER_LIMIT / 277` entries.
#[test]
fn read_ahead_entries_are_charged_and_capped() {
    let (mut r, mut t) = receiver(CONTINUE);
    let max_entries = REORDER_LIMIT / (HEADER_LEN + 1 + ENTRY_OVERHEAD);
    let flood = out_of_order(u32::try_from(max_entries).unwrap() + 10_000, 1);
    let mut at = 0;
    let mut buf = [0u8; 64];
    let err = loop {
        while at < flood.len() && r.needs_input(UNTRUSTED).unwrap_or(false) {
            let space = r.recv_buf(UNTRUSTED);
            let n = space.len().min(flood.len() - at);
            space[..n].copy_from_slice(&flood[at..at + n]);
            r.handle_recv(UNTRUSTED, n);
            at += n;
        }
        match r.read(t, &mut buf) {
            Ok(Read::Blocked) => t += STALL,
            Ok(other) => panic!("{other:?}"),
            Err(e) => break e,
        }
        assert!(at < flood.len(), "the flood was taken whole");
    };
    assert!(
        err.to_string().contains("out-of-order buffer full"),
        "{err}"
    );
    assert!(r.reorder.len() <= max_entries, "{}", r.reorder.len());
    assert!(r.reorder.len() > max_entries / 2, "{}", r.reorder.len());
}

/// An attacker on one path who repeats or drops a segment breaks the path's sequence: the
/// stream ends with an error, never with a gap or a repeat.
#[test]
fn a_repeated_or_dropped_segment_ends_the_stream() {
    for drop in [false, true] {
        let o = Options {
            segment_len: 1000,
            ..opts(Cipher::None, CLOSE)
        };
        let mut net = Net::new(&o, &o, data(200_000, 3), Vec::new());
        let mut done = false;
        net.tamper = Some(Box::new(move |from, slot, bytes: &mut Vec<u8>| {
            // The untrusted path's first chunk from the sender: repeat or remove its first
            // segment.
            if done || from != 0 || slot != UNTRUSTED {
                return;
            }
            done = true;
            let len = wire::segment_len(bytes).unwrap().unwrap();
            if drop {
                bytes.drain(..len);
            } else {
                let seg = bytes[..len].to_vec();
                bytes.splice(0..0, seg);
            }
        }));
        net.run(10_000);
        let err = net.ends[1].error.as_ref().expect("the receiver fails");
        assert!(
            err.to_string().contains("missing or repeated"),
            "drop {drop}: {err}"
        );
        assert!(net.ends[1].got.len() < 200_000);
    }
}

/// A bit flipped in a segment on one path: sealed streams refuse it (`Auth`); a scrambled
/// stream delivers the change undetected (the scrambler has no integrity).
#[test]
fn a_flipped_bit_is_caught_by_aead_not_by_the_scrambler() {
    for cipher in [
        Cipher::Aes128Gcm,
        Cipher::ChaCha20Poly1305,
        Cipher::Scramble,
    ] {
        let o = Options {
            segment_len: 1000,
            ..opts(cipher, CLOSE)
        };
        let mut net = Net::new(&o, &o, data(100_000, 3), Vec::new());
        let mut done = false;
        net.tamper = Some(Box::new(move |from, slot, bytes: &mut Vec<u8>| {
            if !done && from == 0 && slot == UNTRUSTED {
                bytes[HEADER_LEN + 100] ^= 0x20;
                done = true;
            }
        }));
        net.run(10_000);
        let r = &net.ends[1];
        if cipher == Cipher::Scramble {
            assert!(r.error.is_none() && r.eof);
            let diff = r
                .got
                .iter()
                .zip(&net.ends[0].data)
                .filter(|(a, b)| a != b)
                .count();
            assert!(diff > 0, "the change went through");
        } else {
            let e = r.error.as_ref().expect("refused");
            assert!(e.to_string().contains("authentication"), "{cipher}: {e}");
        }
    }
}

/// A forged ack on the untrusted path: ignored (and counted) for `scramble` and `none` while
/// the trusted path works; a sealed stream fails it (`Auth`), never forgetting data on it.
#[test]
fn a_forged_ack_on_the_untrusted_path_is_never_trusted() {
    for cipher in [Cipher::Scramble, Cipher::None, Cipher::Aes128Gcm] {
        let o = opts(cipher, CONTINUE);
        let mut net = Net::new(&o, &o, data(2_000_000, 3), Vec::new());
        net.run_until_received(1, 500_000);
        // The forged ack carries the path's next sequence number (the responder's fin went
        // first).
        let path_seq = net.ends[0].conn.paths[UNTRUSTED].rx_seq;
        let tag = if cipher.is_aead() { TAG_LEN } else { 0 };
        let mut ack = vec![0x42; HEADER_LEN + tag];
        Repr {
            kind: Kind::Ack,
            len: tag as u16,
            path_seq,
            offset: 1_000_000,
            seg: 50,
        }
        .emit(&mut ack);
        net.links[1][UNTRUSTED]
            .queue
            .push_back((net.now, ack.clone()));
        net.links[1][UNTRUSTED].in_flight += ack.len();
        net.run(100_000);
        let s = &net.ends[0];
        if cipher.is_aead() {
            let e = s.error.as_ref().expect("refused");
            assert!(e.to_string().contains("authentication"), "{e}");
        } else {
            assert_eq!(s.conn.path_stats(UNTRUSTED).acks_ignored, 1);
            assert!(net.ends[1].got == s.data, "{cipher}: every byte arrived");
        }
    }
}

/// Acks travel on the trusted path while it works, only to a peer that asked for them.
#[test]
fn acks_only_on_the_trusted_path_and_only_when_asked() {
    let o = opts(Cipher::Scramble, CONTINUE);
    let mut net = Net::new(&o, &o, data(3_000_000, 3), Vec::new());
    net.run(100_000);
    assert_delivered(&net, "acks");
    let s = &net.ends[0].conn;
    assert!(s.path_stats(TRUSTED).acks_received >= 2);
    assert_eq!(s.path_stats(UNTRUSTED).acks_received, 0);
    let close = opts(Cipher::Scramble, CLOSE);
    let mut net = Net::new(&close, &close, data(3_000_000, 3), Vec::new());
    net.run(100_000);
    assert_delivered(&net, "no acks");
    assert_eq!(net.ends[1].conn.path_stats(TRUSTED).acks_sent, 0);
}

/// A responder-side receiver in clear whose peer asked for acks, with `policy`, at `T0`.
fn receiver(policy: OnPathFailure) -> (Connection, Instant) {
    let peer = opts(Cipher::None, CONTINUE);
    let me = opts(Cipher::None, policy);
    let (_, est) = pair(&peer, &me);
    (Connection::new(T0, est, &me), T0)
}

/// Writes `bytes` into path `slot`'s receive buffer (they must fit).
fn feed(c: &mut Connection, slot: usize, bytes: &[u8]) {
    let space = c.recv_buf(slot);
    let n = bytes.len().min(space.len());
    space[..n].copy_from_slice(&bytes[..n]);
    c.handle_recv(slot, n);
}

/// `n` consecutive data segments of `len` bytes each from segment number 1 on (segment 0,
/// which the receiver needs next, is never sent).
fn out_of_order(n: u32, len: u16) -> Vec<u8> {
    let mut out = Vec::new();
    for k in 0..n {
        let repr = Repr {
            kind: Kind::Data,
            len,
            path_seq: k,
            offset: u64::from(k + 1) * u64::from(len.max(1)),
            seg: k + 1,
        };
        let start = out.len();
        out.resize(start + HEADER_LEN + usize::from(len), b'x');
        repr.emit(&mut out[start..start + HEADER_LEN]);
    }
    out
}

/// One unsealed data segment: number `seg`, `len` bytes of `fill` at `offset`, `path_seq`.
fn data_segment(path_seq: u32, offset: u64, seg: u32, len: u16, fill: u8) -> Vec<u8> {
    let repr = Repr {
        kind: Kind::Data,
        len,
        path_seq,
        offset,
        seg,
    };
    let mut out = vec![fill; HEADER_LEN + usize::from(len)];
    repr.emit(&mut out);
    out
}

/// An unsealed control segment.
fn control(kind: Kind, path_seq: u32, offset: u64, seg: u32) -> Vec<u8> {
    let mut out = vec![0u8; HEADER_LEN];
    Repr {
        kind,
        len: 0,
        path_seq,
        offset,
        seg,
    }
    .emit(&mut out);
    out
}

/// Segment 0 on the trusted path is the sender's duty, not checked by the receiver: it
/// arrives on the untrusted path after a trusted-path failure under `Continue`, and a receiver
/// cannot tell that from a sender breaking the rule. Delivered, then the stream ends.
#[test]
fn a_receiver_takes_segment_0_from_either_path() {
    for policy in [CLOSE, CONTINUE] {
        let (mut r, t) = receiver(policy);
        feed(&mut r, UNTRUSTED, &data_segment(0, 0, 0, 5, b'a'));
        feed(&mut r, UNTRUSTED, &control(Kind::Fin, 1, 5, 1));
        feed(&mut r, TRUSTED, &control(Kind::Fin, 0, 5, 1));
        let mut buf = [0u8; 64];
        assert_eq!(r.read(t, &mut buf).unwrap(), Read::Data(5));
        assert_eq!(&buf[..5], b"aaaaa");
        assert_eq!(r.read(t, &mut buf).unwrap(), Read::End);
        assert_eq!(r.path_stats(UNTRUSTED).segments_received, 1);
    }
}

/// The ack trigger: an ack is queued when a read completes a segment and the bytes delivered
/// since the last ack reach 1 MiB (here after the 64th 16384-byte segment, however small the
/// reads), and at end of stream; on the trusted path, `path_seq` 0 and 1.
#[test]
fn an_ack_follows_each_mib_delivered_at_a_segment_end_and_the_end() {
    const LEN: u16 = 16384;
    let (mut r, t) = receiver(CLOSE);
    let mut fed = 0u32;
    let mut acks = Vec::new();
    let mut buf = [0u8; 1000];
    let total = 65u32;
    let mut delivered = 0u64;
    loop {
        while fed < total && r.needs_input(TRUSTED).unwrap() {
            let seg = data_segment(fed, u64::from(fed) * u64::from(LEN), fed, LEN, 7);
            if r.recv_buf(TRUSTED).len() < seg.len() {
                break;
            }
            feed(&mut r, TRUSTED, &seg);
            fed += 1;
            if fed == total {
                let end = u64::from(total) * u64::from(LEN);
                feed(&mut r, TRUSTED, &control(Kind::Fin, total, end, total));
                feed(&mut r, UNTRUSTED, &control(Kind::Fin, 0, end, total));
            }
        }
        let got = r.read(t, &mut buf).unwrap();
        if let Read::Data(n) = got {
            delivered += n as u64;
        }
        let out = r.poll_transmit(TRUSTED).to_vec();
        r.transmitted(TRUSTED, out.len());
        assert!(r.poll_transmit(UNTRUSTED).is_empty());
        if !out.is_empty() {
            acks.push((delivered, out));
        }
        match got {
            Read::Data(_) => {}
            Read::End => break,
            Read::Blocked => panic!("blocked after {delivered} bytes"),
        }
    }
    assert_eq!(delivered, 65 * 16384);
    // The first ack leaves with the read that completed segment 63 (its last 384 bytes).
    assert_eq!(
        acks,
        [
            (1 << 20, control(Kind::Ack, 0, 1 << 20, 64)),
            (delivered, control(Kind::Ack, 1, delivered, 65)),
        ]
    );
    // docs/MULTIPATH.md, "Vectors: edge cases", case 7.
    let doc = include_str!("../../../../../docs/MULTIPATH.md");
    let label = "\nfirst ack, unsealed (20 bytes)\n";
    let at = doc.find(label).expect("MULTIPATH.md prints the first ack") + label.len();
    assert_eq!(hex::encode(&acks[0].1), doc[at..at + 40]);
}

/// 16384 and 16400: a sender cuts at most 16384 plaintext bytes per segment whatever
/// `segment_len` asks, for every cipher (16400 on the wire with the tag); a receiver takes a
/// payload length up to 16400 for every cipher (so 16400 unsealed bytes) and refuses 16401.
#[test]
fn segments_carry_at_most_16384_bytes_and_receivers_take_lengths_up_to_16400() {
    for &cipher in Cipher::ALL {
        let o = Options {
            segment_len: 100_000,
            ..opts(cipher, CLOSE)
        };
        let (ei, _) = pair(&o, &o);
        assert_eq!(Connection::new(T0, ei, &o).segment_len(), 16384, "{cipher}");
    }
    let (mut r, t) = receiver(CLOSE);
    feed(&mut r, TRUSTED, &data_segment(0, 0, 0, 16400, b'z'));
    let mut buf = vec![0u8; 20_000];
    assert_eq!(r.read(t, &mut buf).unwrap(), Read::Data(16400));
    let (mut r, t) = receiver(CLOSE);
    let mut seg = data_segment(0, 0, 0, 16400, b'z');
    seg[2..4].copy_from_slice(&16401u16.to_be_bytes());
    feed(&mut r, TRUSTED, &seg);
    let e = r.read(t, &mut buf).unwrap_err();
    assert_eq!(
        e.to_string(),
        "bad bytes on the trusted path: length field too large"
    );
}
