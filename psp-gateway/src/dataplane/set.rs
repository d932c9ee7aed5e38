//! The peer set: everything one configuration's peers need at run time (their counters, their
//! normalized endpoints, and the sealers and openers of the two dataplane tasks), built in one
//! fallible step, so that a reload applies completely or changes nothing.
//!
//! A start or a reload goes through three steps; only the first can fail:
//!
//! 1. [`PeerSet::build`] reads the running set by reference only and makes everything new:
//!    counters for new peer names, a normalized endpoint (with a fresh sealer) for every
//!    normalized peer that needs one, and both tasks' halves of the peer table with a fresh
//!    sealer per key and fresh openers per peer. It checks the PSP overhead against what the
//!    running TAP MTU leaves. It returns a [`Staged`] set or an error; on error the running set
//!    is untouched and keeps working.
//! 2. [`Staged::commit`] changes the running set, and cannot fail: a new S_goal for kept
//!    endpoints, the sealer of a replaced endpoint handed to its successor (one sequence-number
//!    stream per key), endpoints that left retired. The daemon then hands the new endpoints to the pacer thread
//!    and publishes the set.
//! 3. Each dataplane task, between batches, takes its half of the new set ([`PeerSet::take_tx`],
//!    [`PeerSet::take_rx`]) and carries over the sealers and openers of unchanged keys from the
//!    half it ran with (`TxPeers::carry_over`, `RxPeers::carry_over`; they cannot fail either).
//!
//! What this module does not do: read the configuration file, or seal and open frames.

use std::sync::{Arc, Mutex, MutexGuard};

use super::Shared;
use super::counters::PeerCounters;
use super::keys::{self, KeySealer, new_sealer};
use super::normalize::{NormContext, NormPeer, Reuse};
use super::peers::{GroupSealer, RxPeers, TxPeers, lock_group};
use crate::config::{Config, ConfigError, PeerConfig};
use crate::io::{ETHERNET_HEADER_LEN, Uplink};
use crate::sessions::PeerSession;
use crate::state::{GROUP_BLOCK, UNICAST_BLOCK};

/// Why a peer set could not be built (nothing changed).
#[derive(Debug, thiserror::Error)]
pub(crate) enum BuildError {
    /// The core refused a key or its settings.
    #[error(transparent)]
    Keys(#[from] keys::Error),
    /// A normalized peer's settings do not fit the uplink or leave no room for data.
    #[error(transparent)]
    Normalize(ConfigError),
    /// The known_peers file cannot be read or is unsafe.
    #[error("known_peers: {0}")]
    State(#[from] crate::state::StateError),
    /// The suites need more overhead than the running TAP MTU leaves.
    #[error(
        "the new suites need {overhead} bytes of PSP overhead, more than the TAP MTU leaves ({max}); restart instead"
    )]
    Overhead {
        /// The largest overhead of the new keys.
        overhead: usize,
        /// What the running TAP MTU leaves.
        max: usize,
    },
}

/// The peers of one configuration: what the daemon publishes to the tasks and `status` reads.
#[derive(Debug)]
pub(crate) struct PeerSet {
    /// The configuration.
    pub(crate) config: Config,
    /// Counters, parallel to `config.peers`.
    pub(crate) counters: Vec<Arc<PeerCounters>>,
    /// Normalized endpoints, parallel to `config.peers`.
    pub(crate) norm: Vec<Option<Arc<NormPeer>>>,
    /// Session peers' state, parallel to `config.peers`.
    pub(crate) sessions: Vec<Option<Arc<PeerSession>>>,
    /// The group key's sealer (shared with the session driver).
    group: GroupSealer,
    // Each task's half, taken once by that task (or by the daemon at start).
    tx: Mutex<Option<TxPeers>>,
    rx: Mutex<Option<RxPeers>>,
    max_overhead: usize,
}

/// One change to the running set, made by [`Staged::commit`].
#[derive(Debug)]
enum Step {
    /// The kept endpoint takes the peer's new settings (a new S_goal).
    Update(Arc<NormPeer>, Box<PeerConfig>),
    /// The replaced endpoint `from` hands its sealer to `to` (same key settings).
    Handover {
        from: Arc<NormPeer>,
        to: Arc<NormPeer>,
    },
    /// The pacer thread stops serving the endpoint (the peer left or got a new endpoint).
    Retire(Arc<NormPeer>),
    /// The kept group sealer signs with the new identity (or stops signing): its sequence
    /// numbers go on.
    Signer(GroupSealer, Option<psp_core::crypto::SigningKey>),
}

/// A complete new peer set, not yet in force: [`Staged::commit`] applies it.
#[derive(Debug)]
#[must_use = "a staged peer set changes nothing until it is committed"]
pub(crate) struct Staged {
    set: PeerSet,
    steps: Vec<Step>,
}

impl PeerSet {
    /// Builds the set for `config`. With `previous` (a reload), reuses by name the counters of
    /// its peers and the normalized endpoints whose settings are unchanged (or differ only in
    /// S_goal), and plans the hand-over of the sealers of replaced endpoints with unchanged key
    /// settings; `previous` itself is not changed. `max_overhead` is what the running TAP MTU
    /// leaves for PSP overhead (`None` at start, when the MTU follows from the set).
    ///
    /// # Errors
    /// A key or setting the core refuses, a normalized frame size that does not fit the uplink
    /// or leaves no room for data, or more overhead than `max_overhead`.
    pub(crate) fn build(
        config: Config,
        previous: Option<&Self>,
        ctx: &NormContext,
        max_overhead: Option<usize>,
    ) -> Result<Staged, BuildError> {
        let counters: Vec<Arc<PeerCounters>> = config
            .peers
            .iter()
            .map(|p| {
                previous
                    .and_then(|prev| {
                        prev.config
                            .peers
                            .iter()
                            .position(|q| q.name == p.name)
                            .map(|i| Arc::clone(&prev.counters[i]))
                    })
                    .unwrap_or_default()
            })
            .collect();
        let mut steps = Vec::new();
        let mut norm = Vec::with_capacity(config.peers.len());
        for (i, p) in config.peers.iter().enumerate() {
            let Some(cfg) = p.normalize else {
                norm.push(None);
                continue;
            };
            let old =
                previous.and_then(|prev| prev.norm.iter().flatten().find(|o| o.name == p.name));
            match old.map(|o| (o, o.reuse(p, ctx.max_frame))) {
                Some((o, Reuse::Same)) => {
                    norm.push(Some(Arc::clone(o)));
                    continue;
                }
                Some((o, Reuse::Update)) => {
                    steps.push(Step::Update(Arc::clone(o), Box::new(p.clone())));
                    norm.push(Some(Arc::clone(o)));
                    continue;
                }
                Some((_, Reuse::Replace)) | None => {}
            }
            let sealer = new_sealer(&p.name, &p.security, ctx.state.as_ref(), UNICAST_BLOCK)?;
            let np = NormPeer::new(
                ctx,
                &config.path,
                i,
                p,
                cfg,
                Arc::clone(&counters[i]),
                sealer,
            )
            .map_err(BuildError::Normalize)?;
            let np = Arc::new(np);
            if let Some(o) = old.filter(|o| o.has_key_settings(&p.security)) {
                steps.push(Step::Handover {
                    from: Arc::clone(o),
                    to: Arc::clone(&np),
                });
            }
            norm.push(Some(np));
        }
        if let Some(prev) = previous {
            for o in prev.norm.iter().flatten() {
                if !norm.iter().flatten().any(|n| Arc::ptr_eq(n, o)) {
                    steps.push(Step::Retire(Arc::clone(o)));
                }
            }
        }
        // The group sealer is kept while the group key is: one sequence-number stream per key,
        // whatever else changed (an identity change only changes what it signs with).
        let group = match previous.filter(|prev| prev.config.group == config.group) {
            Some(prev) => {
                if !same_identity(&prev.config, &config) {
                    steps.push(Step::Signer(Arc::clone(&prev.group), signer(&config)));
                }
                Arc::clone(&prev.group)
            }
            None => Arc::new(Mutex::new(group_sealer(&config, ctx.state.as_ref())?)),
        };
        let sessions = session_peers(&config, previous, ctx.max_frame)?;
        let tx = TxPeers::build(
            &config,
            &counters,
            &norm,
            &group,
            &sessions,
            ctx.state.as_ref(),
        )?;
        let overhead = tx.max_overhead().max(session_overhead(&config));
        if let Some(max) = max_overhead.filter(|max| overhead > *max) {
            return Err(BuildError::Overhead { overhead, max });
        }
        let rx = RxPeers::build(&config, &counters, &norm, &sessions, ctx.max_frame)?;
        Ok(Staged {
            set: Self {
                config,
                counters,
                norm,
                sessions,
                group,
                tx: Mutex::new(Some(tx)),
                rx: Mutex::new(Some(rx)),
                max_overhead: overhead,
            },
            steps,
        })
    }

    /// The group key's sealer, locked (for handshake messages).
    pub(crate) fn group_sealer(&self) -> MutexGuard<'_, KeySealer> {
        lock_group(&self.group)
    }

    /// The transmit task's half, once (`None` after it was taken).
    pub(crate) fn take_tx(&self) -> Option<TxPeers> {
        lock(&self.tx).take()
    }

    /// The receive task's half, once (`None` after it was taken).
    pub(crate) fn take_rx(&self) -> Option<RxPeers> {
        lock(&self.rx).take()
    }

    /// The largest number of bytes sealing adds to an inner frame, over all keys.
    pub(crate) fn max_overhead(&self) -> usize {
        self.max_overhead
    }

    /// The smallest TAP MTU the normalized peers need lowered to (faithful packing carries one
    /// inner frame per outer frame), if any.
    pub(crate) fn mtu_limit(&self) -> Option<usize> {
        self.norm
            .iter()
            .flatten()
            .map(|np| np.max_inner_len().saturating_sub(ETHERNET_HEADER_LEN))
            .min()
    }

    /// Hands every normalized peer the pacer thread does not serve yet to it.
    pub(crate) fn spawn_pacers(&self, uplink: &Arc<Uplink>, shared: &Arc<Shared>) {
        for np in self.norm.iter().flatten() {
            NormPeer::start(np, uplink, shared);
        }
    }

    /// The number of peers that are new or changed against `previous`.
    pub(crate) fn changed_since(&self, previous: &Self) -> usize {
        self.config
            .peers
            .iter()
            .filter(|p| !previous.config.peers.contains(p))
            .count()
    }
}

impl Staged {
    /// Puts the set in force against the set it was built from: kept endpoints take their new
    /// S_goal, replaced endpoints hand their sealer to their successors, endpoints that left
    /// stop pacing. Publish the returned set (after [`PeerSet::spawn_pacers`]).
    pub(crate) fn commit(self) -> PeerSet {
        for step in self.steps {
            match step {
                Step::Update(np, p) => np.update(&p),
                Step::Handover { from, to } => to.take_sealer_from(&from),
                Step::Retire(np) => np.retire(),
                Step::Signer(group, signer) => lock_group(&group).set_signer(signer),
            }
        }
        self.set
    }
}

fn same_identity(a: &Config, b: &Config) -> bool {
    let id = |c: &Config| c.session.as_ref().and_then(|s| s.identity.clone());
    id(a) == id(b)
}

/// The group sealer: signs with this host's identity when it has one (the thesis'
/// digital-signature flag on group frames).
fn group_sealer(
    config: &Config,
    state: Option<&Arc<crate::state::StateDir>>,
) -> Result<KeySealer, keys::Error> {
    let mut sealer = new_sealer("group", &config.group, state, GROUP_BLOCK)?;
    sealer.set_signer(signer(config));
    Ok(sealer)
}

/// The key that signs this host's group frames: its identity's, if it has one.
fn signer(config: &Config) -> Option<psp_core::crypto::SigningKey> {
    config
        .session
        .as_ref()
        .and_then(|s| s.identity.as_ref())
        .and_then(|f| psp_core::handshake::Identity::from_seed(*f.seed).ok())
        .and_then(|id| id.signing_key().ok())
}

/// The key-ring settings of the session peers.
pub(crate) fn ring_config(config: &Config, max_frame: usize) -> psp_core::handshake::KeyRingConfig {
    let mut rc = psp_core::handshake::KeyRingConfig::default();
    if let Some(s) = &config.session {
        rc.grace = s.grace;
        rc.rekey_seq = s.rekey_seq;
        // A quarter of the lifetime, at most a minute: the rekey starts well before expiry.
        rc.rekey_margin =
            psp_core::time::Duration::from_micros((s.lifetime.total_micros() / 4).min(60_000_000));
    }
    rc.opener = rc
        .opener
        .with_replay_window(config.group.replay_window)
        .with_max_frame_len(max_frame);
    rc
}

/// The session state of every session peer: kept from `previous` for a peer of the same name,
/// MACs, identity and address (its sessions go on), new otherwise. A new `identity = "tofu"`
/// peer starts with the pin in `known_peers`, if there is one, so every opener built for it
/// checks its signatures from the start.
fn session_peers(
    config: &Config,
    previous: Option<&PeerSet>,
    max_frame: usize,
) -> Result<Vec<Option<Arc<PeerSession>>>, BuildError> {
    let Some(sc) = &config.session else {
        return Ok(vec![None; config.peers.len()]);
    };
    let tofu = if config.peers.iter().any(|p| p.tofu) {
        Some(crate::sessions::Tofu::load(
            &crate::sessions::known_peers_path(config),
        )?)
    } else {
        None
    };
    Ok(config
        .peers
        .iter()
        .map(|p| {
            if !p.session {
                return None;
            }
            let kept = previous.and_then(|prev| {
                let i = prev.config.peers.iter().position(|q| {
                    q.name == p.name
                        && q.session
                        && q.macs == p.macs
                        && q.identity == p.identity
                        && q.tofu == p.tofu
                        && q.address == p.address
                })?;
                (prev.config.session == config.session)
                    .then(|| prev.sessions[i].clone())
                    .flatten()
            });
            Some(kept.unwrap_or_else(|| {
                let learnt = tofu
                    .as_ref()
                    .filter(|_| p.tofu)
                    .and_then(|t| t.get(&p.name));
                Arc::new(PeerSession::new(
                    &p.name,
                    p.macs[0],
                    ring_config(config, max_frame),
                    p.identity.or(learnt),
                    p.tofu,
                    p.address,
                    sc.queue,
                ))
            }))
        })
        .collect())
}

/// The largest overhead of a session suite (frames carry the key id as security number).
fn session_overhead(config: &Config) -> usize {
    let Some(s) = &config.session else {
        return 0;
    };
    s.suites
        .iter()
        .filter_map(|suite| {
            let key =
                psp_core::crypto::SuiteKey::new(*suite, &[0u8; 32][..suite.key_len()]).ok()?;
            let cfg = psp_core::session::SealerConfig::new()
                .with_security_number(psp_core::wire::SecurityNumber::new(0).ok())
                .with_allow_none(true);
            psp_core::session::Sealer::new(key, psp_core::Seq(0), cfg)
                .ok()
                .map(|s| s.overhead())
        })
        .max()
        .unwrap_or(0)
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock cannot leave a half-taken Option: keep going.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::PathBuf;

    use super::*;

    /// A directory with key files, removed on drop.
    struct Dir(PathBuf);

    impl Dir {
        fn new(tag: &str) -> Self {
            let dir = std::env::temp_dir().join(format!("psp-set-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            let d = Self(dir);
            for name in ["group", "plain", "plain2", "n1", "n2", "n3"] {
                d.key(name);
            }
            d
        }

        fn key(&self, name: &str) {
            let mut key = [0u8; 16];
            getrandom::fill(&mut key).unwrap();
            let path = self.0.join(format!("{name}.key"));
            std::fs::write(&path, hex::encode(key)).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        }

        /// A configuration: `plain` with `plain_key`, normalized `n1` and `n2` with the extra
        /// `[peer.normalize]` lines given, and `n3` (normalized, `n3` lines) when `Some`.
        fn config(&self, plain_key: &str, n1: &str, n2: &str, n3: Option<&str>) -> Config {
            let mut text = format!(
                "[interface]\nname = \"psp0\"\nmac = \"02:50:53:00:00:01\"\n\
                 [uplink]\nkind = \"raw\"\ninterface = \"up0\"\n\
                 [defaults]\nsuite = \"aes128-gcm\"\n\
                 [group]\nkey_file = \"group.key\"\n\
                 [normalize]\ns_goal_kbps = 4000\n\
                 [[peer]]\nname = \"plain\"\nmac = \"02:50:53:00:00:02\"\nkey_file = \"{plain_key}.key\"\n\
                 [[peer]]\nname = \"n1\"\nmac = \"02:50:53:00:00:03\"\nkey_file = \"n1.key\"\n\
                 [peer.normalize]\nenabled = true\n{n1}\n\
                 [[peer]]\nname = \"n2\"\nmac = \"02:50:53:00:00:04\"\nkey_file = \"n2.key\"\n\
                 [peer.normalize]\nenabled = true\n{n2}\n"
            );
            if let Some(n3) = n3 {
                text.push_str(&format!(
                    "[[peer]]\nname = \"n3\"\nmac = \"02:50:53:00:00:05\"\nkey_file = \"n3.key\"\n\
                     [peer.normalize]\nenabled = true\n{n3}\n"
                ));
            }
            Config::parse(&self.0.join("gw.toml"), &text).unwrap()
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn ctx() -> NormContext {
        // A state directory of its own per test (sequence-number reservations persist).
        static N: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("psp-set-state-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        NormContext {
            max_frame: 1514,
            udp: false,
            origin: std::time::Instant::now(),
            state: Some(Arc::new(crate::state::StateDir::open(&dir).unwrap())),
        }
    }

    fn norm<'a>(set: &'a PeerSet, name: &str) -> &'a Arc<NormPeer> {
        let i = set
            .config
            .peers
            .iter()
            .position(|p| p.name == name)
            .unwrap();
        set.norm[i].as_ref().unwrap()
    }

    fn s_goal(np: &NormPeer) -> u64 {
        np.to_json()["s_goal_kbps"].as_u64().unwrap()
    }

    /// What a failed build must leave alone: every old endpoint keeps its sealer (the same
    /// sequence numbers), its S_goal and its place on the pacer thread.
    fn snapshot(set: &PeerSet) -> Vec<(String, Option<psp_core::Seq>, u64, bool)> {
        set.norm
            .iter()
            .flatten()
            .map(|np| {
                (
                    np.name.clone(),
                    np.sealer_seq(),
                    s_goal(np),
                    np.is_retired(),
                )
            })
            .collect()
    }

    #[test]
    fn a_build_that_fails_half_way_changes_nothing() {
        let dir = Dir::new("fail");
        let ctx = ctx();
        let old = PeerSet::build(dir.config("plain", "", "", None), None, &ctx, None)
            .unwrap()
            .commit();
        let before = snapshot(&old);
        assert_eq!(before.len(), 2);
        assert!(
            before
                .iter()
                .all(|(_, seq, goal, retired)| seq.is_some() && *goal == 4000 && !retired)
        );

        // plain: new key; n1: S_goal only (would update in place); n2: new o_min (would take
        // n2's sealer); then n3 fails: its frame does not fit the uplink.
        let bad = dir.config(
            "plain2",
            "s_goal_kbps = 2000",
            "o_min_ms = 50",
            Some("frame_size = 2048"),
        );
        let e = PeerSet::build(bad, Some(&old), &ctx, None).unwrap_err();
        assert!(matches!(e, BuildError::Normalize(_)), "{e}");
        assert!(
            e.to_string().contains("peer[3].normalize.frame_size"),
            "{e}"
        );
        assert_eq!(snapshot(&old), before);

        // The same changes, refused at the end by the overhead check.
        let over = dir.config("plain2", "s_goal_kbps = 2000", "o_min_ms = 50", None);
        let e = PeerSet::build(over, Some(&old), &ctx, Some(8)).unwrap_err();
        assert!(matches!(e, BuildError::Overhead { max: 8, .. }), "{e}");
        assert_eq!(snapshot(&old), before);
    }

    #[test]
    fn commit_updates_hands_over_and_retires() {
        let dir = Dir::new("commit");
        let ctx = ctx();
        let old = PeerSet::build(dir.config("plain", "", "", Some("")), None, &ctx, None)
            .unwrap()
            .commit();
        let old_tx = old.take_tx().unwrap();
        assert!(old.take_tx().is_none(), "a half is taken once");
        let (n1, n2, n3) = (norm(&old, "n1"), norm(&old, "n2"), norm(&old, "n3"));
        let n2_seq = n2.sealer_seq().unwrap();

        let next = dir.config("plain2", "s_goal_kbps = 2000", "o_min_ms = 50", None);
        let staged = PeerSet::build(next, Some(&old), &ctx, Some(1000)).unwrap();
        // Built, not committed: the running endpoints are as they were.
        assert_eq!(s_goal(n1), 4000);
        assert_eq!(n2.sealer_seq(), Some(n2_seq));
        assert!(!n3.is_retired());
        let new = staged.commit();

        // n1: the same endpoint, with the new S_goal.
        assert!(Arc::ptr_eq(norm(&new, "n1"), n1));
        assert_eq!(s_goal(n1), 2000);
        // n2: a new endpoint that took over the old one's sealer (its sequence numbers).
        let new_n2 = norm(&new, "n2");
        assert!(!Arc::ptr_eq(new_n2, n2));
        assert_eq!(new_n2.sealer_seq(), Some(n2_seq));
        assert_eq!(n2.sealer_seq(), None);
        assert!(n2.is_retired() && n3.is_retired() && !n1.is_retired());

        // The transmit half keeps the group's sealer and takes a fresh one for plain's new key.
        let tx = new.take_tx().unwrap().carry_over(old_tx);
        assert_eq!(tx.peers[0].sealer, Some(0), "plain's own key");
        // Counters follow the names: plain keeps its counters although its key changed.
        assert_eq!(new.counters.len(), 3);
        assert!(Arc::ptr_eq(&new.counters[0], &old.counters[0]));
    }

    #[test]
    fn carry_over_keeps_the_sequence_numbers_of_unchanged_keys() {
        let dir = Dir::new("carry");
        let ctx = ctx();
        let old = PeerSet::build(dir.config("plain", "", "", None), None, &ctx, None)
            .unwrap()
            .commit();
        let old_tx = old.take_tx().unwrap();
        let seqs = |t: &TxPeers| {
            core::iter::once(t.group().next_seq())
                .chain(t.sealers.iter().map(|s| s.next_seq()))
                .collect::<Vec<_>>()
        };
        let before = seqs(&old_tx);
        let next = dir.config("plain2", "", "", None);
        let new = PeerSet::build(next, Some(&old), &ctx, None)
            .unwrap()
            .commit();
        let fresh = new.take_tx().unwrap();
        let after = seqs(&fresh.carry_over(old_tx));
        // Sealers: group (shared, kept by the build), plain, n1, n2 (in configuration order).
        assert_eq!(after.len(), 4);
        assert_eq!(after[0], before[0], "group key unchanged");
        assert_ne!(after[1], before[1], "plain has a new key");
        assert_eq!(after[2..], before[2..], "n1 and n2 unchanged");
    }
}
