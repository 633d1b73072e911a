//! bc-reconcile: the reconcilers and their runtime. Not built yet: see the README.
