//! The `SecretBox` port: authenticated encryption of provider credentials at rest.
//!
//! Invariant: `open(seal(x, aad), aad) == x`, and opening with another `aad` (another
//! row's id) fails, so a ciphertext copied between rows is useless.

/// Why sealing or opening failed. Carries no plaintext.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretError {
    /// The ciphertext is corrupt, was sealed with another key, or for another row.
    #[error("secret could not be opened (wrong key, wrong row, or corrupt)")]
    Open,
    /// The key is not 32 bytes, or sealing failed.
    #[error("secret box misconfigured: {0}")]
    Config(String),
}

/// AEAD over byte strings.
pub trait SecretBox: Send + Sync {
    /// Encrypts `plaintext`, binding it to `aad` (e.g. the account id).
    fn seal(&self, plaintext: &[u8], aad: &[u8]) -> Result<Vec<u8>, SecretError>;
    /// Decrypts what `seal` produced with the same `aad`.
    fn open(&self, sealed: &[u8], aad: &[u8]) -> Result<Vec<u8>, SecretError>;
}
