//! Unit tests of the command templates.

use super::template::Template;
use crate::error::Result;

fn template(command: &str, names: &[&str]) -> Result<Template> {
    Template::parse("test", command.into(), names.iter().map(|n| n.to_string()).collect())
}

#[test]
fn placeholders_are_replaced_like_python_format() {
    let t = template("echo {a} {b:.2f} {{x}} {epoch_num}/{global_step} {a}", &["a", "b"]).unwrap();
    assert_eq!(t.render(&[0.25, 1.0 / 3.0], 2, 40), "echo 0.25 0.33 {x} 2/40 0.25");
    assert_eq!(t.render(&[1.0, f64::NAN], 1, 1), "echo 1.0 NaN {x} 1/1 1.0");
}

#[test]
fn a_watched_name_takes_precedence_over_the_counters() {
    let t = template("{epoch_num}", &["epoch_num"]).unwrap();
    assert_eq!(t.render(&[7.5], 1, 1), "7.5");
}

#[test]
fn bad_templates_are_errors_naming_the_problem() {
    let error = |c: &str, n: &[&str]| template(c, n).expect_err("an error").to_string();
    assert!(error("echo {c}", &["a"]).contains("`{c}` names none of the scalars `a`"));
    assert!(error("echo {a", &["a"]).contains("unclosed"));
    assert!(error("echo a}", &["a"]).contains("single `}`"));
    assert!(error("echo {a:>5}", &["a"]).contains("only `{name}` and `{name:.Nf}`"));
    assert!(error("echo", &[]).contains("no scalar names"));
    assert!(error("echo {a}", &["a", "a"]).contains("`a` is given twice"));
    assert!(error("echo {a}", &["a", ""]).contains("empty"));
}
