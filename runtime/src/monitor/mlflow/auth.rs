//! The tracking server's credentials, from MLflow's own environment variables.

/// The `Authorization` header the sink sends with every request: basic auth from
/// `MLFLOW_TRACKING_USERNAME` and `MLFLOW_TRACKING_PASSWORD` when both are set, else
/// `Bearer <MLFLOW_TRACKING_TOKEN>` when that is set (MLflow's client decides in that order).
/// Its `Debug` hides the secret.
#[derive(Clone, PartialEq)]
pub(in crate::monitor) struct Authorization(String);

impl std::fmt::Debug for Authorization {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = self.0.split(' ').next().unwrap_or_default();
        write!(f, "Authorization({scheme} <redacted>)")
    }
}

impl Authorization {
    /// From the process's environment; `None` when no credentials are set (empty values count
    /// as unset).
    pub(super) fn from_env() -> Option<Authorization> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// From the variables `var` gives.
    fn from_vars(var: impl Fn(&str) -> Option<String>) -> Option<Authorization> {
        let var = |name: &str| var(name).filter(|v| !v.is_empty());
        if let (Some(user), Some(password)) =
            (var("MLFLOW_TRACKING_USERNAME"), var("MLFLOW_TRACKING_PASSWORD"))
        {
            return Some(Authorization(format!("Basic {}", base64(format!("{user}:{password}").as_bytes()))));
        }
        var("MLFLOW_TRACKING_TOKEN").map(|token| Authorization(format!("Bearer {token}")))
    }

    /// The header's value as it is given (Comet's `Authorization: <API key>`).
    #[cfg_attr(not(feature = "comet"), allow(dead_code))]
    pub(in crate::monitor) fn raw(value: String) -> Authorization {
        Authorization(value)
    }

    /// The header's value.
    pub(super) fn header(&self) -> &str {
        &self.0
    }
}

/// Standard base64 with padding (RFC 4648), as HTTP basic auth encodes `user:password`.
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[(n >> (18 - 6 * i)) as usize & 63]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_is_rfc_4648s() {
        // RFC 4648's test vectors.
        let cases = [("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg==")];
        for (plain, encoded) in cases.into_iter().chain([("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy")]) {
            assert_eq!(base64(plain.as_bytes()), encoded, "{plain}");
        }
    }

    #[test]
    fn credentials_come_in_mlflows_order_and_stay_out_of_debug() {
        let vars = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
        };
        assert_eq!(Authorization::from_vars(vars(&[])), None);
        let token = Authorization::from_vars(vars(&[("MLFLOW_TRACKING_TOKEN", "t0k")])).unwrap();
        assert_eq!(token.header(), "Bearer t0k");
        assert_eq!(format!("{token:?}"), "Authorization(Bearer <redacted>)");
        const BOTH: &[(&str, &str)] = &[
            ("MLFLOW_TRACKING_TOKEN", "t0k"),
            ("MLFLOW_TRACKING_USERNAME", "user"),
            ("MLFLOW_TRACKING_PASSWORD", "pass"),
        ];
        let basic = Authorization::from_vars(vars(BOTH)).unwrap();
        assert_eq!(basic.header(), "Basic dXNlcjpwYXNz");
        assert_eq!(Authorization::from_vars(vars(&[("MLFLOW_TRACKING_TOKEN", "")])), None);
        const USER_ONLY: &[(&str, &str)] =
            &[("MLFLOW_TRACKING_USERNAME", "user"), ("MLFLOW_TRACKING_TOKEN", "t0k")];
        assert_eq!(Authorization::from_vars(vars(USER_ONLY)).unwrap().header(), "Bearer t0k");
    }
}
