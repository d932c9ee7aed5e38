//! Reporting frames from MACs that are no peer's, without letting a flood of random source MACs
//! become a flood of log lines: each MAC at most once a [`REPORT_EVERY`], at most
//! [`UNKNOWN_REPORTED`] MACs at a time, and beyond that one summary a [`REPORT_EVERY`].

use alloc::collections::{BTreeMap, VecDeque};

use super::{HostEvent, Mac, REPORT_EVERY};
use crate::time::Instant;

/// At most this many unknown sources are reported one by one within a minute.
pub const UNKNOWN_REPORTED: usize = 64;

/// Which unknown sources were reported, and what went unreported.
#[derive(Debug, Default)]
pub(crate) struct Unknown {
    reported: BTreeMap<Mac, Instant>,
    unreported: u64,
    last: Option<Mac>,
    summary_at: Option<Instant>,
}

impl Unknown {
    /// A frame from `mac`, which is no peer's.
    pub(crate) fn report(&mut self, now: Instant, mac: Mac, events: &mut VecDeque<HostEvent>) {
        let recent = |t: &Instant| now.saturating_since(*t) < REPORT_EVERY;
        if self.reported.get(&mac).is_some_and(recent) {
            return;
        }
        if self.reported.len() >= UNKNOWN_REPORTED {
            self.reported.retain(|_, t| recent(t));
        }
        if self.reported.len() < UNKNOWN_REPORTED || self.reported.contains_key(&mac) {
            self.reported.insert(mac, now);
            events.push_back(HostEvent::UnknownSource(mac));
            return;
        }
        self.unreported += 1;
        self.last = Some(mac);
        if self.summary_at.is_none_or(|t| !recent(&t))
            && let Some(last) = self.last
        {
            self.summary_at = Some(now);
            events.push_back(HostEvent::UnknownSources {
                count: core::mem::take(&mut self.unreported),
                last,
            });
        }
    }

    /// How many MACs it remembers (bounded by [`UNKNOWN_REPORTED`]).
    #[cfg(test)]
    pub(crate) fn remembered(&self) -> usize {
        self.reported.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;

    fn mac(i: u32) -> Mac {
        let b = i.to_be_bytes();
        [2, 0, b[0], b[1], b[2], b[3]]
    }

    #[test]
    fn a_flood_of_random_sources_is_a_bounded_number_of_events() {
        let mut u = Unknown::default();
        let mut ev = VecDeque::new();
        let t = Instant::from_secs(100);
        for i in 0..20_000 {
            u.report(t + Duration::from_micros(u64::from(i)), mac(i), &mut ev);
        }
        let one_by_one = ev
            .iter()
            .filter(|e| matches!(e, HostEvent::UnknownSource(_)))
            .count();
        let summaries: u64 = ev
            .iter()
            .filter_map(|e| match e {
                HostEvent::UnknownSources { count, .. } => Some(*count),
                _ => None,
            })
            .sum();
        assert_eq!(one_by_one, UNKNOWN_REPORTED);
        assert_eq!(
            ev.len(),
            UNKNOWN_REPORTED + 1,
            "one summary within the minute"
        );
        assert_eq!(summaries, 1);
        assert!(u.remembered() <= UNKNOWN_REPORTED);
        // A minute later: the table takes new MACs again, and the summary counts what went
        // unreported meanwhile.
        ev.clear();
        let later = t + REPORT_EVERY + Duration::from_secs(1);
        u.report(later, mac(1_000_000), &mut ev);
        assert!(matches!(ev[0], HostEvent::UnknownSource(_)));
        // A known MAC is reported again only after a minute.
        ev.clear();
        u.report(later, mac(1_000_000), &mut ev);
        assert!(ev.is_empty());
    }
}
