//! One reading discipline for every document trainplan reads, in JSON and TOML alike: a serde
//! [`Deserializer`] that wraps the format's own and refuses, at any depth,
//!
//! - **an array where an object is meant**: serde's derived structs accept a sequence of their
//!   fields by position (`"layout": [8, 8, 32, 1]`), which no file format of trainplan means;
//! - **a key given twice** in one object: the format would let the last one win silently;
//! - **`null`** for an optional field, unless the document's kind documents it ([`Nulls`]): a
//!   field left out keeps its default, and `null` is not another way to say so.
//!
//! It also names a TOML datetime as such where a number or a string is meant (TOML's
//! deserializer hands it over as a one-key table, which would read "invalid type: map").
//!
//! Errors are serde's own messages, so `serde_path_to_error` around this deserializer still
//! names the field's path: `brief.loss_law: invalid type: sequence, expected struct
//! LossLawPatch`, `tokens: given twice`.

use std::collections::HashSet;
use std::fmt;

use serde::de::value::StringDeserializer;
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IntoDeserializer, MapAccess, SeqAccess,
    Unexpected, VariantAccess, Visitor,
};

/// Whether a document may say `null`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nulls {
    /// `null` is refused everywhere: briefs, plans, efficiency tables, request bodies.
    Refused,
    /// `null` reads as "absent": Hugging Face configs (transformers writes `"rope_scaling":
    /// null`) and runs files.
    Absent,
    /// trainplan's own documents read back (shard partials): `null` reads as "absent" (a shape
    /// with no window has `null` there), and a key the document's type does not know is
    /// refused at any depth, since trainplan never writes one: it is a hand edit that would
    /// otherwise be dropped silently.
    Own,
}

/// The key TOML's deserializer gives a datetime's one-key table.
const TOML_DATETIME: &str = "$__toml_private_datetime";

/// A format's deserializer, read strictly.
pub struct Strict<D> {
    inner: D,
    nulls: Nulls,
}

impl<D> Strict<D> {
    /// `inner`, read under the discipline above.
    pub fn new(inner: D, nulls: Nulls) -> Self {
        Strict { inner, nulls }
    }
}

/// A visitor, told what the discipline refuses; `object` when it stands for a struct,
/// `scalar` when it stands for a number, a string or a flag (for which any map is wrong).
struct Visit<V> {
    inner: V,
    nulls: Nulls,
    object: bool,
    scalar: bool,
}

fn visit<V>(inner: V, nulls: Nulls) -> Visit<V> {
    Visit {
        inner,
        nulls,
        object: false,
        scalar: false,
    }
}

fn scalar<V>(inner: V, nulls: Nulls) -> Visit<V> {
    Visit {
        scalar: true,
        ..visit(inner, nulls)
    }
}

macro_rules! forward_deserialize {
    ($wrap:ident: $($method:ident),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
                self.inner.$method($wrap(v, self.nulls))
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Strict<D> {
    type Error = D::Error;

    forward_deserialize!(
        visit: deserialize_any,
        deserialize_option,
        deserialize_seq,
        deserialize_map,
    );

    /// What a type skips: the value of a key it does not know.
    fn deserialize_ignored_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, D::Error> {
        if self.nulls == Nulls::Own {
            // The path the error is reported at ends with the key, so it names it.
            return Err(de::Error::custom(
                "unknown field: trainplan writes no such key here",
            ));
        }
        self.inner.deserialize_ignored_any(visit(v, self.nulls))
    }
    forward_deserialize!(
        scalar: deserialize_bool,
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_unit,
        deserialize_identifier,
    );

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.inner
            .deserialize_unit_struct(name, visit(v, self.nulls))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.inner
            .deserialize_newtype_struct(name, visit(v, self.nulls))
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, D::Error> {
        self.inner.deserialize_tuple(len, visit(v, self.nulls))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        len: usize,
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.inner
            .deserialize_tuple_struct(name, len, visit(v, self.nulls))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        let v = Visit {
            object: true,
            ..visit(v, self.nulls)
        };
        self.inner.deserialize_struct(name, fields, v)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, D::Error> {
        self.inner
            .deserialize_enum(name, variants, visit(v, self.nulls))
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

macro_rules! forward_visit {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(
            fn $method<E: de::Error>(self, x: $ty) -> Result<V::Value, E> {
                self.inner.$method(x)
            }
        )*
    };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Visit<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.inner.expecting(f)
    }

    forward_visit!(
        visit_bool(bool),
        visit_i8(i8),
        visit_i16(i16),
        visit_i32(i32),
        visit_i64(i64),
        visit_i128(i128),
        visit_u8(u8),
        visit_u16(u16),
        visit_u32(u32),
        visit_u64(u64),
        visit_u128(u128),
        visit_f32(f32),
        visit_f64(f64),
        visit_char(char),
        visit_str(&str),
        visit_borrowed_str(&'de str),
        visit_string(String),
        visit_bytes(&[u8]),
        visit_borrowed_bytes(&'de [u8]),
        visit_byte_buf(Vec<u8>),
    );

    fn visit_unit<E: de::Error>(self) -> Result<V::Value, E> {
        self.inner.visit_unit()
    }

    fn visit_none<E: de::Error>(self) -> Result<V::Value, E> {
        match self.nulls {
            Nulls::Refused => Err(E::custom(
                "null is not a value here: leave the field out to keep its default",
            )),
            Nulls::Absent | Nulls::Own => self.inner.visit_none(),
        }
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_some(Strict::new(d, self.nulls))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<V::Value, D::Error> {
        self.inner.visit_newtype_struct(Strict::new(d, self.nulls))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<V::Value, A::Error> {
        if self.object {
            return Err(de::Error::invalid_type(Unexpected::Seq, &self));
        }
        self.inner.visit_seq(Seq {
            inner: seq,
            nulls: self.nulls,
        })
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<V::Value, A::Error> {
        // Where a number, a string or a flag is meant, any map is wrong: read its first key to
        // name a TOML datetime (a one-key table to serde) as such.
        let mut pending = None;
        if self.scalar {
            pending = map.next_key::<String>()?;
            if pending.as_deref() == Some(TOML_DATETIME) {
                let at: String = map.next_value()?;
                let what = format!("a TOML datetime ({at})");
                return Err(de::Error::invalid_type(Unexpected::Other(&what), &self));
            }
        }
        self.inner.visit_map(Map {
            inner: map,
            nulls: self.nulls,
            seen: HashSet::new(),
            pending,
        })
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<V::Value, A::Error> {
        self.inner.visit_enum(Enum {
            inner: data,
            nulls: self.nulls,
        })
    }
}

/// A seed whose deserializer is read strictly.
struct Seed<S> {
    inner: S,
    nulls: Nulls,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Seed<S> {
    type Value = S::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.inner.deserialize(Strict::new(d, self.nulls))
    }
}

struct Seq<A> {
    inner: A,
    nulls: Nulls,
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Seq<A> {
    type Error = A::Error;
    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, A::Error> {
        self.inner.next_element_seed(Seed {
            inner: seed,
            nulls: self.nulls,
        })
    }
    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// An object's entries, each key refused the second time it comes. A key is read through the
/// format's own deserializer, so its errors keep their place in the file; its text is noted on
/// the way.
struct Map<A> {
    inner: A,
    nulls: Nulls,
    seen: HashSet<String>,
    /// A first key read ahead (where a scalar was meant), to give back first.
    pending: Option<String>,
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Map<A> {
    type Error = A::Error;
    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        if let Some(key) = self.pending.take() {
            self.seen.insert(key.clone());
            let key: StringDeserializer<A::Error> = key.into_deserializer();
            return seed.deserialize(key).map(Some);
        }
        let mut text = None;
        let key = self.inner.next_key_seed(KeySeed {
            inner: seed,
            text: &mut text,
        })?;
        if let Some(text) = text {
            if !self.seen.insert(text.clone()) {
                // The path the error is reported at ends with the key, so it names it.
                return Err(de::Error::custom("given twice: each key may be given once"));
            }
        }
        Ok(key)
    }
    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.inner.next_value_seed(Seed {
            inner: seed,
            nulls: self.nulls,
        })
    }
    fn size_hint(&self) -> Option<usize> {
        self.inner.size_hint()
    }
}

/// A key's seed that notes the key's text as the format hands it over.
struct KeySeed<'a, S> {
    inner: S,
    text: &'a mut Option<String>,
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for KeySeed<'_, S> {
    type Value = S::Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.inner.deserialize(Key {
            inner: d,
            text: self.text,
        })
    }
}

/// A key's deserializer: the format's own, its visitor noting any text it is given.
struct Key<'a, D> {
    inner: D,
    text: &'a mut Option<String>,
}

macro_rules! forward_key {
    ($($method:ident($($arg:ident: $ty:ty),*)),* $(,)?) => {
        $(
            fn $method<V: Visitor<'de>>(self, $($arg: $ty,)* v: V) -> Result<V::Value, D::Error> {
                self.inner.$method($($arg,)* Noted { inner: v, text: self.text })
            }
        )*
    };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Key<'_, D> {
    type Error = D::Error;
    forward_key!(
        deserialize_any(),
        deserialize_bool(),
        deserialize_i8(),
        deserialize_i16(),
        deserialize_i32(),
        deserialize_i64(),
        deserialize_i128(),
        deserialize_u8(),
        deserialize_u16(),
        deserialize_u32(),
        deserialize_u64(),
        deserialize_u128(),
        deserialize_f32(),
        deserialize_f64(),
        deserialize_char(),
        deserialize_str(),
        deserialize_string(),
        deserialize_bytes(),
        deserialize_byte_buf(),
        deserialize_option(),
        deserialize_unit(),
        deserialize_seq(),
        deserialize_map(),
        deserialize_identifier(),
        deserialize_ignored_any(),
        deserialize_unit_struct(name: &'static str),
        deserialize_newtype_struct(name: &'static str),
        deserialize_tuple(len: usize),
        deserialize_tuple_struct(name: &'static str, len: usize),
        deserialize_struct(name: &'static str, fields: &'static [&'static str]),
        deserialize_enum(name: &'static str, variants: &'static [&'static str]),
    );
    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// A key's visitor that notes the text it is given.
struct Noted<'a, V> {
    inner: V,
    text: &'a mut Option<String>,
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Noted<'_, V> {
    type Value = V::Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.inner.expecting(f)
    }
    fn visit_str<E: de::Error>(self, x: &str) -> Result<V::Value, E> {
        *self.text = Some(x.to_string());
        self.inner.visit_str(x)
    }
    fn visit_borrowed_str<E: de::Error>(self, x: &'de str) -> Result<V::Value, E> {
        *self.text = Some(x.to_string());
        self.inner.visit_borrowed_str(x)
    }
    fn visit_string<E: de::Error>(self, x: String) -> Result<V::Value, E> {
        *self.text = Some(x.clone());
        self.inner.visit_string(x)
    }
    fn visit_bytes<E: de::Error>(self, x: &[u8]) -> Result<V::Value, E> {
        *self.text = Some(String::from_utf8_lossy(x).into_owned());
        self.inner.visit_bytes(x)
    }
    fn visit_u64<E: de::Error>(self, x: u64) -> Result<V::Value, E> {
        *self.text = Some(x.to_string());
        self.inner.visit_u64(x)
    }
    fn visit_i64<E: de::Error>(self, x: i64) -> Result<V::Value, E> {
        *self.text = Some(x.to_string());
        self.inner.visit_i64(x)
    }
}

struct Enum<A> {
    inner: A,
    nulls: Nulls,
}

impl<'de, A: EnumAccess<'de>> EnumAccess<'de> for Enum<A> {
    type Error = A::Error;
    type Variant = Variant<A::Variant>;
    fn variant_seed<T: DeserializeSeed<'de>>(
        self,
        seed: T,
    ) -> Result<(T::Value, Self::Variant), A::Error> {
        let nulls = self.nulls;
        let (value, variant) = self.inner.variant_seed(Seed { inner: seed, nulls })?;
        Ok((
            value,
            Variant {
                inner: variant,
                nulls,
            },
        ))
    }
}

struct Variant<A> {
    inner: A,
    nulls: Nulls,
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for Variant<A> {
    type Error = A::Error;
    fn unit_variant(self) -> Result<(), A::Error> {
        self.inner.unit_variant()
    }
    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.inner.newtype_variant_seed(Seed {
            inner: seed,
            nulls: self.nulls,
        })
    }
    fn tuple_variant<V: Visitor<'de>>(self, len: usize, v: V) -> Result<V::Value, A::Error> {
        self.inner.tuple_variant(len, visit(v, self.nulls))
    }
    fn struct_variant<V: Visitor<'de>>(
        self,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, A::Error> {
        let v = Visit {
            object: true,
            ..visit(v, self.nulls)
        };
        self.inner.struct_variant(fields, v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        a: u64,
        #[serde(default)]
        b: Option<f64>,
    }

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        inner: Inner,
        #[serde(default)]
        list: Vec<Inner>,
    }

    fn json<T: for<'de> Deserialize<'de>>(text: &str, nulls: Nulls) -> Result<T, String> {
        let mut de = serde_json::Deserializer::from_str(text);
        T::deserialize(Strict::new(&mut de, nulls)).map_err(|e| e.to_string())
    }

    fn toml<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, String> {
        T::deserialize(Strict::new(toml::Deserializer::new(text), Nulls::Refused))
            .map_err(|e| e.message().to_string())
    }

    #[test]
    fn objects_read_as_they_always_did() {
        let want = Outer {
            inner: Inner { a: 1, b: Some(2.5) },
            list: vec![Inner { a: 3, b: None }],
        };
        let text = r#"{"inner": {"a": 1, "b": 2.5}, "list": [{"a": 3}]}"#;
        assert_eq!(json::<Outer>(text, Nulls::Refused).unwrap(), want);
        let text = "list = [{a = 3}]\n[inner]\na = 1\nb = 2.5\n";
        assert_eq!(toml::<Outer>(text).unwrap(), want);
    }

    #[test]
    fn an_array_is_not_an_object_at_any_depth_in_json_or_toml() {
        let e = json::<Outer>(r#"{"inner": [1, 2.5]}"#, Nulls::Refused).unwrap_err();
        assert!(
            e.starts_with("invalid type: sequence, expected struct Inner"),
            "{e}"
        );
        let e = json::<Outer>(r#"[{"a": 1}]"#, Nulls::Refused).unwrap_err();
        assert!(
            e.starts_with("invalid type: sequence, expected struct Outer"),
            "{e}"
        );
        let e = json::<Outer>(r#"{"inner": {"a": 1}, "list": [[3]]}"#, Nulls::Refused).unwrap_err();
        assert!(
            e.starts_with("invalid type: sequence, expected struct Inner"),
            "{e}"
        );
        let e = toml::<Outer>("inner = [1, 2.5]\n").unwrap_err();
        assert!(
            e.starts_with("invalid type: sequence, expected struct Inner"),
            "{e}"
        );
    }

    #[test]
    fn a_key_given_twice_is_refused_in_structs_and_in_free_form_values() {
        let e = json::<Inner>(r#"{"a": 1, "a": 2}"#, Nulls::Refused).unwrap_err();
        assert!(e.starts_with("given twice"), "{e}");
        let e = json::<serde_json::Value>(r#"{"x": {"h": 1, "h": 2}}"#, Nulls::Absent).unwrap_err();
        assert!(e.starts_with("given twice"), "{e}");
        // Read with its path, the error names the key.
        let mut de = serde_json::Deserializer::from_str(r#"{"x": {"h": 1, "h": 2}}"#);
        let strict = Strict::new(&mut de, Nulls::Refused);
        let e = serde_path_to_error::deserialize::<_, serde_json::Value>(strict).unwrap_err();
        assert_eq!(e.path().to_string(), "x.h");
        // The same key in two objects is two keys.
        let v: serde_json::Value =
            json(r#"{"x": {"h": 1}, "y": {"h": 2}}"#, Nulls::Absent).unwrap();
        assert_eq!(v["y"]["h"], 2);
    }

    #[test]
    fn null_is_refused_unless_the_document_means_absent() {
        let e = json::<Inner>(r#"{"a": 1, "b": null}"#, Nulls::Refused).unwrap_err();
        assert!(e.starts_with("null is not a value here"), "{e}");
        let read: Inner = json(r#"{"a": 1, "b": null}"#, Nulls::Absent).unwrap();
        assert_eq!(read, Inner { a: 1, b: None });
        // A free-form value keeps its null either way: it is a value there.
        let v: serde_json::Value = json(r#"{"b": null}"#, Nulls::Refused).unwrap();
        assert!(v["b"].is_null());
    }

    #[test]
    fn trainplan_s_own_documents_take_no_key_their_type_does_not_know() {
        // Types that skip the keys they do not know.
        #[derive(Debug, Deserialize, PartialEq)]
        struct Loose {
            a: u64,
            #[serde(default)]
            b: Option<f64>,
        }
        #[derive(Debug, Deserialize, PartialEq)]
        struct Doc {
            inner: Loose,
        }
        let read: Doc = json(r#"{"inner": {"a": 1, "b": null}}"#, Nulls::Own).unwrap();
        assert_eq!(read.inner, Loose { a: 1, b: None });
        // Skipped elsewhere, refused here, `null` or not, at any depth, by its path.
        let text = r#"{"inner": {"a": 1, "colour": null}}"#;
        assert!(json::<Doc>(text, Nulls::Absent).is_ok());
        let mut de = serde_json::Deserializer::from_str(text);
        let e = serde_path_to_error::deserialize::<_, Doc>(Strict::new(&mut de, Nulls::Own))
            .unwrap_err();
        assert_eq!(e.path().to_string(), "inner.colour");
        assert!(e.inner().to_string().starts_with("unknown field"), "{e}");
    }

    #[test]
    fn a_toml_datetime_is_named_where_a_number_is_meant() {
        let e = toml::<Inner>("a = 1979-05-27\n").unwrap_err();
        assert!(
            e.starts_with("invalid type: a TOML datetime (1979-05-27), expected u64"),
            "{e}"
        );
    }
}
