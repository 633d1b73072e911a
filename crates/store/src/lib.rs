//! bc-store: the sea-orm adapter of the bc-domain store ports (SQLite and PostgreSQL).
