//! perf.data files built byte by byte from the layouts of `perf_event_open(2)` and perf's
//! `perf.data` format documentation, with hand-computed expected answers: exec, fork,
//! records out of time order inside a round, kernel samples, lost counts, several events.
//! Both the streaming counter (`count_perf_data`) and the full reader (`read_perf_data_with`
//! + `SampleCounts::from_samples`) must give exactly the expected counts.

use proftrust_formats::segments::NoSegments;
use proftrust_formats::{count_perf_data, read_perf_data_with, PerfDataOptions, SampleCounts};
use std::collections::BTreeMap;
use std::path::Path;

const IP: u64 = 1;
const TID: u64 = 2;
const TIME: u64 = 4;
const ID: u64 = 1 << 6;
const PERIOD: u64 = 1 << 8;
const IDENTIFIER: u64 = 1 << 16;
const MISC_USER: u16 = 2;
const MISC_KERNEL: u16 = 1;
const MISC_EXEC: u16 = 1 << 13;

/// One attribute: sample_type and event ids.
struct Attr {
    sample_type: u64,
    ids: Vec<u64>,
}

/// Builds records for attributes that all share `sample_type` (as perf writes them).
struct Rec {
    sample_type: u64,
}

fn pad8(mut v: Vec<u8>) -> Vec<u8> {
    while v.len() % 8 != 0 {
        v.push(0);
    }
    v
}

fn c_string(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    pad8(v)
}

impl Rec {
    fn record(ty: u32, misc: u16, body: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&ty.to_le_bytes());
        v.extend_from_slice(&misc.to_le_bytes());
        v.extend_from_slice(&((8 + body.len()) as u16).to_le_bytes());
        v.extend_from_slice(body);
        v
    }

    /// The `sample_id` trailer: TID, TIME, ID, IDENTIFIER (the fields these tests use).
    fn trailer(&self, pid: u32, time: u64, id: u64) -> Vec<u8> {
        let mut v = Vec::new();
        if self.sample_type & TID != 0 {
            v.extend_from_slice(&pid.to_le_bytes());
            v.extend_from_slice(&pid.to_le_bytes());
        }
        if self.sample_type & TIME != 0 {
            v.extend_from_slice(&time.to_le_bytes());
        }
        if self.sample_type & ID != 0 {
            v.extend_from_slice(&id.to_le_bytes());
        }
        if self.sample_type & IDENTIFIER != 0 {
            v.extend_from_slice(&id.to_le_bytes());
        }
        v
    }

    fn sample(&self, misc: u16, id: u64, ip: u64, pid: u32, time: u64) -> Vec<u8> {
        let mut b = Vec::new();
        if self.sample_type & IDENTIFIER != 0 {
            b.extend_from_slice(&id.to_le_bytes());
        }
        b.extend_from_slice(&ip.to_le_bytes());
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&pid.to_le_bytes());
        if self.sample_type & TIME != 0 {
            b.extend_from_slice(&time.to_le_bytes());
        }
        if self.sample_type & ID != 0 {
            b.extend_from_slice(&id.to_le_bytes());
        }
        b.extend_from_slice(&1000u64.to_le_bytes()); // PERIOD
        Self::record(9, misc, &b)
    }

    #[allow(clippy::too_many_arguments)]
    fn mmap2(&self, pid: u32, addr: u64, len: u64, pgoff: u64, path: &str, time: u64) -> Vec<u8> {
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
        b.extend_from_slice(&self.trailer(pid, time, 0));
        Self::record(10, MISC_USER, &b)
    }

    fn exec(&self, pid: u32, comm: &str, time: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&pid.to_le_bytes());
        b.extend_from_slice(&c_string(comm));
        b.extend_from_slice(&self.trailer(pid, time, 0));
        Self::record(3, MISC_USER | MISC_EXEC, &b)
    }

    fn fork(&self, pid: u32, ppid: u32, time: u64) -> Vec<u8> {
        let mut b = Vec::new();
        for x in [pid, ppid, pid, ppid] {
            b.extend_from_slice(&x.to_le_bytes());
        }
        b.extend_from_slice(&time.to_le_bytes());
        b.extend_from_slice(&self.trailer(pid, time, 0));
        Self::record(7, MISC_USER, &b)
    }

    fn lost(&self, n: u64, time: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&0u64.to_le_bytes());
        b.extend_from_slice(&n.to_le_bytes());
        b.extend_from_slice(&self.trailer(0, time, 0));
        Self::record(2, 0, &b)
    }

    fn lost_samples(&self, n: u64, time: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&n.to_le_bytes());
        b.extend_from_slice(&self.trailer(0, time, 0));
        Self::record(13, 0, &b)
    }

    fn finished_round() -> Vec<u8> {
        Self::record(68, 0, &[])
    }
}

/// A 128-byte `perf_event_attr` (PERF_ATTR_SIZE_VER7): software cpu-clock, period 1000,
/// `sample_id_all`.
fn attr_bytes(sample_type: u64) -> Vec<u8> {
    let mut a = vec![0u8; 128];
    a[0..4].copy_from_slice(&1u32.to_le_bytes()); // PERF_TYPE_SOFTWARE
    a[4..8].copy_from_slice(&128u32.to_le_bytes()); // size
    a[8..16].copy_from_slice(&0u64.to_le_bytes()); // PERF_COUNT_SW_CPU_CLOCK
    a[16..24].copy_from_slice(&1000u64.to_le_bytes()); // sample_period
    a[24..32].copy_from_slice(&sample_type.to_le_bytes());
    let flags: u64 = 1 << 18; // sample_id_all
    a[40..48].copy_from_slice(&flags.to_le_bytes());
    a
}

/// File mode: 104-byte header, attribute section (attr + ids section per attribute), the
/// ids, the data section, and with several attributes the `HEADER_EVENT_DESC` feature
/// (bit 12: `u32 nr, u32 attr_size`, then per event the attr, `u32 nr_ids`, the name as
/// `u32 len` + NUL-padded bytes, the ids), which is where perf readers find the ids.
fn perf_file(attrs: &[Attr], records: &[Vec<u8>]) -> Vec<u8> {
    perf_file_on(attrs, records, None)
}

/// [`perf_file`] with the `HEADER_ARCH` feature (bit 6: a perf string, `u32 len` then the
/// NUL-padded name, `uname -m` of the recording machine) when `arch` is given.
fn perf_file_on(attrs: &[Attr], records: &[Vec<u8>], arch: Option<&str>) -> Vec<u8> {
    let attr_entry = 128 + 16;
    let attrs_off = 104u64;
    let ids_off = attrs_off + (attr_entry * attrs.len()) as u64;
    let ids_len: usize = attrs.iter().map(|a| 8 * a.ids.len()).sum();
    let data_off = ids_off + ids_len as u64;
    let data: Vec<u8> = records.concat();
    let mut f = Vec::new();
    f.extend_from_slice(b"PERFILE2");
    f.extend_from_slice(&104u64.to_le_bytes());
    f.extend_from_slice(&(attr_entry as u64).to_le_bytes());
    f.extend_from_slice(&attrs_off.to_le_bytes());
    f.extend_from_slice(&((attr_entry * attrs.len()) as u64).to_le_bytes());
    f.extend_from_slice(&data_off.to_le_bytes());
    f.extend_from_slice(&(data.len() as u64).to_le_bytes());
    f.extend_from_slice(&[0u8; 16]); // event_types
    let features: u64 =
        if attrs.len() > 1 { 1 << 12 } else { 0 } | if arch.is_some() { 1 << 6 } else { 0 };
    f.extend_from_slice(&features.to_le_bytes()); // feature bitmap
    f.extend_from_slice(&[0u8; 24]);
    assert_eq!(f.len(), 104);
    let mut id_at = ids_off;
    for a in attrs {
        f.extend_from_slice(&attr_bytes(a.sample_type));
        f.extend_from_slice(&id_at.to_le_bytes());
        f.extend_from_slice(&((8 * a.ids.len()) as u64).to_le_bytes());
        id_at += 8 * a.ids.len() as u64;
    }
    for a in attrs {
        for id in &a.ids {
            f.extend_from_slice(&id.to_le_bytes());
        }
    }
    f.extend_from_slice(&data);
    // The feature sections' (offset, size) table, in bit order, then their bodies.
    let mut bodies: Vec<Vec<u8>> = Vec::new();
    if let Some(a) = arch {
        let name = c_string(a);
        let mut b = (name.len() as u32).to_le_bytes().to_vec();
        b.extend_from_slice(&name);
        bodies.push(b);
    }
    if arch.is_some() {
        let mut at = f.len() as u64 + 16 * (bodies.len() as u64 + u64::from(attrs.len() > 1));
        let table_only = attrs.len() <= 1;
        for b in &bodies {
            f.extend_from_slice(&at.to_le_bytes());
            f.extend_from_slice(&(b.len() as u64).to_le_bytes());
            at += b.len() as u64;
        }
        assert!(
            table_only,
            "HEADER_ARCH with HEADER_EVENT_DESC is not built here"
        );
        for b in &bodies {
            f.extend_from_slice(b);
        }
        return f;
    }
    if attrs.len() > 1 {
        let mut desc = Vec::new();
        desc.extend_from_slice(&(attrs.len() as u32).to_le_bytes());
        desc.extend_from_slice(&128u32.to_le_bytes());
        for (i, a) in attrs.iter().enumerate() {
            desc.extend_from_slice(&attr_bytes(a.sample_type));
            desc.extend_from_slice(&(a.ids.len() as u32).to_le_bytes());
            let name = c_string(&format!("event{i}"));
            desc.extend_from_slice(&(name.len() as u32).to_le_bytes());
            desc.extend_from_slice(&name);
            for id in &a.ids {
                desc.extend_from_slice(&id.to_le_bytes());
            }
        }
        let desc_off = f.len() as u64 + 16;
        f.extend_from_slice(&desc_off.to_le_bytes());
        f.extend_from_slice(&(desc.len() as u64).to_le_bytes());
        f.extend_from_slice(&desc);
    }
    f
}

/// `(event, module path or "-", svma) -> samples`.
fn normalized(c: &SampleCounts) -> BTreeMap<(u16, String, u64), u64> {
    let mut m = BTreeMap::new();
    for x in &c.counts {
        let module =
            x.ip.module
                .and_then(|i| c.modules.get(i))
                .map_or("-".to_string(), |m| m.path.clone());
        *m.entry((x.event, module, x.ip.svma.0)).or_default() += x.samples;
    }
    m
}

fn both(bytes: &[u8]) -> (SampleCounts, SampleCounts) {
    let p = Path::new("synthetic.data");
    let opts = PerfDataOptions::default();
    let (fast, _) = count_perf_data(bytes, p, &opts, &NoSegments).expect("streaming counter");
    let (full, _) = read_perf_data_with(bytes, p, &opts, &NoSegments).expect("full reader");
    (fast, SampleCounts::from_samples(&full))
}

const KADDR: u64 = 0xffff_ffff_8100_0000;

/// pid 10 runs /bin/a, execs /bin/b (mapped at the same address), forks pid 11; the
/// mmap of /bin/b is written after a sample that follows it in time (same round).
fn exec_fork_records(r: &Rec, id: u64) -> Vec<Vec<u8>> {
    vec![
        r.mmap2(10, 0x1000, 0x2000, 0, "/bin/a", 1),
        r.sample(MISC_USER, id, 0x1100, 10, 2),
        r.sample(MISC_USER, id, 0x1100, 10, 3),
        Rec::finished_round(),
        r.exec(10, "b", 4),
        // Between the exec and the mmap of /bin/b: nothing is mapped.
        r.sample(MISC_USER, id, 0x1100, 10, 45),
        // Written before the mmap below, but taken after it.
        r.sample(MISC_USER, id, 0x1100, 10, 60),
        r.mmap2(10, 0x1000, 0x1000, 0x5000, "/bin/b", 50),
        Rec::finished_round(),
        r.fork(11, 10, 70),
        r.sample(MISC_USER, id, 0x1100, 11, 80),
        r.sample(MISC_KERNEL, id, KADDR, 11, 81),
        r.sample(MISC_USER, id, 0x1234, 99, 82),
        r.lost(5, 83),
        r.lost_samples(3, 84),
        Rec::finished_round(),
    ]
}

#[test]
fn exec_fork_and_out_of_order_records_hand_computed() {
    let r = Rec {
        sample_type: IP | TID | TIME | PERIOD,
    };
    let bytes = perf_file(
        &[Attr {
            sample_type: r.sample_type,
            ids: vec![],
        }],
        &exec_fork_records(&r, 0),
    );
    let (fast, full) = both(&bytes);
    assert!(fast.streamed, "the streaming path must take this file");
    assert!(!full.streamed);
    let want: BTreeMap<(u16, String, u64), u64> = [
        // /bin/a at pgoff 0: svma = 0x1100 - 0x1000 + 0 (no segments: svma = file offset).
        ((0, "/bin/a".to_string(), 0x100), 2),
        // after the exec, before /bin/b is mapped.
        ((0, "-".to_string(), 0x1100), 1),
        // /bin/b at pgoff 0x5000: 0x1100 - 0x1000 + 0x5000; pid 10 at t=60, pid 11 at t=80.
        ((0, "/bin/b".to_string(), 0x5100), 2),
        ((0, "[kernel.kallsyms]".to_string(), KADDR), 1),
        // pid 99 has no mappings.
        ((0, "-".to_string(), 0x1234), 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(normalized(&fast), want);
    assert_eq!(normalized(&full), want);
    assert_eq!((fast.lost, full.lost), (5, 5));
    assert_eq!(fast.per_event(), vec![7]);
    assert_eq!(fast.total(), 7);

    // Kernel samples dropped on request.
    let mut opts = PerfDataOptions::default();
    opts.keep_kernel = false;
    let p = Path::new("synthetic.data");
    let (fast, _) = count_perf_data(&bytes, p, &opts, &NoSegments).unwrap();
    assert_eq!(fast.total(), 6);
}

#[test]
fn several_events_by_identifier_hand_computed() {
    // Every attribute samples IDENTIFIER, and (perf's choice when the formats agree) ID.
    for sample_type in [
        IDENTIFIER | IP | TID | TIME | PERIOD,
        IP | TID | TIME | ID | PERIOD,
    ] {
        several_events(sample_type);
    }
}

fn several_events(sample_type: u64) {
    let r = Rec { sample_type };
    let attrs = [
        Attr {
            sample_type: r.sample_type,
            ids: vec![100, 101],
        },
        Attr {
            sample_type: r.sample_type,
            ids: vec![200],
        },
    ];
    let mut recs = exec_fork_records(&r, 101);
    recs.push(r.sample(MISC_USER, 200, 0x1100, 11, 90));
    recs.push(r.sample(MISC_USER, 200, 0x1180, 11, 91));
    // An id no attribute has goes to the first event (as linux-perf-data does).
    recs.push(r.sample(MISC_USER, 777, 0x1100, 11, 92));
    let bytes = perf_file(&attrs, &recs);
    let (fast, full) = both(&bytes);
    assert!(fast.streamed);
    assert_eq!(fast.events[1].name, "event1");
    assert_eq!(normalized(&fast), normalized(&full));
    let n = normalized(&fast);
    assert_eq!(n[&(1, "/bin/b".to_string(), 0x5100)], 1);
    assert_eq!(n[&(1, "/bin/b".to_string(), 0x5180)], 1);
    assert_eq!(n[&(0, "/bin/b".to_string(), 0x5100)], 3);
    assert_eq!(n[&(0, "/bin/a".to_string(), 0x100)], 2);
    assert_eq!(fast.per_event(), vec![8, 2]);
}

#[test]
fn files_outside_the_streaming_path_use_the_full_reader() {
    let p = Path::new("cut.data");
    let opts = PerfDataOptions::default();
    // Without TIME the counter cannot order records: the full reader counts (in file order).
    let nt = Rec {
        sample_type: IP | TID | PERIOD,
    };
    let bytes = perf_file(
        &[Attr {
            sample_type: nt.sample_type,
            ids: vec![],
        }],
        &exec_fork_records(&nt, 0),
    );
    let (c, _) = count_perf_data(&bytes, p, &opts, &NoSegments).unwrap();
    assert!(!c.streamed);
    assert_eq!(c.total(), 7);

    let r = Rec {
        sample_type: IP | TID | TIME | PERIOD,
    };
    let recs = exec_fork_records(&r, 0);
    let bytes = perf_file(
        &[Attr {
            sample_type: r.sample_type,
            ids: vec![],
        }],
        &recs,
    );
    // A data section cut inside a record: both readers give the full reader's error.
    let mut cut = bytes.clone();
    let data_size_at = 48;
    let size = u64::from_le_bytes(cut[data_size_at..data_size_at + 8].try_into().unwrap());
    cut[data_size_at..data_size_at + 8].copy_from_slice(&(size - 4).to_le_bytes());
    cut.truncate(cut.len() - 4);
    let e1 = count_perf_data(&cut, p, &opts, &NoSegments).unwrap_err();
    let e2 = read_perf_data_with(&cut, p, &opts, &NoSegments).unwrap_err();
    assert_eq!(e1.to_string(), e2.to_string());
    // The loader names the input once.
    let e3 = proftrust_formats::load_samples(
        proftrust_formats::Source::Bytes {
            bytes: &cut,
            name: "cut.data",
        },
        &proftrust_formats::LoadOptions::default(),
    )
    .unwrap_err()
    .to_string();
    assert_eq!(e3, format!("cut.data: {e1}"));

    // A compressed record (type 81) anywhere: not streamed.
    let mut recs2 = recs.clone();
    recs2.insert(0, Rec::record(81, 0, &[0u8; 8]));
    let bytes2 = perf_file(
        &[Attr {
            sample_type: r.sample_type,
            ids: vec![],
        }],
        &recs2,
    );
    if let Ok((c, _)) = count_perf_data(&bytes2, p, &opts, &NoSegments) {
        assert!(!c.streamed);
    }
}

/// A record made by `f` with its `misc` replaced.
fn with_misc(mut rec: Vec<u8>, misc: u16) -> Vec<u8> {
    rec[4..6].copy_from_slice(&misc.to_le_bytes());
    rec
}

/// What perf does and the readers must do too (hand-computed): a later mmap over part of an
/// earlier one keeps the rest of it; kernel samples by cpumode (an old kernel at 0x81000000)
/// and kernel modules as their own modules (`[kvm_intel]`); a guest kernel sample; an
/// unknown record type counted. Then the same file killed (data size 0) and cut mid-record.
#[test]
fn perf_reads_it_so_hand_computed() {
    let r = Rec {
        sample_type: IP | TID | TIME | PERIOD,
    };
    let recs = vec![
        with_misc(
            r.mmap2(
                u32::MAX,
                0x8100_0000,
                0x100_0000,
                0,
                "[kernel.kallsyms]_text",
                1,
            ),
            MISC_KERNEL,
        ),
        with_misc(
            r.mmap2(
                u32::MAX,
                0xc000_0000,
                0x1_0000,
                0,
                "/lib/modules/6.1.0/kernel/arch/x86/kvm/kvm-intel.ko",
                1,
            ),
            MISC_KERNEL,
        ),
        r.mmap2(10, 0x10000, 0x4000, 0, "/lib/a.so", 2),
        // ld.so-style remap of one page in the middle, from another file.
        r.mmap2(10, 0x11000, 0x1000, 0x7000, "/lib/b.so", 3),
        r.sample(MISC_USER, 0, 0x10100, 10, 4),
        r.sample(MISC_USER, 0, 0x11100, 10, 5),
        r.sample(MISC_USER, 0, 0x12100, 10, 6),
        r.sample(MISC_USER, 0, 0x13100, 10, 7),
        r.sample(MISC_KERNEL, 0, 0x8100_0100, 10, 8),
        r.sample(MISC_KERNEL, 0, 0xc000_0100, 10, 9),
        // Kernel mode at a user-space address no kernel mapping holds: no module (perf
        // script: `[unknown]`), not `[kernel.kallsyms]+0x7f…` (issue 31 item 6).
        r.sample(MISC_KERNEL, 0, 0x7f00_0000_1000, 10, 10),
        Rec::record(200, 0, &[0u8; 8]),
        Rec::finished_round(),
    ];
    let bytes = perf_file(
        &[Attr {
            sample_type: r.sample_type,
            ids: vec![],
        }],
        &recs,
    );
    let want: BTreeMap<(u16, String, u64), u64> = [
        ((0, "/lib/a.so".to_string(), 0x100), 1),
        ((0, "/lib/b.so".to_string(), 0x7100), 1),
        // The tail of a.so after the remapped page: pgoff 0x2000.
        ((0, "/lib/a.so".to_string(), 0x2100), 1),
        ((0, "/lib/a.so".to_string(), 0x3100), 1),
        ((0, "[kernel.kallsyms]".to_string(), 0x8100_0100), 1),
        ((0, "[kvm_intel]".to_string(), 0xc000_0100), 1),
        ((0, "-".to_string(), 0x7f00_0000_1000), 1),
    ]
    .into_iter()
    .collect();
    let p = Path::new("synthetic.data");
    let opts = PerfDataOptions::default();
    let (fast, notes) = count_perf_data(&bytes, p, &opts, &NoSegments).unwrap();
    let (full, full_notes) = read_perf_data_with(&bytes, p, &opts, &NoSegments).unwrap();
    assert!(fast.streamed);
    assert_eq!(normalized(&fast), want);
    assert_eq!(normalized(&SampleCounts::from_samples(&full)), want);
    for n in [&notes, &full_notes] {
        assert!(
            n.warnings
                .iter()
                .any(|w| w.starts_with("1 records of types perf does not define")
                    && w.contains("1 of type 200")),
            "{:?}",
            n.warnings
        );
    }

    // A guest kernel sample (cpumode 4): its own module, in both readers.
    let mut g = recs.clone();
    g.insert(6, r.sample(4, 0, 0xffff_ffff_8100_0200, 10, 6));
    let bytes_g = perf_file(
        &[Attr {
            sample_type: r.sample_type,
            ids: vec![],
        }],
        &g,
    );
    let (fast, full) = both(&bytes_g);
    assert_eq!(
        normalized(&fast).get(&(0, "[guest.kernel.kallsyms]".into(), 0xffff_ffff_8100_0200)),
        Some(&1)
    );
    assert_eq!(normalized(&fast), normalized(&full));

    // Killed: the header says data size 0; everything after the header is read.
    let mut killed = bytes.clone();
    killed[48..56].copy_from_slice(&0u64.to_le_bytes());
    let (fast, notes) = count_perf_data(&killed, p, &opts, &NoSegments).unwrap();
    assert_eq!(normalized(&fast), want);
    assert!(notes.warnings[0].contains("perf record did not finish (killed?)"));
    // Cut in the middle of the last sample: the six complete samples are read.
    let cut_at = bytes.len() - 8 - 16 - 20;
    let (full, notes) = read_perf_data_with(&bytes[..cut_at], p, &opts, &NoSegments).unwrap();
    assert_eq!(full.samples.len(), 6);
    assert!(
        notes.warnings[0].contains("a cut copy?"),
        "{:?}",
        notes.warnings
    );
}

/// A version-1 perf.data file is refused by its version.
#[test]
fn version_1_is_named() {
    let mut b = b"PERFFILE".to_vec();
    b.extend_from_slice(&[0u8; 200]);
    let e = read_perf_data_with(
        &b,
        Path::new("v1.data"),
        &PerfDataOptions::default(),
        &NoSegments,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("version \"1 (magic PERFFILE)\""), "{e}");
}

/// A recording made on an AArch64 machine (`HEADER_ARCH` "aarch64"), read here with the
/// cross-compiled binary given as `--binary` is: every sample is attributed to the function
/// `aarch64-linux-gnu-nm` places it in, with inline frames from the binary's DWARF, and a
/// note that machine-code decoding is x86-64 only. Hand-computed counts.
#[test]
fn aarch64_recording_attributed_with_the_binary() {
    use proftrust_binary::{BinaryLocator, LocateOptions, Symbolizer};
    use proftrust_formats::{load_samples, LoadOptions, Source};
    let t = "aarch64_recording_attributed_with_the_binary";
    if !proftrust_testkit::need(t, &["aarch64-linux-gnu-gcc", "aarch64-linux-gnu-nm"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../binary/tests/c/inline_loop.c");
    let exe = dir.path().join("inline_loop");
    let o = std::process::Command::new("aarch64-linux-gnu-gcc")
        .args(["-O2", "-g", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Oracle: the cross binutils' symbol table.
    let nm = std::process::Command::new("aarch64-linux-gnu-nm")
        .arg(&exe)
        .output()
        .unwrap();
    let nm = String::from_utf8_lossy(&nm.stdout).into_owned();
    let addr = |name: &str| {
        nm.lines()
            .find_map(|l| {
                let v: Vec<&str> = l.split_whitespace().collect();
                (v.len() == 3 && v[2] == name).then(|| u64::from_str_radix(v[0], 16).unwrap())
            })
            .unwrap_or_else(|| panic!("nm has no {name}"))
    };
    let (work, main) = (addr("work"), addr("main"));
    // Mapped as the loader maps the first PT_LOAD (offset 0, vaddr 0) of a PIE.
    let base = 0xaaaa_c000_0000u64;
    let r = Rec {
        sample_type: IP | TID | TIME | PERIOD,
    };
    let mut recs = vec![r.mmap2(7, base, 0x10000, 0, "/home/ci/build/inline_loop", 1)];
    let mut time = 2;
    for (at, n) in [(work + 8, 5u32), (work + 16, 2), (main + 4, 3)] {
        for _ in 0..n {
            recs.push(r.sample(MISC_USER, 0, base + at, 7, time));
            time += 1;
        }
    }
    // A sample outside the mapping: counted, unattributed.
    recs.push(r.sample(MISC_USER, 0, 0x10, 7, time));
    let attrs = [Attr {
        sample_type: r.sample_type,
        ids: vec![],
    }];
    let bytes = perf_file_on(&attrs, &recs, Some("aarch64"));
    let locator = BinaryLocator::new(LocateOptions::new(std::slice::from_ref(&exe), None));
    let (set, info) = load_samples(
        Source::Bytes {
            bytes: &bytes,
            name: "arm.data",
        },
        &LoadOptions::with_sources(&locator, &locator),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        info.warnings
            .iter()
            .any(|w| w.contains("recorded on aarch64")),
        "{:?}",
        info.warnings
    );
    let sym = Symbolizer::with_locator(&set.modules, &locator);
    let mut counts: BTreeMap<String, u64> = BTreeMap::new();
    for s in &set.samples {
        *counts.entry(sym.function_name(s.ip)).or_default() += 1;
    }
    let named: BTreeMap<&str, u64> = counts
        .iter()
        .filter(|(k, _)| *k == "work" || *k == "main")
        .map(|(k, v)| (k.as_str(), *v))
        .collect();
    assert_eq!(
        named,
        BTreeMap::from([("main", 3), ("work", 7)]),
        "{counts:?}"
    );
    assert_eq!(set.samples.len(), 11);
    // Module-relative addresses are the SVMAs nm prints.
    assert!(set
        .samples
        .iter()
        .any(|s| s.ip.module.is_some() && s.ip.svma.0 == work + 8));
    let b = sym.binary(set.samples[0].ip.module.unwrap()).unwrap();
    assert_eq!(b.machine(), 183);
    // Frames come from the binary's DWARF: a file and line on the innermost frame.
    let f = sym.frames(set.samples[0].ip);
    assert!(f[0].line.is_some() && f[0].file.is_some(), "{f:?}");
}

/// Issue 31 item 5: events a perf.data does not name (pipe mode without `EVENT_DESC`, as
/// older perf sent it) are named as perf names them, not with the reader's debug text
/// (`Hardware(CacheReferences, PmuTypeId(0))`); by the full reader and the streaming
/// counter alike.
#[test]
fn unnamed_events_are_named_as_perf_names_them() {
    use proftrust_formats::{load_counts, load_samples, LoadOptions, Source};
    use proftrust_testkit::perf_data::{Event, PerfData};
    let mut p = PerfData::new(vec![
        Event::new(0, 2, 10),       // PERF_COUNT_HW_CACHE_REFERENCES
        Event::new(1, 2, 11),       // PERF_COUNT_SW_PAGE_FAULTS
        Event::new(3, 1 << 16, 12), // L1D, read, miss
        Event::new(0, 4 << 32, 13), // cycles of PMU type 4 (a hybrid CPU's core PMU)
    ]);
    p.comm(7, "prog", 1);
    p.mmap2(7, 0x400000, 0x1000, 0, "/bin/prog", 2);
    for (i, id) in [10, 11, 12, 13, 10].into_iter().enumerate() {
        p.sample(id, 0x400100, 7, 3 + i as u64, 1000);
    }
    let want = [
        "cache-references",
        "page-faults",
        "L1-dcache-load-misses",
        "pmu4/cycles/",
    ];
    {
        let (mode, bytes) = ("pipe", p.pipe_mode());
        let src = || Source::Bytes {
            bytes: &bytes,
            name: mode,
        };
        let (s, _) = load_samples(src(), &LoadOptions::default()).expect(mode);
        let names: Vec<&str> = s.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, want, "{mode} mode, full reader");
        assert_eq!(s.count_for_event(0), 2, "{mode}");
        let (c, _) = load_counts(src(), &LoadOptions::default()).expect(mode);
        let names: Vec<&str> = c.events.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, want, "{mode} mode, streaming counter");
        assert_eq!(c.total(), 5);
    }
}
