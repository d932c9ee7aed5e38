//! [`World`]: the hosts, the paths, the attacker and the operator on one virtual clock, one event
//! at a time (a frame arriving, a host's timer, a departure, a boot, an action), with the
//! invariants checked after each.

use std::collections::{BTreeMap, BTreeSet};

use psp_core::host::SessionStatus;
use psp_core::time::{Duration, Instant};

use super::action::{Action, DiskFate};
use super::app::{self, BROADCAST, Tag};
use super::attacker::{Attacker, Caps, Verdict};
use super::check::{Checker, Kind, Violation};
use super::net::{Net, Sender};
use super::node::{MAX_FRAME, Node, Out, Roster};
use super::scenario::{Ids, Scenario};

/// How long path 1 is cut in the quiet phase's failover check.
pub(crate) const FAILOVER_CUT: Duration = Duration::from_secs(8);
/// From this long after path 1 was cut, every session pair carries traffic over path 2 (the
/// detection takes 100 to 125 ms; the rest is slack for frames in flight).
pub(crate) const FAILOVER_BOUND: Duration = Duration::from_secs(1);

/// Once attackers and faults stop, every pair of hosts carries traffic again within this much
/// simulated time (two 15 s handshake timeouts, the 32 s backoff plus 12.5 %, and slack).
pub const LIVENESS_BOUND: Duration = Duration::from_secs(90);
/// Hosts restarted cleanly in a quiet network carry traffic with every peer again within this
/// much simulated time (a handshake takes a round trip; the bound leaves room for one lost
/// first attempt).
pub const RECOVERY_BOUND: Duration = Duration::from_secs(3);
/// A host whose peer has been down this long, while it sent traffic to it, no longer shows the
/// session up.
pub const DEAD_BOUND: Duration = Duration::from_secs(40);

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Events handled.
    pub events: u64,
    /// Inner frames delivered.
    pub delivered: u64,
    /// Sessions established (rekeys included).
    pub sessions: u64,
    /// Sessions established with ML-KEM-768 in their keys (rekeys included).
    pub kem_sessions: u64,
    /// Handshakes that failed.
    pub failures: u64,
    /// Handshakes that failed because one side requires ML-KEM-768 and it was not used
    /// (`kem_required`).
    pub kem_refused: u64,
    /// Frames lost to faults.
    pub lost: u64,
    /// Handshake messages the attacker rewrote.
    pub rewritten: u64,
    /// Restarts.
    pub restarts: u64,
    /// Simulated time, ms.
    pub sim_ms: u64,
}

/// How a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The violations found (the first of each kind, in order; just the first without
    /// `keep_going`).
    pub violations: Vec<Violation>,
    /// What it did.
    pub stats: Stats,
}

/// A normalized frame waiting for its slot: the host, its boot count when it was sealed, the
/// path and the frame.
type Departure = (u8, u32, u8, Vec<u8>);

/// The world.
pub struct World {
    scen: Scenario,
    roster: Roster,
    now: Instant,
    nodes: Vec<Node>,
    net: Net,
    attacker: Attacker,
    check: Checker,
    boots: BTreeMap<(Instant, u8), bool>,
    reloads: BTreeMap<(Instant, u8), u8>,
    departures: BTreeMap<(Instant, u64), Departure>,
    seq: u64,
    next_ping: Instant,
    ping_rr: u64,
    tags: Vec<u64>,
    down_since: Vec<Option<Instant>>,
    /// Probes of the liveness phase not delivered yet: (receiver, tag).
    probes: BTreeSet<(u8, Tag)>,
    /// The next frame of a replay flood through the liveness phase.
    next_flood: Option<Instant>,
    stats: Stats,
    violations: Vec<Violation>,
    kinds: BTreeSet<Kind>,
    keep_going: bool,
    stop: bool,
    /// Print every event (debugging).
    pub trace: bool,
}

impl World {
    /// A world for `scen`, every host booted at 1 s.
    pub fn new(scen: Scenario) -> Self {
        let caps = Caps {
            see: [scen.attackers.path1, scen.attackers.path2_inject],
            inject: [
                scen.attackers.path1 || scen.attackers.insider,
                scen.attackers.path2_inject,
            ],
            control: [scen.attackers.path1, false],
        };
        let mut w = Self {
            roster: Roster::new(scen),
            now: Instant::from_secs(1),
            nodes: (0..scen.hosts)
                .map(|i| Node::new(i, super::mix(scen.seed, u64::from(i) + 1)))
                .collect(),
            net: Net::new(scen.seed, scen.faults),
            attacker: Attacker::new(caps, scen.attackers.insider, scen.seed, scen.hosts),
            check: Checker::default(),
            boots: BTreeMap::new(),
            reloads: BTreeMap::new(),
            departures: BTreeMap::new(),
            seq: 0,
            next_ping: Instant::from_secs(2),
            ping_rr: 0,
            tags: vec![0; usize::from(scen.hosts)],
            down_since: vec![None; usize::from(scen.hosts)],
            probes: BTreeSet::new(),
            next_flood: None,
            stats: Stats::default(),
            violations: Vec::new(),
            kinds: BTreeSet::new(),
            keep_going: false,
            stop: false,
            trace: false,
            scen,
        };
        w.attacker.pki = scen.pki;
        w.attacker.kem = scen.kem[..usize::from(scen.hosts)]
            .iter()
            .any(|k| *k != super::scenario::Kem::Off);
        for i in 0..scen.hosts {
            w.boots.insert((w.now, i), false);
        }
        w
    }

    /// Record every kind of violation (the first of each) instead of stopping at the first.
    pub fn keep_going(mut self) -> Self {
        self.keep_going = true;
        self
    }

    /// Runs `actions` (then the quiet phase, if they do not end with one) and says how it went.
    pub fn run(self, actions: &[Action]) -> Outcome {
        self.run_world(actions).0
    }

    /// As [`run`](Self::run), and the world afterwards.
    pub fn run_world(mut self, actions: &[Action]) -> (Outcome, Self) {
        let mut quiet = false;
        for a in actions {
            if self.stop {
                break;
            }
            self.apply(a);
            quiet |= *a == Action::Quiet;
        }
        if !quiet && !self.stop {
            self.apply(&Action::Quiet);
        }
        (self.outcome(), self)
    }

    /// The violations so far and the statistics.
    pub fn outcome(&self) -> Outcome {
        let mut stats = self.stats.clone();
        stats.lost = self.net.lost;
        stats.rewritten = self.attacker.rewritten;
        stats.sim_ms = self.now.total_micros() / 1000;
        Outcome {
            violations: self.violations.clone(),
            stats,
        }
    }

    /// Every host's peers: counters that are not zero, and the session state (debugging).
    pub fn dump(&self) -> String {
        use psp_core::host::Counters as _;
        let mut s = String::new();
        for n in &self.nodes {
            let Some(host) = n.host.as_ref() else {
                s += &format!("host {}: down\n", n.idx);
                continue;
            };
            for (pi, c) in n.peer_hosts.iter().enumerate() {
                let pid = psp_core::host::PeerId(pi);
                let st = host.session_status(pid, n.local(self.now));
                s += &format!("host {} peer {c}: {st:?}\n   ", n.idx);
                if let Some(pc) = host.peer_counters(pid) {
                    pc.visit(&mut |k| {
                        if k.value > 0 {
                            s += &format!(
                                " {}{}={}",
                                k.name,
                                k.label.map(|l| format!(".{l}")).unwrap_or_default(),
                                k.value
                            );
                        }
                    });
                }
                s += "\n";
            }
            s += "   host:";
            host.counters().visit(&mut |k| {
                if k.value > 0 {
                    s += &format!(" {}={}", k.name, k.value);
                }
            });
            s += "\n";
        }
        s
    }

    /// The pairs (holder, its peer) whose session keys the attacker holds, where the scenario
    /// permits it (no pin, and single-path or both paths hostile).
    pub fn compromised(&self) -> Vec<(u8, u8)> {
        let mut v: Vec<_> = self.check.compromised.iter().copied().collect();
        v.sort_unstable();
        v
    }

    /// Events handled so far.
    pub fn events(&self) -> u64 {
        self.stats.events
    }

    /// Host `host`'s status of its session peer `peer` (a host index), if both are up and `host`
    /// runs sessions with it; and how many of its handshakes with it failed `kem_required`.
    pub fn session_status(&self, host: u8, peer: u8) -> Option<(SessionStatus, u64)> {
        let node = self.nodes.get(usize::from(host))?;
        let h = node.host.as_ref()?;
        let status = h.session_status(node.peer_of(peer)?, node.local(self.now))?;
        Some((status, self.kem_refusals(host, peer)))
    }

    fn violate(&mut self, kind: Kind, detail: String) {
        if self.kinds.insert(kind) {
            let v = Violation {
                kind,
                events: self.stats.events,
                at: self.now,
                detail,
            };
            if self.trace {
                eprintln!("VIOLATION {v}");
            }
            self.violations.push(v);
        }
        if !self.keep_going || kind == Kind::Spin || kind == Kind::Panic {
            self.stop = true;
        }
    }

    /// Applies one action.
    pub fn apply(&mut self, a: &Action) {
        self.stats.events += 1;
        if self.trace {
            eprintln!("{:>9} ms  action {a:?}", self.now.total_micros() / 1000);
        }
        let n = self.scen.hosts;
        let valid = |h: u8| h < n;
        match *a {
            Action::Wait(ms) => {
                let t = self.now + Duration::from_millis(u64::from(ms));
                self.run_until(t);
            }
            Action::Send { from, to } if valid(from) && valid(to) && from != to => {
                self.send_unicast(from, to);
            }
            Action::Broadcast { from, big } if valid(from) => self.send_broadcast(from, big),
            Action::Restart {
                host,
                disk,
                down_ms,
            } if valid(host) => {
                self.crash(host);
                match disk {
                    DiskFate::Intact => {}
                    DiskFate::Lost => self.nodes[usize::from(host)].lose_disk(false, self.now),
                    DiskFate::Rollback => self.nodes[usize::from(host)].lose_disk(true, self.now),
                }
                let at = self.now + Duration::from_millis(u64::from(down_ms));
                self.boots.insert((at, host), false);
            }
            Action::Stop { host, down_ms } if valid(host) => {
                if self.nodes[usize::from(host)].host.is_some() {
                    self.stats.restarts += 1;
                    self.down_since[usize::from(host)] = Some(self.now);
                }
                self.nodes[usize::from(host)].stop(self.now);
                self.boots.retain(|(_, x), _| *x != host);
                let at = self.now + Duration::from_millis(u64::from(down_ms));
                self.boots.insert((at, host), false);
            }
            Action::CrashMidReserve { host } if valid(host) => {
                self.crash(host);
                self.boots.insert((self.now, host), true);
            }
            Action::Reload { host, changed } if valid(host) => {
                if changed {
                    let i = usize::from(host);
                    let j = (0..n)
                        .find(|j| *j != host && self.roster.normalized(host, *j))
                        .or_else(|| {
                            (0..n).find(|j| {
                                *j != host
                                    && self.roster.pair(host, *j) == super::node::PairKind::Session
                            })
                        });
                    if let Some(j) = j {
                        self.roster.alt[i][usize::from(j)] ^= true;
                    }
                }
                let out = self.nodes[usize::from(host)].reload(self.now, &self.roster);
                self.process(host, out);
            }
            Action::RotateIdentity { host, spread_ms } if valid(host) => {
                if self.scen.ids == Ids::None || self.roster.retired[usize::from(host)] {
                    return;
                }
                self.roster.id_gen[usize::from(host)] += 1;
                self.crash(host);
                self.boots.insert((self.now, host), false);
                let gen_now = self.roster.id_gen[usize::from(host)];
                for (k, j) in (0..n).filter(|j| *j != host).enumerate() {
                    let at = self.now
                        + Duration::from_millis(
                            u64::from(spread_ms) * (k as u64 + 1) / u64::from(n),
                        );
                    self.reloads.insert((at, j), host);
                    let _ = gen_now;
                }
            }
            Action::ClockJump { host, ahead } if valid(host) => {
                let node = &mut self.nodes[usize::from(host)];
                node.skew_s += if ahead { 86_400 } else { -86_400 };
                self.crash(host);
                self.boots.insert((self.now, host), false);
            }
            Action::Partition { path, ms } => {
                self.net.partition(
                    path & 1,
                    self.now,
                    self.now + Duration::from_millis(u64::from(ms)),
                );
            }
            Action::Flap {
                path,
                period_ms,
                times,
            } => {
                let p = Duration::from_millis(u64::from(period_ms.max(1)));
                for k in 0..u64::from(times) {
                    let from = self.now + Duration::from_micros(p.total_micros() * 2 * k);
                    self.net.partition(path & 1, from, from + p);
                }
            }
            Action::Retire { host } if valid(host) => {
                let i = usize::from(host);
                if self.roster.retired.iter().any(|r| *r) {
                    return;
                }
                self.roster.retired[i] = true;
                let id = Roster::identity(host, self.roster.id_gen[i]);
                self.attacker.identities.insert(host, id);
                if self.scen.pki {
                    // Revoked on one host; the list spreads from there. The attacker keeps
                    // the former member's certificate too.
                    self.attacker.certs.insert(host, self.roster.cert(host));
                    let serials: Vec<u64> = (0..=self.roster.id_gen[i])
                        .map(|g| Roster::serial(host, g))
                        .collect();
                    let list = psp_core::pki::RevocationList::sign(
                        1,
                        super::node::WALL0,
                        &serials,
                        &Roster::ca(),
                    )
                    .expect("a short list");
                    if let Some(j) = (0..n).find(|j| *j != host) {
                        let out = self.nodes[usize::from(j)].revoke(self.now, list);
                        self.process(j, out);
                    }
                    return;
                }
                for j in (0..n).filter(|j| *j != host) {
                    let out = self.nodes[usize::from(j)].reload(self.now, &self.roster);
                    self.process(j, out);
                }
            }
            Action::Replay { path, pick } => {
                if let Some(f) = self.attacker.replay(path, pick) {
                    self.net.send(self.now, path & 1, Sender::Attacker, f, None);
                }
            }
            Action::Reseal { path, pick, from } if valid(from) => {
                if let Some((f, _)) = self.attacker.reseal(self.now, path, pick, from) {
                    self.net.send(self.now, 0, Sender::Attacker, f, None);
                } else if !self.attacker.stopped
                    && let Some((p, f)) = self.attacker.reseal_request(self.now, u64::from(pick))
                {
                    // Not a data frame: a captured Request, sealed again.
                    self.net.send(self.now, p, Sender::Attacker, f, None);
                }
            }
            Action::Drop { path, count } => self.attacker.arm_drop(path, count),
            Action::Hold { path, ms } => {
                let until = self.now + Duration::from_millis(u64::from(ms));
                self.attacker.arm_hold(path, until);
            }
            Action::Forge {
                from,
                to,
                kind,
                far,
            } if valid(from) => {
                let (frames, _) = self.attacker.forge(self.now, from, to, kind, far);
                for f in frames {
                    self.net.send(self.now, 0, Sender::Attacker, f, None);
                }
            }
            Action::Rewrite(op) => self.attacker.arm_rewrite(op),
            Action::Puppet { from, to } if valid(from) && valid(to) => {
                self.attacker.puppet(self.now, from, to);
                self.flush_attacker();
            }
            Action::Quiet => self.quiet(),
            _ => {}
        }
    }

    /// The quiet phase: attackers and faults stop, every host comes up with its configuration
    /// complete; after [`LIVENESS_BOUND`], every pair must carry a frame each way, but a pair
    /// whose `kem` modes forbid a session, which must have counted `kem_required` instead.
    fn quiet(&mut self) {
        self.attacker.stop();
        self.net.quiet(self.now);
        let boots: Vec<_> = self.boots.keys().map(|(_, h)| *h).collect();
        self.boots.clear();
        for h in boots {
            if self.nodes[usize::from(h)].host.is_none() {
                self.boot(h, false);
            }
        }
        for ((_, j), h) in core::mem::take(&mut self.reloads) {
            self.apply_reload(j, h);
        }
        if self.scen.attackers.flood {
            self.next_flood = Some(self.now);
        }
        let end = self.now + LIVENESS_BOUND;
        self.run_until(end);
        if self.stop {
            return;
        }
        let end = self.now + Duration::from_secs(3);
        let failed = self.cross_every_pair(|_, _, _| true, end);
        if self.stop {
            return;
        }
        if !failed.is_empty() {
            let detail = format!(
                "{} s after the attackers and faults stopped, no frame crossed {failed:?} (from, to)",
                LIVENESS_BOUND.total_micros() / 1_000_000
            );
            self.violate(Kind::Liveness, detail);
            return;
        }
        // The pairs whose `kem` modes forbid a session (exempt above) were refused, and said
        // why: `kem_required` counted by one of the two.
        let n = self.scen.hosts;
        let silent: Vec<(u8, u8)> = (0..n)
            .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
            .filter(|&(i, j)| self.roster.kem_apart(i, j) && !self.excused(i, j))
            .filter(|&(i, j)| self.kem_refusals(i, j) + self.kem_refusals(j, i) == 0)
            .collect();
        if !silent.is_empty() {
            let detail = format!(
                "{} s after the attackers and faults stopped, the pairs {silent:?} (one requires the KEM, the other has it off) counted no kem_required",
                LIVENESS_BOUND.total_micros() / 1_000_000
            );
            self.violate(Kind::Liveness, detail);
            return;
        }
        self.failover();
        if self.stop {
            return;
        }
        // Restarts in the quiet network: one host (host 1: normalized with host 0 when the
        // scenario normalizes), then two at once (their handshakes cross).
        for hosts in [&[1u8][..], &[0, 2]] {
            if self.stop {
                return;
            }
            self.recovery(hosts);
        }
    }

    /// Restarts `hosts` cleanly, at once, and checks that every pair involving one of them
    /// carries a frame each way within [`RECOVERY_BOUND`].
    /// Every pair of hosts not exempt and chosen by `pick` sends a tagged unicast frame (each
    /// way); the simulation runs until `end`; the pairs (from, to) whose frame did not arrive.
    fn cross_every_pair(
        &mut self,
        pick: impl Fn(&Self, u8, u8) -> bool,
        end: Instant,
    ) -> Vec<(u8, u8)> {
        let n = self.scen.hosts;
        let mut sent = Vec::new();
        for i in 0..n {
            for j in (0..n).filter(|j| *j != i) {
                if self.exempt(i, j) || !pick(self, i, j) {
                    continue;
                }
                if let Some(tag) = self.send_unicast(i, j) {
                    sent.push((i, j, tag));
                }
            }
        }
        self.probes = sent.iter().map(|(_, j, t)| (*j, *t)).collect();
        self.run_until(end);
        sent.iter()
            .filter(|(_, j, t)| self.probes.contains(&(*j, *t)))
            .map(|(i, j, _)| (*i, *j))
            .collect()
    }

    /// Failover in the quiet network: path 1 is cut for [`FAILOVER_CUT`]; from
    /// [`FAILOVER_BOUND`] on, every pair with a session must carry a frame each way (over path
    /// 2); then path 1 comes back and the network settles.
    fn failover(&mut self) {
        let start = self.now;
        self.net.partition(0, start, start + FAILOVER_CUT);
        self.run_until(start + FAILOVER_BOUND);
        if self.stop {
            return;
        }
        let end = start + FAILOVER_BOUND + Duration::from_secs(1);
        let session = |w: &Self, i, j| w.roster.pair(i, j) == super::node::PairKind::Session;
        let failed = self.cross_every_pair(session, end);
        if self.stop {
            return;
        }
        if !failed.is_empty() {
            let detail = format!(
                "path 1 cut: no frame crossed {failed:?} (from, to) over path 2 within {} ms",
                (FAILOVER_BOUND + Duration::from_secs(1)).total_micros() / 1000
            );
            self.violate(Kind::Failover, detail);
            return;
        }
        // Path 1 back: its liveness returns with the next frames.
        self.run_until(start + FAILOVER_CUT + Duration::from_secs(2));
    }

    fn recovery(&mut self, hosts: &[u8]) {
        let n = self.scen.hosts;
        let hosts: Vec<u8> = hosts
            .iter()
            .copied()
            .filter(|h| *h < n && !self.roster.retired[usize::from(*h)])
            .collect();
        for &h in &hosts {
            self.nodes[usize::from(h)].stop(self.now);
        }
        for &h in &hosts {
            self.boot(h, false);
        }
        let pairs: Vec<(u8, u8)> = (0..n)
            .flat_map(|i| (0..n).map(move |j| (i, j)))
            .filter(|(i, j)| i != j && (hosts.contains(i) || hosts.contains(j)))
            .filter(|(i, j)| !self.exempt(*i, *j))
            .collect();
        let start = self.now;
        let mut sent: Vec<(u8, u8, Tag)> = Vec::new();
        while self.now < start + RECOVERY_BOUND && !self.stop {
            for &(i, j) in &pairs {
                if let Some(tag) = self.send_unicast(i, j) {
                    self.probes.insert((j, tag));
                    sent.push((i, j, tag));
                }
            }
            let t = self.now + Duration::from_millis(100);
            self.run_until(t);
        }
        let failed: Vec<(u8, u8)> = pairs
            .iter()
            .copied()
            .filter(|(i, j)| {
                sent.iter()
                    .filter(|(a, b, _)| (a, b) == (i, j))
                    .all(|(_, b, t)| self.probes.contains(&(*b, *t)))
            })
            .collect();
        self.probes.clear();
        if !failed.is_empty() {
            let detail = format!(
                "after a clean restart of {hosts:?} in a quiet network, no frame crossed {failed:?} (from, to) within {} s",
                RECOVERY_BOUND.total_micros() / 1_000_000
            );
            self.violate(Kind::SlowRecovery, detail);
        }
    }
}

impl World {
    /// Runs every event due up to `end`, then sets the clock to `end`.
    fn run_until(&mut self, end: Instant) {
        while !self.stop {
            let Some((t, ev)) = self.next_event() else {
                break;
            };
            if t > end {
                break;
            }
            self.now = self.now.max(t);
            self.stats.events += 1;
            self.dispatch(ev);
            if !self.stop {
                self.after_event();
            }
        }
        if !self.stop {
            self.now = self.now.max(end);
        }
    }

    /// The next event and its time: boots and reloads first, then departures, arrivals, timers,
    /// the attacker's timers and background traffic.
    fn next_event(&self) -> Option<(Instant, Ev)> {
        let mut best: Option<(Instant, Ev)> = None;
        let mut consider = |t: Option<Instant>, ev: Ev| {
            if let Some(t) = t
                && best.as_ref().is_none_or(|(b, _)| t < *b)
            {
                best = Some((t, ev));
            }
        };
        consider(self.boots.keys().next().map(|k| k.0), Ev::Boot);
        consider(self.reloads.keys().next().map(|k| k.0), Ev::Reload);
        consider(self.departures.keys().next().map(|k| k.0), Ev::Departure);
        consider(self.net.next_at(), Ev::Arrival);
        for n in &self.nodes {
            consider(n.next_wake(), Ev::Timer(n.idx));
        }
        if !self.attacker.stopped {
            consider(self.attacker.next_wake(), Ev::Attacker);
        }
        consider(Some(self.next_ping), Ev::Ping);
        consider(self.next_flood, Ev::Flood);
        best
    }

    fn dispatch(&mut self, ev: Ev) {
        if self.trace {
            eprintln!("{:>9} ms  {ev:?}", self.now.total_micros() / 1000);
        }
        match ev {
            Ev::Boot => {
                let Some((&(t, h), &armed)) = self.boots.iter().next() else {
                    return;
                };
                self.boots.remove(&(t, h));
                self.boot(h, armed);
            }
            Ev::Reload => {
                let Some((&(t, j), &h)) = self.reloads.iter().next() else {
                    return;
                };
                self.reloads.remove(&(t, j));
                self.apply_reload(j, h);
            }
            Ev::Departure => {
                let Some((&k, _)) = self.departures.iter().next() else {
                    return;
                };
                let Some((h, boots, path, f)) = self.departures.remove(&k) else {
                    return;
                };
                // A departure of a run that crashed since never leaves (its pacer died).
                if self.nodes[usize::from(h)].boots == boots
                    && self.nodes[usize::from(h)].host.is_some()
                {
                    self.transmit(h, path, f);
                }
            }
            Ev::Arrival => {
                let Some(f) = self.net.pop_due(self.now) else {
                    return;
                };
                self.arrive(f);
            }
            Ev::Timer(h) => {
                let out = self.nodes[usize::from(h)].timeout(self.now);
                if self.nodes[usize::from(h)].spin.1 > 10_000 {
                    let detail =
                        format!("host {h}'s timer did not act: woken 10,000 times at one instant");
                    self.violate(Kind::Spin, detail);
                    return;
                }
                self.process(h, out);
            }
            Ev::Attacker => {
                self.attacker.timeout(self.now);
                self.flush_attacker();
            }
            Ev::Flood => {
                self.next_flood = Some(self.now + Duration::from_millis(250));
                let pick = super::mix(self.scen.seed, self.now.total_micros());
                if let Some((path, f)) = self.attacker.reseal_request(self.now, pick) {
                    self.net.send(self.now, path, Sender::Attacker, f, None);
                }
            }
            Ev::Ping => {
                let n = u64::from(self.scen.hosts);
                self.next_ping =
                    self.now + Duration::from_millis(u64::from(self.scen.ping_ms.max(10)));
                let from = (self.ping_rr % n) as u8;
                let to = ((from as u64 + 1 + (self.ping_rr / n) % (n - 1)) % n) as u8;
                self.ping_rr += 1;
                self.send_unicast(from, to);
                self.check_dead_peers();
            }
        }
    }

    fn arrive(&mut self, f: super::net::InFlight) {
        let Some(dst) = f.frame.get(..6).and_then(|d| <[u8; 6]>::try_from(d).ok()) else {
            return;
        };
        if self.trace
            && let Ok(h) = psp_core::wire::Frame::new_checked(&f.frame[..], 0)
        {
            eprintln!(
                "            {:?} path {} {:02x}->{:02x} sn {} key {:?} len {}",
                f.from,
                f.path,
                h.src_addr()[5],
                h.dst_addr()[5],
                h.seq_number().0,
                h.security_number().map(|s| s.get()),
                f.frame.len()
            );
        }
        let group = dst[0] & 1 == 1;
        let from = match f.from {
            Sender::Host(h) => Some(h),
            Sender::Attacker => None,
        };
        for i in 0..self.scen.hosts {
            if Some(i) == from || (!group && Roster::mac(i) != dst) {
                continue;
            }
            if self.nodes[usize::from(i)].host.is_none() {
                continue;
            }
            let out = self.nodes[usize::from(i)].uplink(self.now, f.path, &f.frame);
            self.process(i, out);
            if self.stop {
                return;
            }
        }
    }

    /// Handles what a node produced: seals recorded, frames sent (or scheduled), deliveries
    /// checked, a crash.
    fn process(&mut self, h: u8, out: Out) {
        for e in &out.events {
            match e {
                psp_core::host::HostEvent::SessionUp { info, peer } => {
                    self.stats.sessions += 1;
                    self.stats.kem_sessions += u64::from(info.kem);
                    if self.scen.smkex == super::scenario::Smkex::Require && !info.two_path {
                        let detail = format!(
                            "host {h} set up a single-path session with its peer {} under smkex = require",
                            peer.0
                        );
                        self.violate(Kind::SinglePathSession, detail);
                    }
                }
                psp_core::host::HostEvent::HandshakeFailed { reason, .. } => {
                    self.stats.failures += 1;
                    self.stats.kem_refused += u64::from(*reason == "kem_required");
                }
                _ => {}
            }
        }
        for (path, frame, at) in out.sends {
            if let Err((k, d)) = self
                .check
                .seal(&self.nodes[usize::from(h)], &self.roster, &frame)
            {
                self.violate(k, d);
            }
            match at {
                Some(t) if t > self.now => {
                    self.seq += 1;
                    let boots = self.nodes[usize::from(h)].boots;
                    self.departures
                        .insert((t, self.seq), (h, boots, path, frame));
                }
                _ => self.transmit(h, path, frame),
            }
        }
        for (claimed, inner) in out.delivered {
            self.stats.delivered += 1;
            if let Some(tag) = app::tag_of(&inner) {
                self.probes.remove(&(h, tag));
            }
            let r = &self.nodes[usize::from(h)];
            if let Err((k, d)) =
                self.check
                    .deliver(r, claimed, &inner, &self.roster, &self.attacker, self.now)
            {
                self.violate(k, d);
            }
        }
        if out.crashed {
            self.crash(h);
            self.boots.insert((self.now, h), false);
        }
    }

    /// An honest frame onto `path`, past the attacker.
    fn transmit(&mut self, h: u8, path: u8, frame: Vec<u8>) {
        match self.attacker.observe(self.now, path, &frame) {
            Verdict::Pass => self.net.send(self.now, path, Sender::Host(h), frame, None),
            Verdict::Drop => {}
            Verdict::Hold(t) => self
                .net
                .send(self.now, path, Sender::Host(h), frame, Some(t)),
            Verdict::Replace(f) => self.net.send(self.now, path, Sender::Attacker, f, None),
        }
        self.flush_attacker();
    }

    fn flush_attacker(&mut self) {
        for (path, f) in self.attacker.take_outbox() {
            self.net.send(self.now, path, Sender::Attacker, f, None);
        }
    }

    /// After every event: the key invariants.
    fn after_event(&mut self) {
        if let Err((k, d)) = self.check.keys(&self.nodes, &self.attacker, &self.roster) {
            self.violate(k, d);
        }
    }

    /// A host shows a session up with a peer down longer than [`DEAD_BOUND`].
    fn check_dead_peers(&mut self) {
        for j in 0..self.scen.hosts {
            let Some(since) = self.down_since[usize::from(j)] else {
                continue;
            };
            if self.now.saturating_since(since) < DEAD_BOUND {
                continue;
            }
            for n in &self.nodes {
                let Some(host) = n.host.as_ref() else {
                    continue;
                };
                let Some(pid) = n.peer_of(j) else {
                    continue;
                };
                if n.boot_at > since {
                    continue;
                }
                let up = host
                    .session_status(pid, n.local(self.now))
                    .is_some_and(|s| s.up);
                if up {
                    let detail = format!(
                        "host {} shows its session with host {j} up, {} s after host {j} stopped",
                        n.idx,
                        self.now.saturating_since(since).total_micros() / 1_000_000
                    );
                    self.violate(Kind::DeadPeerUp, detail);
                    return;
                }
            }
        }
    }

    fn crash(&mut self, h: u8) {
        let node = &mut self.nodes[usize::from(h)];
        if node.host.is_some() {
            self.stats.restarts += 1;
            self.down_since[usize::from(h)] = Some(self.now);
        }
        node.crash(self.now);
        self.boots.retain(|(_, x), _| *x != h);
    }

    fn boot(&mut self, h: u8, armed: bool) {
        let node = &mut self.nodes[usize::from(h)];
        node.snapshot(self.now);
        node.crash_armed = armed;
        let out = node.boot(self.now, &self.roster);
        self.down_since[usize::from(h)] = None;
        self.process(h, out);
    }

    /// Host `j` learns host `h`'s new identity (a reload).
    fn apply_reload(&mut self, j: u8, h: u8) {
        let (ji, hi) = (usize::from(j), usize::from(h));
        self.roster.known[ji][hi] = self.roster.id_gen[hi];
        self.nodes[ji].disk.pins.remove(&format!("h{h}"));
        if self.nodes[ji].host.is_some() {
            let out = self.nodes[ji].reload(self.now, &self.roster);
            self.process(j, out);
        }
    }

    /// Whether the pair is exempt from the liveness check: excused (below), or hosts whose
    /// `kem` modes forbid a session (one requires the KEM, the other has it off; the quiet
    /// phase checks that they count `kem_required` instead).
    fn exempt(&self, i: u8, j: u8) -> bool {
        self.excused(i, j) || self.roster.kem_apart(i, j)
    }

    /// Handshakes host `i` counted failed `kem_required` with host `j` in its current run.
    fn kem_refusals(&self, i: u8, j: u8) -> u64 {
        let node = &self.nodes[usize::from(i)];
        let at = psp_core::host::FAIL_REASONS
            .iter()
            .position(|r| *r == "kem_required");
        node.host
            .as_ref()
            .zip(node.peer_of(j))
            .and_then(|(h, p)| h.peer_counters(p))
            .zip(at)
            .map_or(0, |(c, at)| c.handshake_failures[at])
    }

    /// Whether the pair is excused from what the quiet phase expects of it: a retired host, a
    /// lost or rolled-back state directory (documented: the peers' windows refuse its frames),
    /// keys the attacker legitimately holds, or a window the attacker pinned where it may.
    fn excused(&self, i: u8, j: u8) -> bool {
        let (a, b) = (usize::from(i), usize::from(j));
        let unpinned = self.scen.ids != Ids::Configured
            || self.roster.pair(i, j) != super::node::PairKind::Session;
        self.roster.retired[a]
            || self.roster.retired[b]
            || self.nodes[a].epoch > 0
            || self.nodes[b].epoch > 0
            || self.check.compromised.contains(&(i, j))
            || self.check.compromised.contains(&(j, i))
            || (unpinned
                && (self.attacker.far_forged.contains(&(i, j))
                    || self.attacker.far_forged.contains(&(j, i))))
    }

    /// Host `from` sends a tagged unicast frame to host `to`; its tag, if it was handed over.
    fn send_unicast(&mut self, from: u8, to: u8) -> Option<Tag> {
        self.nodes[usize::from(from)].host.as_ref()?;
        let tag = self.tag(from);
        let inner = app::frame(
            (Roster::mac(to), Roster::ip(to)),
            (Roster::mac(from), Roster::ip(from)),
            tag,
            80 + (tag.counter % 5) as usize * 100,
        );
        let out = self.nodes[usize::from(from)].tap(self.now, &inner);
        self.process(from, out);
        Some(tag)
    }

    fn send_broadcast(&mut self, from: u8, big: bool) {
        let Some(host) = self.nodes[usize::from(from)].host.as_ref() else {
            return;
        };
        let len = if big {
            MAX_FRAME - 14 - host.max_overhead() + 14
        } else {
            100
        };
        let tag = self.tag(from);
        let inner = app::frame(
            (BROADCAST, core::net::Ipv4Addr::BROADCAST),
            (Roster::mac(from), Roster::ip(from)),
            tag,
            len,
        );
        let out = self.nodes[usize::from(from)].tap(self.now, &inner);
        self.process(from, out);
    }

    fn tag(&mut self, from: u8) -> Tag {
        let c = &mut self.tags[usize::from(from)];
        *c += 1;
        Tag {
            origin: from,
            counter: *c,
        }
    }
}

/// A natural event of the world.
#[derive(Clone, Copy, Debug)]
enum Ev {
    Boot,
    Reload,
    Departure,
    Arrival,
    Timer(u8),
    Attacker,
    Ping,
    Flood,
}
