//! Whole gateways in memory, for the integration tests (`tests/driver.rs`): the daemon's
//! driver and host built from a real configuration file, on a [`MemTap`] and [`MemUplink`]s,
//! under tokio's clock (so `tokio::time::pause` makes the run virtual and repeatable) and a
//! seeded random generator. No root, no namespace, no socket. Not an API.

use std::sync::Arc;

use psp_core::handshake::Tai64n;
use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::config::Config;
use crate::driver::{Clock, Control, Driver, Parts, build};
use crate::io::mem::{MemTap, MemUplink};
use crate::state::StateDir;
use crate::status::{self, Info, PathInfo};
use crate::tofu::{Tofu, known_peers_path};

/// A deterministic random generator (SplitMix64), for tests only: never for keys that matter.
#[derive(Debug, Clone)]
pub struct TestRng(pub u64);

impl rand_core::RngCore for TestRng {
    fn next_u32(&mut self) -> u32 {
        self.next_u64() as u32
    }
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        for chunk in dest.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand_core::Error> {
        self.fill_bytes(dest);
        Ok(())
    }
}

impl rand_core::CryptoRng for TestRng {}

/// Conditions a test imposes on a [`MemGateway`].
#[derive(Debug, Clone, Default)]
pub struct MemOptions {
    /// The state directory is removed right after it is opened, so no reservation can be
    /// written (the sealers under static keys stop: `tx_unreserved`).
    pub state_lost: bool,
}

/// One gateway running in this process.
#[derive(Debug)]
pub struct MemGateway {
    /// Its TAP: the test is the protected host.
    pub tap: MemTap,
    ctl: mpsc::Sender<Control>,
    task: JoinHandle<std::io::Result<()>>,
    info: Info,
}

/// The largest frame the in-memory uplinks carry (a 1500-byte Ethernet MTU).
pub const MAX_FRAME: usize = 1514;

impl MemGateway {
    /// Starts the gateway of `config` (its `[interface] mac` is the TAP's MAC) on `uplinks`
    /// (path 1, and path 2 if there are two), with `seed` for its random numbers. Its state
    /// directory and `known_peers` are the configuration's (a temporary directory in tests).
    ///
    /// # Errors
    /// What the daemon would refuse at start (keys, state directory, settings), as a line.
    pub fn start(config: &Config, uplinks: Vec<MemUplink>, seed: u64) -> Result<Self, String> {
        Self::start_with(config, uplinks, seed, &MemOptions::default())
    }

    /// [`start`](Self::start) with test-only conditions.
    ///
    /// # Errors
    /// As [`start`](Self::start).
    pub fn start_with(
        config: &Config,
        uplinks: Vec<MemUplink>,
        seed: u64,
        opts: &MemOptions,
    ) -> Result<Self, String> {
        let mac = config
            .interface
            .mac
            .ok_or("the in-memory gateway needs [interface] mac")?;
        let clock = Clock::start();
        let state =
            Arc::new(StateDir::open(&config.daemon.state_directory).map_err(|e| e.to_string())?);
        if opts.state_lost {
            // The open directory is unlinked: every later write in it fails.
            std::fs::remove_dir_all(&config.daemon.state_directory).map_err(|e| e.to_string())?;
        }
        let tofu = Tofu::load(&known_peers_path(config)).ok();
        let udp = uplinks
            .first()
            .is_some_and(crate::io::UplinkIo::is_addressed);
        let (host, names, endpoints) = build::host(
            config,
            (mac, MAX_FRAME, udp),
            (clock.now(), Tai64n::from_unix(1_800_000_000, 0)),
            &state,
            tofu.as_ref(),
        )
        .map_err(|e| e.to_string())?;
        let tap = MemTap::new();
        let (ctl, ctl_rx) = mpsc::channel(16);
        let driver = Driver::new(Parts {
            host,
            tap: Arc::new(tap.clone()),
            uplinks: uplinks.into_iter().map(Arc::new).collect(),
            endpoints,
            names,
            clock,
            state: Some(state),
            tofu,
            pacer_thread: false,
            ctl: ctl_rx,
            rng: Box::new(TestRng(seed)),
            max_frame: MAX_FRAME,
        })
        .map_err(|e| e.to_string())?;
        let info = Info {
            interface: config.interface.name.clone(),
            uplinks: vec!["mem".into(); 1 + usize::from(config.uplink2.is_some())],
            mtu: MAX_FRAME - 14,
            mac,
            paths: core::iter::once(&config.uplink)
                .chain(config.uplink2.as_ref())
                .map(PathInfo::of)
                .collect(),
            public_key: None,
        };
        Ok(Self {
            tap,
            ctl,
            task: tokio::spawn(driver.run()),
            info,
        })
    }

    /// The status document, as `psp-gateway status --json` prints it.
    ///
    /// # Panics
    /// If the gateway stopped.
    pub async fn status(&self) -> Value {
        let (tx, rx) = oneshot::channel();
        self.ctl
            .send(Control::Snapshot(tx))
            .await
            .expect("the gateway runs");
        let snap = rx.await.expect("a snapshot");
        status::document(&self.info, &snap)
    }

    /// The status table, as `psp-gateway status` prints it.
    ///
    /// # Panics
    /// If the gateway stopped.
    pub async fn status_table(&self) -> String {
        status::render(&self.status().await)
    }

    /// Applies a reloaded configuration (SIGHUP): the number of peers new or changed.
    ///
    /// # Errors
    /// Why nothing changed.
    pub async fn reload(&self, config: Config) -> Result<usize, String> {
        let (tx, rx) = oneshot::channel();
        self.ctl
            .send(Control::Reload(Box::new(config), tx))
            .await
            .map_err(|_| "the gateway stopped".to_string())?;
        rx.await.map_err(|_| "the gateway stopped".to_string())?
    }

    /// Stops the gateway (as SIGTERM does) and waits for it.
    pub async fn stop(self) {
        drop(self.ctl);
        let _ = self.task.await;
    }
}
