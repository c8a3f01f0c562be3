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
