//! bc-api: the HTTP API, method registry, authentication and authorization. Not built yet: see the README.
