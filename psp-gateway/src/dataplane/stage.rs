//! Pipeline stages (issue 11, "both cores"; opt-in with `PSP_SPLIT=1`): the second half of
//! one direction on a thread of its own, so a bulk transfer in one direction can use a second
//! core. `tx_loop` keeps reading the TAP and sealing, and a stage sends its batches; `rx_loop`
//! keeps receiving and opening, and a stage writes the inner frames to the TAP.
//!
//! A loop and its stage pass a fixed set of [`DEPTH`] items (batch arenas) around two bounded
//! channels: filled ones in order through one FIFO, emptied ones back. Nothing is allocated in
//! steady state, the order of frames is kept, and only the loop seals or opens, so sequence
//! numbers stay unique and in order without a lock. The stage is a thread with a
//! current-thread runtime rather than a task on the daemon's runtime: a task woken by the loop
//! would wait in that worker's LIFO slot, on the same core, until the loop parks.
//!
//! This module knows nothing of frames; the stage bodies are in the dataplane's `mod.rs`.

use core::future::Future;
use std::io;
use std::sync::OnceLock;

use tokio::sync::{mpsc, oneshot};

/// Items in flight per direction: the one the loop fills plus what the stage has queued or is
/// working on (the loop waits when the stage is `DEPTH - 1` items behind).
pub(crate) const DEPTH: usize = 3;

/// Whether `PSP_SPLIT=1` is set (read once).
pub(crate) fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("PSP_SPLIT").is_ok_and(|v| v == "1"))
}

/// The loop's end of a stage: hands filled items over and takes emptied ones back. Dropping it
/// stops the stage and waits for its thread to end.
#[derive(Debug)]
pub(crate) struct Stage<T> {
    full: mpsc::Sender<T>,
    empty: mpsc::Receiver<T>,
    error: oneshot::Receiver<io::Error>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The stage's end: takes filled items in order and gives them back emptied.
#[derive(Debug)]
pub(crate) struct Drain<T> {
    full: mpsc::Receiver<T>,
    empty: mpsc::Sender<T>,
}

impl<T: Send + 'static> Stage<T> {
    /// Starts thread `name` running `run`, with `DEPTH - 1` items made by `make` to pass
    /// around (the loop holds the last one). An error `run` returns is what [`Self::swap`]
    /// and [`Self::failed`] report.
    ///
    /// # Errors
    /// The thread or its runtime could not be created.
    pub(crate) fn spawn<F, Fut>(name: &str, mut make: impl FnMut() -> T, run: F) -> io::Result<Self>
    where
        F: FnOnce(Drain<T>) -> Fut + Send + 'static,
        Fut: Future<Output = io::Result<()>>,
    {
        let (full_tx, full_rx) = mpsc::channel(DEPTH);
        let (empty_tx, empty_rx) = mpsc::channel(DEPTH);
        for _ in 1..DEPTH {
            // Cannot fail: the channel holds DEPTH items and gets DEPTH - 1.
            let _ = empty_tx.try_send(make());
        }
        let (error_tx, error_rx) = oneshot::channel();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let drain = Drain {
            full: full_rx,
            empty: empty_tx,
        };
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || {
                let stop = drain.empty.clone();
                let r = rt.block_on(async move {
                    tokio::select! {
                        r = run(drain) => r,
                        // The loop dropped its end (the daemon stops): leave even mid-write.
                        () = stop.closed() => Ok(()),
                    }
                });
                if let Err(e) = r {
                    let _ = error_tx.send(e);
                }
            })?;
        tracing::info!(
            stage = name,
            depth = DEPTH,
            "PSP_SPLIT: pipeline stage started"
        );
        Ok(Self {
            full: full_tx,
            empty: empty_rx,
            error: error_rx,
            thread: Some(thread),
        })
    }

    /// Hands the filled `item` to the stage and puts an emptied one in its place, waiting
    /// while the stage is [`DEPTH`]` - 1` items behind.
    ///
    /// # Errors
    /// The stage's error when it has stopped (a stage that ended without one: `Other`).
    pub(crate) async fn swap(&mut self, item: &mut T) -> io::Result<()> {
        let Some(next) = self.empty.recv().await else {
            return Err(self.failed().await);
        };
        let full = core::mem::replace(item, next);
        if self.full.send(full).await.is_err() {
            return Err(self.failed().await);
        }
        Ok(())
    }

    /// Completes when the stage has stopped, with its error. Cancel-safe (for `select!`);
    /// call it no more after it completed.
    pub(crate) async fn failed(&mut self) -> io::Error {
        (&mut self.error)
            .await
            .unwrap_or_else(|_| io::Error::other("pipeline stage stopped"))
    }
}

impl<T> Drop for Stage<T> {
    fn drop(&mut self) {
        // Closing the return channel ends the stage's `select!` at once, so the join is short.
        self.empty.close();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl<T> Drain<T> {
    /// The next filled item, in the order handed over; `None` once the loop is gone.
    pub(crate) async fn next(&mut self) -> Option<T> {
        self.full.recv().await
    }

    /// Gives an emptied item back to the loop.
    pub(crate) fn done(&self, item: T) {
        // Cannot be full: only DEPTH items exist and the loop holds one. Closed: stopping.
        let _ = self.empty.try_send(item);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_order_and_recycles() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let (seen_tx, mut seen_rx) = mpsc::unbounded_channel();
            let mut stage = Stage::spawn(
                "test-stage",
                Vec::new,
                move |mut d: Drain<Vec<u32>>| async move {
                    while let Some(mut v) = d.next().await {
                        seen_tx.send(v.clone()).unwrap();
                        v.clear();
                        d.done(v);
                    }
                    Ok(())
                },
            )
            .unwrap();
            let mut item = Vec::with_capacity(4);
            for i in 0..10 {
                item.push(i);
                stage.swap(&mut item).await.unwrap();
                assert!(item.is_empty());
            }
            for i in 0..10 {
                assert_eq!(seen_rx.recv().await.unwrap(), [i]);
            }
        });
    }

    #[test]
    fn reports_the_stage_error() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let mut stage = Stage::spawn(
                "test-stage",
                || 0u8,
                |mut d: Drain<u8>| async move {
                    d.next().await;
                    Err(io::Error::from(io::ErrorKind::ConnectionRefused))
                },
            )
            .unwrap();
            let mut item = 1;
            // The first hand-over succeeds; a later one (or `failed`) sees the error.
            stage.swap(&mut item).await.unwrap();
            assert_eq!(
                stage.failed().await.kind(),
                io::ErrorKind::ConnectionRefused
            );
        });
    }
}
