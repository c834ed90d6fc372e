//! `text_enum!`: an enumeration whose values are stored and sent as text.
//!
//! Each variant's text is written once, and that one string is its JSON value (serde), its
//! database value (a sea-orm active enum on a text column, with the `db` feature), its OpenAPI
//! value (utoipa, with the `openapi` feature) and what `as_str`, `parse` and `Display` use. A
//! database value that is not one of them is an error when the row is read, never a default.
//! Every such enumeration is a [`TextEnum`], so code at the edge (a query parameter, a form
//! field) can read any of them with one generic function.

/// An enumeration made by `text_enum!`: its variants and their texts.
pub trait TextEnum: Copy + Sized + 'static {
    /// Every variant, in declaration order.
    fn variants() -> &'static [Self];

    /// The variant's text.
    fn text(self) -> &'static str;

    /// The variant whose text is `text`.
    fn from_text(text: &str) -> Option<Self> {
        Self::variants().iter().copied().find(|v| v.text() == text)
    }

    /// Every text, comma-separated, for messages such as "status must be one of …".
    fn texts() -> String {
        Self::variants()
            .iter()
            .map(|v| v.text())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

macro_rules! text_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $( $(#[$variant_meta:meta])* $variant:ident = $text:tt, )+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[cfg_attr(feature = "db", derive(sea_orm::EnumIter, sea_orm::DeriveActiveEnum))]
        // The columns are `VARCHAR`/`TEXT` (migrations' `string()`), not database enum types.
        #[cfg_attr(
            feature = "db",
            sea_orm(rs_type = "String", db_type = "String(sea_orm::sea_query::StringLen::None)")
        )]
        pub enum $name {
            $(
                $(#[$variant_meta])*
                #[serde(rename = $text)]
                #[cfg_attr(feature = "db", sea_orm(string_value = $text))]
                $variant,
            )+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: [$name; [$($text),+].len()] = [$($name::$variant),+];

            /// The variant's text: its JSON and database value.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The variant whose text is `text` (input at the edge: a query, a path, a CLI flag).
            pub fn parse(text: &str) -> Option<Self> {
                match text {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl $crate::TextEnum for $name {
            fn variants() -> &'static [Self] {
                &Self::ALL
            }

            fn text(self) -> &'static str {
                self.as_str()
            }

            fn from_text(text: &str) -> Option<Self> {
                Self::parse(text)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(crate) use text_enum;
