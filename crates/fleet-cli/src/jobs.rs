//! The fleet jobs (moved here from `proftrust-pipeline`, which no longer pulls the engine):
//! the profiles of many hosts in a Parquet store, and fleet statistics over them run
//! as query plans on Apache DataFusion (embedded) or an Apache Ballista cluster
//! (`proftrust_fleet`, docs/fleet.md).
//!
//! * [`ingest`]: profile files (any format the one loader reads) -> new files in the store;
//! * [`report`]: fleet shares with cluster-robust intervals, host deviations, precision;
//! * [`diff`]: two label selections of the store compared function by function.
//!
//! The fleet crate's API is async; these functions build a tokio runtime (2 worker
//! threads) and block on it, so callers stay synchronous like every other command.

use proftrust_fleet::ingest::{self as fi, IngestSpec, KnownSymbols};
use proftrust_fleet::query::Selector;
use proftrust_fleet::report::{DiffSpec, ReportSpec};
use proftrust_pipeline::{load, Context, Error, Events, Result};

pub use proftrust_fleet::ingest::Rows;
pub use proftrust_fleet::{Engine, Level};
use proftrust_report::fleet::{FleetDiffReport, FleetReport, HostShare};
use std::path::PathBuf;

/// Options of `fleet ingest`.
#[derive(Debug, Clone, Default)]
pub struct IngestOptions {
    /// Host the profiles come from (default: none; required).
    pub host: String,
    /// Labels `k=v` of every recording of this ingest (default: none).
    pub labels: Vec<String>,
    /// The store directory (created when missing; default: none, required).
    pub out: PathBuf,
    /// Profile files: perf.data, perf script text or proftrust sample files.
    pub profiles: Vec<PathBuf>,
    /// Row granularity (default: aggregated per location).
    pub rows: Rows,
    /// Binaries of the profiles (matched by build-id, else file name), as `read --binary`.
    pub binaries: Vec<PathBuf>,
    /// perf's `--symfs` (default: none).
    pub symfs: Option<PathBuf>,
}

/// One ingested file.
#[derive(Debug, Clone, PartialEq)]
pub struct IngestedFile {
    /// The profile file.
    pub source: PathBuf,
    /// Its format's name.
    pub format: String,
    /// What was written.
    pub ingested: fi::Ingested,
}

/// What `fleet ingest` did.
#[derive(Debug, Clone, PartialEq)]
pub struct IngestSummary {
    /// The store.
    pub store: PathBuf,
    /// The host.
    pub host: String,
    /// Per file.
    pub files: Vec<IngestedFile>,
    /// Samples over all files.
    pub samples: u64,
    /// Wall-clock seconds of the whole ingest (reading, symbolizing, writing).
    pub seconds: f64,
}

impl IngestSummary {
    /// One line per file, and the total with the rate.
    pub fn render_text(&self) -> String {
        let mut s = String::new();
        for f in &self.files {
            s.push_str(&format!(
                "{}: {} samples ({}) -> recording {} of host {}: {} rows, {} new symbols\n",
                f.source.display(),
                f.ingested.samples,
                f.format,
                f.ingested.recording_id,
                self.host,
                f.ingested.rows,
                f.ingested.new_symbols
            ));
            if let Some(e) = &f.ingested.ending {
                s.push_str(&format!(
                    "  ENDED EARLY: {}: stored as such; fleet report and diff name it\n",
                    proftrust_report::quote_name(e)
                ));
            }
        }
        s.push_str(&format!(
            "ingested {} samples from {} file(s) into {} in {:.2} s\n",
            self.samples,
            self.files.len(),
            self.store.display(),
            self.seconds
        ));
        s
    }
}

/// Refuses a store path `create_dir_all` would refuse with a bare "File exists": a file that
/// is not a directory, or a symbolic link to nothing.
fn check_store_path(out: &std::path::Path) -> Result<()> {
    let Ok(meta) = std::fs::symlink_metadata(out) else {
        return Ok(());
    };
    if meta.file_type().is_symlink() && std::fs::metadata(out).is_err() {
        let target = std::fs::read_link(out).unwrap_or_default();
        return Err(Error::Invalid(format!(
            "--out {} is a symbolic link to {}, which does not exist: create that directory, or give --out a directory",
            out.display(),
            target.display()
        )));
    }
    if !out.is_dir() {
        return Err(Error::Invalid(format!(
            "--out {} exists and is not a directory: give --out a new or existing store directory",
            out.display()
        )));
    }
    Ok(())
}

/// Parses `k=v` labels (each may itself be a comma-separated list, as `--labels a=1,b=2`).
pub fn parse_labels(labels: &[String]) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for l in labels {
        for part in l.split(',').filter(|p| !p.is_empty()) {
            let kv = proftrust_fleet::schema::parse_label(part).ok_or_else(|| {
                Error::Invalid(format!(
                    "label `{part}` is not KEY=VALUE (e.g. --labels build=A,week=47); keys are \
                     1 to 64 of A-Z a-z 0-9 . _ -"
                ))
            })?;
            out.push(kv);
        }
    }
    Ok(out)
}

fn fleet_err(e: proftrust_fleet::Error) -> Error {
    match e {
        proftrust_fleet::Error::Invalid(m) => Error::Invalid(m),
        e => Error::Step {
            what: "fleet store".to_string(),
            source: Box::new(e),
        },
    }
}

/// Runs `fleet ingest`: reads every profile (all are read and checked before anything is
/// written), then writes one recording per file.
pub fn ingest(o: &IngestOptions, events: &dyn Events) -> Result<IngestSummary> {
    let start = std::time::Instant::now();
    if !proftrust_fleet::schema::valid_host(&o.host) {
        return Err(Error::Invalid(format!(
            "--host `{}` is not usable as a host name: give 1 to 128 of A-Z a-z 0-9 . _ - \
             (not starting with .)",
            o.host
        )));
    }
    let labels = parse_labels(&o.labels)?;
    if o.profiles.is_empty() {
        return Err(Error::Invalid(
            "no profile to ingest: give perf.data, perf script or proftrust sample files"
                .to_string(),
        ));
    }
    if o.out.exists() && !o.out.is_dir() {
        return Err(Error::Invalid(format!(
            "--out {} is not a directory",
            o.out.display()
        )));
    }
    let locator = load::locator(&o.binaries, o.symfs.as_deref());
    let spec = IngestSpec {
        host: o.host.clone(),
        labels,
        rows: o.rows,
    };
    let now = fi::now_ns();
    // Read all first: a bad file stops the ingest before the store changes.
    let mut loaded = Vec::with_capacity(o.profiles.len());
    for p in &o.profiles {
        if p.as_os_str() == "-" {
            return Err(Error::Invalid(
                "fleet ingest reads files, not standard input: save the profile to a file"
                    .to_string(),
            ));
        }
        let format = match load::format_of(p)? {
            Some(f) => f,
            None => {
                return Err(Error::Invalid(format!(
                    "{}: not a profile proftrust reads (perf.data, perf script text, proftrust samples)",
                    p.display()
                )))
            }
        };
        let set = load::samples_with(p, &locator, events)
            .with_context(|| format!("cannot ingest {}", p.display()))?;
        loaded.push((p.clone(), format.name().to_string(), set));
    }
    check_store_path(&o.out)?;
    std::fs::create_dir_all(&o.out)
        .with_context(|| format!("cannot create the store {}", o.out.display()))?;
    let swept = proftrust_fleet::manifest::sweep_temporaries(&o.out);
    if swept > 0 {
        events.note(&format!(
            "removed {swept} temporary file(s) that interrupted ingests left in {}",
            o.out.display()
        ));
    }
    let mut known = KnownSymbols::load(&o.out).map_err(fleet_err)?;
    let mut files = Vec::new();
    let mut samples = 0;
    for (i, (p, format, set)) in loaded.iter().enumerate() {
        let sym = proftrust_binary::Symbolizer::with_locator(&set.modules, &locator);
        for w in sym.warnings() {
            events.note(&format!("{}: {w}", p.display()));
        }
        let source = p.display().to_string();
        let src = fi::Source {
            path: &source,
            format,
            set,
            symbolizer: &sym,
        };
        let id = fi::new_recording_id(now, i);
        let ing = fi::ingest(&o.out, &spec, &src, &id, now, &mut known).map_err(fleet_err)?;
        samples += ing.samples;
        files.push(IngestedFile {
            source: p.clone(),
            format: format.clone(),
            ingested: ing,
        });
    }
    Ok(IngestSummary {
        store: o.out.clone(),
        host: o.host.clone(),
        files,
        samples,
        seconds: start.elapsed().as_secs_f64(),
    })
}

/// Options of `fleet report`.
#[derive(Debug, Clone)]
pub struct ReportOptions {
    /// The store (default: none, required).
    pub store: PathBuf,
    /// Query engine (default: embedded DataFusion).
    pub engine: Engine,
    /// Aggregation level (default: function).
    pub level: Level,
    /// Event (default: the one with most samples).
    pub event: Option<String>,
    /// Functions with host deviations and precision rows (default: 10).
    pub top: usize,
    /// Confidence level (default: 0.95).
    pub confidence: f64,
    /// Target relative half-width of the precision rows (default: 0.1).
    pub precision_target: f64,
    /// False-discovery rate of the host deviations (default: 0.05).
    pub fdr: f64,
}

impl Default for ReportOptions {
    fn default() -> ReportOptions {
        let s = ReportSpec::default();
        ReportOptions {
            store: PathBuf::new(),
            engine: s.engine,
            level: s.level,
            event: s.event,
            top: s.top,
            confidence: s.confidence,
            precision_target: s.precision_target,
            fdr: s.fdr,
        }
    }
}

/// Options of `fleet diff`.
#[derive(Debug, Clone)]
pub struct DiffOptions {
    /// The store (default: none, required).
    pub store: PathBuf,
    /// Query engine (default: embedded).
    pub engine: Engine,
    /// Aggregation level (default: function).
    pub level: Level,
    /// Event (default: the one with most samples).
    pub event: Option<String>,
    /// Side A selector `k=v` (required).
    pub a: String,
    /// Side B selector `k=v` (required).
    pub b: String,
    /// Confidence level (default: 0.95).
    pub confidence: f64,
    /// False-discovery rate (default: 0.05).
    pub fdr: f64,
    /// Rows below this share on both sides are not tested (default:
    /// [`proftrust_fleet::report::DEFAULT_MIN_SHARE`], 0.1%).
    pub min_share: f64,
}

impl Default for DiffOptions {
    fn default() -> DiffOptions {
        DiffOptions {
            store: PathBuf::new(),
            engine: Engine::Embedded,
            level: Level::Function,
            event: None,
            a: String::new(),
            b: String::new(),
            confidence: 0.95,
            fdr: 0.05,
            min_share: proftrust_fleet::report::DEFAULT_MIN_SHARE,
        }
    }
}

fn runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the query engine's runtime")
}

/// Runs `fleet report`: the report, and every host's share of each of the top functions
/// (for `FleetReport::render_html_with_hosts`).
pub fn report(o: &ReportOptions, _events: &dyn Events) -> Result<(FleetReport, Vec<HostShare>)> {
    let spec = ReportSpec {
        engine: o.engine.clone(),
        level: o.level,
        event: o.event.clone(),
        top: o.top,
        confidence: o.confidence,
        precision_target: o.precision_target,
        fdr: o.fdr,
    };
    runtime()?
        .block_on(proftrust_fleet::report::report(&o.store, &spec))
        .map_err(fleet_err)
}

/// Runs `fleet diff`.
pub fn diff(o: &DiffOptions, _events: &dyn Events) -> Result<FleetDiffReport> {
    let spec = DiffSpec {
        engine: o.engine.clone(),
        level: o.level,
        event: o.event.clone(),
        a: Selector::parse(&o.a).map_err(fleet_err)?,
        b: Selector::parse(&o.b).map_err(fleet_err)?,
        confidence: o.confidence,
        fdr: o.fdr,
        min_share: o.min_share,
    };
    runtime()?
        .block_on(proftrust_fleet::report::diff(&o.store, &spec))
        .map_err(fleet_err)
}

/// Options of the synthetic fleet generator (`fleet synth`, hidden; the benchmark's and
/// the tests' input): proftrust sample files for `hosts` hosts with `samples` samples in
/// total, addresses inside the functions of a real binary.
#[derive(Debug, Clone)]
pub struct SynthOptions {
    /// The binary whose functions the samples fall in (default: none, required).
    pub binary: PathBuf,
    /// Directory the files are written to, `host-NNNN.ptsamp` (default: none, required).
    pub out: PathBuf,
    /// Hosts (default: 10).
    pub hosts: u64,
    /// Samples over all hosts (default: 100,000), split evenly.
    pub samples: u64,
    /// Functions sampled, the largest ones of the binary (default: 40).
    pub functions: usize,
    /// Spread of the host effect: each host's weight of a function is the fleet weight
    /// times `exp(sigma·Z)`, Z standard normal (default: 0.3; 0: every host alike).
    pub sigma: f64,
    /// Seed (default: [`proftrust_pipeline::DEFAULT_SEED`]).
    pub seed: u64,
}

impl Default for SynthOptions {
    fn default() -> SynthOptions {
        SynthOptions {
            binary: PathBuf::new(),
            out: PathBuf::new(),
            hosts: 10,
            samples: 100_000,
            functions: 40,
            sigma: 0.3,
            seed: proftrust_pipeline::DEFAULT_SEED,
        }
    }
}

/// What [`synthesize`] wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct SynthSummary {
    /// The files, one per host.
    pub files: Vec<PathBuf>,
    /// The functions and their true fleet weights (Zipf 1/rank, normalised), before host
    /// effects.
    pub functions: Vec<(String, f64)>,
    /// Samples written.
    pub samples: u64,
    /// The seed used.
    pub seed: u64,
}

/// Writes a synthetic fleet: per host, samples drawn from the binary's largest functions
/// with Zipf weights times a log-normal host effect, at uniform addresses inside each
/// function, as proftrust sample files (event `cpu-clock`, period 1 ms).
pub fn synthesize(o: &SynthOptions) -> Result<SynthSummary> {
    use proftrust_model::{
        EventDesc, EventKind, Location, Module, ModuleTable, Sample, SampleSet, SamplingConfig,
    };
    use rand::{Rng, SeedableRng};
    use rand_distr::{Distribution, StandardNormal};

    let bin = proftrust_binary::Binary::open(&o.binary)
        .with_context(|| format!("cannot open {}", o.binary.display()))?;
    let mut funcs: Vec<&proftrust_binary::Function> =
        bin.functions().iter().filter(|f| f.size >= 4).collect();
    funcs.sort_by(|a, b| b.size.cmp(&a.size).then_with(|| a.name.cmp(&b.name)));
    // One function per name (aliases share an address range).
    let mut seen = std::collections::BTreeSet::new();
    funcs.retain(|f| seen.insert(f.start.0));
    funcs.truncate(o.functions.max(1));
    if funcs.is_empty() {
        return Err(Error::Invalid(format!(
            "{} has no functions to sample (no symbols?)",
            o.binary.display()
        )));
    }
    if o.hosts == 0 {
        return Err(Error::Invalid("--hosts must be at least 1".to_string()));
    }
    std::fs::create_dir_all(&o.out)
        .with_context(|| format!("cannot create {}", o.out.display()))?;
    let weights: Vec<f64> = (0..funcs.len()).map(|i| 1.0 / (i as f64 + 1.0)).collect();
    let wsum: f64 = weights.iter().sum();
    let mut module = Module::new(
        std::fs::canonicalize(&o.binary)
            .unwrap_or_else(|_| o.binary.clone())
            .display()
            .to_string(),
    );
    module.build_id = bin.build_id().cloned();
    let mut modules = ModuleTable::default();
    let m = modules.intern(module);
    let event = EventDesc {
        name: "cpu-clock".to_string(),
        kind: EventKind::CpuClock,
        config: SamplingConfig::default(),
    };
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(o.seed);
    let mut files = Vec::new();
    let mut written = 0u64;
    for h in 0..o.hosts {
        let n = o.samples / o.hosts + u64::from(h < o.samples % o.hosts);
        // Host effect, then the cumulative weights to draw from.
        let mut cum = Vec::with_capacity(weights.len());
        let mut acc = 0.0;
        for w in &weights {
            let z: f64 = StandardNormal.sample(&mut rng);
            acc += w * (o.sigma * z).exp();
            cum.push(acc);
        }
        let mut samples = Vec::with_capacity(n as usize);
        for i in 0..n {
            let u: f64 = rng.gen::<f64>() * acc;
            let k = cum.partition_point(|&c| c <= u).min(funcs.len() - 1);
            let f = funcs[k];
            let addr = f.start.0 + rng.gen_range(0..f.size);
            samples.push(Sample {
                event: 0,
                pid: 1000 + h as u32,
                tid: 1000 + h as u32,
                time: 1_000_000 * (i + 1),
                cpu: 0,
                period: 1_000_000,
                ip: Location::new(m, addr),
                callchain: Vec::new(),
                branches: Vec::new(),
            });
        }
        let set = SampleSet {
            modules: modules.clone(),
            events: vec![event.clone()],
            samples,
            ..SampleSet::default()
        };
        let path = o.out.join(format!("host-{h:04}.ptsamp"));
        let file = std::fs::File::create(&path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        let mut w = std::io::BufWriter::new(file);
        proftrust_formats::native::write_samples(&mut w, &set)?;
        std::io::Write::flush(&mut w)
            .with_context(|| format!("cannot write {}", path.display()))?;
        written += n;
        files.push(path);
    }
    Ok(SynthSummary {
        files,
        functions: funcs
            .iter()
            .zip(&weights)
            .map(|(f, w)| (f.name.clone(), w / wsum))
            .collect(),
        samples: written,
        seed: o.seed,
    })
}

/// Runs a Ballista scheduler on `bind` until the process is stopped (`fleet scheduler`).
#[cfg(feature = "ballista")]
pub fn run_scheduler(bind: std::net::SocketAddr) -> Result<()> {
    runtime()?
        .block_on(proftrust_fleet::ballista::run_scheduler(bind))
        .map_err(fleet_err)
}

/// Runs a Ballista executor until the process is stopped (`fleet executor`).
#[cfg(feature = "ballista")]
pub fn run_executor(
    scheduler: std::net::SocketAddr,
    bind: std::net::SocketAddr,
    grpc_port: u16,
    concurrency: usize,
) -> Result<()> {
    runtime()?
        .block_on(proftrust_fleet::ballista::run_executor(
            scheduler,
            bind,
            grpc_port,
            concurrency,
        ))
        .map_err(fleet_err)
}
