//! Event names as the user writes them (`cpu-clock`, `cycles:pp`, `r01c2:p`).

use crate::error::RecordError;
use proftrust_model::EventKind;

/// Default period of `cpu-clock` and `task-clock`: 100 003 ns (a prime, ~10 kHz). `record`
/// and `audit` share it: at perf's 1 kHz a 0.5 s program gets ~500 samples, whose 95%
/// intervals are several points wide; at 10 kHz ~5000 (the kernel's default
/// `perf_event_max_sample_rate`, 100 kHz, leaves room).
pub const DEFAULT_CLOCK_PERIOD_NS: u64 = 100_003;
/// Default period of `cycles` and `instructions`: 2 000 003 events (a prime).
pub const DEFAULT_HW_PERIOD: u64 = 2_000_003;
/// Default period of raw hardware events: 100 003 events (a prime; raw events are often rare).
pub const DEFAULT_RAW_PERIOD: u64 = 100_003;

/// A parsed event name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    /// The name as written (`cycles:pp`).
    pub name: String,
    /// What it counts.
    pub kind: EventKind,
    /// Precise level 0-3 (number of `p` modifiers) → `precise_ip`.
    pub precise: u8,
}

impl EventSpec {
    /// Parses `cpu-clock`, `task-clock`, `cycles`/`cpu-cycles`, `instructions`, `rHEX`, each
    /// optionally followed by `:p`, `:pp`, `:ppp` (and `u`, which is the default anyway).
    pub fn parse(s: &str) -> Result<EventSpec, RecordError> {
        let bad = |why: &str| RecordError::BadEvent {
            name: s.to_string(),
            why: why.to_string(),
        };
        let (base, mods) = match s.split_once(':') {
            Some((b, m)) => (b, m),
            None => (s, ""),
        };
        let mut precise = 0u8;
        for c in mods.chars() {
            match c {
                'p' => precise += 1,
                'u' => {}
                _ => return Err(bad("modifiers may only be `p` (precise, up to 3) and `u`")),
            }
        }
        if precise > 3 {
            return Err(bad("at most three `p` (precise level 0-3)"));
        }
        let kind = match base {
            "cpu-clock" => EventKind::CpuClock,
            "task-clock" => EventKind::TaskClock,
            "cycles" | "cpu-cycles" => EventKind::Cycles,
            "instructions" => EventKind::Instructions,
            r if r.len() > 1 && r.starts_with('r') => {
                let code = u64::from_str_radix(&r[1..], 16)
                    .map_err(|_| bad("a raw event is `r` followed by a hex code, e.g. r01c2"))?;
                EventKind::Raw(code)
            }
            _ => {
                return Err(bad(
                    "known events: cpu-clock, task-clock, cycles, instructions, rHEX (raw)",
                ))
            }
        };
        if precise > 0 && !kind.is_hardware() {
            return Err(bad(
                "precise levels (:p, :pp, :ppp) apply to hardware events only",
            ));
        }
        Ok(EventSpec {
            name: s.to_string(),
            kind,
            precise,
        })
    }

    /// Parses a list as perf's `-e` takes it: names separated by commas
    /// (`instructions,cycles`), each as [`EventSpec::parse`]. Spaces around a name are
    /// ignored; an empty name (`a,,b`, a trailing comma) is an error.
    pub fn parse_list(s: &str) -> Result<Vec<EventSpec>, RecordError> {
        s.split(',')
            .map(|p| {
                let p = p.trim();
                if p.is_empty() {
                    Err(RecordError::BadEvent {
                        name: s.to_string(),
                        why: "an empty event name in the list (write -e a,b or -e a -e b)".into(),
                    })
                } else {
                    EventSpec::parse(p)
                }
            })
            .collect()
    }

    /// The prime default period of this event (ns for clocks, events otherwise).
    pub fn default_period(&self) -> u64 {
        match self.kind {
            EventKind::CpuClock | EventKind::TaskClock => DEFAULT_CLOCK_PERIOD_NS,
            EventKind::Raw(_) => DEFAULT_RAW_PERIOD,
            _ => DEFAULT_HW_PERIOD,
        }
    }

    /// `(type, config)` for `perf_event_attr`.
    pub(crate) fn type_config(&self) -> (u32, u64) {
        use perf_event_open_sys::bindings as b;
        match self.kind {
            EventKind::CpuClock => (b::PERF_TYPE_SOFTWARE, b::PERF_COUNT_SW_CPU_CLOCK as u64),
            EventKind::TaskClock => (b::PERF_TYPE_SOFTWARE, b::PERF_COUNT_SW_TASK_CLOCK as u64),
            EventKind::Cycles => (b::PERF_TYPE_HARDWARE, b::PERF_COUNT_HW_CPU_CYCLES as u64),
            EventKind::Instructions => {
                (b::PERF_TYPE_HARDWARE, b::PERF_COUNT_HW_INSTRUCTIONS as u64)
            }
            EventKind::Raw(c) => (b::PERF_TYPE_RAW, c),
            EventKind::Other => (b::PERF_TYPE_SOFTWARE, b::PERF_COUNT_SW_CPU_CLOCK as u64),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_names_and_precise_levels() {
        let cases = [
            ("cpu-clock", EventKind::CpuClock, 0),
            ("task-clock:u", EventKind::TaskClock, 0),
            ("cycles:pp", EventKind::Cycles, 2),
            ("cpu-cycles:p", EventKind::Cycles, 1),
            ("instructions:ppp", EventKind::Instructions, 3),
            ("r01c2", EventKind::Raw(0x1c2), 0),
            ("r3c:p", EventKind::Raw(0x3c), 1),
        ];
        for (name, kind, p) in cases {
            let e = EventSpec::parse(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!((e.kind, e.precise), (kind, p), "case {name}");
        }
    }

    #[test]
    fn parses_perf_style_lists() {
        let l = EventSpec::parse_list("instructions,cycles:pp").unwrap();
        assert_eq!(
            l.iter().map(|e| (e.kind, e.precise)).collect::<Vec<_>>(),
            [(EventKind::Instructions, 0), (EventKind::Cycles, 2)]
        );
        assert_eq!(l[1].name, "cycles:pp");
        assert_eq!(EventSpec::parse_list("cpu-clock").unwrap().len(), 1);
        for bad in ["", "cycles,", "a,,b", "cycles,bogus"] {
            assert!(EventSpec::parse_list(bad).is_err(), "case {bad:?}");
        }
    }

    #[test]
    fn rejects_bad_names() {
        for name in ["cycles:pppp", "cpu-clock:p", "rzz", "bogus", "cycles:k"] {
            assert!(EventSpec::parse(name).is_err(), "case {name}");
        }
    }

    #[test]
    fn default_periods_are_prime() {
        fn is_prime(n: u64) -> bool {
            n > 1 && (2..).take_while(|d| d * d <= n).all(|d| n % d != 0)
        }
        for p in [
            DEFAULT_CLOCK_PERIOD_NS,
            DEFAULT_HW_PERIOD,
            DEFAULT_RAW_PERIOD,
        ] {
            assert!(is_prime(p), "{p}");
        }
    }
}
