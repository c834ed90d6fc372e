//! `text_enum!`: an enumeration whose values are stored and sent as text.
//!
//! Each variant's text is written once, and that one string is its JSON value (serde), its
//! database value (a sea-orm active enum on a text column, with the `db` feature), its OpenAPI
//! value (utoipa, with the `openapi` feature) and what `as_str`, `parse` and `Display` use. A
//! database value that is not one of them is an error when the row is read, never a default.

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

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(crate) use text_enum;
