//! `AeadSecretBox`: the `SecretBox` port with ChaCha20-Poly1305.
//!
//! Invariant: every seal uses a fresh random 96-bit nonce from the operating system and
//! binds the caller's `aad` (the row id), so equal plaintexts never give equal
//! ciphertexts and a ciphertext moved to another row does not open. Output layout:
//! `nonce (12 bytes) || ciphertext+tag`.

use base64::Engine;
use bc_domain::ports::{SecretBox, SecretError};
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{ChaCha20Poly1305, Key, Nonce};
use rand::TryRng;

/// Nonce length of ChaCha20-Poly1305.
const NONCE_LEN: usize = 12;
/// Key length of ChaCha20-Poly1305.
const KEY_LEN: usize = 32;

/// ChaCha20-Poly1305 over byte strings, with one 32-byte key.
pub struct AeadSecretBox {
    cipher: ChaCha20Poly1305,
}

impl std::fmt::Debug for AeadSecretBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AeadSecretBox([key redacted])")
    }
}

impl AeadSecretBox {
    /// A box over a raw 32-byte key.
    pub fn new(key: &[u8]) -> Result<Self, SecretError> {
        if key.len() != KEY_LEN {
            return Err(SecretError::Config(format!(
                "the key must be {KEY_LEN} bytes, not {}",
                key.len()
            )));
        }
        Ok(Self { cipher: ChaCha20Poly1305::new(Key::from_slice(key)) })
    }

    /// A box over a standard-base64 32-byte key (how operators configure it).
    pub fn from_base64_key(key: &str) -> Result<Self, SecretError> {
        let raw = base64::engine::general_purpose::STANDARD
            .decode(key.trim())
            .map_err(|_| SecretError::Config("the key is not valid base64".into()))?;
        Self::new(&raw)
    }

    /// A fresh random key, base64-encoded (for `bc-api dev` and tests).
    pub fn generate_base64_key() -> Result<String, SecretError> {
        let mut key = [0u8; KEY_LEN];
        rand::rngs::SysRng
            .try_fill_bytes(&mut key)
            .map_err(|e| SecretError::Config(format!("no randomness: {e}")))?;
        Ok(base64::engine::general_purpose::STANDARD.encode(key))
    }
}

impl SecretBox for AeadSecretBox {
    fn seal(&self, plaintext: &[u8], aad: &[u8]) -> Result<Vec<u8>, SecretError> {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rngs::SysRng
            .try_fill_bytes(&mut nonce)
            .map_err(|e| SecretError::Config(format!("no randomness: {e}")))?;
        let sealed = self
            .cipher
            .encrypt(Nonce::from_slice(&nonce), Payload { msg: plaintext, aad })
            .map_err(|_| SecretError::Config("sealing failed".into()))?;
        let mut out = Vec::with_capacity(NONCE_LEN + sealed.len());
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    fn open(&self, sealed: &[u8], aad: &[u8]) -> Result<Vec<u8>, SecretError> {
        if sealed.len() < NONCE_LEN {
            return Err(SecretError::Open);
        }
        let (nonce, body) = sealed.split_at(NONCE_LEN);
        self.cipher
            .decrypt(Nonce::from_slice(nonce), Payload { msg: body, aad })
            .map_err(|_| SecretError::Open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn boxed() -> AeadSecretBox {
        AeadSecretBox::from_base64_key(&AeadSecretBox::generate_base64_key().unwrap()).unwrap()
    }

    const SECRET: &[u8] = b"{\"token\":\"dop_v1_0123456789abcdef\"}";

    #[test]
    fn round_trips() {
        let b = boxed();
        let sealed = b.seal(SECRET, b"acct_1").unwrap();
        assert_eq!(b.open(&sealed, b"acct_1").unwrap(), SECRET);
    }

    #[test]
    fn another_row_cannot_open_it() {
        let b = boxed();
        let sealed = b.seal(SECRET, b"acct_1").unwrap();
        assert_eq!(b.open(&sealed, b"acct_2"), Err(SecretError::Open));
    }

    #[test]
    fn another_key_cannot_open_it() {
        let sealed = boxed().seal(SECRET, b"acct_1").unwrap();
        assert_eq!(boxed().open(&sealed, b"acct_1"), Err(SecretError::Open));
    }

    #[test]
    fn tampering_is_detected() {
        let b = boxed();
        let sealed = b.seal(SECRET, b"acct_1").unwrap();
        for i in [0, NONCE_LEN, sealed.len() - 1] {
            let mut t = sealed.clone();
            t[i] ^= 0x01;
            assert_eq!(b.open(&t, b"acct_1"), Err(SecretError::Open), "byte {i}");
        }
        assert_eq!(b.open(&sealed[..NONCE_LEN - 1], b"acct_1"), Err(SecretError::Open));
    }

    #[test]
    fn ciphertext_hides_the_plaintext_and_never_repeats() {
        let b = boxed();
        let one = b.seal(SECRET, b"acct_1").unwrap();
        let two = b.seal(SECRET, b"acct_1").unwrap();
        assert_ne!(one, two, "a fresh nonce per seal");
        for sealed in [&one, &two] {
            assert!(!sealed.windows(8).any(|w| SECRET.windows(8).any(|p| p == w)));
        }
    }

    #[test]
    fn refuses_bad_keys() {
        assert!(matches!(AeadSecretBox::new(&[0u8; 31]), Err(SecretError::Config(_))));
        assert!(matches!(
            AeadSecretBox::from_base64_key("not base64!"),
            Err(SecretError::Config(_))
        ));
        assert!(!format!("{:?}", boxed()).contains("key:"));
    }
}
