mod date;
mod datetime;
mod time;
