//! A command with `{name}` placeholders, parsed once and rendered with the values.

use std::iter::Peekable;
use std::str::Chars;

use crate::error::{Error, Result};

/// One piece of a command template.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    /// Text copied as it is.
    Text(String),
    /// The value of `names[index]`, with a fixed number of decimals or in its shortest form.
    Value { index: usize, decimals: Option<usize> },
    /// The epoch the values were put in.
    Epoch,
    /// The global step the values were put at.
    Step,
}

/// A command with `{name}` placeholders, parsed once.
#[derive(Debug, Clone)]
pub(super) struct Template {
    pub(super) owner: &'static str,
    command: String,
    pub(super) names: Vec<String>,
    pieces: Vec<Piece>,
}

impl Template {
    /// Parse `command`: `{name}` (a name of `names`, or `epoch_num` / `global_step`),
    /// `{name:.Nf}` (N decimals), `{{` and `}}` (literal braces), as Python's `str.format`.
    pub(super) fn parse(owner: &'static str, command: String, names: Vec<String>) -> Result<Template> {
        check_names(owner, &command, &names)?;
        let bad = |what: String| Error::invalid(format!("{owner}: {what} in command `{command}`"));
        let mut pieces = Vec::new();
        let mut text = String::new();
        let mut chars = command.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    text.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    text.push('}');
                }
                '}' => return Err(bad("a single `}` (write `}}` for a literal brace)".into())),
                '{' => {
                    let field = placeholder(&mut chars).map_err(&bad)?;
                    let piece = piece_of(&field, &names).map_err(&bad)?;
                    if !text.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut text)));
                    }
                    pieces.push(piece);
                }
                c => text.push(c),
            }
        }
        if !text.is_empty() {
            pieces.push(Piece::Text(text));
        }
        Ok(Template { owner, command, names, pieces })
    }

    /// The command with `values` (one per name, in order) in place of the placeholders.
    pub(super) fn render(&self, values: &[f64], epoch_num: u64, global_step: u64) -> String {
        let mut out = String::with_capacity(self.command.len() + 16 * values.len());
        for piece in &self.pieces {
            match piece {
                Piece::Text(text) => out.push_str(text),
                Piece::Value { index, decimals: None } => out.push_str(&format!("{:?}", values[*index])),
                Piece::Value { index, decimals: Some(n) } => out.push_str(&format!("{:.n$}", values[*index])),
                Piece::Epoch => out.push_str(&epoch_num.to_string()),
                Piece::Step => out.push_str(&global_step.to_string()),
            }
        }
        out
    }
}

/// The scalar names a command is given: at least one, none empty, none twice.
fn check_names(owner: &str, command: &str, names: &[String]) -> Result<()> {
    if names.is_empty() {
        return Err(Error::invalid(format!("{owner}: no scalar names given for command `{command}`")));
    }
    for (i, name) in names.iter().enumerate() {
        if name.is_empty() {
            return Err(Error::invalid(format!("{owner}: an empty scalar name")));
        }
        if names[..i].contains(name) {
            return Err(Error::invalid(format!("{owner}: scalar name `{name}` is given twice")));
        }
    }
    Ok(())
}

/// A placeholder's text up to its closing `}` (its `{` read already); what is wrong otherwise.
fn placeholder(chars: &mut Peekable<Chars<'_>>) -> std::result::Result<String, String> {
    let mut field = String::new();
    loop {
        match chars.next() {
            Some('}') => return Ok(field),
            Some('{') | None => {
                return Err(format!(
                    "an unclosed placeholder `{{{field}` (write `{{{{` for a literal brace)"
                ));
            }
            Some(c) => field.push(c),
        }
    }
}

/// What the placeholder `{field}` stands for: `name` or `name:.Nf`, `name` one of `names` or
/// a counter; what is wrong otherwise.
fn piece_of(field: &str, names: &[String]) -> std::result::Result<Piece, String> {
    let (name, spec) = match field.split_once(':') {
        Some((name, spec)) => (name, Some(spec)),
        None => (field, None),
    };
    let decimals = match spec {
        None => None,
        Some(spec) => Some(
            spec.strip_prefix('.')
                .and_then(|s| s.strip_suffix('f'))
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| {
                    format!(
                        "format `{{{field}}}`: only `{{name}}` and `{{name:.Nf}}` (N decimals) are supported"
                    )
                })?,
        ),
    };
    match names.iter().position(|n| n == name) {
        Some(index) => Ok(Piece::Value { index, decimals }),
        None if name == "epoch_num" && decimals.is_none() => Ok(Piece::Epoch),
        None if name == "global_step" && decimals.is_none() => Ok(Piece::Step),
        None => Err(format!(
            "placeholder `{{{field}}}` names none of the scalars {} (nor `epoch_num`, `global_step`)",
            names.iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
        )),
    }
}
