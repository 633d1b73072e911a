//! The simulator's TLS, as DOKS serves its cluster APIs: one CA per simulator, made when
//! it is first needed (rcgen on ring), a serving certificate for the loopback addresses
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
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// The simulator's certificate authority and the server identity it signed.
struct Generated {
    ca_pem: String,
    acceptor: TlsAcceptor,
}

/// The TLS material of one simulator, generated on first use and shared by every
/// listener (and every clone of the model).
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

fn generate() -> Result<Generated, String> {
    crate::install_crypto();
    let fail = |what: &str, e: rcgen::Error| format!("{what}: {e}");
    // The CA: a distinct name per simulator, so two simulators' CAs never vouch for
    // each other's servers.
    let ca_key = KeyPair::generate().map_err(|e| fail("CA key", e))?;
    let mut ca = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, format!("bc-sim cluster CA {}", ulid::Ulid::generate()));
    dn.push(DnType::OrganizationName, "bc-sim");
    ca.distinguished_name = dn;
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    validity(&mut ca);
    let ca_cert = ca.self_signed(&ca_key).map_err(|e| fail("CA certificate", e))?;
    let issuer = rcgen::Issuer::new(ca, ca_key);

    // The server: what every simulated cluster API (and the https DigitalOcean face)
    // presents.
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

    let chain = vec![cert.der().clone(), ca_cert.der().clone()];
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
    Ok(Generated { ca_pem: ca_cert.pem(), acceptor: TlsAcceptor::from(Arc::new(config)) })
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

    /// The CA certificate (PEM) that kubeconfigs carry as `certificate-authority-data`
    /// (base64 of this text) and clients trust.
    pub fn ca_pem(&self) -> &str {
        &self.generated().ca_pem
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
