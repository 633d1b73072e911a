//! The simulator's TLS, as DOKS serves its cluster APIs: one CA per simulator, made when
//! it is first needed (rcgen on ring) or restored from an earlier run, a serving certificate for the loopback addresses
//! signed by it, and an acceptor that axum serves through ([`TlsListener`]). Kubeconfigs
//! carry the CA as `certificate-authority-data`, so kubectl, kube-rs and the Python
//! client verify the server as they would a real cluster.
//!
//! Invariant: ring is the only crypto provider (no aws-lc, no OpenSSL); the serving
//! certificate names exactly the addresses the listeners bind (127.0.0.1, ::1,
//! `localhost`); a failed handshake drops that connection and nothing else.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use rustls::pki_types::pem::PemObject as _;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// The simulator's certificate authority and the server identity it signed.
struct Generated {
    ca: CaMaterial,
    acceptor: TlsAcceptor,
}

/// The simulator's CA as it is kept across restarts (crate::persist): its name, its
/// certificate and its private key, all PEM. Kubeconfigs handed out before a restart
/// trust this certificate, so a simulator restored with it serves them again.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CaMaterial {
    /// The CA's common name (its distinguished name, which signed certificates name).
    pub name: String,
    /// The CA certificate (PEM).
    pub cert_pem: String,
    /// The CA's private key (PKCS#8 PEM): a secret, kept only in the private state file.
    pub key_pem: String,
}

impl std::fmt::Debug for CaMaterial {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("CaMaterial").field("name", &self.name).finish_non_exhaustive()
    }
}

/// The TLS material of one simulator, generated on first use (or restored) and shared
/// by every listener (and every clone of the model).
#[derive(Default)]
pub struct SimTls {
    generated: OnceLock<Result<Generated, String>>,
}

impl std::fmt::Debug for SimTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimTls").field("generated", &self.generated.get().is_some()).finish()
    }
}

/// How long the certificates are valid around the moment they are made: clients check
/// them against the wall clock, whatever clock drives the model.
const BACKDATE: Duration = Duration::from_secs(3600);
const VALIDITY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

fn validity(params: &mut CertificateParams) {
    let now = time::OffsetDateTime::now_utc();
    params.not_before = now - BACKDATE;
    params.not_after = now + VALIDITY;
}

fn fail(what: &str, e: rcgen::Error) -> String {
    format!("{what}: {e}")
}

/// The CA's parameters: its name, and what it may sign.
fn ca_params(name: &str) -> CertificateParams {
    let mut ca = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, name);
    dn.push(DnType::OrganizationName, "bc-sim");
    ca.distinguished_name = dn;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    ca
}

fn generate() -> Result<Generated, String> {
    crate::install_crypto();
    // A distinct name per simulator, so two simulators' CAs never vouch for each other's
    // servers.
    let name = format!("bc-sim cluster CA {}", ulid::Ulid::generate());
    let ca_key = KeyPair::generate().map_err(|e| fail("CA key", e))?;
    let mut ca = ca_params(&name);
    validity(&mut ca);
    let ca_cert = ca.self_signed(&ca_key).map_err(|e| fail("CA certificate", e))?;
    serve_with(CaMaterial { name, cert_pem: ca_cert.pem(), key_pem: ca_key.serialize_pem() })
}

/// The server identity every simulated cluster API (and the https DigitalOcean face)
/// presents, signed by `ca`.
fn serve_with(ca: CaMaterial) -> Result<Generated, String> {
    crate::install_crypto();
    let ca_key = KeyPair::from_pem(&ca.key_pem).map_err(|e| fail("CA key", e))?;
    let ca_der = rustls::pki_types::CertificateDer::from_pem_slice(ca.cert_pem.as_bytes())
        .map_err(|e| format!("CA certificate: {e}"))?;
    let issuer = rcgen::Issuer::new(ca_params(&ca.name), ca_key);

    let key = KeyPair::generate().map_err(|e| fail("server key", e))?;
    let mut server = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, "kube-apiserver");
    server.distinguished_name = dn;
    server.subject_alt_names = vec![
        SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)),
        SanType::IpAddress(IpAddr::V6(Ipv6Addr::LOCALHOST)),
        SanType::DnsName("localhost".try_into().map_err(|e| fail("server name", e))?),
    ];
    server.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
    server.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    validity(&mut server);
    let cert = server.signed_by(&key, &issuer).map_err(|e| fail("server certificate", e))?;

    let chain = vec![cert.der().clone(), ca_der];
    let private = rustls::pki_types::PrivateKeyDer::try_from(key.serialize_der())
        .map_err(|e| format!("server key: {e}"))?;
    let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| format!("TLS versions: {e}"))?
    .with_no_client_auth()
    .with_single_cert(chain, private)
    .map_err(|e| format!("TLS server config: {e}"))?;
    // HTTP/1.1 only: watches stream as chunked responses, as every client expects.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Generated { ca, acceptor: TlsAcceptor::from(Arc::new(config)) })
}

impl SimTls {
    fn generated(&self) -> &Generated {
        match self.generated.get_or_init(generate) {
            Ok(g) => g,
            // Generating a key pair and two certificates with ring cannot fail short of a
            // broken build; there is no simulator without them.
            Err(e) => panic!("bc-sim cannot make its TLS certificates: {e}"),
        }
    }

    /// TLS that serves with the CA `ca` (kept from an earlier run) instead of a new one;
    /// an error names what of it does not parse.
    pub fn with_ca(ca: CaMaterial) -> Result<Self, String> {
        let tls = Self::default();
        let _ = tls.generated.set(Ok(serve_with(ca)?));
        Ok(tls)
    }

    /// The CA, to keep (its private key included).
    pub fn ca(&self) -> &CaMaterial {
        &self.generated().ca
    }

    /// The CA certificate (PEM) that kubeconfigs carry as `certificate-authority-data`
    /// (base64 of this text) and clients trust.
    pub fn ca_pem(&self) -> &str {
        &self.generated().ca.cert_pem
    }

    /// The CA as `certificate-authority-data`: base64 of the PEM.
    pub fn ca_data(&self) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(self.ca_pem())
    }

    /// Binds a TLS listener on `addr` (loopback in tests): connections are accepted and
    /// their handshakes run in a background task that stops with the listener.
    pub fn listen(&self, listener: std::net::TcpListener) -> std::io::Result<TlsListener> {
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let acceptor = self.generated().acceptor.clone();
        let (tx, rx) = mpsc::channel(64);
        let task = tokio::spawn(async move {
            let Ok(listener) = TcpListener::from_std(listener) else { return };
            loop {
                let Ok((tcp, peer)) = listener.accept().await else {
                    // Out of file descriptors, say: back off rather than spin.
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    // A client that never finishes its handshake holds only this task.
                    let handshake =
                        tokio::time::timeout(Duration::from_secs(10), acceptor.accept(tcp)).await;
                    if let Ok(Ok(stream)) = handshake {
                        let _ = tx.send((stream, peer)).await;
                    }
                });
            }
        });
        Ok(TlsListener { rx, local, task })
    }
}

/// A TLS listener axum serves through (`axum::serve(listener, router)`).
pub struct TlsListener {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(conn) => conn,
            // The accept task is gone (aborted): no connection will ever come.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
