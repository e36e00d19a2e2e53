//! `sasl.jaas.config` parsing, following Kafka's `JaasConfig` (a `java.io.StreamTokenizer`
//! with `//` and `/* */` comments and `-`, `_`, `$` as word characters):
//!
//! ```text
//! <LoginModuleClass> <flag> [<option>=<value>]* ;
//! ```
//!
//! Values are words or quoted strings (`"..."` or `'...'`, with `\n`, `\t`, `\\`, `\"`,
//! octal escapes...). A client config must hold exactly one login module
//! (`JaasContext.loadClientContext`). Error messages never repeat option values: they may
//! be passwords.

use std::collections::BTreeMap;

/// The PLAIN login module.
pub const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";
/// The SCRAM login module.
pub const SCRAM_LOGIN_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";
/// The OAUTHBEARER login module (KIP-255).
pub const OAUTHBEARER_LOGIN_MODULE: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";
/// `sasl.login.callback.handler.class` values that select the OIDC client-credentials login
/// (KIP-768); the second is the pre-3.4 name. Without one, OAUTHBEARER uses Kafka's unsecured
/// login handler.
pub const OAUTHBEARER_LOGIN_HANDLERS: &[&str] = &[
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
    "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
];

/// A JAAS syntax or content problem. Never contains option values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JaasError {
    #[error("no login module in the JAAS config")]
    Empty,
    #[error("the JAAS config holds {0} login modules; a client needs exactly 1")]
    TooManyModules(usize),
    #[error("login module control flag not specified")]
    MissingFlag,
    #[error(
        "invalid login module control flag (expected required, requisite, sufficient or optional)"
    )]
    InvalidFlag,
    #[error("value not specified for option `{0}`")]
    MissingValue(String),
    #[error("an option name is missing before `=`")]
    MissingOptionName,
    #[error("JAAS config entry not terminated by `;`")]
    Unterminated,
    #[error("the login module name is not a class name")]
    BadModule,
}

/// A login module's control flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlFlag {
    /// `required`.
    Required,
    /// `requisite`.
    Requisite,
    /// `sufficient`.
    Sufficient,
    /// `optional`.
    Optional,
}

/// One login module with its options.
#[derive(Clone, PartialEq, Eq)]
pub struct JaasEntry {
    /// The login module class.
    pub login_module: String,
    /// Its control flag.
    pub flag: ControlFlag,
    /// Option values may be secrets: `Debug` prints only the option names.
    pub options: BTreeMap<String, String>,
}

impl std::fmt::Debug for JaasEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JaasEntry")
            .field("login_module", &self.login_module)
            .field("flag", &self.flag)
            .field("options", &self.options.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Parses a client `sasl.jaas.config` value: exactly one login module.
pub fn parse(value: &str) -> Result<JaasEntry, JaasError> {
    let mut entries = parse_all(value)?;
    match entries.len() {
        0 => Err(JaasError::Empty),
        1 => Ok(entries.remove(0)),
        n => Err(JaasError::TooManyModules(n)),
    }
}

/// Parses every login module in the value (`JaasConfig`'s constructor).
pub fn parse_all(value: &str) -> Result<Vec<JaasEntry>, JaasError> {
    let mut tok = Tokenizer::new(value);
    let mut entries = Vec::new();
    loop {
        let first = tok.next_token();
        if first == Token::Eof {
            break;
        }
        entries.push(parse_entry(first, &mut tok)?);
    }
    if entries.is_empty() {
        return Err(JaasError::Empty);
    }
    Ok(entries)
}

fn parse_entry(first: Token, tok: &mut Tokenizer) -> Result<JaasEntry, JaasError> {
    let login_module = match first.sval() {
        Some(s) if !s.is_empty() => s.to_string(),
        _ => return Err(JaasError::BadModule),
    };
    let flag_token = tok.next_token();
    if flag_token == Token::Eof {
        return Err(JaasError::MissingFlag);
    }
    let flag = match flag_token.sval().map(|s| s.to_ascii_uppercase()) {
        None => return Err(JaasError::MissingFlag),
        Some(f) => match f.as_str() {
            "REQUIRED" => ControlFlag::Required,
            "REQUISITE" => ControlFlag::Requisite,
            "SUFFICIENT" => ControlFlag::Sufficient,
            "OPTIONAL" => ControlFlag::Optional,
            _ => return Err(JaasError::InvalidFlag),
        },
    };
    let mut options = BTreeMap::new();
    loop {
        let t = tok.next_token();
        if t == Token::Eof {
            return Err(JaasError::Unterminated);
        }
        if t == Token::Char(';') {
            break;
        }
        let Some(key) = t.sval().map(str::to_string) else {
            return Err(JaasError::MissingOptionName);
        };
        if tok.next_token() != Token::Char('=') {
            return Err(JaasError::MissingValue(key));
        }
        match tok.next_token().sval() {
            Some(v) => {
                options.insert(key, v.to_string());
            }
            None => return Err(JaasError::MissingValue(key)),
        }
    }
    Ok(JaasEntry {
        login_module,
        flag,
        options,
    })
}

/// A `StreamTokenizer` token.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    Eof,
    Word(String),
    Quoted(String),
    Number,
    Char(char),
}

impl Token {
    /// `StreamTokenizer.sval`: set for words and quoted strings only.
    fn sval(&self) -> Option<&str> {
        match self {
            Token::Word(s) | Token::Quoted(s) => Some(s),
            _ => None,
        }
    }
}

struct Tokenizer {
    chars: Vec<char>,
    pos: usize,
}

/// Character classes of Kafka's tokenizer.
fn is_whitespace(c: char) -> bool {
    (c as u32) <= 0x20
}

fn is_alpha(c: char) -> bool {
    c.is_ascii_alphabetic()
        || (0xA0..=0xFF).contains(&(c as u32))
        || (c as u32) > 0xFF
        || matches!(c, '-' | '_' | '$')
}

fn is_digit(c: char) -> bool {
    c.is_ascii_digit() || c == '.' || c == '-'
}

impl Tokenizer {
    fn new(s: &str) -> Self {
        Tokenizer {
            chars: s.chars().collect(),
            pos: 0,
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }

    fn skip_to_eol(&mut self) {
        while let Some(c) = self.bump() {
            if c == '\n' || c == '\r' {
                break;
            }
        }
    }

    fn next_token(&mut self) -> Token {
        loop {
            let Some(c) = self.bump() else {
                return Token::Eof;
            };
            if is_whitespace(c) {
                continue;
            }
            if c == '/' {
                match self.peek() {
                    Some('*') => {
                        self.pos += 1;
                        let mut prev = '\0';
                        while let Some(d) = self.bump() {
                            if prev == '*' && d == '/' {
                                break;
                            }
                            prev = d;
                        }
                    }
                    // `//` and, since `/` is a comment character, a lone `/` too.
                    _ => self.skip_to_eol(),
                }
                continue;
            }
            // StreamTokenizer tests for numbers before words; `-` is both.
            if is_digit(c) {
                if c == '-' {
                    match self.peek() {
                        Some(d) if d.is_ascii_digit() || d == '.' => {}
                        _ => return Token::Char('-'),
                    }
                }
                let mut seen_dot = c == '.';
                while let Some(d) = self.peek() {
                    if d.is_ascii_digit() || (d == '.' && !seen_dot) {
                        seen_dot |= d == '.';
                        self.pos += 1;
                    } else {
                        break;
                    }
                }
                return Token::Number;
            }
            if is_alpha(c) {
                let mut word = String::from(c);
                while let Some(d) = self.peek() {
                    if is_alpha(d) || is_digit(d) {
                        word.push(d);
                        self.pos += 1;
                    } else {
                        break;
                    }
                }
                return Token::Word(word);
            }
            if c == '"' || c == '\'' {
                return Token::Quoted(self.quoted(c));
            }
            return Token::Char(c);
        }
    }

    fn quoted(&mut self, quote: char) -> String {
        let mut out = String::new();
        while let Some(d) = self.bump() {
            if d == quote {
                break;
            }
            if d == '\n' || d == '\r' {
                // An unterminated string ends at the line end; the end is read again.
                self.pos -= 1;
                break;
            }
            if d != '\\' {
                out.push(d);
                continue;
            }
            let Some(e) = self.bump() else {
                out.push('\u{ffff}');
                break;
            };
            match e {
                '0'..='7' => {
                    let first = e;
                    let mut v = e as u32 - '0' as u32;
                    if let Some(c2) = self.peek().filter(|c| ('0'..='7').contains(c)) {
                        self.pos += 1;
                        v = (v << 3) + (c2 as u32 - '0' as u32);
                        if let Some(c3) = self.peek().filter(|c| ('0'..='7').contains(c))
                            && first <= '3'
                        {
                            self.pos += 1;
                            v = (v << 3) + (c3 as u32 - '0' as u32);
                        }
                    }
                    out.push(char::from_u32(v).unwrap_or('\u{fffd}'));
                }
                'a' => out.push('\u{7}'),
                'b' => out.push('\u{8}'),
                'f' => out.push('\u{c}'),
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                't' => out.push('\t'),
                'v' => out.push('\u{b}'),
                other => out.push(other),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn plain_and_scram_forms() {
        let e = parse(r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="alice-secret";"#)
            .expect("valid");
        assert_eq!(e.login_module, PLAIN_LOGIN_MODULE);
        assert_eq!(e.flag, ControlFlag::Required);
        assert_eq!(e.options.get("username").map(String::as_str), Some("alice"));
        assert_eq!(
            e.options.get("password").map(String::as_str),
            Some("alice-secret")
        );

        let e = parse("org.apache.kafka.common.security.scram.ScramLoginModule REQUIRED\n  username='bob'\n  password=\"p\\\"w\\\\d\";")
            .expect("valid");
        assert_eq!(e.login_module, SCRAM_LOGIN_MODULE);
        assert_eq!(e.options.get("username").map(String::as_str), Some("bob"));
        assert_eq!(
            e.options.get("password").map(String::as_str),
            Some("p\"w\\d")
        );
    }

    #[test]
    fn unquoted_words_and_comments() {
        let e = parse("x.y.Module optional /* c */ user_name=al-ice_$1 // trailing\n ;")
            .expect("valid");
        assert_eq!(e.flag, ControlFlag::Optional);
        assert_eq!(
            e.options.get("user_name").map(String::as_str),
            Some("al-ice_$1")
        );
    }

    #[test]
    fn escapes_in_quotes() {
        let e = parse(r#"M required a="t\tn\n\101\7";"#).expect("valid");
        assert_eq!(e.options.get("a").map(String::as_str), Some("t\tn\nA\u{7}"));
        // Two quoted strings in a row are two tokens: `b='it'` then a stray string.
        assert!(parse(r#"M required b='it''s';"#).is_err());
    }

    #[test]
    fn errors() {
        assert_eq!(parse(""), Err(JaasError::Empty));
        assert_eq!(parse("   // only a comment"), Err(JaasError::Empty));
        assert_eq!(parse("M"), Err(JaasError::MissingFlag));
        assert_eq!(parse("M mandatory;"), Err(JaasError::InvalidFlag));
        assert_eq!(parse("M required user=alice"), Err(JaasError::Unterminated));
        assert_eq!(
            parse("M required user alice;"),
            Err(JaasError::MissingValue("user".into()))
        );
        // A number is not a value (StreamTokenizer gives it no string).
        assert_eq!(
            parse("M required pin=1234;"),
            Err(JaasError::MissingValue("pin".into()))
        );
        assert_eq!(parse("M required =x;"), Err(JaasError::MissingOptionName));
        assert_eq!(
            parse("A required; B required;"),
            Err(JaasError::TooManyModules(2))
        );
        // An unquoted slash starts a comment, which eats the terminator.
        assert_eq!(
            parse("M required path=/tmp/x;"),
            Err(JaasError::MissingValue("path".into()))
        );
    }

    #[test]
    fn errors_and_debug_never_show_values() {
        let secret = "hunter2-SECRET";
        let e = parse(&format!("M required password=\"{secret}\";")).expect("valid");
        assert!(!format!("{e:?}").contains(secret));
        let err = parse(&format!("M required password=\"{secret}\"")).expect_err("unterminated");
        assert!(!err.to_string().contains(secret));
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC{0,80}") {
            let _ = parse_all(&s);
        }

        #[test]
        fn quoted_values_round_trip(user in "[ -~]{0,20}", pass in "[ -~]{0,20}") {
            let q = |s: &str| s.replace('\\', "\\\\").replace('"', "\\\"");
            let text = format!("{PLAIN_LOGIN_MODULE} required username=\"{}\" password=\"{}\";", q(&user), q(&pass));
            let e = parse(&text).expect("valid");
            prop_assert_eq!(e.options.get("username"), Some(&user));
            prop_assert_eq!(e.options.get("password"), Some(&pass));
        }
    }
}
