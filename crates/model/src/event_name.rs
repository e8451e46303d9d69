//! What an event name, as perf spells it, counts: the one rule behind the event kind of a
//! `perf script` reader ([`EventKind::of`]), the unit of an event's sampling period in the
//! text and HTML reports and in fleet reports ([`PeriodUnit::of`]), all reading the name
//! through [`event_base`].
//!
//! The names are perf's (`perf list`, linux `tools/perf/Documentation/perf-list.txt`):
//! the hardware events `cycles` (alias `cpu-cycles`), `instructions`, `ref-cycles`,
//! `bus-cycles`, `branches`/`branch-instructions`, `branch-misses`, `cache-references`,
//! `cache-misses`, `stalled-cycles-frontend`/`-backend` (aliases `idle-cycles-…`); the
//! software events `cpu-clock` and `task-clock` (sampled with a period in nanoseconds;
//! `perf stat` prints their counts in msec, and perf's old `-msecs` names are taken too);
//! raw events `rNNNN` (a hexadecimal PMU code); PMU events `pmu/term=value,…/` (a `name=`
//! term names the event as perf then prints it; `cpu/cycles/`, and the hybrid
//! `cpu_core/…/` and `cpu_atom/…/`); and the modifiers after `:` (or directly after a PMU
//! event's closing `/`): `u k h I G H p P S D W e b R` (perf-list's "event modifiers").

use crate::EventKind;

/// perf's event modifiers (perf-list.txt, "EVENT MODIFIERS"): user, kernel, hypervisor,
/// non-idle, guest, host, precise level (`p`, `P`), sample read, pinned, weak group,
/// exclusive, BPF counters, retire latency.
const MODIFIERS: &str = "ukhIGHpPSDWebR";

fn is_modifiers(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| MODIFIERS.contains(c))
}

/// The event `name` without its modifiers and PMU wrapper: `cycles:u` → `cycles`,
/// `cpu-clock:ppp:` (as `perf script` prints it) → `cpu-clock`, `cpu_core/instructions/u`
/// → `instructions`, `cpu/event=0x3c,name=cycles/` → `cycles`, `r1c0:p` → `r1c0`. A PMU
/// event given by its terms alone (`cpu/event=0x3c,umask=0/`) stays as written (less its
/// modifiers); a tracepoint keeps its `subsystem:` (`sched:sched_switch`).
pub fn event_base(name: &str) -> &str {
    let s = name.trim().trim_end_matches(':');
    if let (Some(first), Some(last)) = (s.find('/'), s.rfind('/')) {
        if first < last {
            let terms = &s[first + 1..last];
            let after = s[last + 1..].trim_start_matches(':');
            let whole = if is_modifiers(after) { &s[..=last] } else { s };
            if let Some(n) = terms
                .split(',')
                .find_map(|t| t.trim().strip_prefix("name="))
            {
                return n.trim_matches(|c| c == '\'' || c == '"');
            }
            return if terms.contains('=') || terms.is_empty() {
                whole
            } else {
                terms
            };
        }
    }
    match s.rsplit_once(':') {
        Some((base, mods)) if is_modifiers(mods) => base,
        _ => s,
    }
}

impl EventKind {
    /// The kind of the event perf calls `name` (see [`event_base`]): the clocks,
    /// cycles (`cycles`, `cpu-cycles`, Intel's fixed counter `cpu_clk_unhalted.thread`),
    /// instructions (`instructions`, Intel's `inst_retired.any`), a raw code (`rNNNN`), else
    /// [`EventKind::Other`] (`ref-cycles` count reference cycles at the TSC's rate, not the
    /// core's cycles, so they are not [`EventKind::Cycles`]). Case does not matter (perf's
    /// PMU event names are not case-sensitive).
    pub fn of(name: &str) -> EventKind {
        let base = event_base(name);
        match base.to_ascii_lowercase().as_str() {
            "cpu-clock" | "cpu-clock-msecs" => EventKind::CpuClock,
            "task-clock" | "task-clock-msecs" => EventKind::TaskClock,
            "cycles" | "cpu-cycles" | "cpu_clk_unhalted.thread" | "cpu_clk_unhalted.core" => {
                EventKind::Cycles
            }
            "instructions" | "inst_retired.any" => EventKind::Instructions,
            n if n.len() > 1
                && n.starts_with('r')
                && n.len() <= 17
                && n[1..].bytes().all(|c| c.is_ascii_hexdigit()) =>
            {
                u64::from_str_radix(&n[1..], 16).map_or(EventKind::Other, EventKind::Raw)
            }
            _ => EventKind::Other,
        }
    }
}

/// What one unit of an event's sampling period is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeriodUnit {
    /// Nanoseconds: the software clocks `cpu-clock` and `task-clock`.
    Nanoseconds,
    /// Core clock cycles: `cycles`, `cpu-cycles`, the stalled-cycle counters, TSX's
    /// `cycles-t`/`cycles-ct`.
    Cycles,
    /// Retired instructions.
    Instructions,
    /// Occurrences of the event itself (`branch-misses`, `cache-misses`, `ref-cycles`,
    /// a raw code, anything else).
    Events,
}

impl PeriodUnit {
    /// The unit of the period of the event perf calls `name`.
    pub fn of(name: &str) -> PeriodUnit {
        match EventKind::of(name) {
            EventKind::CpuClock | EventKind::TaskClock => PeriodUnit::Nanoseconds,
            EventKind::Cycles => PeriodUnit::Cycles,
            EventKind::Instructions => PeriodUnit::Instructions,
            EventKind::Raw(_) => PeriodUnit::Events,
            EventKind::Other => match event_base(name).to_ascii_lowercase().as_str() {
                "stalled-cycles-frontend"
                | "stalled-cycles-backend"
                | "idle-cycles-frontend"
                | "idle-cycles-backend"
                | "cycles-t"
                | "cycles-ct" => PeriodUnit::Cycles,
                _ => PeriodUnit::Events,
            },
        }
    }

    /// `ns`, `cycles`, `instructions` or `events`.
    pub fn name(self) -> &'static str {
        match self {
            PeriodUnit::Nanoseconds => "ns",
            PeriodUnit::Cycles => "cycles",
            PeriodUnit::Instructions => "instructions",
            PeriodUnit::Events => "events",
        }
    }

    /// The unit as a report labels a period of event `name`: the unit, or for
    /// [`PeriodUnit::Events`] the event's own name (`branch-misses events`).
    pub fn label(name: &str) -> String {
        match PeriodUnit::of(name) {
            PeriodUnit::Events => format!("{} events", event_base(name)),
            u => u.name().to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name family of perf-list.txt, with its kind and unit.
    #[test]
    fn perf_names() {
        use EventKind as K;
        use PeriodUnit as U;
        let cases: &[(&str, &str, EventKind, PeriodUnit)] = &[
            // Software clocks: period in ns; perf stat's old names.
            ("cpu-clock", "cpu-clock", K::CpuClock, U::Nanoseconds),
            ("task-clock", "task-clock", K::TaskClock, U::Nanoseconds),
            ("cpu-clock:u", "cpu-clock", K::CpuClock, U::Nanoseconds),
            ("cpu-clock:ppp:", "cpu-clock", K::CpuClock, U::Nanoseconds),
            (
                "task-clock-msecs",
                "task-clock-msecs",
                K::TaskClock,
                U::Nanoseconds,
            ),
            (
                "cpu-clock-msecs",
                "cpu-clock-msecs",
                K::CpuClock,
                U::Nanoseconds,
            ),
            // Hardware events and their aliases.
            ("cycles", "cycles", K::Cycles, U::Cycles),
            ("cpu-cycles", "cpu-cycles", K::Cycles, U::Cycles),
            ("cycles:u", "cycles", K::Cycles, U::Cycles),
            ("cycles:upp", "cycles", K::Cycles, U::Cycles),
            ("cycles:P", "cycles", K::Cycles, U::Cycles),
            ("CYCLES", "CYCLES", K::Cycles, U::Cycles),
            ("ref-cycles", "ref-cycles", K::Other, U::Events),
            ("bus-cycles", "bus-cycles", K::Other, U::Events),
            (
                "instructions",
                "instructions",
                K::Instructions,
                U::Instructions,
            ),
            (
                "instructions:k",
                "instructions",
                K::Instructions,
                U::Instructions,
            ),
            ("branches", "branches", K::Other, U::Events),
            (
                "branch-instructions",
                "branch-instructions",
                K::Other,
                U::Events,
            ),
            ("branch-misses", "branch-misses", K::Other, U::Events),
            ("cache-references", "cache-references", K::Other, U::Events),
            ("cache-misses:u", "cache-misses", K::Other, U::Events),
            (
                "stalled-cycles-frontend",
                "stalled-cycles-frontend",
                K::Other,
                U::Cycles,
            ),
            (
                "idle-cycles-backend",
                "idle-cycles-backend",
                K::Other,
                U::Cycles,
            ),
            // PMU events: by name, by name= term, hybrid PMUs, modifiers after the slash.
            ("cpu/cycles/", "cycles", K::Cycles, U::Cycles),
            ("cpu/cycles/pp", "cycles", K::Cycles, U::Cycles),
            (
                "cpu_core/instructions/u",
                "instructions",
                K::Instructions,
                U::Instructions,
            ),
            ("cpu_atom/cycles/:u", "cycles", K::Cycles, U::Cycles),
            (
                "cpu/event=0x3c,umask=0x0,name=cycles/",
                "cycles",
                K::Cycles,
                U::Cycles,
            ),
            (
                "cpu/event=0xc0,name='inst_retired.any'/u",
                "inst_retired.any",
                K::Instructions,
                U::Instructions,
            ),
            (
                "cpu/event=0x3c,umask=0x0/",
                "cpu/event=0x3c,umask=0x0/",
                K::Other,
                U::Events,
            ),
            ("cpu/event=0x3c/u", "cpu/event=0x3c/", K::Other, U::Events),
            ("cpu/cycles-ct/", "cycles-ct", K::Other, U::Cycles),
            (
                "cpu_clk_unhalted.thread",
                "cpu_clk_unhalted.thread",
                K::Cycles,
                U::Cycles,
            ),
            // Raw codes.
            ("r1c0", "r1c0", K::Raw(0x1c0), U::Events),
            ("r003c:u", "r003c", K::Raw(0x3c), U::Events),
            ("r", "r", K::Other, U::Events),
            ("rxyz", "rxyz", K::Other, U::Events),
            // Tracepoints keep their subsystem; unknown names count themselves.
            (
                "sched:sched_switch",
                "sched:sched_switch",
                K::Other,
                U::Events,
            ),
            ("page-faults", "page-faults", K::Other, U::Events),
        ];
        for &(name, base, kind, unit) in cases {
            assert_eq!(event_base(name), base, "{name}");
            assert_eq!(EventKind::of(name), kind, "{name}");
            assert_eq!(PeriodUnit::of(name), unit, "{name}");
        }
    }

    /// The report label: the unit, or the event's own name for events.
    #[test]
    fn labels() {
        assert_eq!(PeriodUnit::label("cpu-clock:u"), "ns");
        assert_eq!(PeriodUnit::label("cycles:pp"), "cycles");
        assert_eq!(PeriodUnit::label("instructions"), "instructions");
        assert_eq!(PeriodUnit::label("branch-misses:u"), "branch-misses events");
        assert_eq!(PeriodUnit::label("r1c0"), "r1c0 events");
        assert_eq!(PeriodUnit::name(PeriodUnit::of("task-clock")), "ns");
    }
}
