//! Conversions between a seam type and its pure counterpart, shared by
//! every interface of `mneme:types`: [`Conv`] through lists, options and
//! tuples, and `pair!`, which writes `From` both ways field by field (a
//! field one side lacks fails to compile).

/// A conversion between a seam type and its pure counterpart, through
/// lists and options. `From` cannot do this: it has no impl for
/// `Vec<A> -> Vec<B>`, nor for `u32 -> usize`.
pub trait Conv<T> {
    fn conv(self) -> T;
}

macro_rules! same {
    ($($t:ty),*) => { $(impl Conv<$t> for $t { fn conv(self) -> $t { self } })* };
}
same!(String, bool, f64, u64, u32, u8, i64);

impl Conv<usize> for u32 {
    fn conv(self) -> usize {
        self as usize
    }
}

impl Conv<u32> for usize {
    fn conv(self) -> u32 {
        u32::try_from(self).unwrap_or(u32::MAX)
    }
}

impl<A: Conv<B>, B> Conv<Vec<B>> for Vec<A> {
    fn conv(self) -> Vec<B> {
        self.into_iter().map(Conv::conv).collect()
    }
}

impl<A1: Conv<B1>, A2: Conv<B2>, B1, B2> Conv<(B1, B2)> for (A1, A2) {
    fn conv(self) -> (B1, B2) {
        (self.0.conv(), self.1.conv())
    }
}

impl<A: Conv<B>, B> Conv<Option<B>> for Option<A> {
    fn conv(self) -> Option<B> {
        self.map(Conv::conv)
    }
}

/// `From` both ways, and `Conv` both ways, for two types of the same
/// shape: enums case by case, records field by field.
#[macro_export]
#[doc(hidden)]
macro_rules! pair {
    (enum $wit:ident, $pure:ident { $($case:ident),* $(,)? }) => {
        impl From<$wit> for $pure {
            fn from(x: $wit) -> Self {
                match x { $($wit::$case => $pure::$case),* }
            }
        }
        impl From<$pure> for $wit {
            fn from(x: $pure) -> Self {
                match x { $($pure::$case => $wit::$case),* }
            }
        }
        $crate::pair!(@conv $wit, $pure);
    };
    (record $wit:ident, $pure:ident { $($field:ident),* $(,)? }) => {
        impl From<$wit> for $pure {
            fn from(x: $wit) -> Self {
                $pure { $($field: $crate::conv::Conv::conv(x.$field)),* }
            }
        }
        impl From<$pure> for $wit {
            fn from(x: $pure) -> Self {
                $wit { $($field: $crate::conv::Conv::conv(x.$field)),* }
            }
        }
        $crate::pair!(@conv $wit, $pure);
    };
    (@conv $wit:ident, $pure:ident) => {
        impl $crate::conv::Conv<$pure> for $wit {
            fn conv(self) -> $pure { self.into() }
        }
        impl $crate::conv::Conv<$wit> for $pure {
            fn conv(self) -> $wit { self.into() }
        }
    };
}

/// `serde::Serialize` for seam types, as their pure counterparts
/// serialise: the names rows and the API already use (`in_progress`, a
/// field left out when empty), which a derive on generated code cannot
/// give. Each type named here is left out of the derive in `lib.rs`.
#[macro_export]
#[doc(hidden)]
macro_rules! serialize_as {
    ($($wit:ty => $pure:ty),* $(,)?) => {$(
        impl serde::Serialize for $wit {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                serde::Serialize::serialize(&<$pure>::from(self.clone()), s)
            }
        }
    )*};
}

/// A JSON value crosses the seam as its text; text that is not JSON (no
/// producer writes any) reads as null.
impl Conv<String> for serde_json::Value {
    fn conv(self) -> String {
        self.to_string()
    }
}

impl Conv<serde_json::Value> for String {
    fn conv(self) -> serde_json::Value {
        serde_json::from_str(&self).unwrap_or(serde_json::Value::Null)
    }
}

/// The names of a seam enum with no pure counterpart: `as_str`, and
/// `serde::Serialize` as that name. Each type named here is left out of the
/// derive in `lib.rs`.
#[macro_export]
#[doc(hidden)]
macro_rules! named_enum {
    ($t:ident { $($case:ident => $name:literal),* $(,)? }) => {
        impl $t {
            pub fn as_str(self) -> &'static str {
                match self { $($t::$case => $name),* }
            }
        }
        impl serde::Serialize for $t {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }
    };
}
