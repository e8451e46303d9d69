//! One module per subcommand.
pub mod analyze;
pub mod audit;
pub mod calibrate;
pub mod cct;
pub mod check;
pub mod correct;
pub mod export;
pub mod inspect;
pub mod paths;
pub mod read;
pub mod record;
pub mod simulate;
pub mod truth;
pub mod vpmu;
pub mod vpp;
