//! proftrust-metrics (being written).
