//! One module per subcommand.
pub mod audit;
pub mod analyze;
pub mod simulate;
pub mod calibrate;
pub mod correct;
pub mod inspect;
pub mod vpmu;
pub mod record;
pub mod read;
pub mod paths;
pub mod cct;
pub mod truth;
