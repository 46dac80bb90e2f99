//! Text assembly: parser and printer (in progress).
