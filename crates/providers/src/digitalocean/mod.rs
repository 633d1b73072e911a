//! The DigitalOcean adapter (placeholder).
