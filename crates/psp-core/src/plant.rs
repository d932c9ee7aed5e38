//! Bugs planted on purpose (feature `_plant`, test builds only): each is a one-line change of
//! a rule the host relies on, switched on for the current thread with `set`, so psp-test's
//! simulator can show it finds every one (docs/SESSIONS.md, "The simulator"). Without the
//! feature, the check is a constant `false` and the planted branches compile away.

/// A planted bug.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Bug {
    /// A Request not newer than one already accepted starts a handshake (no freshness).
    StaleRequest,
    /// A configured or learnt pin is not applied (to group frames' signatures, to handshakes).
    SkipPin,
    /// A reload resets the replay windows of the peers it keeps.
    ResetWindowOnReload,
    /// A sealer ignores where its reservation starts (it reuses the numbers of the run before).
    ReuseReservation,
    /// Crossing handshakes: both hosts give up their own and answer the other's.
    NoCrossingTieBreak,
    /// A responder seals under new keys at once, before the initiator used them.
    OneWayInstall,
    /// Liveness never fires: a session with a silent peer stays up.
    NoLiveness,
    /// The opener moves its replay window before it checks the signature.
    WindowBeforeSignature,
    /// A normalized stream payload is taken under the group key.
    StreamUnderGroupKey,
    /// A responder answers a Request inside the normalized stream, whatever way it came.
    AnswerInStream,
    /// The replay floors of the run before are not applied at a start.
    ForgetFloors,
    /// A certificate in a handshake is taken without checking the CA's signature.
    AnyCa,
    /// A certified peer's frames are delivered whatever source address they carry.
    NoAddressBinding,
    /// The revocation list is not consulted.
    IgnoreRevocation,
    /// Data stays on path 1 when path 1 is down (no failover).
    NoFailover,
    /// With path 2 down, a handshake runs on one path even under `smkex = "require"`.
    SinglePathUnderRequire,
    /// A responder configured to require ML-KEM-768 (`kem = "require"`) accepts a Request
    /// that does not offer it (a session without the KEM).
    KemDowngrade,
    /// The host does not ask the reorder buffer (`paths = "both"`) for the frames it released:
    /// only a normalized stream's deliveries are polled.
    ReorderNotPolled,
}

impl Bug {
    /// Every planted bug.
    pub const ALL: [Self; 18] = [
        Self::StaleRequest,
        Self::SkipPin,
        Self::ResetWindowOnReload,
        Self::ReuseReservation,
        Self::NoCrossingTieBreak,
        Self::OneWayInstall,
        Self::NoLiveness,
        Self::WindowBeforeSignature,
        Self::StreamUnderGroupKey,
        Self::AnswerInStream,
        Self::ForgetFloors,
        Self::AnyCa,
        Self::NoAddressBinding,
        Self::IgnoreRevocation,
        Self::NoFailover,
        Self::SinglePathUnderRequire,
        Self::KemDowngrade,
        Self::ReorderNotPolled,
    ];
}

#[cfg(feature = "_plant")]
std::thread_local! {
    static BUG: core::cell::Cell<Option<Bug>> = const { core::cell::Cell::new(None) };
}

/// Plants `bug` (or none) for the current thread.
#[cfg(feature = "_plant")]
pub fn set(bug: Option<Bug>) {
    BUG.with(|b| b.set(bug));
}

/// Whether `bug` is planted on this thread.
#[inline(always)]
pub(crate) fn on(bug: Bug) -> bool {
    #[cfg(feature = "_plant")]
    {
        BUG.with(|b| b.get() == Some(bug))
    }
    #[cfg(not(feature = "_plant"))]
    {
        let _ = bug;
        false
    }
}
