//! bc-sim: one simulated cloud (DigitalOcean API, per-cluster Kubernetes API, simulated bcd).
