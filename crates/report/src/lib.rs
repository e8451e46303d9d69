//! proftrust-report (being written).
