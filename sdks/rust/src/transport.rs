//! The HTTP/JSON binding of the worker protocol: one blocking `ureq` agent
//! shared by every thread of a run, JSON in and out, and the runtime's error
//! envelope (`{"error": {"code", "message"}}`) turned into [`ApiError`].

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use ureq::tls::{Certificate, ClientCert, PemItem, PrivateKey, RootCerts, TlsConfig};
use ureq::Agent;

use crate::error::ApiError;

pub(crate) const REGISTER: &str = "/v1/workers/register";
pub(crate) const POLL: &str = "/v1/workers/poll";
pub(crate) const HEARTBEAT: &str = "/v1/workers/heartbeat";
pub(crate) const UNREGISTER: &str = "/v1/workers/unregister";
pub(crate) const COMPLETE: &str = "/v1/tasks/complete";
pub(crate) const FAIL: &str = "/v1/tasks/fail";

/// The bound of every call but the long poll, whose bound is its wait plus
/// this.
pub(crate) const CALL_TIMEOUT: Duration = Duration::from_secs(15);

const MAX_ERROR_CHARS: usize = 2000;

pub(crate) struct Client {
    agent: Agent,
    server: String,
    authorization: Option<String>,
}

/// What the builder collected for TLS.
#[derive(Clone, Default)]
pub(crate) struct TlsMaterial {
    pub(crate) ca_pem: Option<Vec<u8>>,
    pub(crate) identity: Option<(Vec<u8>, Vec<u8>)>,
}

impl Client {
    pub(crate) fn new(
        server: &str,
        token: Option<&str>,
        tls: &TlsMaterial,
        connections: usize,
    ) -> Result<Client, ApiError> {
        let agent: Agent = Agent::config_builder()
            .http_status_as_error(false)
            .user_agent(format!("orbit-rust/{}", crate::VERSION))
            .max_idle_connections_per_host(connections)
            .tls_config(tls_config(tls)?)
            .build()
            .into();
        Ok(Client {
            agent,
            server: server.trim_end_matches('/').to_owned(),
            authorization: token.map(|t| format!("Bearer {t}")),
        })
    }

    /// POSTs `body` to `path`: `Ok(None)` for 204, `Ok(Some(answer))` for
    /// another 2xx, and the runtime's refusal or the failure to reach it as
    /// an [`ApiError`].
    pub(crate) fn post(
        &self,
        path: &str,
        body: &Value,
        timeout: Duration,
    ) -> Result<Option<Value>, ApiError> {
        let mut request = self
            .agent
            .post(format!("{}{}", self.server, path))
            .config()
            .timeout_global(Some(timeout))
            .build()
            .header("content-type", "application/json")
            .header("accept", "application/json");
        if let Some(auth) = &self.authorization {
            request = request.header("authorization", auth);
        }
        let data = serde_json::to_vec(body).expect("a JSON value always serializes");
        let mut response = request.send(&data[..]).map_err(|e| {
            ApiError::new(
                0,
                "CONNECTION",
                format!("cannot reach the runtime at {}: {e}", self.server),
            )
        })?;
        let status = response.status().as_u16();
        let text = response.body_mut().read_to_string().map_err(|e| {
            ApiError::new(
                0,
                "CONNECTION",
                format!("the runtime's answer broke off: {e}"),
            )
        })?;
        match status {
            204 => Ok(None),
            200..=299 => serde_json::from_str(&text).map(Some).map_err(|e| {
                ApiError::new(status, "HTTP_ERROR", format!("unreadable answer: {e}"))
            }),
            _ => Err(error_from(status, &text)),
        }
    }
}

fn error_from(status: u16, text: &str) -> ApiError {
    if let Ok(Value::Object(body)) = serde_json::from_str::<Value>(text) {
        if let Some(Value::Object(error)) = body.get("error") {
            if let Some(Value::String(code)) = error.get("code") {
                let message = match error.get("message") {
                    Some(Value::String(m)) => m.clone(),
                    _ => String::new(),
                };
                return ApiError::new(status, code, message);
            }
        }
    }
    let message = match text.trim() {
        "" => format!("HTTP status {status}"),
        other => clip(other),
    };
    ApiError::new(status, "HTTP_ERROR", message)
}

/// Cuts long texts (an error page, a message) so a log line stays a line.
pub(crate) fn clip(text: &str) -> String {
    if text.chars().count() <= MAX_ERROR_CHARS {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(MAX_ERROR_CHARS - 1).collect();
    cut.push('…');
    cut
}

fn tls_error(what: &str, detail: impl std::fmt::Display) -> ApiError {
    ApiError::new(0, "CONNECTION", format!("{what}: {detail}"))
}

fn tls_config(tls: &TlsMaterial) -> Result<TlsConfig, ApiError> {
    let mut builder = TlsConfig::builder();
    if let Some(pem) = &tls.ca_pem {
        let certs = certificates(pem).map_err(|e| tls_error("invalid CA certificate PEM", e))?;
        if certs.is_empty() {
            return Err(tls_error(
                "invalid CA certificate PEM",
                "it holds no certificate",
            ));
        }
        builder = builder.root_certs(RootCerts::Specific(Arc::new(certs)));
    }
    if let Some((cert_pem, key_pem)) = &tls.identity {
        let chain =
            certificates(cert_pem).map_err(|e| tls_error("invalid client certificate PEM", e))?;
        if chain.is_empty() {
            return Err(tls_error(
                "invalid client certificate PEM",
                "it holds no certificate",
            ));
        }
        let key =
            PrivateKey::from_pem(key_pem).map_err(|e| tls_error("invalid client key PEM", e))?;
        builder = builder.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
    }
    Ok(builder.build())
}

fn certificates(pem: &[u8]) -> Result<Vec<Certificate<'static>>, ureq::Error> {
    let mut certs = Vec::new();
    for item in ureq::tls::parse_pem(pem) {
        if let PemItem::Certificate(cert) = item? {
            certs.push(cert);
        }
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_envelopes_are_decoded() {
        let e = error_from(
            404,
            r#"{"error": {"code": "UNKNOWN_SESSION", "message": "gone"}}"#,
        );
        assert_eq!(e, ApiError::new(404, "UNKNOWN_SESSION", "gone"));
        let e = error_from(502, "<html>bad gateway</html>");
        assert_eq!(e.code, "HTTP_ERROR");
        assert_eq!(e.message, "<html>bad gateway</html>");
        assert_eq!(error_from(503, "").message, "HTTP status 503");
    }

    #[test]
    fn bad_pem_is_refused_with_a_clear_error() {
        let tls = TlsMaterial {
            ca_pem: Some(b"not a certificate".to_vec()),
            identity: None,
        };
        let err = Client::new("http://127.0.0.1:1", None, &tls, 1)
            .err()
            .unwrap();
        assert!(err.message.contains("CA certificate"), "{err}");
    }

    #[test]
    fn long_texts_are_clipped() {
        let long = "x".repeat(5000);
        assert_eq!(clip(&long).chars().count(), MAX_ERROR_CHARS);
        assert_eq!(clip("short"), "short");
    }
}
