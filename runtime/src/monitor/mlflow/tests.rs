//! Unit tests of the MLflow keys, values and params.

use serde_json::json;

use super::sink::{mlflow_key, mlflow_value};
use super::{MLFLOW_MAX_PARAM_VALUE_LENGTH, MlflowLogger};

#[test]
fn sink_mlflow_keys_keep_what_mlflow_takes_and_replace_the_rest() {
    assert_eq!(mlflow_key("validation_error"), "validation_error");
    assert_eq!(mlflow_key("val/top-1 err.x"), "val/top-1 err.x");
    assert_eq!(mlflow_key("b[1]:x"), "b_1__x");
    assert_eq!(mlflow_key("coût"), "co_t");
    assert_eq!(mlflow_key(""), "_");
    assert_eq!(mlflow_key(&"a".repeat(300)).len(), 250);
}

#[test]
fn sink_mlflow_non_finite_values_are_mlflow_strings() {
    assert_eq!(mlflow_value(0.25), json!(0.25));
    assert_eq!(mlflow_value(f64::NAN), json!("NaN"));
    assert_eq!(mlflow_value(f64::INFINITY), json!("Infinity"));
    assert_eq!(mlflow_value(f64::NEG_INFINITY), json!("-Infinity"));
}

#[test]
fn sink_mlflow_params_of_flattens_a_configuration() {
    #[derive(serde::Serialize)]
    struct Inner {
        rate: f64,
    }
    #[derive(serde::Serialize)]
    struct Config {
        name: String,
        epochs: u64,
        optim: Inner,
        layers: Vec<u32>,
    }
    let config = Config { name: "mlp".into(), epochs: 3, optim: Inner { rate: 0.5 }, layers: vec![64, 10] };
    let logger =
        MlflowLogger::new("http://127.0.0.1:1").unwrap().params_of(&config).unwrap().param("epochs", 4);
    let mut params: Vec<(&str, &str)> =
        logger.settings.params.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    params.sort();
    assert_eq!(params, [("epochs", "4"), ("layers", "[64,10]"), ("name", "mlp"), ("optim.rate", "0.5")]);
    let long = MlflowLogger::new("http://127.0.0.1:1").unwrap().param("x", "é".repeat(4000));
    assert!(long.settings.params[0].1.len() <= MLFLOW_MAX_PARAM_VALUE_LENGTH);
}

#[test]
fn sink_mlflow_https_needs_the_feature_and_says_so() {
    let https = MlflowLogger::new("https://mlflow.example.com");
    if cfg!(feature = "mlflow-tls") {
        assert!(https.is_ok(), "{:?}", https.err());
    } else {
        let error = https.expect_err("https without mlflow-tls").to_string();
        assert!(error.contains("mlflow-tls") && error.contains("https://mlflow.example.com"), "{error}");
    }
    // What a build without the feature says, whichever this build is.
    let error = super::tls::check_uri("https://h:1", false).expect("refused without TLS");
    assert!(
        error.contains("feature `mlflow-tls`") && error.contains("features = [\"mlflow-tls\"]"),
        "{error}"
    );
    assert_eq!(super::tls::check_uri("https://h:1", true), None);
    assert_eq!(super::tls::check_uri("http://h:1/", false), None);
    for uri in ["https://", "https:///x", "ftp://h:1", "h:5000"] {
        let error = MlflowLogger::new(uri).expect_err(uri).to_string();
        assert!(error.contains(uri), "{error}");
    }
}

#[test]
fn sink_mlflow_trust_reads_mlflows_variables() {
    use super::tls::{CERT_PATH_VAR, INSECURE_VAR, Trust};
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| pairs.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
    };
    assert_eq!(Trust::from_vars(vars(&[])), Trust::default());
    let trust = Trust::from_vars(vars(&[(CERT_PATH_VAR, "/ca.pem"), (INSECURE_VAR, "TRUE")]));
    assert_eq!(trust.cert_path.as_deref(), Some(std::path::Path::new("/ca.pem")));
    assert!(trust.insecure);
    let trust = Trust::from_vars(vars(&[(CERT_PATH_VAR, ""), (INSECURE_VAR, "1")]));
    assert_eq!(trust, Trust::default(), "an empty path is unset, only `true` turns the check off");
}

#[cfg(feature = "mlflow-tls")]
#[test]
fn sink_mlflow_a_ca_file_that_cannot_serve_is_an_error_naming_it() {
    use super::tls::{Trust, tls_config};
    let dir = std::env::temp_dir().join(format!("stoker-mlflow-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let missing = dir.join("missing.pem");
    let error =
        tls_config(&Trust { cert_path: Some(missing.clone()), insecure: false }).unwrap_err().to_string();
    assert!(error.contains(&missing.display().to_string()) && error.contains("PEM"), "{error}");
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let error =
        tls_config(&Trust { cert_path: Some(empty.clone()), insecure: false }).unwrap_err().to_string();
    assert!(
        error.contains("holds no certificate") && error.contains(&empty.display().to_string()),
        "{error}"
    );
    let both = Trust { cert_path: Some(empty), insecure: true };
    let error = tls_config(&both).unwrap_err().to_string();
    assert!(error.contains("MLFLOW_TRACKING_INSECURE_TLS") && error.contains("unset one"), "{error}");
    assert!(tls_config(&Trust::default()).is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn sink_mlflow_artifacts_go_where_mlflows_client_resolves_them() {
    use super::artifacts::{artifact_base, encode};
    let tracking = "http://127.0.0.1:5000";
    let proxy = "http://127.0.0.1:5000/api/2.0/mlflow-artifacts/artifacts/1/abc/artifacts";
    assert_eq!(artifact_base(tracking, "mlflow-artifacts:/1/abc/artifacts").as_deref(), Some(proxy));
    assert_eq!(
        artifact_base("https://t:1", "mlflow-artifacts://store:8000/1/abc/artifacts").as_deref(),
        Some("https://store:8000/api/2.0/mlflow-artifacts/artifacts/1/abc/artifacts")
    );
    assert_eq!(artifact_base(tracking, "http://files/x/").as_deref(), Some("http://files/x"));
    assert_eq!(artifact_base(tracking, "s3://bucket/1/abc/artifacts"), None);
    assert_eq!(artifact_base(tracking, "/tmp/mlruns/1/abc/artifacts"), None);
    assert_eq!(encode("min-val loss%?#é"), "min-val%20loss%25%3F%23%C3%A9");
}
