//! The rustls server configuration: the server's chain and key (PEM), and
//! with a client CA, certificates required and checked against it and its
//! CRL (so one client's key can be revoked). Built again on reload, so a
//! renewed certificate or an updated CRL takes effect without a restart.

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, CertificateRevocationListDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Why the TLS files were refused, as one sentence.
#[derive(thiserror::Error, Debug)]
pub enum TlsError {
    #[error("cannot read {what} {}: {message}", path.display())]
    File { what: &'static str, path: PathBuf, message: String },
    #[error("{what} {} holds no PEM {kind}", path.display())]
    Empty { what: &'static str, path: PathBuf, kind: &'static str },
    #[error("TLS setup failed: {0}")]
    Rustls(String),
}

fn file_error(what: &'static str, path: &Path, e: impl std::fmt::Display) -> TlsError {
    TlsError::File { what, path: path.to_path_buf(), message: e.to_string() }
}

fn certs(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(what, path, e))?
        .collect::<Result<_, _>>()
        .map_err(|e| file_error(what, path, e))?;
    if certs.is_empty() {
        return Err(TlsError::Empty { what, path: path.to_path_buf(), kind: "certificate" });
    }
    Ok(certs)
}

/// Builds the server configuration from the files (HTTP/1.1 only).
pub fn server_config(files: &crate::TlsFiles) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = certs("the certificate (--tls-cert)", &files.cert)?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| file_error("the key (--tls-key)", &files.key, e))?;
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Rustls(e.to_string()))?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in certs("the client CA (--client-ca)", ca)? {
                roots.add(c).map_err(|e| file_error("the client CA (--client-ca)", ca, e))?;
            }
            let mut verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            if let Some(crl) = &files.client_crl {
                let what = "the CRL (--client-crl)";
                let crls: Vec<_> = CertificateRevocationListDer::pem_file_iter(crl)
                    .map_err(|e| file_error(what, crl, e))?
                    .collect::<Result<_, _>>()
                    .map_err(|e| file_error(what, crl, e))?;
                if crls.is_empty() {
                    return Err(TlsError::Empty { what, path: crl.clone(), kind: "X509 CRL" });
                }
                verifier = verifier.with_crls(crls);
            }
            builder.with_client_cert_verifier(verifier.build().map_err(|e| TlsError::Rustls(e.to_string()))?)
        }
    };
    let mut cfg = builder
        .with_single_cert(chain, key)
        .map_err(|e| TlsError::Rustls(format!("the certificate and key do not go together: {e}")))?;
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// The subject (CN, else the whole distinguished name) of a client
/// certificate, for the log.
pub(crate) fn subject(cert: &CertificateDer<'_>) -> String {
    match x509_parser::parse_x509_certificate(cert.as_ref()) {
        Ok((_, c)) => {
            let cn = c.subject().iter_common_name().next().and_then(|a| a.as_str().ok().map(str::to_string));
            cn.unwrap_or_else(|| c.subject().to_string())
        }
        Err(_) => "(unparsable certificate)".into(),
    }
}
