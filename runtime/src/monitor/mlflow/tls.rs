//! `https://` tracking servers (feature `mlflow-tls`): which certificates the sink trusts, from
//! MLflow's own environment variables or the builder, and the error when the feature is off.

use std::path::PathBuf;

use crate::error::Result;

/// The variable MLflow's Python client reads for a CA bundle to trust instead of its default
/// roots (requests' `verify=`).
pub(super) const CERT_PATH_VAR: &str = "MLFLOW_TRACKING_SERVER_CERT_PATH";

/// The variable MLflow's Python client reads to skip the server's certificate check.
pub(super) const INSECURE_VAR: &str = "MLFLOW_TRACKING_INSECURE_TLS";

/// How the sink checks an `https://` server's certificate.
#[derive(Debug, Clone, Default, PartialEq)]
pub(in crate::monitor) struct Trust {
    /// A PEM file of the certificates to trust, in place of Mozilla's roots.
    pub(super) cert_path: Option<PathBuf>,
    /// No check at all (`MLFLOW_TRACKING_INSECURE_TLS=true`).
    pub(super) insecure: bool,
}

impl Trust {
    /// From the process's environment.
    pub(in crate::monitor) fn from_env() -> Trust {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// From the variables `var` gives: an empty path counts as unset, and only `true` (any
    /// case) turns the check off, as MLflow's client reads them.
    pub(super) fn from_vars(var: impl Fn(&str) -> Option<String>) -> Trust {
        Trust {
            cert_path: var(CERT_PATH_VAR).filter(|v| !v.is_empty()).map(PathBuf::from),
            insecure: var(INSECURE_VAR).is_some_and(|v| v.eq_ignore_ascii_case("true")),
        }
    }
}

/// The error for a tracking URI a build cannot reach, or `None` for one it can: `http://`, and
/// `https://` when it `has_tls` (the feature `mlflow-tls`).
pub(in crate::monitor) fn check_uri(uri: &str, has_tls: bool) -> Option<String> {
    let (scheme_ok, rest) = match (uri.strip_prefix("http://"), uri.strip_prefix("https://")) {
        (Some(rest), _) => (true, rest),
        (None, Some(rest)) => (has_tls, rest),
        (None, None) => return Some("expected http://host:port or https://host[:port]".into()),
    };
    if !scheme_ok {
        return Some(
            "https needs TLS, which this build of burn-stoker leaves out: turn on the feature `mlflow-tls` \
             (burn-stoker = { ..., features = [\"mlflow-tls\"] }), or give the http:// address of a local \
             forwarder that adds it (see MlflowLogger's docs)"
                .into(),
        );
    }
    if rest.split('/').next().unwrap_or_default().is_empty() {
        return Some("the host is missing: expected http://host:port or https://host[:port]".into());
    }
    None
}

/// ureq's TLS settings for `trust`, the certificates read now: an error naming the file and the
/// variable when it cannot be read or holds no certificate, or when both variables are set.
#[cfg(feature = "mlflow-tls")]
pub(super) fn tls_config(trust: &Trust) -> Result<ureq::tls::TlsConfig> {
    use std::sync::Arc;
    use ureq::tls::{PemItem, RootCerts, TlsConfig, TlsProvider};

    use crate::error::Error;

    let builder = TlsConfig::builder().provider(TlsProvider::Rustls);
    if trust.insecure {
        if let Some(path) = &trust.cert_path {
            return Err(Error::invalid(format!(
                "MLflow: {INSECURE_VAR}=true and a server certificate ({}) are both set: the check is either \
                 off or made against the certificate; unset one of them (MLflow's own client refuses the pair too)",
                path.display()
            )));
        }
        crate::logging::warn!(
            "MLflow: {INSECURE_VAR}=true: the tracking server's certificate is not checked, anyone between \
             here and it can read the credentials and the metrics"
        );
        return Ok(builder.disable_verification(true).build());
    }
    let Some(path) = &trust.cert_path else {
        return Ok(builder.root_certs(RootCerts::WebPki).build());
    };
    let pem = std::fs::read(path).map_err(|e| {
        Error::context(
            format!(
                "MLflow: reading the tracking server's CA certificate {} ({CERT_PATH_VAR} or \
                 MlflowLogger::server_cert): give the path of a PEM file",
                path.display()
            ),
            e,
        )
    })?;
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(&pem) {
        match item {
            Ok(PemItem::Certificate(cert)) => certs.push(cert),
            Ok(_) => {}
            Err(e) => {
                return Err(Error::context(
                    format!("MLflow: the CA certificate file {} is not valid PEM", path.display()),
                    e,
                ));
            }
        }
    }
    if certs.is_empty() {
        return Err(Error::invalid(format!(
            "MLflow: the CA certificate file {} holds no certificate (expected PEM, `-----BEGIN CERTIFICATE-----`)",
            path.display()
        )));
    }
    Ok(builder.root_certs(RootCerts::Specific(Arc::new(certs))).build())
}

/// Without the feature `mlflow-tls` there is nothing to set: [`check_uri`] refused `https://`.
#[cfg(not(feature = "mlflow-tls"))]
pub(super) fn tls_config(trust: &Trust) -> Result<()> {
    // Read from the environment all the same, for an `http://` server they do not concern.
    let _ = (&trust.cert_path, trust.insecure);
    Ok(())
}

/// The sink's agent: MLflow's error bodies read rather than stopped at the status, `timeout`
/// for every request unless it sets its own, TLS as `trust` says with the feature.
pub(in crate::monitor) fn agent(trust: &Trust, timeout: std::time::Duration) -> Result<ureq::Agent> {
    let config = ureq::Agent::config_builder().http_status_as_error(false).timeout_global(Some(timeout));
    #[cfg(feature = "mlflow-tls")]
    let config = config.tls_config(tls_config(trust)?);
    #[cfg(not(feature = "mlflow-tls"))]
    tls_config(trust)?;
    Ok(config.build().into())
}
