//! Decoding of the raw records drained from the ring buffer.
//!
//! The layout is fixed by the `sample_type` the recorder asks for (see [`SAMPLE_TYPE_BASE`]);
//! field order as in `include/uapi/linux/perf_event.h` (`PERF_RECORD_SAMPLE`: identifier, ip,
//! pid/tid, time, stream_id, cpu/res, period, callchain, branch stack). Every other record
//! carries a `sample_id_all` trailer (pid/tid, time, stream_id, cpu/res, identifier: 40 bytes)
//! of which only `time` is used.

use crate::error::RecordError;
use perf_event_open_sys::bindings as b;

/// Sample fields always requested.
pub(crate) const SAMPLE_TYPE_BASE: u64 = (b::PERF_SAMPLE_IDENTIFIER
    | b::PERF_SAMPLE_IP
    | b::PERF_SAMPLE_TID
    | b::PERF_SAMPLE_TIME
    | b::PERF_SAMPLE_STREAM_ID
    | b::PERF_SAMPLE_CPU
    | b::PERF_SAMPLE_PERIOD) as u64;

/// Size of the `sample_id_all` trailer for [`SAMPLE_TYPE_BASE`] (tid, time, stream_id, cpu,
/// identifier).
const TRAILER: usize = 40;

/// One decoded branch-stack entry (runtime addresses).
#[derive(Debug, Clone, Copy)]
pub(crate) struct RawBranch {
    pub from: u64,
    pub to: u64,
    pub flags: u64,
}

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

struct Cur<'a> {
    b: &'a [u8],
    pos: usize,
    kind: u32,
    base: usize,
}

impl Cur<'_> {
    fn u64(&mut self) -> Result<u64, RecordError> {
        let v = self
            .b
            .get(self.pos..self.pos + 8)
            .ok_or_else(|| self.short())?;
        self.pos += 8;
        Ok(u64::from_le_bytes(v.try_into().expect("8 bytes")))
    }
    fn u32(&mut self) -> Result<u32, RecordError> {
        let v = self
            .b
            .get(self.pos..self.pos + 4)
            .ok_or_else(|| self.short())?;
        self.pos += 4;
        Ok(u32::from_le_bytes(v.try_into().expect("4 bytes")))
    }
    fn skip(&mut self, n: usize) -> Result<(), RecordError> {
        if self.pos + n > self.b.len() {
            return Err(self.short());
        }
        self.pos += n;
        Ok(())
    }
    fn short(&self) -> RecordError {
        RecordError::BadRecord {
            kind: self.kind,
            offset: self.base,
            why: format!("record ends after {} bytes", self.b.len()),
        }
    }
}

fn trailer_time(body: &[u8]) -> u64 {
    if body.len() >= TRAILER {
        let at = body.len() - TRAILER + 8;
        u64::from_le_bytes(body[at..at + 8].try_into().expect("8 bytes"))
    } else {
        0
    }
}

/// The `read_format` of every event: `TOTAL_TIME_ENABLED | TOTAL_TIME_RUNNING`.
pub(crate) const READ_FORMAT: u64 =
    (b::PERF_FORMAT_TOTAL_TIME_ENABLED | b::PERF_FORMAT_TOTAL_TIME_RUNNING) as u64;

/// Which optional sample fields were requested.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Layout {
    /// `PERF_SAMPLE_READ` with [`READ_FORMAT`] (value, time enabled, time running).
    pub read: bool,
    /// `PERF_SAMPLE_CALLCHAIN`.
    pub callchain: bool,
    /// `PERF_SAMPLE_BRANCH_STACK`.
    pub branch: bool,
    /// `PERF_SAMPLE_REGS_USER` ([`REGS_USER`]) + `PERF_SAMPLE_STACK_USER`.
    pub user_stack: bool,
}

/// The user registers a DWARF unwinder starts from: `bp`, `sp`, `ip` (x86-64 perf register
/// numbers 6, 7, 8; the kernel writes them in bit order).
pub(crate) const REGS_USER: u64 = (1 << 6) | (1 << 7) | (1 << 8);

/// Decodes every record of a drained batch, appending to `out`: one handler per record
/// type, on a cursor over the record's body.
pub(crate) fn decode_batch(bytes: &[u8], l: Layout, out: &mut Vec<Rec>) -> Result<(), RecordError> {
    let mut off = 0usize;
    while off + 8 <= bytes.len() {
        let kind = u32::from_le_bytes(bytes[off..off + 4].try_into().expect("4 bytes"));
        let misc = u16::from_le_bytes(bytes[off + 4..off + 6].try_into().expect("2 bytes"));
        let size =
            u16::from_le_bytes(bytes[off + 6..off + 8].try_into().expect("2 bytes")) as usize;
        if size < 8 || off + size > bytes.len() {
            return Err(RecordError::BadRecord {
                kind,
                offset: off,
                why: format!(
                    "size {size} does not fit the {} bytes left",
                    bytes.len() - off
                ),
            });
        }
        let mut c = Cur {
            b: &bytes[off + 8..off + size],
            pos: 0,
            kind,
            base: off,
        };
        let rec = match kind {
            b::PERF_RECORD_SAMPLE => Some(c.sample(l)?),
            b::PERF_RECORD_MMAP2 => Some(c.mmap2()?),
            b::PERF_RECORD_COMM => Some(c.comm(misc)?),
            b::PERF_RECORD_FORK => c.fork()?,
            b::PERF_RECORD_LOST => {
                c.u64()?;
                Some(Rec::Lost { lost: c.u64()? })
            }
            b::PERF_RECORD_LOST_SAMPLES => Some(Rec::Lost { lost: c.u64()? }),
            b::PERF_RECORD_THROTTLE | b::PERF_RECORD_UNTHROTTLE => Some(c.throttle()?),
            _ => None,
        };
        out.extend(rec);
        off += size;
    }
    Ok(())
}

/// The handlers of the record types kept, each reading its record's body.
impl Cur<'_> {
    /// `PERF_RECORD_SAMPLE` with the fields of `l`.
    fn sample(&mut self, l: Layout) -> Result<Rec, RecordError> {
        let id = self.u64()?;
        let ip = self.u64()?;
        let pid = self.u32()?;
        let tid = self.u32()?;
        let time = self.u64()?;
        let stream_id = self.u64()?;
        let cpu = self.u32()?;
        self.u32()?;
        let period = self.u64()?;
        let count = if l.read {
            let value = self.u64()?;
            self.u64()?; // time enabled
            self.u64()?; // time running
            Some(value)
        } else {
            None
        };
        let callchain = if l.callchain {
            self.callchain()?
        } else {
            Vec::new()
        };
        let branches = if l.branch {
            self.branch_stack()?
        } else {
            Vec::new()
        };
        let user_stack = if l.user_stack {
            self.user_stack()?
        } else {
            None
        };
        Ok(Rec::Sample(RawSample {
            id,
            stream_id,
            ip,
            pid,
            tid,
            time,
            cpu,
            period,
            count,
            callchain,
            branches,
            user_stack,
        }))
    }

    /// `PERF_SAMPLE_CALLCHAIN`: the number of entries, then the addresses.
    fn callchain(&mut self) -> Result<Vec<u64>, RecordError> {
        let nr = self.u64()? as usize;
        if nr > self.b.len() / 8 {
            return Err(self.short());
        }
        let mut chain = Vec::with_capacity(nr);
        for _ in 0..nr {
            chain.push(self.u64()?);
        }
        Ok(chain)
    }

    /// `PERF_SAMPLE_BRANCH_STACK`: the number of entries, then (from, to, flags) each.
    fn branch_stack(&mut self) -> Result<Vec<RawBranch>, RecordError> {
        let nr = self.u64()? as usize;
        if nr > self.b.len() / 24 {
            return Err(self.short());
        }
        let mut branches = Vec::new();
        for _ in 0..nr {
            let from = self.u64()?;
            let to = self.u64()?;
            let flags = self.u64()?;
            branches.push(RawBranch { from, to, flags });
        }
        Ok(branches)
    }

    /// `PERF_SAMPLE_REGS_USER` ([`REGS_USER`]): abi, then the registers (none when abi is 0:
    /// a kernel thread); `PERF_SAMPLE_STACK_USER`: size, the bytes, then the size used (when
    /// size > 0). The registers and the used bytes, when there are registers.
    fn user_stack(&mut self) -> Result<Option<(proftrust_model::UserRegs, Vec<u8>)>, RecordError> {
        let abi = self.u64()?;
        let regs = if abi != 0 {
            let bp = self.u64()?;
            let sp = self.u64()?;
            let ip = self.u64()?;
            Some(proftrust_model::UserRegs { ip, sp, bp })
        } else {
            None
        };
        let size = self.u64()? as usize;
        if size > self.b.len() {
            return Err(self.short());
        }
        let at = self.pos;
        self.skip(size)?;
        let used = if size > 0 { self.u64()? as usize } else { 0 };
        Ok(regs.map(|r| (r, self.b[at..at + used.min(size)].to_vec())))
    }

    /// `PERF_RECORD_MMAP2`.
    fn mmap2(&mut self) -> Result<Rec, RecordError> {
        let pid = self.u32()?;
        self.u32()?;
        let start = self.u64()?;
        let len = self.u64()?;
        let pgoff = self.u64()?;
        self.skip(24)?; // maj/min/ino/ino_generation or build-id
        let prot = self.u32()?;
        self.u32()?;
        Ok(Rec::Mmap {
            pid,
            time: trailer_time(self.b),
            start,
            len,
            pgoff,
            prot,
            path: self.c_string(),
        })
    }

    /// `PERF_RECORD_COMM`; `misc` says whether an `execve` set the name.
    fn comm(&mut self, misc: u16) -> Result<Rec, RecordError> {
        let pid = self.u32()?;
        let tid = self.u32()?;
        // The name, NUL-terminated and padded to 8 bytes, then the sample_id trailer.
        Ok(Rec::Comm {
            pid,
            tid,
            time: trailer_time(self.b),
            comm: self.c_string(),
            exec: u32::from(misc) & b::PERF_RECORD_MISC_COMM_EXEC != 0,
        })
    }

    /// `PERF_RECORD_FORK` of a new process (`None` for a new thread).
    fn fork(&mut self) -> Result<Option<Rec>, RecordError> {
        let pid = self.u32()?;
        let ppid = self.u32()?;
        let tid = self.u32()?;
        let ptid = self.u32()?;
        let time = self.u64()?;
        Ok((pid != ppid).then_some(Rec::Fork {
            pid,
            tid,
            ppid,
            ptid,
            time,
        }))
    }

    /// `PERF_RECORD_THROTTLE` or `PERF_RECORD_UNTHROTTLE`: time, id, stream_id (then the
    /// sample_id trailer).
    fn throttle(&mut self) -> Result<Rec, RecordError> {
        let time = self.u64()?;
        self.u64()?;
        let stream_id = self.u64()?;
        Ok(if self.kind == b::PERF_RECORD_THROTTLE {
            Rec::Throttle { stream_id, time }
        } else {
            Rec::Unthrottle { stream_id, time }
        })
    }

    /// The NUL-terminated string from the cursor on (lossy UTF-8; the rest when there is no
    /// NUL).
    fn c_string(&self) -> String {
        let rest = &self.b[self.pos..];
        let end = rest.iter().position(|&x| x == 0).unwrap_or(rest.len());
        String::from_utf8_lossy(&rest[..end]).into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&kind.to_le_bytes());
        v.extend_from_slice(&misc.to_le_bytes());
        v.extend_from_slice(&((body.len() + 8) as u16).to_le_bytes());
        v.extend_from_slice(body);
        v
    }

    /// A SAMPLE body of the recorder's layout: id 7, ip 0x401000, pid 10, tid 11, time 123,
    /// stream id 9, cpu 1, then `tail` (period and what the layout adds).
    fn sample_body(tail: &[u64]) -> Vec<u8> {
        let mut body = Vec::new();
        for x in [7u64, 0x401000] {
            body.extend_from_slice(&x.to_le_bytes());
        }
        body.extend_from_slice(&10u32.to_le_bytes());
        body.extend_from_slice(&11u32.to_le_bytes());
        for x in [123u64, 9] {
            body.extend_from_slice(&x.to_le_bytes());
        }
        body.extend_from_slice(&1u32.to_le_bytes());
        body.extend_from_slice(&0u32.to_le_bytes());
        for x in tail {
            body.extend_from_slice(&x.to_le_bytes());
        }
        body
    }

    #[test]
    fn decodes_a_hand_built_sample_with_callchain() {
        let body = sample_body(&[1000003, 2, 0x401000, 0x402000]);
        let bytes = rec(b::PERF_RECORD_SAMPLE, 0, &body);
        let mut out = Vec::new();
        decode_batch(
            &bytes,
            Layout {
                callchain: true,
                ..Layout::default()
            },
            &mut out,
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
                callchain,
                ..
            })] => assert_eq!(callchain, &vec![0x401000, 0x402000]),
            other => panic!("{other:?}"),
        }
    }

    /// A sample with `PERF_SAMPLE_READ` under [`READ_FORMAT`] (value, enabled, running) and
    /// a throttle / unthrottle pair (time, id, stream_id, then the trailer).
    #[test]
    fn decodes_read_values_and_throttles() {
        let body = sample_body(&[1000003, 5_000_000, 800, 400]);
        let mut bytes = rec(b::PERF_RECORD_SAMPLE, 0, &body);
        for (ty, t) in [
            (b::PERF_RECORD_THROTTLE, 200u64),
            (b::PERF_RECORD_UNTHROTTLE, 950),
        ] {
            let mut t_body = Vec::new();
            for x in [t, 7, 9] {
                t_body.extend_from_slice(&x.to_le_bytes());
            }
            t_body.extend_from_slice(&[0u8; 40]);
            bytes.extend(rec(ty, 0, &t_body));
        }
        let mut out = Vec::new();
        decode_batch(
            &bytes,
            Layout {
                read: true,
                ..Layout::default()
            },
            &mut out,
        )
        .unwrap();
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
        let mut tail = vec![1000003u64, 2, 0x7000, 0x7ff0, 0x401234, 24];
        tail.extend([0x1111u64, 0x2222, 0x3333, 16]);
        let body = sample_body(&tail);
        let bytes = rec(b::PERF_RECORD_SAMPLE, 0, &body);
        let mut out = Vec::new();
        let l = Layout {
            user_stack: true,
            ..Layout::default()
        };
        decode_batch(&bytes, l, &mut out).unwrap();
        match &out[..] {
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
        let mut out = Vec::new();
        decode_batch(&rec(b::PERF_RECORD_SAMPLE, 0, &body), l, &mut out).unwrap();
        assert!(matches!(
            &out[..],
            [Rec::Sample(RawSample {
                user_stack: None,
                ..
            })]
        ));
        // A stack size past the record is an error, not a panic.
        let body = sample_body(&[1000003, 0, 1 << 40]);
        assert!(decode_batch(&rec(b::PERF_RECORD_SAMPLE, 0, &body), l, &mut out).is_err());
    }

    #[test]
    fn truncated_sample_is_an_error_not_a_panic() {
        let bytes = rec(b::PERF_RECORD_SAMPLE, 0, &[0u8; 16]);
        let mut out = Vec::new();
        assert!(decode_batch(&bytes, Layout::default(), &mut out).is_err());
        let mut bad = bytes.clone();
        bad[6] = 200; // size beyond the batch
        assert!(decode_batch(&bad, Layout::default(), &mut out).is_err());
    }

    #[test]
    fn decodes_lost_and_mmap2() {
        let mut body = Vec::new();
        body.extend_from_slice(&5u64.to_le_bytes());
        body.extend_from_slice(&42u64.to_le_bytes());
        let mut bytes = rec(b::PERF_RECORD_LOST, 0, &body);
        let mut m = Vec::new();
        m.extend_from_slice(&3u32.to_le_bytes());
        m.extend_from_slice(&3u32.to_le_bytes());
        for x in [0x5555_0000u64, 0x1000, 0x1000] {
            m.extend_from_slice(&x.to_le_bytes());
        }
        m.extend_from_slice(&[0u8; 24]);
        m.extend_from_slice(&5u32.to_le_bytes());
        m.extend_from_slice(&2u32.to_le_bytes());
        m.extend_from_slice(b"/bin/x\0\0");
        m.extend_from_slice(&[0u8; 8]);
        m.extend_from_slice(&77u64.to_le_bytes()); // trailer time
        m.extend_from_slice(&[0u8; 24]);
        bytes.extend(rec(b::PERF_RECORD_MMAP2, 0, &m));
        let mut out = Vec::new();
        decode_batch(&bytes, Layout::default(), &mut out).unwrap();
        assert!(matches!(out[0], Rec::Lost { lost: 42 }));
        match &out[1] {
            Rec::Mmap {
                pid: 3,
                time: 77,
                start: 0x5555_0000,
                len: 0x1000,
                pgoff: 0x1000,
                prot: 5,
                path,
            } => assert_eq!(path, "/bin/x"),
            other => panic!("{other:?}"),
        }
    }
}
