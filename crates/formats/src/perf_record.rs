//! Raw perf records through `linux-perf-event-reader` (0.10, as `linux-perf-data` 0.13
//! re-exports it), with the repairs that version needs: the one home of those repairs for
//! both readers of perf records, the perf.data reader (`perf_data.rs`) and the recorder's
//! ring buffer (`proftrust-record`'s `parse.rs`).
//!
//! Each repair names the report written for upstream, in `docs/upstream/` (no network to
//! file it from here; the files are ready to paste):
//!
//! * `PERF_SAMPLE_READ`: the crate swaps the layouts with and without `PERF_FORMAT_GROUP`
//!   (`docs/upstream/event-reader-read-format-layouts.md`) and drops `PERF_FORMAT_LOST`
//!   (`docs/upstream/event-reader-read-format-lost.md`): the read values are parsed here
//!   ([`read_values`]) and the crate is handed the body without them ([`SampleParts`]).
//! * `PERF_SAMPLE_CALLCHAIN`: the crate multiplies the count by 8 unchecked
//!   (`docs/upstream/event-reader-callchain-overflow.md`): checked here first.
//! * `PERF_SAMPLE_BRANCH_STACK`: the crate reads past it and keeps nothing
//!   (`docs/upstream/event-reader-branch-stack.md`): read here ([`RawBranch`]).
//! * `PERF_RECORD_MMAP2` with a build-id: the crate asserts the length is at most 20
//!   (`docs/upstream/event-reader-mmap2-build-id-assert.md`): checked here first
//!   ([`check_mmap2`]).
//! * `PERF_RECORD_LOST_SAMPLES`: the crate leaves it unparsed
//!   (`docs/upstream/event-reader-lost-samples.md`): read here ([`lost_samples`]).
//!
//! Little-endian records only (perf.data files of other byte orders are refused before).

use linux_perf_data::linux_perf_event_reader::{
    EventRecord, RawData, RawEventRecord, RecordParseInfo, SampleFormat, SampleRecord,
};
use proftrust_model::{Branch, Location};

/// `PERF_RECORD_LOST_SAMPLES`.
pub const PERF_RECORD_LOST_SAMPLES: u32 = 13;
/// `PERF_RECORD_MMAP2`.
pub const PERF_RECORD_MMAP2: u32 = 10;
/// `PERF_RECORD_MISC_MMAP_BUILD_ID`: the MMAP2 record carries a build-id.
pub const MISC_MMAP_BUILD_ID: u16 = 1 << 14;

/// `read_format` bits (`perf_event_open(2)`).
const FORMAT_TOTAL_TIME_ENABLED: u64 = 1;
const FORMAT_TOTAL_TIME_RUNNING: u64 = 1 << 1;
const FORMAT_ID: u64 = 1 << 2;
const FORMAT_GROUP: u64 = 1 << 3;
const FORMAT_LOST: u64 = 1 << 4;

/// `sample_type` bits up to the branch stack (`perf_event_open(2)`).
const IDENTIFIER: u64 = 1 << 16;
const IP: u64 = 1 << 0;
const TID: u64 = 1 << 1;
const TIME: u64 = 1 << 2;
const ADDR: u64 = 1 << 3;
const READ: u64 = 1 << 4;
const CALLCHAIN: u64 = 1 << 5;
const ID: u64 = 1 << 6;
const CPU: u64 = 1 << 7;
const PERIOD: u64 = 1 << 8;
const STREAM_ID: u64 = 1 << 9;
const RAW: u64 = 1 << 10;
const BRANCH_STACK: u64 = 1 << 11;
/// `PERF_SAMPLE_BRANCH_HW_INDEX` in `branch_sample_type`.
const HW_INDEX: u64 = 1 << 17;

/// One `read_format` block (a `PERF_SAMPLE_READ` area, or the body of a `PERF_RECORD_READ`
/// after pid and tid).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadValues {
    /// The count, without `PERF_FORMAT_GROUP` (a group's values are not kept).
    pub value: Option<u64>,
    /// `PERF_FORMAT_TOTAL_TIME_ENABLED`.
    pub enabled: Option<u64>,
    /// `PERF_FORMAT_TOTAL_TIME_RUNNING`.
    pub running: Option<u64>,
    /// The (first) value's id, with `PERF_FORMAT_ID`.
    pub id: Option<u64>,
    /// Bytes the block takes.
    pub len: usize,
}

/// Parses a `read_format` block at the start of `b`. Without `GROUP`: `value, [enabled],
/// [running], [id], [lost]`; with `GROUP`: `nr, [enabled], [running], nr × (value, [id],
/// [lost])` (`perf_event_open(2)`, "read_format"). `None` when `b` is too short. `rf` is
/// the attribute's `read_format` as the kernel was given it: `linux-perf-event-reader` 0.10
/// swaps the two layouts and drops `LOST` (upstream reports:
/// `docs/upstream/event-reader-read-format-layouts.md`,
/// `docs/upstream/event-reader-read-format-lost.md`).
pub fn read_values(b: &[u8], rf: u64) -> Option<ReadValues> {
    let word = |i: usize| -> Option<u64> {
        Some(u64::from_le_bytes(
            b.get(8 * i..8 * i + 8)?.try_into().ok()?,
        ))
    };
    let has = |m: u64| rf & m != 0;
    let mut i = 0usize;
    let nr = if has(FORMAT_GROUP) {
        i += 1;
        word(0)?
    } else {
        1
    };
    let value = if has(FORMAT_GROUP) {
        None
    } else {
        i += 1;
        Some(word(i - 1)?)
    };
    let enabled = if has(FORMAT_TOTAL_TIME_ENABLED) {
        i += 1;
        Some(word(i - 1)?)
    } else {
        None
    };
    let running = if has(FORMAT_TOTAL_TIME_RUNNING) {
        i += 1;
        Some(word(i - 1)?)
    } else {
        None
    };
    let per = usize::from(has(FORMAT_GROUP))
        + usize::from(has(FORMAT_ID))
        + usize::from(has(FORMAT_LOST));
    // In a group the first entry's id follows its value.
    let id_at = if has(FORMAT_GROUP) { i + 1 } else { i };
    let id = if has(FORMAT_ID) && nr > 0 {
        Some(word(id_at)?)
    } else {
        None
    };
    let words = usize::try_from(nr).ok()?.checked_mul(per)?.checked_add(i)?;
    let len = words.checked_mul(8)?;
    (len <= b.len()).then_some(ReadValues {
        value,
        enabled,
        running,
        id,
        len,
    })
}

/// `(start, end)` of the `PERF_SAMPLE_READ` values in a raw `SAMPLE` body (`start == end`
/// without `READ`): the fields before it in the kernel's order (`perf_event_open(2)`), then
/// the read values ([`read_values`]). `None` when the body is too short.
fn read_span(b: &[u8], info: &RecordParseInfo, rf: u64) -> Option<(usize, usize)> {
    let sf = info.sample_format.bits();
    let mut p = 0usize;
    for bit in [IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, CPU, PERIOD] {
        if sf & bit != 0 {
            p = p.checked_add(8)?;
        }
    }
    let start = p;
    if sf & READ != 0 {
        p = p.checked_add(read_values(b.get(p..)?, rf)?.len)?;
    }
    (p <= b.len()).then_some((start, p))
}

/// A `SAMPLE` body whose call-chain count does not fit the record: `linux-perf-event-reader`
/// 0.10 multiplies the count by 8 unchecked (an overflow panic in debug builds, a wrapped
/// length and a misread record otherwise; found by the perf_counts fuzz target; upstream
/// report: `docs/upstream/event-reader-callchain-overflow.md`).
fn check_callchain(b: &[u8], info: &RecordParseInfo, rf: u64) -> Result<(), String> {
    if info.sample_format.bits() & CALLCHAIN == 0 {
        return Ok(());
    }
    let short = || "a SAMPLE record ends before its call chain".to_string();
    let p = read_span(b, info, rf).ok_or_else(short)?.1;
    let nr = b
        .get(p..p + 8)
        .map(|x| u64::from_le_bytes(x.try_into().expect("8 bytes")))
        .ok_or_else(short)?;
    let room = (b.len() - p - 8) as u64 / 8;
    if nr > room {
        return Err(format!(
            "a SAMPLE record's call chain of {nr} entries does not fit its {} bytes",
            b.len()
        ));
    }
    Ok(())
}

/// One branch-stack entry as the kernel writes it (`struct perf_branch_entry`), addresses
/// as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawBranch {
    /// Source address.
    pub from: u64,
    /// Target address.
    pub to: u64,
    /// The flag word: bit 0 mispredicted, bit 1 predicted, bits 4..20 cycles.
    pub flags: u64,
}

impl RawBranch {
    /// The model's branch, its addresses located by `locate`.
    pub fn located(&self, mut locate: impl FnMut(u64) -> Location) -> Branch {
        Branch {
            from: locate(self.from),
            to: locate(self.to),
            mispredicted: self.flags & 1 != 0,
            predicted_known: self.flags & 3 != 0,
            cycles: ((self.flags >> 4) & 0xffff) as u32,
        }
    }
}

/// The branch stack of a raw `SAMPLE` body (fields in the kernel's order up to
/// `PERF_SAMPLE_BRANCH_STACK`, `perf_event_open(2)`; the `hw_idx` word skipped with
/// `PERF_SAMPLE_BRANCH_HW_INDEX`). `linux-perf-event-reader` 0.10 reads past it and keeps
/// nothing (upstream report: `docs/upstream/event-reader-branch-stack.md`). `None` without
/// a branch stack or when it does not fit the body.
fn branch_stack(b: &[u8], info: &RecordParseInfo, rf: u64) -> Option<Vec<RawBranch>> {
    let sf = info.sample_format.bits();
    if sf & BRANCH_STACK == 0 {
        return None;
    }
    let rd = |p: &mut usize| -> Option<u64> {
        let v = u64::from_le_bytes(b.get(*p..*p + 8)?.try_into().ok()?);
        *p += 8;
        Some(v)
    };
    let mut p = read_span(b, info, rf)?.1;
    if sf & CALLCHAIN != 0 {
        let nr = rd(&mut p)?;
        p = p.checked_add(usize::try_from(nr.checked_mul(8)?).ok()?)?;
    }
    if sf & RAW != 0 {
        let size = u32::from_le_bytes(b.get(p..p + 4)?.try_into().ok()?) as usize;
        p = p.checked_add(4 + size)?;
    }
    let nr = rd(&mut p)?;
    if info.branch_sample_format.bits() & HW_INDEX != 0 {
        rd(&mut p)?;
    }
    if nr > (b.len() as u64) / 24 {
        return None;
    }
    let mut out = Vec::with_capacity(nr as usize);
    for _ in 0..nr {
        out.push(RawBranch {
            from: rd(&mut p)?,
            to: rd(&mut p)?,
            flags: rd(&mut p)?,
        });
    }
    Some(out)
}

/// What a `SAMPLE` record holds beyond what `linux-perf-event-reader` 0.10 parses right,
/// read from the raw body, and the body the crate can parse ([`SampleParts::parse`]).
#[derive(Debug, Clone)]
pub struct SampleParts {
    /// The `PERF_SAMPLE_READ` values.
    pub read: Option<ReadValues>,
    /// The `PERF_SAMPLE_BRANCH_STACK` entries (`None` without a branch stack, or when it
    /// does not fit the record).
    pub branches: Option<Vec<RawBranch>>,
    /// With `READ`: the body without the read values, and the parse info without `READ`.
    stripped: Option<(Vec<u8>, RecordParseInfo)>,
}

impl SampleParts {
    /// The parts of the raw `SAMPLE` record `record`, whose attribute's `read_format` is
    /// `rf` (as the kernel was given it: the crate's `ReadFormat` drops bits it does not
    /// know). An error names what does not fit the record (the call chain, the read
    /// values).
    pub fn of(record: &RawEventRecord<'_>, rf: u64) -> Result<SampleParts, String> {
        let b = record.data.as_slice();
        let info = &record.parse_info;
        check_callchain(&b, info, rf)?;
        let (read, stripped) = if info.sample_format.contains(SampleFormat::READ) {
            let (start, end) =
                read_span(&b, info, rf).ok_or("a SAMPLE record is shorter than its read values")?;
            let v = read_values(&b[start..end], rf).expect("read_span parsed it");
            let mut body = Vec::with_capacity(b.len() - (end - start));
            body.extend_from_slice(&b[..start]);
            body.extend_from_slice(&b[end..]);
            let mut info = *info;
            info.sample_format.remove(SampleFormat::READ);
            (Some(v), Some((body, info)))
        } else {
            (None, None)
        };
        Ok(SampleParts {
            read,
            branches: branch_stack(&b, info, rf),
            stripped,
        })
    }

    /// The sample as the crate parses it: from the body without its read values when it
    /// had some, else from `record` itself (the record these parts are of).
    pub fn parse<'s>(
        &'s self,
        record: &RawEventRecord<'s>,
    ) -> Result<SampleRecord<'s>, std::io::Error> {
        let stripped = self.stripped.as_ref().map(|(body, info)| RawEventRecord {
            record_type: record.record_type,
            misc: record.misc,
            data: RawData::Single(body),
            parse_info: *info,
        });
        match stripped.as_ref().unwrap_or(record).parse()? {
            linux_perf_data::linux_perf_event_reader::EventRecord::Sample(s) => Ok(s),
            _ => Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "not a SAMPLE record",
            )),
        }
    }
}

/// An `MMAP2` record the crate would panic on: a build-id longer than 20 bytes
/// (`linux-perf-event-reader` 0.10 asserts; found by the perf_data fuzz target; upstream
/// report: `docs/upstream/event-reader-mmap2-build-id-assert.md`). Other records pass.
pub fn check_mmap2(record: &RawEventRecord<'_>) -> Result<(), &'static str> {
    if record.record_type.0 == PERF_RECORD_MMAP2 && record.misc & MISC_MMAP_BUILD_ID != 0 {
        let body = record.data.as_slice();
        if body.get(32).is_some_and(|&n| n > 20) {
            return Err("an MMAP2 record states a build-id longer than 20 bytes");
        }
    }
    Ok(())
}

/// A non-sample record parsed by the crate, after the checks it needs ([`check_mmap2`]):
/// what both readers of perf.data files act on (the full reader's handlers, the streaming
/// counter's address-space changes). The error names the record.
pub fn parse_event<'a>(record: &RawEventRecord<'a>) -> Result<EventRecord<'a>, String> {
    check_mmap2(record).map_err(|e| format!("{e} (file corrupt)"))?;
    record
        .parse()
        .map_err(|e| format!("a {:?} record cannot be parsed: {e}", record.record_type))
}

/// The count of a `PERF_RECORD_LOST_SAMPLES` body (`u64 lost`, then the `sample_id`
/// trailer), which `linux-perf-event-reader` 0.10 leaves unparsed (upstream report:
/// `docs/upstream/event-reader-lost-samples.md`). `None` when the body is shorter.
pub fn lost_samples(record: &RawEventRecord<'_>) -> Option<u64> {
    let b = record.data.as_slice();
    Some(u64::from_le_bytes(b.get(..8)?.try_into().ok()?))
}
