//! perf.data files built byte by byte, in file mode or pipe mode, from the layouts of
//! `perf_event_open(2)` and perf's `tools/perf/Documentation/perf.data-file-format.txt`,
//! for tests that need a recording this machine cannot make (hardware events, a hybrid
//! CPU's two PMUs, an old perf's pipe mode without event names).
//!
//! Every event samples `IDENTIFIER | IP | TID | TIME | PERIOD` with `sample_id_all`, so
//! samples and side records name their event by id.
//!
//! ```
//! use proftrust_testkit::perf_data::{Event, PerfData};
//!
//! let mut p = PerfData::new(vec![Event::new(1, 0, 10).named("cpu-clock")]);
//! p.mmap2(7, 0x400000, 0x1000, 0, "/bin/prog", 1);
//! p.sample(10, 0x400100, 7, 2, 1000);
//! assert!(p.file_mode().starts_with(b"PERFILE2"));
//! assert_eq!(&p.pipe_mode()[8..16], &16u64.to_le_bytes());
//! ```

const IP: u64 = 1;
const TID: u64 = 1 << 1;
const TIME: u64 = 1 << 2;
const PERIOD: u64 = 1 << 8;
const IDENTIFIER: u64 = 1 << 16;
/// The `sample_type` of every event.
pub const SAMPLE_TYPE: u64 = IDENTIFIER | IP | TID | TIME | PERIOD;
const ATTR_SIZE: usize = 128;
const MISC_USER: u16 = 2;

/// One event: its `perf_event_attr` type and config, its sample id, and the name the
/// file's `EVENT_DESC` feature gives it (none: the file names it not at all).
#[derive(Debug, Clone)]
pub struct Event {
    /// `perf_event_attr.type` (0 hardware, 1 software, 3 hardware cache, 4 raw, ...).
    pub type_: u32,
    /// `perf_event_attr.config`.
    pub config: u64,
    /// The id its samples carry.
    pub id: u64,
    /// Its name in `EVENT_DESC` (file mode only).
    pub name: Option<String>,
}

impl Event {
    /// An unnamed event.
    pub fn new(type_: u32, config: u64, id: u64) -> Event {
        Event {
            type_,
            config,
            id,
            name: None,
        }
    }

    /// The event with a name in the file.
    pub fn named(mut self, name: &str) -> Event {
        self.name = Some(name.to_string());
        self
    }

    /// The 128-byte `perf_event_attr` (PERF_ATTR_SIZE_VER7): period 1000, `sample_id_all`,
    /// user space only.
    fn attr(&self) -> Vec<u8> {
        let mut a = vec![0u8; ATTR_SIZE];
        a[0..4].copy_from_slice(&self.type_.to_le_bytes());
        a[4..8].copy_from_slice(&(ATTR_SIZE as u32).to_le_bytes());
        a[8..16].copy_from_slice(&self.config.to_le_bytes());
        a[16..24].copy_from_slice(&1000u64.to_le_bytes());
        a[24..32].copy_from_slice(&SAMPLE_TYPE.to_le_bytes());
        // exclude_kernel (bit 5), exclude_hv (bit 6), sample_id_all (bit 18).
        let flags: u64 = (1 << 5) | (1 << 6) | (1 << 18);
        a[40..48].copy_from_slice(&flags.to_le_bytes());
        a
    }
}

/// A recording: its events and records, written out by [`PerfData::file_mode`] or
/// [`PerfData::pipe_mode`].
#[derive(Debug, Clone)]
pub struct PerfData {
    events: Vec<Event>,
    records: Vec<u8>,
}

fn record(ty: u32, misc: u16, body: &[u8]) -> Vec<u8> {
    let size = u16::try_from(8 + body.len()).expect("a record fits in 64 KiB");
    let mut v = Vec::with_capacity(8 + body.len());
    v.extend_from_slice(&ty.to_le_bytes());
    v.extend_from_slice(&misc.to_le_bytes());
    v.extend_from_slice(&size.to_le_bytes());
    v.extend_from_slice(body);
    v
}

/// A NUL-terminated string padded to 8 bytes.
fn c_string(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    while v.len() % 8 != 0 {
        v.push(0);
    }
    v
}

impl PerfData {
    /// A recording of these events, no records yet.
    pub fn new(events: Vec<Event>) -> PerfData {
        PerfData {
            events,
            records: Vec::new(),
        }
    }

    /// The `sample_id` trailer of a side record: pid, tid, time, identifier (the first
    /// event's id).
    fn trailer(&self, pid: u32, time: u64) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&pid.to_le_bytes());
        v.extend_from_slice(&pid.to_le_bytes());
        v.extend_from_slice(&time.to_le_bytes());
        v.extend_from_slice(&self.events.first().map_or(0, |e| e.id).to_le_bytes());
        v
    }

    /// `PERF_RECORD_COMM` (with the exec flag) of process `pid`.
    pub fn comm(&mut self, pid: u32, comm: &str, time: u64) {
        let mut b = Vec::new();
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&c_string(comm));
        b.extend_from_slice(&self.trailer(pid, time));
        self.records.extend(record(3, MISC_USER | (1 << 13), &b));
    }

    /// `PERF_RECORD_MMAP2` of `path` at `addr` (executable, private).
    pub fn mmap2(&mut self, pid: u32, addr: u64, len: u64, pgoff: u64, path: &str, time: u64) {
        let mut b = Vec::new();
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&addr.to_le_bytes());
        b.extend_from_slice(&len.to_le_bytes());
        b.extend_from_slice(&pgoff.to_le_bytes());
        b.extend_from_slice(&[0u8; 24]); // maj, min, ino, ino_generation
        b.extend_from_slice(&5u32.to_le_bytes()); // PROT_READ | PROT_EXEC
        b.extend_from_slice(&2u32.to_le_bytes()); // MAP_PRIVATE
        b.extend_from_slice(&c_string(path));
        b.extend_from_slice(&self.trailer(pid, time));
        self.records.extend(record(10, MISC_USER, &b));
    }

    /// `PERF_RECORD_SAMPLE` of the event with id `id` at `ip` (user space).
    pub fn sample(&mut self, id: u64, ip: u64, pid: u32, time: u64, period: u64) {
        let mut b = Vec::new();
        b.extend_from_slice(&id.to_le_bytes());
        b.extend_from_slice(&ip.to_le_bytes());
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&time.to_le_bytes());
        b.extend_from_slice(&period.to_le_bytes());
        self.records.extend(record(9, MISC_USER, &b));
    }

    /// File mode: the 104-byte header, the attributes (each with its ids section), the
    /// ids, the data, and the `EVENT_DESC` feature (bit 12) when any event is named.
    pub fn file_mode(&self) -> Vec<u8> {
        let entry = ATTR_SIZE + 16;
        let attrs_off = 104u64;
        let ids_off = attrs_off + (entry * self.events.len()) as u64;
        let data_off = ids_off + 8 * self.events.len() as u64;
        let named = self.events.iter().any(|e| e.name.is_some());
        let mut f = Vec::new();
        f.extend_from_slice(b"PERFILE2");
        f.extend_from_slice(&104u64.to_le_bytes());
        f.extend_from_slice(&(entry as u64).to_le_bytes());
        f.extend_from_slice(&attrs_off.to_le_bytes());
        f.extend_from_slice(&((entry * self.events.len()) as u64).to_le_bytes());
        f.extend_from_slice(&data_off.to_le_bytes());
        f.extend_from_slice(&(self.records.len() as u64).to_le_bytes());
        f.extend_from_slice(&[0u8; 16]); // event_types (unused)
        let features: u64 = if named { 1 << 12 } else { 0 };
        f.extend_from_slice(&features.to_le_bytes());
        f.extend_from_slice(&[0u8; 24]);
        for (i, e) in self.events.iter().enumerate() {
            f.extend_from_slice(&e.attr());
            f.extend_from_slice(&(ids_off + 8 * i as u64).to_le_bytes());
            f.extend_from_slice(&8u64.to_le_bytes());
        }
        for e in &self.events {
            f.extend_from_slice(&e.id.to_le_bytes());
        }
        f.extend_from_slice(&self.records);
        if named {
            let mut desc = Vec::new();
            desc.extend_from_slice(&(self.events.len() as u32).to_le_bytes());
            desc.extend_from_slice(&(ATTR_SIZE as u32).to_le_bytes());
            for e in &self.events {
                desc.extend_from_slice(&e.attr());
                desc.extend_from_slice(&1u32.to_le_bytes());
                let name = c_string(e.name.as_deref().unwrap_or(""));
                desc.extend_from_slice(&(name.len() as u32).to_le_bytes());
                desc.extend_from_slice(&name);
                desc.extend_from_slice(&e.id.to_le_bytes());
            }
            let at = f.len() as u64 + 16;
            f.extend_from_slice(&at.to_le_bytes());
            f.extend_from_slice(&(desc.len() as u64).to_le_bytes());
            f.extend_from_slice(&desc);
        }
        f
    }

    /// Pipe mode (`perf record -o -`): the 16-byte header, one `PERF_RECORD_HEADER_ATTR`
    /// (type 64: the attribute, then its ids) per event, then the records. No feature
    /// records: the events are not named, as with perf before it sent `EVENT_DESC` down
    /// the pipe.
    pub fn pipe_mode(&self) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(b"PERFILE2");
        f.extend_from_slice(&16u64.to_le_bytes());
        for e in &self.events {
            let mut b = e.attr();
            b.extend_from_slice(&e.id.to_le_bytes());
            f.extend(record(64, 0, &b));
        }
        f.extend_from_slice(&self.records);
        f
    }
}
