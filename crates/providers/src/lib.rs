//! bc-providers: provider adapters (DigitalOcean over reqwest, cluster access over kube).
