//! Decoding of the raw records drained from the ring buffer, through
//! `linux-perf-event-reader` (the copy `linux-perf-data` re-exports, which the perf.data
//! reader uses too) with the repairs its 0.10 needs from
//! [`proftrust_formats::perf_record`] (read values, the call-chain check, the branch stack,
//! `LOST_SAMPLES`): one decoder of perf records for files and the live ring buffer, as
//! samply has.
//!
//! The layout is fixed by the attribute the events were opened with ([`Decoder::new`]
//! parses it back into the crate's `RecordParseInfo`): the `sample_type` of
//! [`SAMPLE_TYPE_BASE`] and what the options add, `sample_id_all` (every other record ends
//! with pid/tid, time, stream_id, cpu/res, identifier). Each record kept is parsed into the
//! crate's `EventRecord` and converted to the recorder's [`Rec`]; the others are skipped.

use crate::error::RecordError;
use crate::sys;
use linux_perf_data::linux_perf_event_reader::{
    EventRecord, PerfEventAttr, RawData, RawEventRecord, RecordParseInfo, RecordType, SampleRecord,
};
use linux_perf_data::Endianness;
use perf_event_open_sys::bindings as b;
use proftrust_formats::perf_record::{self, RawBranch, SampleParts};

/// Sample fields always requested.
pub(crate) const SAMPLE_TYPE_BASE: u64 = (b::PERF_SAMPLE_IDENTIFIER
    | b::PERF_SAMPLE_IP
    | b::PERF_SAMPLE_TID
    | b::PERF_SAMPLE_TIME
    | b::PERF_SAMPLE_STREAM_ID
    | b::PERF_SAMPLE_CPU
    | b::PERF_SAMPLE_PERIOD) as u64;

/// The `read_format` of every event: `TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING`.
pub(crate) const READ_FORMAT: u64 =
    (b::PERF_FORMAT_TOTAL_TIME_ENABLED | b::PERF_FORMAT_TOTAL_TIME_RUNNING) as u64;

/// The user registers a DWARF unwinder starts from: `bp`, `sp`, `ip` (x86-64 perf register
/// numbers 6, 7, 8; the kernel writes them in bit order).
pub(crate) const REGS_USER: u64 = (1 << 6) | (1 << 7) | (1 << 8);

/// A sample as the kernel wrote it (runtime addresses).
#[derive(Debug, Clone)]
pub(crate) struct RawSample {
    /// Event id (the parent event's id, for inherited instances too).
    pub id: u64,
    /// Id of the event instance that overflowed.
    pub stream_id: u64,
    pub ip: u64,
    pub pid: u32,
    pub tid: u32,
    pub time: u64,
    pub cpu: u32,
    pub period: u64,
    /// The instance's count at the overflow (`PERF_SAMPLE_READ`), when requested.
    pub count: Option<u64>,
    pub callchain: Vec<u64>,
    pub branches: Vec<RawBranch>,
    /// The user registers and the used part of the user stack copy
    /// (`PERF_SAMPLE_REGS_USER` + `PERF_SAMPLE_STACK_USER`), with `--call-graph dwarf`.
    pub user_stack: Option<(proftrust_model::UserRegs, Vec<u8>)>,
}

/// A decoded record, addresses still runtime addresses.
#[derive(Debug, Clone)]
pub(crate) enum Rec {
    Sample(RawSample),
    Mmap {
        pid: u32,
        time: u64,
        start: u64,
        len: u64,
        pgoff: u64,
        prot: u32,
        path: String,
    },
    /// A thread's name from now on (`PERF_RECORD_COMM`); `exec`: it came with an `execve`.
    Comm {
        pid: u32,
        tid: u32,
        time: u64,
        comm: String,
        exec: bool,
    },
    /// A new process (`PERF_RECORD_FORK` with `pid != ppid`; new threads are not kept).
    Fork {
        pid: u32,
        tid: u32,
        ppid: u32,
        ptid: u32,
        time: u64,
    },
    Lost {
        lost: u64,
    },
    Throttle {
        stream_id: u64,
        time: u64,
    },
    Unthrottle {
        stream_id: u64,
        time: u64,
    },
}

impl Rec {
    /// Time stamp used to order records (0 for records without one).
    pub(crate) fn time(&self) -> u64 {
        match self {
            Rec::Sample(RawSample { time, .. })
            | Rec::Mmap { time, .. }
            | Rec::Comm { time, .. }
            | Rec::Fork { time, .. }
            | Rec::Throttle { time, .. }
            | Rec::Unthrottle { time, .. } => *time,
            Rec::Lost { .. } => 0,
        }
    }
}

/// How the records of one session are parsed: every event of a session is opened with the
/// same sample layout (the events differ in type, config, period and precision only).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Decoder {
    info: RecordParseInfo,
    /// The `read_format` as the kernel was given it (the crate's `ReadFormat` keeps only
    /// the bits it knows).
    read_format: u64,
}

impl Decoder {
    /// The decoder of records written for events opened with `attr`: the attribute's bytes
    /// parsed back by the crate, as a perf.data reader parses a file's attribute section.
    pub(crate) fn new(attr: &sys::Attr) -> Result<Decoder, RecordError> {
        let (parsed, _) = PerfEventAttr::parse::<_, byteorder::NativeEndian>(sys::attr_bytes(attr))
            .map_err(|e| RecordError::sys("parsing back our own perf_event_attr", e))?;
        Ok(Decoder {
            info: RecordParseInfo::new(&parsed, Endianness::NATIVE),
            read_format: attr.read_format,
        })
    }

    /// Decodes every record of a drained batch, appending the kept ones to `out`.
    pub(crate) fn decode_batch(&self, bytes: &[u8], out: &mut Vec<Rec>) -> Result<(), RecordError> {
        let mut off = 0usize;
        while off + 8 <= bytes.len() {
            let kind = u32::from_ne_bytes(bytes[off..off + 4].try_into().expect("4 bytes"));
            let misc = u16::from_ne_bytes(bytes[off + 4..off + 6].try_into().expect("2 bytes"));
            let size =
                u16::from_ne_bytes(bytes[off + 6..off + 8].try_into().expect("2 bytes")) as usize;
            let bad = |why: String| RecordError::BadRecord {
                kind,
                offset: off,
                why,
            };
            if size < 8 || off + size > bytes.len() {
                let left = bytes.len() - off;
                return Err(bad(format!(
                    "size {size} does not fit the {left} bytes left"
                )));
            }
            let raw = RawEventRecord::new(
                RecordType(kind),
                misc,
                RawData::Single(&bytes[off + 8..off + size]),
                self.info,
            );
            out.extend(self.decode(&raw).map_err(bad)?);
            off += size;
        }
        Ok(())
    }

    /// One record: parsed by the crate (with the repairs of `perf_record`) and converted;
    /// `None` for a record type the recorder does not keep, and for a `FORK` of a thread.
    fn decode(&self, raw: &RawEventRecord<'_>) -> Result<Option<Rec>, String> {
        let ends = |e: std::io::Error| format!("{e} in a {}-byte record", raw.data.len() + 8);
        let time = || raw.timestamp().unwrap_or(0);
        let rec = match raw.record_type.0 {
            b::PERF_RECORD_SAMPLE => {
                let mut parts = SampleParts::of(raw, self.read_format)?;
                let branches = parts.branches.take().unwrap_or_default();
                let count = parts.read.and_then(|r| r.value);
                let s = parts.parse(raw).map_err(ends)?;
                Rec::Sample(sample(&s, count, branches))
            }
            b::PERF_RECORD_LOST_SAMPLES => Rec::Lost {
                lost: perf_record::lost_samples(raw)
                    .ok_or_else(|| ends(std::io::ErrorKind::UnexpectedEof.into()))?,
            },
            b::PERF_RECORD_MMAP2
            | b::PERF_RECORD_COMM
            | b::PERF_RECORD_FORK
            | b::PERF_RECORD_LOST
            | b::PERF_RECORD_THROTTLE
            | b::PERF_RECORD_UNTHROTTLE => {
                perf_record::check_mmap2(raw)?;
                match raw.parse().map_err(ends)? {
                    EventRecord::Mmap2(m) => Rec::Mmap {
                        pid: m.pid as u32,
                        time: time(),
                        start: m.address,
                        len: m.length,
                        pgoff: m.page_offset,
                        prot: m.protection,
                        path: String::from_utf8_lossy(&m.path.as_slice()).into_owned(),
                    },
                    EventRecord::Comm(c) => Rec::Comm {
                        pid: c.pid as u32,
                        tid: c.tid as u32,
                        time: time(),
                        comm: String::from_utf8_lossy(&c.name.as_slice()).into_owned(),
                        exec: c.is_execve,
                    },
                    EventRecord::Fork(f) if f.pid != f.ppid => Rec::Fork {
                        pid: f.pid as u32,
                        tid: f.tid as u32,
                        ppid: f.ppid as u32,
                        ptid: f.ptid as u32,
                        time: f.timestamp,
                    },
                    EventRecord::Lost(l) => Rec::Lost { lost: l.count },
                    // The crate's throttle record keeps the id, not the instance's stream id:
                    // the `sample_id` trailer's is the same (`event->id` in both; upstream
                    // report: docs/upstream/event-reader-throttle-stream-id.md).
                    EventRecord::Throttle(t) | EventRecord::Unthrottle(t) => {
                        let stream_id = raw.common_data().map_err(ends)?.stream_id.unwrap_or(0);
                        if raw.record_type.0 == b::PERF_RECORD_THROTTLE {
                            Rec::Throttle {
                                stream_id,
                                time: t.timestamp,
                            }
                        } else {
                            Rec::Unthrottle {
                                stream_id,
                                time: t.timestamp,
                            }
                        }
                    }
                    _ => return Ok(None),
                }
            }
            _ => return Ok(None),
        };
        Ok(Some(rec))
    }
}

/// The recorder's sample of a parsed `SAMPLE` record (every field of [`SAMPLE_TYPE_BASE`]
/// is present; the optional ones as the attribute asked for them).
/// `count`: the `PERF_SAMPLE_READ` value; `branches`: the branch stack.
fn sample(s: &SampleRecord<'_>, count: Option<u64>, branches: Vec<RawBranch>) -> RawSample {
    let callchain = s
        .callchain
        .as_ref()
        .map(|c| (0..c.len()).filter_map(|i| c.get(i)).collect())
        .unwrap_or_default();
    // Registers (none for a kernel thread: abi 0) and the used part of the stack copy.
    let user_stack = s.user_regs.as_ref().and_then(|r| {
        let regs = proftrust_model::UserRegs {
            bp: r.get(6)?,
            sp: r.get(7)?,
            ip: r.get(8)?,
        };
        let (stack, used) = s.user_stack.as_ref()?;
        let stack = stack.as_slice();
        let used = usize::try_from(*used).map_or(stack.len(), |u| u.min(stack.len()));
        Some((regs, stack[..used].to_vec()))
    });
    RawSample {
        id: s.id.unwrap_or(0),
        stream_id: s.stream_id.unwrap_or(0),
        ip: s.ip.unwrap_or(0),
        pid: s.pid.unwrap_or(-1) as u32,
        tid: s.tid.unwrap_or(-1) as u32,
        time: s.timestamp.unwrap_or(0),
        cpu: s.cpu.unwrap_or(0),
        period: s.period.unwrap_or(0),
        count,
        callchain,
        branches,
        user_stack,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RecordOptions;

    /// The decoder of the attribute the recorder builds for `opts` (and `PERF_SAMPLE_READ`
    /// when `read`): the same path as a recording.
    fn decoder(opts: &RecordOptions, read: bool) -> Decoder {
        Decoder::new(&crate::build_attr(&opts.events[0], opts, 1000003, read)).unwrap()
    }

    fn decode(d: &Decoder, bytes: &[u8]) -> Result<Vec<Rec>, RecordError> {
        let mut out = Vec::new();
        d.decode_batch(bytes, &mut out).map(|()| out)
    }

    fn rec(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&kind.to_le_bytes());
        v.extend_from_slice(&misc.to_le_bytes());
        v.extend_from_slice(&((body.len() + 8) as u16).to_le_bytes());
        v.extend_from_slice(body);
        v
    }

    fn words(v: &mut Vec<u8>, xs: &[u64]) {
        for x in xs {
            v.extend_from_slice(&x.to_le_bytes());
        }
    }

    /// The `sample_id_all` trailer of the recorder's layout: pid/tid, time, stream_id,
    /// cpu/res, identifier.
    fn trailer(v: &mut Vec<u8>, pid: u32, tid: u32, time: u64, stream_id: u64, id: u64) {
        v.extend_from_slice(&pid.to_le_bytes());
        v.extend_from_slice(&tid.to_le_bytes());
        words(v, &[time, stream_id, 1, id]);
    }

    /// A SAMPLE body of the recorder's layout: id 7, ip 0x401000, pid 10, tid 11, time 123,
    /// stream id 9, cpu 1, then `tail` (period and what the layout adds).
    fn sample_body(tail: &[u64]) -> Vec<u8> {
        let mut body = Vec::new();
        words(&mut body, &[7, 0x401000]);
        body.extend_from_slice(&10u32.to_le_bytes());
        body.extend_from_slice(&11u32.to_le_bytes());
        words(&mut body, &[123, 9]);
        body.extend_from_slice(&1u32.to_le_bytes());
        body.extend_from_slice(&0u32.to_le_bytes());
        words(&mut body, tail);
        body
    }

    /// Every field of a SAMPLE with read values, a call chain and a branch stack with
    /// cycles, an MMAP2 and a LOST record, written by hand in the kernel's layout
    /// (`perf_event_open(2)`), decoded through the crate and the shared repairs.
    #[test]
    fn decodes_sample_with_callchain_and_branch_cycles_then_mmap2_and_lost() {
        let opts = RecordOptions {
            callchain: true,
            branch_stack: true,
            ..RecordOptions::default()
        };
        let d = decoder(&opts, true);
        // period 1000003; read: value 5000000, enabled 800, running 400; call chain of 3
        // (PERF_CONTEXT_USER, 0x401000, 0x402345); 2 branches: (from, to, flags) with
        // flags = cycles << 4 | predicted (bit 1) or mispredicted (bit 0).
        let context_user = (-512i64) as u64;
        let mut tail = vec![1000003u64, 5_000_000, 800, 400, 3, context_user];
        tail.extend([0x401000, 0x402345, 2]);
        tail.extend([0x401100, 0x401200, (37 << 4) | 2]);
        tail.extend([0x401300, 0x401000, (0xfffe << 4) | 1]);
        let mut bytes = rec(b::PERF_RECORD_SAMPLE, 2, &sample_body(&tail));
        let mut m = Vec::new();
        m.extend_from_slice(&3u32.to_le_bytes());
        m.extend_from_slice(&4u32.to_le_bytes());
        words(&mut m, &[0x5555_0000, 0x2000, 0x1000]);
        m.extend_from_slice(&[0u8; 24]); // maj, min, ino, ino_generation
        m.extend_from_slice(&5u32.to_le_bytes()); // PROT_READ | PROT_EXEC
        m.extend_from_slice(&2u32.to_le_bytes()); // MAP_PRIVATE
        m.extend_from_slice(b"/bin/x\0\0");
        trailer(&mut m, 3, 4, 77, 9, 7);
        bytes.extend(rec(b::PERF_RECORD_MMAP2, 2, &m));
        let mut l = Vec::new();
        words(&mut l, &[7, 42]);
        trailer(&mut l, 0, 0, 0, 0, 0);
        bytes.extend(rec(b::PERF_RECORD_LOST, 0, &l));
        let out = decode(&d, &bytes).unwrap();
        assert_eq!(out.len(), 3, "{out:?}");
        let Rec::Sample(s) = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!(
            (s.id, s.stream_id, s.ip, s.pid, s.tid, s.time, s.cpu),
            (7, 9, 0x401000, 10, 11, 123, 1)
        );
        assert_eq!((s.period, s.count), (1000003, Some(5_000_000)));
        assert_eq!(s.callchain, [context_user, 0x401000, 0x402345]);
        let branches: Vec<_> = s
            .branches
            .iter()
            .map(|b| (b.from, b.to, b.located(proftrust_model::Location::unmapped)))
            .collect();
        assert_eq!(branches.len(), 2);
        assert_eq!((branches[0].0, branches[0].1), (0x401100, 0x401200));
        assert_eq!((branches[1].0, branches[1].1), (0x401300, 0x401000));
        let b0 = &branches[0].2;
        assert_eq!(
            (b0.mispredicted, b0.predicted_known, b0.cycles),
            (false, true, 37)
        );
        assert_eq!(b0.from, proftrust_model::Location::unmapped(0x401100));
        let b1 = &branches[1].2;
        assert_eq!(
            (b1.mispredicted, b1.predicted_known, b1.cycles),
            (true, true, 0xfffe)
        );
        assert!(s.user_stack.is_none());
        match &out[1] {
            Rec::Mmap {
                pid: 3,
                time: 77,
                start: 0x5555_0000,
                len: 0x2000,
                pgoff: 0x1000,
                prot: 5,
                path,
            } => assert_eq!(path, "/bin/x"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(out[2], Rec::Lost { lost: 42 }), "{out:?}");
    }

    #[test]
    fn decodes_a_hand_built_sample_with_callchain() {
        let opts = RecordOptions {
            callchain: true,
            ..RecordOptions::default()
        };
        let body = sample_body(&[1000003, 2, 0x401000, 0x402000]);
        let out = decode(
            &decoder(&opts, false),
            &rec(b::PERF_RECORD_SAMPLE, 0, &body),
        )
        .unwrap();
        match &out[..] {
            [Rec::Sample(RawSample {
                id: 7,
                stream_id: 9,
                ip: 0x401000,
                pid: 10,
                tid: 11,
                time: 123,
                cpu: 1,
                period: 1000003,
                count: None,
                callchain,
                branches,
                user_stack: None,
            })] => {
                assert_eq!(callchain, &vec![0x401000, 0x402000]);
                assert!(branches.is_empty());
            }
            other => panic!("{other:?}"),
        }
    }

    /// A sample with `PERF_SAMPLE_READ` under [`READ_FORMAT`] (value, enabled, running) and
    /// a throttle / unthrottle pair (time, id, stream_id, then the trailer, whose stream id
    /// the kernel writes from the same `event->id`).
    #[test]
    fn decodes_read_values_and_throttles() {
        let body = sample_body(&[1000003, 5_000_000, 800, 400]);
        let mut bytes = rec(b::PERF_RECORD_SAMPLE, 0, &body);
        for (ty, t) in [
            (b::PERF_RECORD_THROTTLE, 200u64),
            (b::PERF_RECORD_UNTHROTTLE, 950),
        ] {
            let mut t_body = Vec::new();
            words(&mut t_body, &[t, 7, 9]);
            trailer(&mut t_body, 10, 11, t, 9, 7);
            bytes.extend(rec(ty, 0, &t_body));
        }
        let out = decode(&decoder(&RecordOptions::default(), true), &bytes).unwrap();
        assert!(
            matches!(
                out[..],
                [
                    Rec::Sample(RawSample {
                        count: Some(5_000_000),
                        period: 1000003,
                        ..
                    }),
                    Rec::Throttle {
                        stream_id: 9,
                        time: 200
                    },
                    Rec::Unthrottle {
                        stream_id: 9,
                        time: 950
                    }
                ]
            ),
            "{out:?}"
        );
    }

    /// `PERF_SAMPLE_REGS_USER` (abi 2 = 64-bit, then bp, sp, ip in bit order) and
    /// `PERF_SAMPLE_STACK_USER` (size 24, the bytes, then 16 used): the used part is kept.
    #[test]
    fn decodes_user_registers_and_stack() {
        let opts = RecordOptions {
            dwarf_stack: Some(24),
            ..RecordOptions::default()
        };
        let d = decoder(&opts, false);
        let mut tail = vec![1000003u64, 2, 0x7000, 0x7ff0, 0x401234, 24];
        tail.extend([0x1111u64, 0x2222, 0x3333, 16]);
        let body = sample_body(&tail);
        match &decode(&d, &rec(b::PERF_RECORD_SAMPLE, 0, &body)).unwrap()[..] {
            [Rec::Sample(RawSample {
                user_stack: Some((r, stack)),
                ..
            })] => {
                assert_eq!((r.bp, r.sp, r.ip), (0x7000, 0x7ff0, 0x401234));
                assert_eq!(stack.len(), 16);
                assert_eq!(stack[8..16], 0x2222u64.to_le_bytes());
            }
            other => panic!("{other:?}"),
        }
        // A kernel thread: abi 0, no registers; an empty stack has no used-size word.
        let body = sample_body(&[1000003, 0, 0]);
        assert!(matches!(
            &decode(&d, &rec(b::PERF_RECORD_SAMPLE, 0, &body)).unwrap()[..],
            [Rec::Sample(RawSample {
                user_stack: None,
                ..
            })]
        ));
        // A stack size past the record is an error, not a panic.
        let body = sample_body(&[1000003, 0, 1 << 40]);
        assert!(decode(&d, &rec(b::PERF_RECORD_SAMPLE, 0, &body)).is_err());
    }

    #[test]
    fn truncated_sample_is_an_error_not_a_panic() {
        let d = decoder(&RecordOptions::default(), false);
        let bytes = rec(b::PERF_RECORD_SAMPLE, 0, &[0u8; 16]);
        assert!(decode(&d, &bytes).is_err());
        let mut bad = bytes.clone();
        bad[6] = 200; // size beyond the batch
        assert!(decode(&d, &bad).is_err());
        // A call chain of 2^61 entries (8 × 2^61 overflows): an error, not a wrapped length.
        let opts = RecordOptions {
            callchain: true,
            ..RecordOptions::default()
        };
        let body = sample_body(&[1000003, 1 << 61, 0x401000]);
        let err = decode(
            &decoder(&opts, false),
            &rec(b::PERF_RECORD_SAMPLE, 0, &body),
        );
        assert!(
            matches!(&err, Err(RecordError::BadRecord { why, .. }) if why.contains("call chain")),
            "{err:?}"
        );
    }

    /// `LOST_SAMPLES` (which the crate leaves unparsed) and a `FORK` of a new process (a new
    /// thread's is not kept); `EXIT` is skipped.
    #[test]
    fn decodes_lost_samples_and_process_forks() {
        let d = decoder(&RecordOptions::default(), false);
        let mut ls = Vec::new();
        words(&mut ls, &[5]);
        trailer(&mut ls, 0, 0, 0, 0, 0);
        let mut bytes = rec(b::PERF_RECORD_LOST_SAMPLES, 0, &ls);
        for (ty, pid, ppid) in [
            (b::PERF_RECORD_FORK, 20u32, 10u32),
            (b::PERF_RECORD_FORK, 10, 10),
            (b::PERF_RECORD_EXIT, 20, 10),
        ] {
            let mut f = Vec::new();
            for x in [pid, ppid, pid + 1, ppid + 1] {
                f.extend_from_slice(&x.to_le_bytes());
            }
            words(&mut f, &[500]);
            trailer(&mut f, pid, pid + 1, 500, 9, 7);
            bytes.extend(rec(ty, 0, &f));
        }
        let out = decode(&d, &bytes).unwrap();
        assert!(
            matches!(
                out[..],
                [
                    Rec::Lost { lost: 5 },
                    Rec::Fork {
                        pid: 20,
                        tid: 21,
                        ppid: 10,
                        ptid: 11,
                        time: 500
                    }
                ]
            ),
            "{out:?}"
        );
    }
}
