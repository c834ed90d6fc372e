pub mod r#box;
pub mod circle;
pub mod line;
pub mod line_segment;
pub mod path;
pub mod point;
pub mod polygon;
