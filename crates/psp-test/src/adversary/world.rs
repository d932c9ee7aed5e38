//! [`World`]: honest hosts, the paths between them, the attacker and the virtual clock, driven
//! one [`Action`] at a time, with the invariants checked after every step.

use core::net::{IpAddr, Ipv4Addr};
use std::collections::BTreeSet;
use std::fmt;

use psp_core::handshake::{Config, PathId, Role, SessionId, SmkexMode};
use psp_core::time::{Duration, Instant};

use super::attacker::{Attacker, Op, PuppetKind};
use super::digest;
use super::gateway::{GatewayParty, HostSpec, Rules};
use super::party::{Frame, Mac, Observation, Party, SessionView, SlotKind};

/// What the attacker can do on each path (index 0: path 1, 1: path 2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct Caps {
    /// It sees the frames.
    pub see: [bool; 2],
    /// It can send frames (any source MAC).
    pub inject: [bool; 2],
    /// It can drop, hold back, reorder and rewrite frames.
    pub control: [bool; 2],
}

/// Where the attacker sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Position {
    /// Nowhere: an honest network.
    None,
    /// Dolev-Yao on path 1; on path 2 it sees the frames if `path2_seen` (seed 002's A-P), or
    /// nothing.
    Path1 {
        /// It is passive on path 2.
        path2_seen: bool,
    },
    /// On path 2 it sees and injects but cannot drop, delay or rewrite; on path 1 it sees the
    /// frames if `path1_seen`.
    Path2InjectOnly {
        /// It is passive on path 1.
        path1_seen: bool,
    },
    /// Dolev-Yao on both paths (seed 002's A-A).
    BothPaths,
}

impl Position {
    /// Its capabilities.
    pub fn caps(self) -> Caps {
        match self {
            Self::None => Caps::default(),
            Self::Path1 { path2_seen } => Caps {
                see: [true, path2_seen],
                inject: [true, false],
                control: [true, false],
            },
            Self::Path2InjectOnly { path1_seen } => Caps {
                see: [path1_seen, true],
                inject: [false, true],
                control: [false, false],
            },
            Self::BothPaths => Caps {
                see: [true; 2],
                inject: [true; 2],
                control: [true; 2],
            },
        }
    }

    /// The positions the sweep covers.
    pub const ALL: [Self; 5] = [
        Self::None,
        Self::Path1 { path2_seen: true },
        Self::Path1 { path2_seen: false },
        Self::Path2InjectOnly { path1_seen: true },
        Self::BothPaths,
    ];

    /// Whether it can rewrite both paths (then an unpinned two-path session may be its).
    pub fn both_hostile(self) -> bool {
        self == Self::BothPaths
    }
}

/// The handshake flow both hosts run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Flow {
    /// The thesis' three round trips.
    Thesis,
    /// `Config::compact`: one round trip (SMKEX required, two paths).
    Compact,
}

/// Long-term keys of the honest hosts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Identities {
    /// None.
    None,
    /// Every host has one; nobody pins (a first contact).
    Unpinned,
    /// Every host has one and pins every other's.
    Pinned,
}

/// What the attacker may try (its alphabet) and how much of it per run.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Alphabet {
    /// Drop a frame in flight (paths it controls).
    pub drop: bool,
    /// Send a copy of a frame in flight.
    pub dup: bool,
    /// Deliver frames out of order (paths it controls).
    pub reorder: bool,
    /// Replay one of the last `replay` frames it knows (0: none), to its destination...
    pub replay: usize,
    /// ... or to any host.
    pub redirect: bool,
    /// Rewrites of frames in flight (paths it controls); [`Op::SpliceIds`] is tried with the
    /// last `replay` frames it knows when `splice` is set.
    pub ops: Vec<Op>,
    /// Splice ids across sessions.
    pub splice: bool,
    /// Puppet handshakes it may start (as initiator under any host's name, or answering a
    /// Request it saw).
    pub puppets: Vec<PuppetKind>,
    /// At most this many puppets.
    pub max_puppets: usize,
    /// Puppet Requests may be dated an hour ahead.
    pub future: bool,
    /// It may switch to absorbing the frames its puppets answer (a man in the middle).
    pub absorb: bool,
    /// It may seal frames under keys it knows.
    pub forge: bool,
    /// At most this many attacker actions per run.
    pub budget: usize,
}

impl Alphabet {
    /// Nothing: the attacker only watches.
    pub fn none() -> Self {
        Self {
            drop: false,
            dup: false,
            reorder: false,
            replay: 0,
            redirect: false,
            ops: Vec::new(),
            splice: false,
            puppets: Vec::new(),
            max_puppets: 0,
            future: false,
            absorb: false,
            forge: false,
            budget: 0,
        }
    }

    /// The network's misbehaviour only: drop, duplicate, reorder, delay, replay.
    pub fn network() -> Self {
        Self {
            drop: true,
            dup: true,
            reorder: true,
            replay: 2,
            redirect: false,
            budget: usize::MAX,
            ..Self::none()
        }
    }

    /// Everything, for random runs.
    pub fn full() -> Self {
        let kinds = [
            PuppetKind {
                two_path: true,
                with_static: false,
                compact: false,
            },
            PuppetKind {
                two_path: false,
                with_static: false,
                compact: false,
            },
            PuppetKind {
                two_path: true,
                with_static: true,
                compact: false,
            },
            PuppetKind {
                two_path: true,
                with_static: false,
                compact: true,
            },
        ];
        Self {
            drop: true,
            dup: true,
            reorder: true,
            replay: 4,
            redirect: true,
            ops: vec![
                Op::SwapShare,
                Op::StripTwoPath,
                Op::FutureTimestamp,
                Op::StaticNone,
                Op::StaticEve,
                Op::StaticClaim,
            ],
            splice: true,
            puppets: kinds.to_vec(),
            max_puppets: 3,
            future: true,
            absorb: true,
            forge: true,
            budget: usize::MAX,
        }
    }
}

/// What the environment (traffic, rekeys, crossings) may add per run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EnvBudget {
    /// "Traffic waits" kicks: a rekey in a wanted direction, or a crossing start in the other.
    pub kicks: usize,
    /// Data frames sent.
    pub traffic: usize,
}

/// One configuration to explore.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// For reports.
    pub name: String,
    /// Honest hosts (2 or more).
    pub parties: usize,
    /// The flow.
    pub flow: Flow,
    /// SMKEX policy of every host.
    pub smkex: SmkexMode,
    /// Long-term keys.
    pub identities: Identities,
    /// The attacker's position.
    pub position: Position,
    /// The hosts' rules.
    pub rules: Rules,
    /// The attacker's alphabet.
    pub alphabet: Alphabet,
    /// The environment's budget.
    pub env: EnvBudget,
    /// Pairs (initiator, responder) that want a session from the start.
    pub wanted: Vec<(usize, usize)>,
    /// The gateway's signed group frames: with [`Identities::Pinned`] every handshake frame is
    /// signed by its sender and checked against the pin, so the attacker can replay a host's
    /// frames but not rewrite them or send new ones in its name (`false`: the insider forges
    /// any source MAC, the core's worst case).
    pub signed: bool,
    /// In the liveness phase the attacker does not stop but replays, before every delivery,
    /// this many handshake frames that honest hosts sent (cycling through all it saw, on the
    /// paths it can inject on): the genuine handshake must complete all the same (0: it stops).
    pub flood: usize,
}

impl Scenario {
    /// Two hosts, host 0 wants a session with host 1, the thesis flow, SMKEX required, no
    /// identities, the attacker on path 1 (passive on path 2) with the full alphabet, one
    /// kick and two data frames from the environment.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_string(),
            parties: 2,
            flow: Flow::Thesis,
            smkex: SmkexMode::Required,
            identities: Identities::None,
            position: Position::Path1 { path2_seen: true },
            rules: Rules::default(),
            alphabet: Alphabet::full(),
            env: EnvBudget {
                kicks: 1,
                traffic: 2,
            },
            wanted: vec![(0, 1)],
            signed: false,
            flood: 0,
        }
    }
}

impl Scenario {
    /// The sweep: two hosts, every flow × SMKEX mode × identities × attacker position (the
    /// compact flow only with SMKEX required), the full alphabet.
    pub fn matrix() -> Vec<Self> {
        let mut v = Vec::new();
        for flow in [Flow::Thesis, Flow::Compact] {
            for smkex in [SmkexMode::Required, SmkexMode::Preferred, SmkexMode::Off] {
                if flow == Flow::Compact && smkex != SmkexMode::Required {
                    continue;
                }
                for identities in [Identities::None, Identities::Unpinned, Identities::Pinned] {
                    for position in Position::ALL {
                        let mut s = Self::new("");
                        s.flow = flow;
                        s.smkex = smkex;
                        s.identities = identities;
                        s.position = position;
                        s.name = s.describe();
                        v.push(s);
                    }
                }
            }
        }
        v
    }

    /// Three hosts, each pair wanting a session (0→1, 2→1, 0→2).
    pub fn three_hosts(flow: Flow, position: Position) -> Self {
        let mut s = Self::new("");
        s.parties = 3;
        s.flow = flow;
        s.position = position;
        s.wanted = vec![(0, 1), (2, 1), (0, 2)];
        s.name = s.describe();
        s
    }

    /// A name from the settings, e.g. `thesis/required/pinned/path1+seen2`.
    pub fn describe(&self) -> String {
        let flow = match self.flow {
            Flow::Thesis => "thesis",
            Flow::Compact => "compact",
        };
        let smkex = match self.smkex {
            SmkexMode::Required => "required",
            SmkexMode::Preferred => "preferred",
            _ => "off",
        };
        let ids = match self.identities {
            Identities::None => "no-ids",
            Identities::Unpinned => "unpinned",
            Identities::Pinned => "pinned",
        };
        let pos = match self.position {
            Position::None => "honest",
            Position::Path1 { path2_seen: true } => "path1+seen2",
            Position::Path1 { path2_seen: false } => "path1",
            Position::Path2InjectOnly { path1_seen: true } => "inject2+seen1",
            Position::Path2InjectOnly { path1_seen: false } => "inject2",
            Position::BothPaths => "both",
        };
        let hosts = if self.parties == 2 {
            String::new()
        } else {
            format!("/{}-hosts", self.parties)
        };
        format!("{flow}/{smkex}/{ids}/{pos}{hosts}")
    }
}

/// One scheduler step.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Deliver the frame in flight with this index.
    Deliver(usize),
    /// Advance the clock to the next timer.
    Tick,
    /// Host `p` wants a session with host `q` (a rekey if `rekey`).
    Want {
        /// The host.
        p: usize,
        /// Its peer.
        q: usize,
        /// Start a new session even if one is up.
        rekey: bool,
    },
    /// Host `p` sends one data frame to host `q`.
    Traffic {
        /// The sender.
        p: usize,
        /// The receiver.
        q: usize,
    },
    /// Drop the frame in flight with this index.
    Drop(usize),
    /// Send a copy of the frame in flight with this index.
    Dup(usize),
    /// Rewrite the frame in flight with this index.
    Modify(usize, Op),
    /// Send the known frame `log` to host `to`.
    Replay {
        /// Index into the attacker's log.
        log: usize,
        /// The host.
        to: usize,
    },
    /// Start a puppet initiator under host `as_`'s name toward host `to`.
    PuppetInitiate {
        /// The host it claims to be.
        as_: usize,
        /// The host it talks to.
        to: usize,
        /// Its configuration.
        kind: PuppetKind,
        /// Its Request dated an hour ahead.
        future: bool,
    },
    /// Answer the known Request `log` with a puppet.
    PuppetRespond {
        /// Index into the attacker's log.
        log: usize,
        /// Its configuration.
        kind: PuppetKind,
    },
    /// Absorb the frames the puppets answer from now on.
    Absorb,
    /// Seal a frame under known key `k` to its holder (on each path it can inject on).
    Forge(usize),
}

impl Action {
    /// Whether it is the attacker's.
    pub fn is_attack(&self) -> bool {
        !matches!(
            self,
            Self::Deliver(_) | Self::Tick | Self::Want { .. } | Self::Traffic { .. }
        )
    }
}

/// Which invariant broke.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ViolationKind {
    /// Two honest hosts hold different keys for one session.
    Agreement,
    /// An honest host holds keys the attacker knows, in a scenario that does not permit it.
    Secrecy,
    /// A responder seals under keys its peer never held (and the attacker does not know).
    OneWay,
    /// A host's state exceeds its bound.
    Bound,
    /// No genuine session after the attacker stopped for the liveness window.
    Liveness,
}

/// A broken invariant, with what reproduces it.
#[derive(Clone, Debug)]
pub struct Violation {
    /// Which.
    pub kind: ViolationKind,
    /// What exactly.
    pub detail: String,
    /// The scenario's name.
    pub scenario: String,
    /// The run's seed.
    pub seed: u64,
    /// The actions from the start.
    pub trace: Vec<Action>,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{:?} in scenario {:?}, seed {}: {}",
            self.kind, self.scenario, self.seed, self.detail
        )?;
        writeln!(f, "trace ({} actions):", self.trace.len())?;
        for (i, a) in self.trace.iter().enumerate() {
            writeln!(f, "  {i:3}: {a:?}")?;
        }
        Ok(())
    }
}

struct InFlight {
    frame: Frame,
    injected: bool,
}

/// How long after the attacker stops a genuine session must be up: the handshake timeout twice
/// (a half-open handshake the attacker left, then ours) plus the longest retry backoff (+12.5 %)
/// and slack.
pub const LIVENESS_WINDOW: Duration = Duration::from_secs(80);

/// The world (see the module docs).
pub struct World {
    now: Instant,
    scenario: Scenario,
    seed: u64,
    hosts: Vec<HostSpec>,
    parties: Vec<Box<dyn Party>>,
    net: Vec<InFlight>,
    attacker: Attacker,
    hist: Vec<u64>,
    /// Frames each host sent since the last invariant check.
    sent: Vec<usize>,
    held: Vec<BTreeSet<SessionId>>,
    attacks: usize,
    kicks: usize,
    traffic: usize,
    stopped: bool,
    /// After the stop: it still replays what honest hosts sent.
    flooding: bool,
    flood_ix: usize,
    compromised: bool,
    steps: u64,
    trace: Vec<Action>,
    /// Print every delivery (debugging).
    pub debug: bool,
}

const WALL_BASE: u64 = 1_700_000_000;

/// The most frames a host may send per peer in answer to one input (a flight of three, or a
/// flight and a compact initiator's two keepalives): more would be amplification.
const MAX_SENT_PER_PEER: usize = 5;

impl World {
    /// A world for `scenario`, every random choice of its hosts drawn from `seed`.
    pub fn new(scenario: &Scenario, seed: u64) -> Self {
        let n = scenario.parties;
        let hosts: Vec<HostSpec> = (0..n)
            .map(|i| {
                HostSpec::new(
                    [2, 0x50, 0x53, 0, 0, i as u8 + 1],
                    IpAddr::V4(Ipv4Addr::new(10, 77, 0, i as u8 + 1)),
                    (scenario.identities != Identities::None).then_some([0x10 + i as u8; 32]),
                )
            })
            .collect();
        let parties: Vec<Box<dyn Party>> = (0..n)
            .map(|i| {
                let mut cfg = Config::new(hosts[i].mac, hosts[i].addr, 24);
                cfg.paths = 2;
                cfg.smkex = scenario.smkex;
                cfg.compact = scenario.flow == Flow::Compact;
                let peers: Vec<_> = (0..n)
                    .filter(|j| *j != i)
                    .map(|j| {
                        let pin = (scenario.identities == Identities::Pinned)
                            .then(|| hosts[j].static_public())
                            .flatten();
                        (hosts[j].clone(), pin)
                    })
                    .collect();
                Box::new(GatewayParty::new(
                    hosts[i].clone(),
                    cfg,
                    scenario.rules,
                    &peers,
                    WALL_BASE + 7 * i as u64,
                    digest(&(seed, i)),
                )) as Box<dyn Party>
            })
            .collect();
        Self::with_parties(scenario, seed, hosts, parties)
    }

    /// A world with hosts of another implementation (`parties[i]` has `hosts[i]`'s MAC).
    pub fn with_parties(
        scenario: &Scenario,
        seed: u64,
        hosts: Vec<HostSpec>,
        parties: Vec<Box<dyn Party>>,
    ) -> Self {
        let n = parties.len();
        let mut w = Self {
            now: Instant::from_secs(1),
            scenario: scenario.clone(),
            seed,
            attacker: Attacker::new(
                scenario.position.caps(),
                hosts.clone(),
                WALL_BASE,
                digest(&(seed, "attacker")),
            ),
            hosts,
            parties,
            net: Vec::new(),
            hist: vec![0; n],
            sent: vec![0; n],
            held: vec![BTreeSet::new(); n],
            attacks: 0,
            kicks: 0,
            traffic: 0,
            stopped: false,
            flooding: false,
            flood_ix: 0,
            compromised: false,
            steps: 0,
            trace: Vec::new(),
            debug: false,
        };
        for &(p, q) in &scenario.wanted {
            w.want(p, q, false);
        }
        w.pump();
        w.sent.fill(0);
        w
    }

    /// The virtual time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// The attacker.
    pub fn attacker(&self) -> &Attacker {
        &self.attacker
    }

    /// Whether the attacker learnt keys of an honest host (where the scenario permits it).
    pub fn compromised(&self) -> bool {
        self.compromised
    }

    /// Steps taken (each followed by the invariant checks).
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// The actions taken so far.
    pub fn trace(&self) -> &[Action] {
        &self.trace
    }

    /// Host `i`'s state.
    pub fn observe(&self, i: usize) -> Observation {
        self.parties[i].observe()
    }

    /// The frames in flight, in the order [`Action::Deliver`] indexes them (and whether the
    /// attacker sent them).
    pub fn flight(&self) -> impl Iterator<Item = (&Frame, bool)> {
        self.net.iter().map(|f| (&f.frame, f.injected))
    }

    /// How many frames are in flight.
    pub fn in_flight_len(&self) -> usize {
        self.net.len()
    }

    /// The MAC of host `i`.
    pub fn mac(&self, i: usize) -> Mac {
        self.hosts[i].mac
    }

    /// Whether the attacker can make `dst` take a handshake frame it made in `src`'s name.
    fn can_forge(&self, src: Mac, dst: Mac) -> bool {
        let signed = self.scenario.signed && self.scenario.identities == Identities::Pinned;
        !(signed && self.party_of(src).is_some() && self.party_of(dst).is_some())
    }

    fn party_of(&self, mac: Mac) -> Option<usize> {
        self.hosts.iter().position(|h| h.mac == mac)
    }

    fn want(&mut self, p: usize, q: usize, rekey: bool) {
        let mac = self.hosts[q].mac;
        self.hist[p] = digest(&(self.hist[p], self.now.total_micros(), "want", q, rekey));
        self.parties[p].want(self.now, mac, rekey);
    }

    /// Every action enabled now.
    pub fn actions(&self, out: &mut Vec<Action>) {
        out.clear();
        let caps = self.attacker.caps();
        let a = &self.scenario.alphabet;
        let attacking = !self.stopped && self.attacks < a.budget;
        for (i, f) in self.net.iter().enumerate() {
            let path = usize::from(f.frame.path.0);
            let free = f.injected || (caps.control[path] && a.reorder);
            let head = || {
                !self.net[..i].iter().any(|g| {
                    !g.injected
                        && g.frame.src == f.frame.src
                        && g.frame.dst == f.frame.dst
                        && g.frame.path == f.frame.path
                })
            };
            if free || head() {
                out.push(Action::Deliver(i));
            }
            if !attacking {
                continue;
            }
            // Its own frames it may still rewrite (crafting), but dropping or copying them
            // adds nothing.
            if caps.control[path] && a.drop && !f.injected {
                out.push(Action::Drop(i));
            }
            if caps.inject[path] && caps.see[path] && a.dup && !f.injected {
                out.push(Action::Dup(i));
            }
            let forge = self.can_forge(f.frame.src, f.frame.dst);
            if forge && (caps.control[path] || (f.injected && caps.inject[path])) {
                for op in &a.ops {
                    if self.attacker.rewrite(&f.frame, *op).is_some() {
                        out.push(Action::Modify(i, *op));
                    }
                }
                if a.splice {
                    let n = self.attacker.log_len();
                    for j in n.saturating_sub(a.replay)..n {
                        if self.attacker.rewrite(&f.frame, Op::SpliceIds(j)).is_some() {
                            out.push(Action::Modify(i, Op::SpliceIds(j)));
                        }
                    }
                }
            }
        }
        if self.next_timer().is_some() {
            out.push(Action::Tick);
        }
        if self.kicks < self.scenario.env.kicks {
            for &(p, q) in &self.scenario.wanted {
                out.push(Action::Want { p, q, rekey: true });
                out.push(Action::Want {
                    p: q,
                    q: p,
                    rekey: false,
                });
            }
        }
        if self.traffic < self.scenario.env.traffic && !self.stopped {
            for &(p, q) in &self.scenario.wanted {
                out.push(Action::Traffic { p, q });
                out.push(Action::Traffic { p: q, q: p });
            }
        }
        if !attacking {
            return;
        }
        let n = self.attacker.log_len();
        for j in n.saturating_sub(a.replay)..n {
            let Some(f) = self.attacker.logged(j) else {
                continue;
            };
            if !caps.inject[usize::from(f.path.0)] {
                continue;
            }
            for to in 0..self.hosts.len() {
                let other = self.hosts[to].mac != f.dst;
                if self.hosts[to].mac == f.src
                    || (other && (!a.redirect || !self.can_forge(f.src, self.hosts[to].mac)))
                {
                    continue;
                }
                out.push(Action::Replay { log: j, to });
            }
        }
        if self.attacker.puppets() < a.max_puppets {
            for &kind in &a.puppets {
                for as_ in 0..self.hosts.len() {
                    for to in 0..self.hosts.len() {
                        if as_ == to || !self.can_forge(self.hosts[as_].mac, self.hosts[to].mac) {
                            continue;
                        }
                        out.push(Action::PuppetInitiate {
                            as_,
                            to,
                            kind,
                            future: false,
                        });
                        if a.future {
                            out.push(Action::PuppetInitiate {
                                as_,
                                to,
                                kind,
                                future: true,
                            });
                        }
                    }
                }
                for (j, f) in self.attacker.log().enumerate() {
                    if is_request(f)
                        && self.party_of(f.dst).is_some()
                        && self.can_forge(f.dst, f.src)
                    {
                        out.push(Action::PuppetRespond { log: j, kind });
                    }
                }
            }
        }
        if a.absorb && !self.attacker.absorbing() && self.attacker.puppets() > 0 {
            out.push(Action::Absorb);
        }
        if a.forge && caps.inject.iter().any(|x| *x) {
            for k in 0..self.attacker.known().len() {
                out.push(Action::Forge(k));
            }
        }
    }

    /// Takes one step, then checks the invariants.
    ///
    /// # Errors
    /// The first invariant that breaks.
    pub fn apply(&mut self, action: &Action) -> Result<(), Violation> {
        self.trace.push(action.clone());
        self.steps += 1;
        if action.is_attack() {
            self.attacks += 1;
        }
        let now = self.now;
        match *action {
            Action::Deliver(i) => {
                if i < self.net.len() {
                    let f = self.net.remove(i);
                    self.deliver(&f.frame);
                }
            }
            Action::Tick => {
                if let Some(t) = self.next_timer() {
                    self.advance(t);
                }
            }
            Action::Want { p, q, rekey } => {
                self.kicks += 1;
                self.want(p, q, rekey);
            }
            Action::Traffic { p, q } => {
                self.traffic += 1;
                let mac = self.hosts[q].mac;
                self.hist[p] = digest(&(self.hist[p], now.total_micros(), "traffic", q));
                let _ = self.parties[p].send_data(now, mac);
            }
            Action::Drop(i) => {
                if i < self.net.len() {
                    self.net.remove(i);
                }
            }
            Action::Dup(i) => {
                if let Some(f) = self.net.get(i) {
                    let f = f.frame.clone();
                    self.inject(f);
                }
            }
            Action::Modify(i, op) => {
                if let Some(g) = self
                    .net
                    .get(i)
                    .and_then(|f| self.attacker.rewrite(&f.frame, op))
                {
                    self.net.remove(i);
                    self.inject(g);
                }
            }
            Action::Replay { log, to } => {
                if let Some(f) = self.attacker.logged(log) {
                    let f = Frame {
                        dst: self.hosts[to].mac,
                        ..f.clone()
                    };
                    self.inject(f);
                }
            }
            Action::PuppetInitiate {
                as_,
                to,
                kind,
                future,
            } => {
                let (a, b) = (self.hosts[as_].mac, self.hosts[to].mac);
                self.attacker.puppet_initiate(now, a, b, kind, future);
            }
            Action::PuppetRespond { log, kind } => self.attacker.puppet_respond(now, log, kind),
            Action::Absorb => self.attacker.set_absorb(),
            Action::Forge(k) => {
                // On every path it can inject on (a compact responder confirms on path 2).
                for path in [PathId::FIRST, PathId::SECOND] {
                    if self.attacker.caps().inject[usize::from(path.0)]
                        && let Some(f) = self.attacker.forge_data(now, k, path)
                    {
                        self.inject(f);
                    }
                }
            }
        }
        self.pump();
        self.check()
    }

    fn deliver(&mut self, f: &Frame) {
        let Some(i) = self.party_of(f.dst) else {
            return;
        };
        self.hist[i] = digest(&(self.hist[i], self.now.total_micros(), f));
        if self.debug {
            println!(
                "{:?} host {i} gets on path {}: {}",
                self.now,
                f.path.0,
                describe(f)
            );
        }
        self.parties[i].handle_frame(self.now, f);
    }

    fn next_timer(&self) -> Option<Instant> {
        let parties = self.parties.iter().filter_map(|p| p.poll_timeout());
        let puppets = (!self.stopped)
            .then(|| self.attacker.poll_timeout())
            .flatten();
        parties.chain(puppets).min()
    }

    fn advance(&mut self, t: Instant) {
        self.now = self.now.max(t);
        for i in 0..self.parties.len() {
            if self.parties[i]
                .poll_timeout()
                .is_some_and(|x| x <= self.now)
            {
                self.hist[i] = digest(&(self.hist[i], self.now.total_micros(), "timeout"));
                self.parties[i].handle_timeout(self.now);
            }
        }
        if !self.stopped {
            self.attacker.handle_timeout(self.now);
        }
    }

    /// An attacker's frame goes out (if it can inject on that path).
    fn inject(&mut self, f: Frame) {
        let path = usize::from(f.path.0);
        if !self.attacker.caps().inject[path] {
            return;
        }
        self.attacker.observe(self.now, &f, false);
        self.net.push(InFlight {
            frame: f,
            injected: true,
        });
    }

    /// Moves every queued frame into the network (through the attacker's eyes).
    fn pump(&mut self) {
        let mut puppet_out = Vec::new();
        loop {
            let mut any = false;
            for i in 0..self.parties.len() {
                while let Some(f) = self.parties[i].poll_transmit() {
                    any = true;
                    self.sent[i] += 1;
                    if self.debug {
                        println!(
                            "{:?} host {i} sends on path {}: {}",
                            self.now,
                            f.path.0,
                            describe(&f)
                        );
                    }
                    let path = usize::from(f.path.0);
                    if (!self.stopped || self.flooding)
                        && self.attacker.caps().see[path]
                        && self.attacker.observe(self.now, &f, true)
                    {
                        continue;
                    }
                    self.net.push(InFlight {
                        frame: f,
                        injected: false,
                    });
                }
            }
            if !self.stopped {
                puppet_out.clear();
                self.attacker.poll_puppets(self.now, &mut puppet_out);
                for f in puppet_out.drain(..) {
                    any = true;
                    self.inject(f);
                }
            }
            if !any {
                break;
            }
        }
    }

    fn fail(&self, kind: ViolationKind, detail: String) -> Violation {
        Violation {
            kind,
            detail,
            scenario: self.scenario.name.clone(),
            seed: self.seed,
            trace: self.trace.clone(),
        }
    }

    fn permitted(&self, v: &SessionView) -> bool {
        !v.pinned && (!v.two_path || self.scenario.position.both_hostile())
    }

    /// The invariants.
    fn check(&mut self) -> Result<(), Violation> {
        let obs: Vec<Observation> = self.parties.iter().map(|p| p.observe()).collect();
        let sent = core::mem::replace(&mut self.sent, vec![0; obs.len()]);
        for (i, o) in obs.iter().enumerate() {
            if o.handshakes > o.peers
                || o.sessions.len() > 4 * o.peers
                || o.queued > 0
                || sent[i] > MAX_SENT_PER_PEER * o.peers
            {
                return Err(self.fail(
                    ViolationKind::Bound,
                    format!(
                        "host {i}: {} handshakes, {} sessions, {} queued, {} frames sent in one \
                         step, for {} peers",
                        o.handshakes,
                        o.sessions.len(),
                        o.queued,
                        sent[i],
                        o.peers
                    ),
                ));
            }
            for v in &o.sessions {
                if self.held[i].insert(v.id) && !self.stopped {
                    let mac = self.hosts[i].mac;
                    self.attacker.try_derive(mac, v);
                }
            }
        }
        for (i, o) in obs.iter().enumerate() {
            for v in &o.sessions {
                let known = self.attacker.knows_fp(&v.send) || self.attacker.knows_fp(&v.recv);
                if known && v.slot != SlotKind::Unconfirmed {
                    if !self.permitted(v) {
                        return Err(self.fail(
                            ViolationKind::Secrecy,
                            format!("host {i} holds {:?} keys the attacker knows: {v:?}", v.slot),
                        ));
                    }
                    self.compromised = true;
                }
                if v.role == Role::Responder
                    && v.slot == SlotKind::Current
                    && !known
                    && let Some(j) = self.party_of(v.peer)
                    && !self.held[j].contains(&v.id)
                {
                    return Err(self.fail(
                        ViolationKind::OneWay,
                        format!("host {i} seals under {:?}, which host {j} never held", v.id),
                    ));
                }
                for (j, p) in obs.iter().enumerate().skip(i + 1) {
                    for w in p.sessions.iter().filter(|w| w.id == v.id) {
                        let mirrored = v.role != w.role
                            && v.send == w.recv
                            && v.recv == w.send
                            && v.peer == self.hosts[j].mac
                            && w.peer == self.hosts[i].mac;
                        if !mirrored {
                            return Err(self.fail(
                                ViolationKind::Agreement,
                                format!("hosts {i} and {j} disagree on {:?}: {v:?} vs {w:?}", v.id),
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// A digest of the whole state, for deduplication: two worlds with the same digest behave
    /// the same from here (each host's state is a function of its inputs and seed).
    pub fn digest(&self) -> u64 {
        let net: Vec<(&Frame, bool)> = self.net.iter().map(|f| (&f.frame, f.injected)).collect();
        digest(&(
            self.now.total_micros(),
            &self.hist,
            net,
            self.attacker.digest(),
            self.attacks,
            self.kicks,
            self.traffic,
        ))
    }

    /// The attacker stops: its frames still in flight vanish, its puppets end. Then the honest
    /// hosts run (every frame delivered at once, a data frame each way per wanted pair every
    /// second) until each wanted pair shares a session the attacker does not know, under which
    /// data flows both ways, or [`LIVENESS_WINDOW`] passes.
    ///
    /// # Errors
    /// An invariant broken on the way, or [`ViolationKind::Liveness`] (unless the attacker got
    /// keys where the scenario permits it: then the run ends "compromised").
    pub fn finish(&mut self) -> Result<bool, Violation> {
        self.stopped = true;
        self.flooding = self.scenario.flood > 0;
        self.attacker.stop();
        self.net.retain(|f| !f.injected);
        let deadline = self.now + LIVENESS_WINDOW;
        let pairs = self.scenario.wanted.clone();
        for &(p, q) in &pairs {
            self.want(p, q, false);
        }
        self.pump();
        self.check()?;
        let mut next_round = self.now;
        loop {
            self.drain()?;
            let t = self.next_timer().map_or(next_round, |t| t.min(next_round));
            if t > deadline {
                break;
            }
            self.advance(t);
            if self.now >= next_round {
                next_round = self.now + Duration::from_secs(1);
                if self.traffic_round(&pairs)? {
                    return Ok(true);
                }
            }
            self.pump();
            self.check()?;
        }
        if self.compromised {
            return Ok(false);
        }
        let states: Vec<String> = pairs
            .iter()
            .flat_map(|&(p, q)| [p, q])
            .map(|i| format!("host {i}: {:?}", self.parties[i].observe()))
            .collect();
        Err(self.fail(
            ViolationKind::Liveness,
            format!(
                "no genuine session {} s after the attacker stopped; {}",
                LIVENESS_WINDOW.total_micros() / 1_000_000,
                states.join("; ")
            ),
        ))
    }

    /// Delivers every frame in flight (in order), with the flood's replays before each.
    fn drain(&mut self) -> Result<(), Violation> {
        while !self.net.is_empty() {
            if self.flooding {
                for _ in 0..self.scenario.flood {
                    let f = self.attacker.honest_frame(self.flood_ix).cloned();
                    self.flood_ix += 1;
                    if let Some(f) = f {
                        // The replay arrives first.
                        let path = usize::from(f.path.0);
                        if self.attacker.caps().inject[path] {
                            self.steps += 1;
                            self.deliver(&f);
                            self.pump();
                            self.check()?;
                        }
                    }
                }
            }
            let f = self.net.remove(0);
            self.steps += 1;
            self.deliver(&f.frame);
            self.pump();
            self.check()?;
        }
        Ok(())
    }

    /// One data frame each way per pair; whether all arrived under one current session per pair
    /// that the attacker does not know.
    fn traffic_round(&mut self, pairs: &[(usize, usize)]) -> Result<bool, Violation> {
        let opened = |w: &Self, i: usize, from: usize| {
            let mac = w.hosts[from].mac;
            w.parties[i]
                .observe()
                .opened
                .iter()
                .find(|(m, _)| *m == mac)
                .map_or(0, |(_, n)| *n)
        };
        let mut ok = true;
        let mut before = Vec::new();
        for &(p, q) in pairs {
            before.push((opened(self, q, p), opened(self, p, q)));
            let (mp, mq) = (self.hosts[p].mac, self.hosts[q].mac);
            let now = self.now;
            self.hist[p] = digest(&(self.hist[p], now.total_micros(), "traffic", q));
            self.hist[q] = digest(&(self.hist[q], now.total_micros(), "traffic", p));
            ok &= self.parties[p].send_data(now, mq);
            ok &= self.parties[q].send_data(now, mp);
        }
        self.pump();
        self.check()?;
        self.drain()?;
        for (&(p, q), (bq, bp)) in pairs.iter().zip(before) {
            ok &= opened(self, q, p) > bq && opened(self, p, q) > bp;
            let current = |i: usize, peer: usize| {
                let mac = self.hosts[peer].mac;
                self.parties[i]
                    .observe()
                    .sessions
                    .into_iter()
                    .find(|v| v.peer == mac && v.slot == SlotKind::Current)
            };
            match (current(p, q), current(q, p)) {
                (Some(a), Some(b)) => {
                    ok &= a.id == b.id && !self.attacker.knows_fp(&a.send);
                }
                _ => ok = false,
            }
        }
        Ok(ok)
    }
}

fn is_request(f: &Frame) -> bool {
    match &f.body {
        super::FrameBody::Handshake(b) => b.get(1) == Some(&0x01),
        super::FrameBody::Session(_) => false,
    }
}

/// One line about a frame (for [`World::debug`]).
fn describe(f: &Frame) -> String {
    use psp_core::handshake::messages::{Body, Repr};
    match &f.body {
        super::FrameBody::Handshake(b) => match Repr::parse_bytes(b) {
            Ok(r) => {
                let body = match r.body {
                    Body::Request(q) => format!("Request {:?}", q.timestamp.to_unix()),
                    b => format!("{:?}", b.message_type()),
                };
                let id = |x: [u8; 8]| u16::from_be_bytes([x[0], x[1]]);
                format!(
                    "{body} {:04x}/{:04x}",
                    id(r.initiator_id.0),
                    id(r.responder_id.0)
                )
            }
            Err(e) => format!("malformed ({e})"),
        },
        super::FrameBody::Session(b) => format!("session frame, {} bytes", b.len()),
    }
}
